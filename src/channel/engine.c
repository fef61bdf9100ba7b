/* The pure channel engine: a Noise-KK-style handshake, then one AEAD frame
 * per message. No sockets, no clock, no randomness of its own: every input
 * arrives as bytes or in the config, so tests can replay and tamper freely.
 *
 * Handshake (Noise KK, "-> e, es, ss" then "<- e, ee, se"): both static
 * keys are pinned in advance, so a peer without the pinned secret cannot
 * produce message 1 (or 2) that authenticates, and the ephemeral DH (ee)
 * gives each session fresh keys and forward secrecy. BLAKE2b is the
 * transcript hash and, keyed, the KDF (Noise's HKDF with keyed BLAKE2b in
 * place of HMAC). Split gives one key per direction, so a frame reflected
 * back to its sender fails to open. */
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "channel_internal.h"

#define HASH_BYTES 64
#define PROTOCOL_NAME "offpath-channel-v1 Noise_KK_25519_XChaChaPoly_BLAKE2b"
#define HS_TYPE_1 0x01
#define HS_TYPE_2 0x02
#define OFFER_XCHACHA 0x01u
#define OFFER_AESGCM 0x02u
#define REKEY_LABEL "offpath-channel-v1 rekey"

const char *const op_chan_tx_counter_names[OP_CHAN_TX_COUNT_] = {
    OP_CHAN_TX_COUNTERS(OP_COUNTER_NAME)};
const char *const op_chan_rx_counter_names[OP_CHAN_RX_COUNT_] = {
    OP_CHAN_RX_COUNTERS(OP_COUNTER_NAME)};

/* Noise's symmetric state. */
struct sym {
    uint8_t ck[HASH_BYTES];
    uint8_t h[HASH_BYTES];
    uint8_t k[32];
    uint64_t n;
};

/* One direction's frame cipher and record counter. */
struct dir_key {
    struct chan_aead aead;
    uint64_t seq;
    uint64_t since_rekey; /* frame bytes under the current key */
};

enum hs_state { HS_IDLE, HS_WAIT_1, HS_WAIT_2, HS_DONE, HS_FAILED };

struct op_chan_eng {
    struct op_chan_eng_config cfg;
    uint8_t e_pub[32];
    enum hs_state hs;
    struct sym sym;
    /* Written only by the sending thread. */
    struct dir_key tx;
    _Atomic uint64_t txc[OP_CHAN_TX_COUNT_];
    const char *tx_error;
    uint64_t batch_msgs, batch_bytes; /* in the open batch record */
    /* Written only by the receiving thread. */
    struct dir_key rx;
    _Atomic uint64_t rxc[OP_CHAN_RX_COUNT_];
    const char *rx_error;
    /* A batch record being delivered: offsets into the caller's bytes. */
    size_t rec_next, rec_end, rec_frame;
};

static void bump_tx(struct op_chan_eng *e, enum op_chan_tx_counter c, uint64_t by)
{
    atomic_store_explicit(&e->txc[c], atomic_load_explicit(&e->txc[c], memory_order_relaxed) + by,
                          memory_order_relaxed);
}

static void bump_rx(struct op_chan_eng *e, enum op_chan_rx_counter c, uint64_t by)
{
    atomic_store_explicit(&e->rxc[c], atomic_load_explicit(&e->rxc[c], memory_order_relaxed) + by,
                          memory_order_relaxed);
}

/* ---- symmetric state ---- */

static void mix_hash(struct sym *s, const uint8_t *data, size_t len)
{
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, HASH_BYTES);
    crypto_generichash_update(&st, s->h, HASH_BYTES);
    crypto_generichash_update(&st, data, len);
    crypto_generichash_final(&st, s->h, HASH_BYTES);
}

/* Noise's HKDF with two outputs, keyed BLAKE2b standing in for HMAC. */
static void hkdf2(const uint8_t ck[HASH_BYTES], const uint8_t *ikm, size_t ikm_len,
                  uint8_t out1[HASH_BYTES], uint8_t out2[HASH_BYTES])
{
    uint8_t temp[HASH_BYTES], buf[HASH_BYTES + 1];
    const uint8_t one = 0x01;

    crypto_generichash(temp, HASH_BYTES, ikm, ikm_len, ck, HASH_BYTES);
    crypto_generichash(out1, HASH_BYTES, &one, 1, temp, HASH_BYTES);
    memcpy(buf, out1, HASH_BYTES);
    buf[HASH_BYTES] = 0x02;
    crypto_generichash(out2, HASH_BYTES, buf, sizeof buf, temp, HASH_BYTES);
    sodium_memzero(temp, sizeof temp);
    sodium_memzero(buf, sizeof buf);
}

static void mix_key(struct sym *s, const uint8_t dh[32])
{
    uint8_t k[HASH_BYTES];
    hkdf2(s->ck, dh, 32, s->ck, k);
    memcpy(s->k, k, 32);
    s->n = 0;
    sodium_memzero(k, sizeof k);
}

/* The handshake payloads are encrypted with the transcript hash as
 * associated data, so any change to an earlier byte fails here. */
static void encrypt_and_hash(struct sym *s, const uint8_t *pt, size_t len, uint8_t *out)
{
    uint8_t nonce[24];
    chan_nonce(s->n++, nonce);
    crypto_aead_xchacha20poly1305_ietf_encrypt(out, NULL, pt, len, s->h, HASH_BYTES, NULL, nonce,
                                               s->k);
    mix_hash(s, out, len + OP_CHAN_TAG_BYTES);
}

static bool decrypt_and_hash(struct sym *s, const uint8_t *ct, size_t len, uint8_t *out)
{
    uint8_t nonce[24];
    chan_nonce(s->n++, nonce);
    if (crypto_aead_xchacha20poly1305_ietf_decrypt(out, NULL, NULL, ct, len, s->h, HASH_BYTES,
                                                   nonce, s->k) != 0)
        return false;
    mix_hash(s, ct, len);
    return true;
}

/* ---- lifecycle ---- */

static void init_symmetric(struct op_chan_eng *e)
{
    const uint8_t *init_pub, *resp_pub;

    crypto_generichash(e->sym.h, HASH_BYTES, (const uint8_t *)PROTOCOL_NAME,
                       sizeof PROTOCOL_NAME - 1, NULL, 0);
    memcpy(e->sym.ck, e->sym.h, HASH_BYTES);
    /* KK's pre-messages: both static keys are known before the first byte. */
    init_pub = e->cfg.role == OP_CHAN_INITIATOR ? e->cfg.local.pub : e->cfg.peer_pub;
    resp_pub = e->cfg.role == OP_CHAN_INITIATOR ? e->cfg.peer_pub : e->cfg.local.pub;
    mix_hash(&e->sym, init_pub, 32);
    mix_hash(&e->sym, resp_pub, 32);
}

op_status_t op_chan_eng_new(const struct op_chan_eng_config *cfg, struct op_chan_eng **out)
{
    *out = NULL;
    if (cfg->max_msg < 1 || cfg->max_msg > OP_CHAN_LIMIT_MAX_MSG ||
        cfg->cipher > OP_CHAN_CIPHER_AESGCM ||
        (cfg->role != OP_CHAN_INITIATOR && cfg->role != OP_CHAN_RESPONDER))
        return OP_ERR_INVAL;
    if (sodium_init() < 0)
        return OP_ERR_UNSUPPORTED;
    struct op_chan_eng *e = calloc(1, sizeof *e);
    if (e == NULL)
        return OP_ERR_NOMEM;
    e->cfg = *cfg;
    if (e->cfg.rekey_bytes == 0)
        e->cfg.rekey_bytes = OP_CHAN_REKEY_BYTES;
    crypto_scalarmult_base(e->e_pub, cfg->ephemeral_sec);
    init_symmetric(e);
    e->hs = cfg->role == OP_CHAN_INITIATOR ? HS_IDLE : HS_WAIT_1;
    *out = e;
    return OP_OK;
}

void op_chan_eng_free(struct op_chan_eng *e)
{
    if (e == NULL)
        return;
    chan_aead_free(&e->tx.aead);
    chan_aead_free(&e->rx.aead);
    sodium_memzero(e, sizeof *e);
    free(e);
}

bool op_chan_eng_established(const struct op_chan_eng *e)
{
    return e->hs == HS_DONE;
}

enum op_chan_cipher op_chan_eng_cipher(const struct op_chan_eng *e)
{
    return e->hs == HS_DONE ? e->tx.aead.cipher : OP_CHAN_CIPHER_AUTO;
}

const char *op_chan_cipher_name(enum op_chan_cipher c)
{
    switch (c) {
    case OP_CHAN_CIPHER_XCHACHA:
        return "xchacha20poly1305";
    case OP_CHAN_CIPHER_AESGCM:
        return "aes256gcm";
    default:
        return "auto";
    }
}

/* ---- handshake ---- */

static op_status_t hs_fail(struct op_chan_eng *e, enum op_chan_rx_counter c, const char *why,
                           op_status_t st)
{
    e->hs = HS_FAILED;
    e->rx_error = why;
    bump_rx(e, c, 1);
    sodium_memzero(&e->sym, sizeof e->sym);
    return st;
}

/* DH that refuses a low-order peer point (an all-zero shared secret). */
static bool dh(uint8_t out[32], const uint8_t sec[32], const uint8_t pub[32])
{
    return crypto_scalarmult(out, sec, pub) == 0;
}

static bool mix_dh(struct op_chan_eng *e, const uint8_t sec[32], const uint8_t pub[32])
{
    uint8_t shared[32];
    if (!dh(shared, sec, pub))
        return false;
    mix_key(&e->sym, shared);
    sodium_memzero(shared, sizeof shared);
    return true;
}

static unsigned local_offer(enum op_chan_cipher want)
{
    unsigned aes = crypto_aead_aes256gcm_is_available() ? OFFER_AESGCM : 0;
    if (want == OP_CHAN_CIPHER_XCHACHA)
        return OFFER_XCHACHA;
    if (want == OP_CHAN_CIPHER_AESGCM)
        return aes;
    return OFFER_XCHACHA | aes;
}

static op_status_t set_dir(struct dir_key *d, enum op_chan_cipher c, const uint8_t key[32])
{
    d->seq = 0;
    d->since_rekey = 0;
    return chan_aead_init(&d->aead, c, key);
}

/* Counts a frame's bytes against its key and moves to the next key when
 * they reach rekey_bytes: both ends count the same frames, so they change
 * keys after the same frame without a message. The next key is keyed
 * BLAKE2b of the old under a label (Noise's Rekey, with the KDF in place of
 * the cipher), so it cannot be run backwards: a key taken from a live
 * session opens nothing sent before it. *rekeyed says whether it did. */
static op_status_t count_frame(struct dir_key *d, uint64_t frame_bytes, uint64_t every,
                               bool *rekeyed)
{
    uint8_t next[32];
    *rekeyed = false;
    d->since_rekey += frame_bytes;
    if (d->since_rekey < every)
        return OP_OK;
    crypto_generichash(next, sizeof next, (const uint8_t *)REKEY_LABEL, sizeof REKEY_LABEL - 1,
                       d->aead.key, sizeof d->aead.key);
    op_status_t st = chan_aead_rekey(&d->aead, next);
    sodium_memzero(next, sizeof next);
    d->since_rekey = 0;
    *rekeyed = st == OP_OK;
    return st;
}

/* Split: the first key is initiator->responder, the second the reverse. */
static op_status_t split(struct op_chan_eng *e, enum op_chan_cipher c)
{
    uint8_t k1[HASH_BYTES], k2[HASH_BYTES];
    bool init = e->cfg.role == OP_CHAN_INITIATOR;
    op_status_t st;

    hkdf2(e->sym.ck, NULL, 0, k1, k2);
    st = set_dir(&e->tx, c, init ? k1 : k2);
    if (st == OP_OK)
        st = set_dir(&e->rx, c, init ? k2 : k1);
    sodium_memzero(k1, sizeof k1);
    sodium_memzero(k2, sizeof k2);
    sodium_memzero(&e->sym, sizeof e->sym);
    e->hs = HS_DONE;
    return st;
}

op_status_t op_chan_eng_hs_start(struct op_chan_eng *e, uint8_t *out, size_t cap,
                                 size_t *out_len)
{
    uint8_t offer;

    *out_len = 0;
    if (e->cfg.role != OP_CHAN_INITIATOR || e->hs != HS_IDLE)
        return OP_ERR_STATE;
    if (cap < OP_CHAN_HS_MSG_BYTES)
        return OP_ERR_NOSPACE;
    offer = (uint8_t)local_offer(e->cfg.cipher);
    if (offer == 0)
        return OP_ERR_UNSUPPORTED;
    out[0] = HS_TYPE_1;
    mix_hash(&e->sym, out, 1);
    memcpy(out + 1, e->e_pub, 32);
    mix_hash(&e->sym, e->e_pub, 32);
    if (!mix_dh(e, e->cfg.ephemeral_sec, e->cfg.peer_pub) ||   /* es */
        !mix_dh(e, e->cfg.local.sec, e->cfg.peer_pub))         /* ss */
        return hs_fail(e, OP_CHAN_handshake_failed, "the pinned peer key is not a usable X25519 key",
                       OP_ERR_INVAL);
    encrypt_and_hash(&e->sym, &offer, 1, out + 33);
    *out_len = OP_CHAN_HS_MSG_BYTES;
    e->hs = HS_WAIT_2;
    return OP_INPROGRESS;
}

static enum op_chan_cipher choose_cipher(enum op_chan_cipher want, unsigned offer)
{
    unsigned common = offer & local_offer(want);
    if (common & OFFER_AESGCM)
        return OP_CHAN_CIPHER_AESGCM;
    if (common & OFFER_XCHACHA)
        return OP_CHAN_CIPHER_XCHACHA;
    return OP_CHAN_CIPHER_AUTO; /* none in common */
}

#define REFUSED_WHY                                                                                \
    "handshake refused: the peer does not hold the pinned key, or the message was altered"

static op_status_t read_msg1(struct op_chan_eng *e, const uint8_t *in, uint8_t *out,
                             size_t *out_len)
{
    uint8_t offer, reply;
    enum op_chan_cipher c;

    if (in[0] != HS_TYPE_1)
        return hs_fail(e, OP_CHAN_handshake_malformed,
                       "handshake message 1 has the wrong type (not an offpath channel peer?)",
                       OP_ERR_MALFORMED);
    mix_hash(&e->sym, in, 1);
    mix_hash(&e->sym, in + 1, 32);
    if (!mix_dh(e, e->cfg.local.sec, in + 1) ||            /* es */
        !mix_dh(e, e->cfg.local.sec, e->cfg.peer_pub))     /* ss */
        return hs_fail(e, OP_CHAN_handshake_failed, REFUSED_WHY, OP_ERR_REFUSED);
    if (!decrypt_and_hash(&e->sym, in + 33, 1 + OP_CHAN_TAG_BYTES, &offer))
        return hs_fail(e, OP_CHAN_handshake_failed, REFUSED_WHY, OP_ERR_REFUSED);
    c = choose_cipher(e->cfg.cipher, offer);
    if (c == OP_CHAN_CIPHER_AUTO)
        return hs_fail(e, OP_CHAN_handshake_failed, "handshake refused: no cipher in common",
                       OP_ERR_UNSUPPORTED);
    /* Message 2: e, ee, se, then the chosen cipher. */
    uint8_t peer_e[32];
    memcpy(peer_e, in + 1, 32);
    out[0] = HS_TYPE_2;
    mix_hash(&e->sym, out, 1);
    memcpy(out + 1, e->e_pub, 32);
    mix_hash(&e->sym, e->e_pub, 32);
    if (!mix_dh(e, e->cfg.ephemeral_sec, peer_e) ||        /* ee */
        !mix_dh(e, e->cfg.ephemeral_sec, e->cfg.peer_pub)) /* se */
        return hs_fail(e, OP_CHAN_handshake_failed, REFUSED_WHY, OP_ERR_REFUSED);
    reply = (uint8_t)c;
    encrypt_and_hash(&e->sym, &reply, 1, out + 33);
    *out_len = OP_CHAN_HS_MSG_BYTES;
    op_status_t st = split(e, c);
    return st;
}

static op_status_t read_msg2(struct op_chan_eng *e, const uint8_t *in)
{
    uint8_t chosen;

    if (in[0] != HS_TYPE_2)
        return hs_fail(e, OP_CHAN_handshake_malformed,
                       "handshake message 2 has the wrong type (not an offpath channel peer?)",
                       OP_ERR_MALFORMED);
    mix_hash(&e->sym, in, 1);
    mix_hash(&e->sym, in + 1, 32);
    if (!mix_dh(e, e->cfg.ephemeral_sec, in + 1) ||   /* ee */
        !mix_dh(e, e->cfg.local.sec, in + 1))         /* se */
        return hs_fail(e, OP_CHAN_handshake_failed, REFUSED_WHY, OP_ERR_REFUSED);
    if (!decrypt_and_hash(&e->sym, in + 33, 1 + OP_CHAN_TAG_BYTES, &chosen))
        return hs_fail(e, OP_CHAN_handshake_failed, REFUSED_WHY, OP_ERR_REFUSED);
    if (chosen != OP_CHAN_CIPHER_XCHACHA && chosen != OP_CHAN_CIPHER_AESGCM)
        return hs_fail(e, OP_CHAN_handshake_malformed, "handshake: the peer chose an unknown cipher",
                       OP_ERR_MALFORMED);
    if (!(local_offer(e->cfg.cipher) & (chosen == OP_CHAN_CIPHER_AESGCM ? OFFER_AESGCM
                                                                        : OFFER_XCHACHA)))
        return hs_fail(e, OP_CHAN_handshake_failed, "handshake: the peer chose a cipher not offered",
                       OP_ERR_REFUSED);
    return split(e, (enum op_chan_cipher)chosen);
}

op_status_t op_chan_eng_hs_consume(struct op_chan_eng *e, const uint8_t *in, size_t len,
                                   size_t *used, uint8_t *out, size_t cap, size_t *out_len)
{
    *used = 0;
    *out_len = 0;
    if (e->hs == HS_FAILED)
        return OP_ERR_STATE;
    if (e->hs != HS_WAIT_1 && e->hs != HS_WAIT_2)
        return OP_ERR_STATE;
    if (len < OP_CHAN_HS_MSG_BYTES)
        return OP_INPROGRESS;
    *used = OP_CHAN_HS_MSG_BYTES;
    if (e->hs == HS_WAIT_1) {
        if (cap < OP_CHAN_HS_MSG_BYTES)
            return OP_ERR_NOSPACE;
        return read_msg1(e, in, out, out_len);
    }
    return read_msg2(e, in);
}

/* ---- frames ---- */

static bool tx_ready(struct op_chan_eng *e)
{
    if (e->hs != HS_DONE || e->tx_error != NULL)
        return false;
    if (e->tx.seq == UINT64_MAX) {
        e->tx_error = "the sending sequence number is exhausted";
        return false;
    }
    return true;
}

/* The header is associated data, so a changed length or batch flag fails
 * the tag even when the changed frame happens to be complete. */
static op_status_t seal_frame(struct op_chan_eng *e, struct op_chan_frame_hdr h, const uint8_t *m,
                              size_t len, uint8_t *out)
{
    op_chan_frame_hdr_encode(h, out);
    if (!chan_aead_seal(&e->tx.aead, e->tx.seq, out, OP_CHAN_FRAME_HDR, m, len,
                        out + OP_CHAN_FRAME_HDR)) {
        e->tx_error = "the cipher refused to seal a record";
        return OP_ERR_STATE;
    }
    e->tx.seq++;
    bump_tx(e, OP_CHAN_records_sealed, 1);
    bool rekeyed;
    if (count_frame(&e->tx, OP_CHAN_FRAME_OVERHEAD + len, e->cfg.rekey_bytes, &rekeyed) != OP_OK)
        e->tx_error = "the cipher refused the next key"; /* this frame is sealed: it goes */
    bump_tx(e, OP_CHAN_tx_rekeys, rekeyed);
    return OP_OK;
}

op_status_t op_chan_eng_seal(struct op_chan_eng *e, const uint8_t *msg, size_t len, uint8_t *out,
                             size_t cap, size_t *out_len)
{
    *out_len = 0;
    if (!tx_ready(e))
        return OP_ERR_STATE;
    if (len < 1 || len > e->cfg.max_msg)
        return OP_ERR_INVAL;
    if (cap < len + OP_CHAN_FRAME_OVERHEAD)
        return OP_ERR_NOSPACE;
    const struct op_chan_frame_hdr h = {.len = (uint32_t)(len + OP_CHAN_TAG_BYTES)};
    op_status_t st = seal_frame(e, h, msg, len, out);
    if (st != OP_OK)
        return st;
    bump_tx(e, OP_CHAN_frames_sealed, 1);
    bump_tx(e, OP_CHAN_bytes_sealed, len);
    *out_len = len + OP_CHAN_FRAME_OVERHEAD;
    return OP_OK;
}

size_t op_chan_max_frame(uint32_t max_msg)
{
    size_t lone = (size_t)max_msg + OP_CHAN_BATCH_HDR;
    return (lone > OP_CHAN_RECORD_MAX ? lone : OP_CHAN_RECORD_MAX) + OP_CHAN_FRAME_OVERHEAD;
}

op_status_t op_chan_eng_batch_add(struct op_chan_eng *e, uint8_t *rec, size_t cap,
                                  size_t *rec_len, const uint8_t *msg, size_t len)
{
    if (e->hs != HS_DONE || e->tx_error != NULL)
        return OP_ERR_STATE;
    if (len < 1 || len > e->cfg.max_msg)
        return OP_ERR_INVAL;
    size_t at = *rec_len == 0 ? OP_CHAN_FRAME_HDR : *rec_len;
    size_t plain = at - OP_CHAN_FRAME_HDR + OP_CHAN_BATCH_HDR + len;
    if ((*rec_len > 0 && plain > OP_CHAN_RECORD_MAX) ||
        cap < OP_CHAN_FRAME_HDR + plain + OP_CHAN_TAG_BYTES)
        return OP_ERR_NOSPACE;
    op_chan_frame_hdr_encode((struct op_chan_frame_hdr){.len = (uint32_t)len}, rec + at);
    memcpy(rec + at + OP_CHAN_BATCH_HDR, msg, len);
    *rec_len = OP_CHAN_FRAME_HDR + plain;
    e->batch_msgs++;
    e->batch_bytes += len;
    return OP_OK;
}

op_status_t op_chan_eng_batch_seal(struct op_chan_eng *e, uint8_t *rec, size_t cap,
                                   size_t *rec_len)
{
    if (*rec_len <= OP_CHAN_FRAME_HDR || e->batch_msgs == 0)
        return OP_ERR_INVAL;
    if (cap < *rec_len + OP_CHAN_TAG_BYTES)
        return OP_ERR_NOSPACE;
    if (!tx_ready(e))
        return OP_ERR_STATE;
    size_t plain = *rec_len - OP_CHAN_FRAME_HDR;
    const struct op_chan_frame_hdr h = {.len = (uint32_t)(plain + OP_CHAN_TAG_BYTES),
                                        .batch = true};
    op_status_t st = seal_frame(e, h, rec + OP_CHAN_FRAME_HDR, plain, rec);
    if (st != OP_OK)
        return st;
    bump_tx(e, OP_CHAN_frames_sealed, e->batch_msgs);
    bump_tx(e, OP_CHAN_bytes_sealed, e->batch_bytes);
    e->batch_msgs = e->batch_bytes = 0;
    *rec_len += OP_CHAN_TAG_BYTES;
    return OP_OK;
}

static op_status_t rx_fail(struct op_chan_eng *e, enum op_chan_rx_counter c, const char *why,
                           op_status_t st)
{
    e->rx_error = why;
    bump_rx(e, c, 1);
    return st;
}

static void deliver(struct op_chan_eng *e, const uint8_t *msg, size_t len, const uint8_t **out,
                    size_t *out_len)
{
    *out = msg;
    *out_len = len;
    bump_rx(e, OP_CHAN_frames_opened, 1);
    bump_rx(e, OP_CHAN_bytes_opened, len);
}

/* Authenticated is not yet well-formed: a peer that holds the key but
 * frames its messages wrongly is refused before any of them is delivered. */
static bool batch_well_formed(const uint8_t *p, size_t len, uint32_t max_msg)
{
    size_t at = 0;
    if (len == 0)
        return false;
    while (at < len) {
        struct op_chan_frame_hdr h;
        if (op_chan_frame_hdr_decode(p + at, len - at, &h) != OP_OK || h.batch)
            return false;
        uint32_t n = h.len;
        at += OP_CHAN_BATCH_HDR;
        if (n < 1 || n > max_msg || n > len - at)
            return false;
        at += n;
    }
    return true;
}

static op_status_t next_in_batch(struct op_chan_eng *e, const uint8_t *in, size_t len,
                                 size_t *used, const uint8_t **msg, size_t *msg_len)
{
    if (len < e->rec_frame)
        return OP_ERR_STATE; /* the caller did not pass the record again */
    struct op_chan_frame_hdr h = {0};
    (void)op_chan_frame_hdr_decode(in + e->rec_next, len - e->rec_next, &h); /* checked whole */
    uint32_t n = h.len;
    deliver(e, in + e->rec_next + OP_CHAN_BATCH_HDR, n, msg, msg_len);
    e->rec_next += OP_CHAN_BATCH_HDR + n;
    if (e->rec_next == e->rec_end) {
        *used = e->rec_frame;
        e->rec_next = e->rec_end = e->rec_frame = 0;
    }
    return OP_OK;
}

op_status_t op_chan_eng_open(struct op_chan_eng *e, uint8_t *in, size_t len, size_t *used,
                             const uint8_t **msg, size_t *msg_len)
{
    *used = 0;
    *msg = NULL;
    *msg_len = 0;
    if (e->hs != HS_DONE || e->rx_error != NULL)
        return OP_ERR_STATE;
    if (e->rec_end != 0)
        return next_in_batch(e, in, len, used, msg, msg_len);
    struct op_chan_frame_hdr h;
    if (op_chan_frame_hdr_decode(in, len, &h) != OP_OK)
        return OP_INPROGRESS;
    bool batch = h.batch;
    uint32_t clen = h.len;
    size_t most = batch ? op_chan_max_frame(e->cfg.max_msg) - OP_CHAN_FRAME_HDR
                        : (size_t)e->cfg.max_msg + OP_CHAN_TAG_BYTES;
    /* Checked before waiting for the body, so a forged length cannot make
     * the receiver buffer more than one largest frame. */
    if (clen <= OP_CHAN_TAG_BYTES || clen > most)
        return rx_fail(e, OP_CHAN_bad_length,
                       "frame length out of range (corrupted or injected frame)",
                       OP_ERR_MALFORMED);
    if (len - OP_CHAN_FRAME_HDR < clen)
        return OP_INPROGRESS;
    if (!chan_aead_open(&e->rx.aead, e->rx.seq, in, OP_CHAN_FRAME_HDR, in + OP_CHAN_FRAME_HDR,
                        clen))
        return rx_fail(e, OP_CHAN_auth_failed,
                       "frame failed authentication (altered, replayed, reordered or injected)",
                       OP_ERR_REFUSED);
    e->rx.seq++;
    bump_rx(e, OP_CHAN_records_opened, 1);
    bool rekeyed;
    if (count_frame(&e->rx, OP_CHAN_FRAME_HDR + (uint64_t)clen, e->cfg.rekey_bytes, &rekeyed) !=
        OP_OK)
        e->rx_error = "the cipher refused the next key"; /* this frame opened: it is delivered */
    bump_rx(e, OP_CHAN_rx_rekeys, rekeyed);
    size_t plain = clen - OP_CHAN_TAG_BYTES;
    if (!batch) {
        *used = OP_CHAN_FRAME_HDR + clen;
        deliver(e, in + OP_CHAN_FRAME_HDR, plain, msg, msg_len);
        return OP_OK;
    }
    if (!batch_well_formed(in + OP_CHAN_FRAME_HDR, plain, e->cfg.max_msg))
        return rx_fail(e, OP_CHAN_bad_length,
                       "a batch record's message lengths do not add up to the record",
                       OP_ERR_MALFORMED);
    e->rec_next = OP_CHAN_FRAME_HDR;
    e->rec_end = OP_CHAN_FRAME_HDR + plain;
    e->rec_frame = OP_CHAN_FRAME_HDR + clen;
    return next_in_batch(e, in, len, used, msg, msg_len);
}

op_status_t op_chan_eng_eof(struct op_chan_eng *e, size_t pending)
{
    if (pending == 0)
        return OP_OK;
    if (e->rx_error == NULL)
        return rx_fail(e, OP_CHAN_truncated, "the stream ended inside a frame (truncated)",
                       OP_ERR_TRUNCATED);
    return OP_ERR_TRUNCATED;
}

const char *op_chan_eng_error(const struct op_chan_eng *e)
{
    return e->rx_error != NULL ? e->rx_error : e->tx_error;
}

void op_chan_eng_counters(const struct op_chan_eng *e, uint64_t tx[OP_CHAN_TX_COUNT_],
                          uint64_t rx[OP_CHAN_RX_COUNT_])
{
    for (int i = 0; i < OP_CHAN_TX_COUNT_; i++)
        tx[i] = atomic_load_explicit(&e->txc[i], memory_order_relaxed);
    for (int i = 0; i < OP_CHAN_RX_COUNT_; i++)
        rx[i] = atomic_load_explicit(&e->rxc[i], memory_order_relaxed);
}
