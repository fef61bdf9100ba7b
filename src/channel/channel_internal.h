/* Internal to src/channel: not part of the public API. */
#ifndef OFFPATH_CHANNEL_INTERNAL_H
#define OFFPATH_CHANNEL_INTERNAL_H

#include <stdatomic.h>

#include <openssl/evp.h>
#include <sodium.h>

#include "offpath/channel.h"

/* A byte-stream transport under the channel: unix and tcp sockets, or the
 * shared-memory ring pair. Each call waits at most until deadline_ns
 * (op_now_ns time); write returns OP_OK after writing all len bytes, read
 * returns OP_OK with *got > 0, or OP_ERR_IO with *got 0 at a clean end. */
/* One direction's frame cipher (aead.c). impl is for tests and
 * bench/aead_cost: AUTO picks the cheapest implementation for each
 * record's length. */
enum chan_aead_impl { CHAN_AEAD_AUTO, CHAN_AEAD_SODIUM, CHAN_AEAD_OPENSSL, CHAN_AEAD_VAES };
struct chan_vaes;
struct chan_aead {
    enum op_chan_cipher cipher;
    enum chan_aead_impl impl;
    uint8_t key[32];
    crypto_aead_aes256gcm_state *aes; /* 16-byte aligned, AES-GCM only */
    EVP_CIPHER_CTX *evp;              /* OpenSSL's, either cipher */
    struct chan_vaes *vaes;           /* AES-GCM on CPUs with VAES (gcm_vaes.c) */
};
/* A counter as a nonce: little-endian, zero-padded to 24 bytes (XChaCha's
 * size; AES-GCM reads the first 12). */
void chan_nonce(uint64_t n, uint8_t out[24]);
op_status_t chan_aead_init(struct chan_aead *a, enum op_chan_cipher c, const uint8_t key[32]);
void chan_aead_free(struct chan_aead *a);
/* The same cipher under a new key, reusing what init allocated. */
op_status_t chan_aead_rekey(struct chan_aead *a, const uint8_t key[32]);
/* Seals m[0..len) into c: len bytes of ciphertext, then the 16-byte tag.
 * m and c may be the same buffer. */
bool chan_aead_seal(struct chan_aead *a, uint64_t seq, const uint8_t *ad, size_t ad_len,
                    const uint8_t *m, size_t len, uint8_t *c);
/* Opens c[0..clen) (ciphertext and tag) in place; false if it does not
 * authenticate, and then nothing of it is left in c as plaintext. */
bool chan_aead_open(struct chan_aead *a, uint64_t seq, const uint8_t *ad, size_t ad_len,
                    uint8_t *c, size_t clen);

/* AES-256-GCM on 512-bit VAES/VPCLMULQDQ (gcm_vaes.c): 12-byte nonce,
 * 16-byte tag after the ciphertext; in place allowed. open wipes c on a bad
 * tag. Only where chan_vaes_available(). */
bool chan_vaes_available(void);
op_status_t chan_vaes_new(const uint8_t key[32], struct chan_vaes **out);
void chan_vaes_free(struct chan_vaes *g);
void chan_vaes_rekey(struct chan_vaes *g, const uint8_t key[32]);
void chan_vaes_seal(const struct chan_vaes *g, const uint8_t iv[12], const uint8_t *ad,
                    size_t ad_len, const uint8_t *m, size_t len, uint8_t *c);
bool chan_vaes_open(const struct chan_vaes *g, const uint8_t iv[12], const uint8_t *ad,
                    size_t ad_len, uint8_t *c, size_t len);

struct chan_transport;
struct chan_transport_ops {
    op_status_t (*write)(struct chan_transport *t, const uint8_t *buf, size_t len,
                         uint64_t deadline_ns);
    op_status_t (*read)(struct chan_transport *t, uint8_t *buf, size_t cap, size_t *got,
                        uint64_t deadline_ns);
    void (*close)(struct chan_transport *t);
};
struct chan_transport {
    const struct chan_transport_ops *ops;
    char rx_why[160]; /* the last read failure, for op_channel_error */
    char tx_why[160]; /* the last write failure (each written by one thread) */
};

op_status_t chan_sock_open(const struct op_channel_config *cfg, struct chan_transport **out,
                           char why[256]);
op_status_t chan_shm_open(const struct op_channel_config *cfg, struct chan_transport **out,
                          char why[256]);

#endif
