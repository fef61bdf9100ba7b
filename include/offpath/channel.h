/* offpath secure channel: an authenticated, encrypted message channel between
 * two processes over a Unix socket, TCP or a shared-memory ring.
 *
 * Two layers:
 *  - the engine (op_chan_eng_*) is pure: bytes in, bytes out, no socket, no
 *    clock, no randomness of its own (the caller hands it the ephemeral key).
 *    It runs a Noise-KK-style handshake (X25519 static keys of both sides,
 *    pinned in advance, plus fresh ephemeral keys) and then seals and opens
 *    one AEAD frame per message with the direction's sequence number as the
 *    nonce, so a flipped bit, a replayed, reordered, reflected, truncated or
 *    injected frame fails authentication and ends the session.
 *  - the channel (op_channel_*) drives the engine over a transport addressed
 *    as unix:PATH, tcp:HOST:PORT or shm:NAME, with deadlines on every wait.
 * Wire format and design: docs/channel.md. */
#ifndef OFFPATH_CHANNEL_H
#define OFFPATH_CHANNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"
#include "offpath/wire/chan.h" /* the frame header */

#define OP_CHAN_KEY_BYTES 32
#define OP_CHAN_DEFAULT_MAX_MSG 65535u        /* DOCA 3.3's limit */
#define OP_CHAN_LIMIT_MAX_MSG (16u << 20)     /* --max-msg-size upper bound */
#define OP_CHAN_HS_MSG_BYTES 50               /* each of the two handshake messages */
#define OP_CHAN_TAG_BYTES 16                  /* AEAD tag per frame */
#define OP_CHAN_FRAME_OVERHEAD (OP_CHAN_FRAME_HDR + OP_CHAN_TAG_BYTES)
/* Batch records: the length header's top bit marks a frame whose plaintext
 * is several messages, each behind its own 4-byte big-endian length, so one
 * AEAD call covers them all. Such a record holds messages while its
 * plaintext stays within OP_CHAN_RECORD_MAX (TLS's record size: the
 * receiver delivers nothing of a record before all of it has arrived and
 * passed, so bigger records would only hold messages back), or one message
 * of any allowed size. */
#define OP_CHAN_RECORD_MAX (16u << 10)

/* ---- keys ---- */
struct op_chan_keypair {
    uint8_t pub[OP_CHAN_KEY_BYTES];
    uint8_t sec[OP_CHAN_KEY_BYTES];
};

/* A fresh X25519 key pair from the system's random source. */
OP_API op_status_t op_chan_keypair_generate(struct op_chan_keypair *kp);
/* Key files are one text line: "offpath-x25519-secret <64 hex>\n" (NAME.key)
 * or "offpath-x25519-public <64 hex>\n" (NAME.pub). The parsers are pure and
 * say why they refuse in why[] (a sentence, no newline). */
OP_API op_status_t op_chan_parse_public(const char *text, size_t len,
                                        uint8_t pub[OP_CHAN_KEY_BYTES], char why[128]);
OP_API op_status_t op_chan_parse_secret(const char *text, size_t len, struct op_chan_keypair *kp,
                                        char why[128]);
/* Writes NAME.key (mode 0600, refuses to replace one) and NAME.pub. */
OP_API op_status_t op_chan_write_keys(const char *name, const struct op_chan_keypair *kp,
                                      char why[256]);
/* Reads a key file; a secret key readable by group or others is refused. */
OP_API op_status_t op_chan_read_secret(const char *path, struct op_chan_keypair *kp,
                                       char why[256]);
OP_API op_status_t op_chan_read_public(const char *path, uint8_t pub[OP_CHAN_KEY_BYTES],
                                       char why[256]);

/* ---- pure engine ---- */
enum op_chan_role { OP_CHAN_INITIATOR, OP_CHAN_RESPONDER };

/* AEAD for the frames: AUTO picks AES-256-GCM when both sides' CPUs have it. */
enum op_chan_cipher { OP_CHAN_CIPHER_AUTO, OP_CHAN_CIPHER_XCHACHA, OP_CHAN_CIPHER_AESGCM };

struct op_chan_eng_config {
    enum op_chan_role role;
    enum op_chan_cipher cipher;
    struct op_chan_keypair local;          /* our static key */
    uint8_t peer_pub[OP_CHAN_KEY_BYTES];   /* the pinned peer key */
    uint8_t ephemeral_sec[OP_CHAN_KEY_BYTES]; /* fresh random bytes per session */
    uint32_t max_msg;                      /* largest message accepted, 1..16 MiB */
    /* Each direction moves to a new key after this many frame bytes (0:
     * OP_CHAN_REKEY_BYTES). Both ends must use the same value. */
    uint64_t rekey_bytes;
};

/* A direction's key lasts 1 GiB of frames, far inside AES-GCM's safe use
 * of one key (TLS 1.3 allows 2^24.5 full records, ~380 GB), and a key
 * taken from a running session opens at most the last GiB of it. */
#define OP_CHAN_REKEY_BYTES (1ull << 30)

/* Counters: tx ones are written only by the sending thread, rx ones only by
 * the receiving one, so the two directions run concurrently. */
/* frames_* count messages and records_* the AEAD records they travelled
 * in (frames_sealed / records_sealed is the number of messages per AEAD
 * call). writes and reads are the channel's (one per system call or ring
 * publish, so frames_sealed / writes is the number of messages per system
 * call); the engine leaves them 0. */
#define OP_CHAN_TX_COUNTERS(X)                                                                     \
    X(frames_sealed) X(bytes_sealed) X(records_sealed) X(writes) X(tx_rekeys)
#define OP_CHAN_RX_COUNTERS(X)                                                                     \
    X(frames_opened) X(bytes_opened) X(records_opened) X(auth_failed) X(bad_length) X(truncated)   \
    X(handshake_failed) X(handshake_malformed) X(reads) X(rx_rekeys)
#define OP_CHAN_ENUM(n) OP_CHAN_##n,
enum op_chan_tx_counter { OP_CHAN_TX_COUNTERS(OP_CHAN_ENUM) OP_CHAN_TX_COUNT_ };
enum op_chan_rx_counter { OP_CHAN_RX_COUNTERS(OP_CHAN_ENUM) OP_CHAN_RX_COUNT_ };
#undef OP_CHAN_ENUM
OP_API extern const char *const op_chan_tx_counter_names[OP_CHAN_TX_COUNT_];
OP_API extern const char *const op_chan_rx_counter_names[OP_CHAN_RX_COUNT_];

struct op_chan_eng;

OP_API op_status_t op_chan_eng_new(const struct op_chan_eng_config *cfg, struct op_chan_eng **out);
OP_API void op_chan_eng_free(struct op_chan_eng *e);

/* Handshake. The initiator calls start for message 1 (OP_CHAN_HS_MSG_BYTES
 * into out). Both feed what they receive to consume: the responder gets
 * message 2 to send back in out; OP_OK means the session is established
 * (*out_len may be nonzero: send it), OP_INPROGRESS means more bytes are
 * needed, an error means the peer is refused (wrong key, tampering) and the
 * engine stays failed. *used tells how many input bytes were taken. */
OP_API op_status_t op_chan_eng_hs_start(struct op_chan_eng *e, uint8_t *out, size_t cap,
                                        size_t *out_len);
OP_API op_status_t op_chan_eng_hs_consume(struct op_chan_eng *e, const uint8_t *in, size_t len,
                                          size_t *used, uint8_t *out, size_t cap,
                                          size_t *out_len);
OP_API bool op_chan_eng_established(const struct op_chan_eng *e);
OP_API enum op_chan_cipher op_chan_eng_cipher(const struct op_chan_eng *e);
OP_API const char *op_chan_cipher_name(enum op_chan_cipher c);

/* Seals one message (1..max_msg bytes) into one frame of len +
 * OP_CHAN_FRAME_OVERHEAD bytes at out. Sending side only. */
OP_API op_status_t op_chan_eng_seal(struct op_chan_eng *e, const uint8_t *msg, size_t len,
                                    uint8_t *out, size_t cap, size_t *out_len);
/* Batch records (OP_CHAN_BATCH_FLAG): messages appended with batch_add
 * collect as plaintext in the caller's buffer rec[0..cap) (*rec_len 0
 * starts a record) until batch_seal encrypts them in place into one frame
 * of *rec_len bytes. OP_ERR_NOSPACE from batch_add says the record (or
 * rec) is full: seal it and start another. One record is open at a time.
 * Sending side only. */
OP_API op_status_t op_chan_eng_batch_add(struct op_chan_eng *e, uint8_t *rec, size_t cap,
                                         size_t *rec_len, const uint8_t *msg, size_t len);
OP_API op_status_t op_chan_eng_batch_seal(struct op_chan_eng *e, uint8_t *rec, size_t cap,
                                          size_t *rec_len);
/* The largest frame a peer may send with this max_msg: a batch record of
 * OP_CHAN_RECORD_MAX, or a single message of max_msg in either form. */
OP_API size_t op_chan_max_frame(uint32_t max_msg);
/* Opens the frame at the start of in[0..len): OP_OK with *msg and *msg_len
 * pointing into in (decrypted in place) and *used the frame's size;
 * OP_INPROGRESS when the frame is not complete yet (*used 0); an error ends
 * the session (sticky) and counts why. A batch record gives its messages
 * one call each, in order, with *used 0 until the last: until then the
 * caller passes the same bytes again. Receiving side only. */
OP_API op_status_t op_chan_eng_open(struct op_chan_eng *e, uint8_t *in, size_t len, size_t *used,
                                    const uint8_t **msg, size_t *msg_len);
/* The stream ended with `pending` bytes of an unfinished frame: counted as
 * truncation when nonzero (returns OP_ERR_TRUNCATED), OP_OK otherwise. */
OP_API op_status_t op_chan_eng_eof(struct op_chan_eng *e, size_t pending);
/* Why the engine failed (a sentence), or NULL while it has not. */
OP_API const char *op_chan_eng_error(const struct op_chan_eng *e);
OP_API void op_chan_eng_counters(const struct op_chan_eng *e, uint64_t tx[OP_CHAN_TX_COUNT_],
                                 uint64_t rx[OP_CHAN_RX_COUNT_]);

/* ---- channel over a transport ---- */
enum op_chan_transport { OP_CHAN_UNIX, OP_CHAN_TCP, OP_CHAN_SHM };

struct op_chan_addr {
    enum op_chan_transport kind;
    char path[108];  /* unix socket path or shm name */
    char host[64];   /* tcp */
    uint16_t port;   /* tcp */
};
/* "unix:PATH", "tcp:HOST:PORT" (IPv4 or a name), "shm:NAME". */
OP_API op_status_t op_chan_addr_parse(const char *text, struct op_chan_addr *a, char why[128]);

struct op_channel_config {
    struct op_chan_addr addr;
    bool listen;            /* agent side: wait for the peer */
    /* with listen: accept on this op_chan_listen socket (left open for the
     * next peer) instead of listening for one peer and closing */
    bool use_listener;
    int listener;
    uint32_t accept_ipv4;   /* tcp listener: 0 any peer, else its only source address */
    enum op_chan_cipher cipher;
    struct op_chan_keypair local;
    uint8_t peer_pub[OP_CHAN_KEY_BYTES];
    uint32_t max_msg;
    uint64_t timeout_ns;    /* longest wait for the peer at any point */
    uint64_t rekey_bytes;   /* see op_chan_eng_config; 0: the default */
    bool plaintext;         /* benchmarks only: no handshake, no crypto */
};

struct op_channel;

/* A listening socket for a server of several peers (tcp and unix; its
 * queue holds 64 connecting peers): each op_channel_open with use_listener
 * takes the next. The caller closes it (close(2)). */
OP_API op_status_t op_chan_listen(const struct op_chan_addr *a, int *fd, char why[256]);

/* Listens or connects (per cfg->listen), runs the handshake, and returns an
 * established channel. On failure why[] says what went wrong. */
OP_API op_status_t op_channel_open(const struct op_channel_config *cfg, struct op_channel **out,
                                   char why[256]);
/* Sends one message. OP_CHAN_MORE says more follow at once, so the frame may
 * wait in the buffer for a batched write (it is flushed when the buffer
 * fills); without it everything buffered goes out now. Sending thread only. */
#define OP_CHAN_MORE 1u
OP_API op_status_t op_channel_send(struct op_channel *c, const void *msg, size_t len,
                                   unsigned flags);
OP_API op_status_t op_channel_flush(struct op_channel *c);
/* Receives one message; *msg stays valid until the next receive. OP_ERR_IO
 * with why "closed" when the peer ended the stream cleanly between frames.
 * Receiving thread only. */
OP_API op_status_t op_channel_recv(struct op_channel *c, const uint8_t **msg, size_t *len);
/* Why the last failure happened (a sentence). */
OP_API const char *op_channel_error(const struct op_channel *c);
OP_API void op_channel_counters(const struct op_channel *c, uint64_t tx[OP_CHAN_TX_COUNT_],
                                uint64_t rx[OP_CHAN_RX_COUNT_]);
OP_API const char *op_channel_cipher(const struct op_channel *c);
OP_API void op_channel_close(struct op_channel *c);

/* ---- the secure_channel tool (DOCA's sample, over this channel) ---- */
#define OP_SC_MAX_NUM_MSGS 1000000000ull
struct op_sc_tool_config {
    struct op_channel_config chan; /* its secret key is wiped once the channel is up */
    uint64_t msg_size, num_msgs, max_msg;
    int log_level;        /* DOCA's 10..70 */
    const char *json_out; /* NULL: no results file */
};
/* Opens the channel, announces the run, sends num_msgs messages of
 * msg_size bytes while receiving (and checking) what the peer announced,
 * logs DOCA's lines to stdout. 0 when every message went both ways intact,
 * 1 otherwise. */
OP_API int op_sc_tool_run(struct op_sc_tool_config *cfg);

#endif
