/* Unit tests of the secure channel (src/channel): the pure engine driven
 * with plain buffers (handshake, frames, and every tampering the issue
 * lists: wrong key, flipped bit, replay, reorder, reflection, truncation,
 * injection), the key-file and JSON parsers, address parsing, and the
 * transports end to end inside one process (two threads). */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sodium.h>

#include "offpath/channel.h"
#include "../../src/channel/channel_internal.h"

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_MSG 4096u

struct pair {
    struct op_chan_eng *init, *resp;
};

/* Deterministic keys: key k is 32 bytes of k. */
static void fixed_keypair(uint8_t k, struct op_chan_keypair *kp)
{
    memset(kp->sec, k, sizeof kp->sec);
    crypto_scalarmult_base(kp->pub, kp->sec);
}

static struct op_chan_eng *new_eng_rekey(enum op_chan_role role, enum op_chan_cipher c,
                                         uint8_t self, uint8_t peer, uint8_t eph,
                                         uint64_t rekey_bytes)
{
    struct op_chan_eng_config cfg = {
        .role = role, .cipher = c, .max_msg = MAX_MSG, .rekey_bytes = rekey_bytes};
    struct op_chan_keypair pk;
    struct op_chan_eng *e;
    fixed_keypair(self, &cfg.local);
    fixed_keypair(peer, &pk);
    memcpy(cfg.peer_pub, pk.pub, 32);
    memset(cfg.ephemeral_sec, eph, 32);
    assert_int_equal(op_chan_eng_new(&cfg, &e), OP_OK);
    return e;
}

static struct op_chan_eng *new_eng(enum op_chan_role role, enum op_chan_cipher c, uint8_t self,
                                   uint8_t peer, uint8_t eph)
{
    return new_eng_rekey(role, c, self, peer, eph, 0);
}

/* Runs the two-message handshake; returns the responder's verdict on
 * message 1 (or the initiator's on message 2 when the first passed). */
static op_status_t handshake(struct pair *p)
{
    uint8_t m1[OP_CHAN_HS_MSG_BYTES], m2[OP_CHAN_HS_MSG_BYTES], none[OP_CHAN_HS_MSG_BYTES];
    size_t n1, n2, used, n;
    assert_int_equal(op_chan_eng_hs_start(p->init, m1, sizeof m1, &n1), OP_INPROGRESS);
    assert_int_equal(n1, OP_CHAN_HS_MSG_BYTES);
    op_status_t st = op_chan_eng_hs_consume(p->resp, m1, n1, &used, m2, sizeof m2, &n2);
    if (st != OP_OK)
        return st;
    assert_int_equal(used, OP_CHAN_HS_MSG_BYTES);
    assert_int_equal(n2, OP_CHAN_HS_MSG_BYTES);
    st = op_chan_eng_hs_consume(p->init, m2, n2, &used, none, sizeof none, &n);
    assert_int_equal(n, 0);
    return st;
}

/* The same keys and ephemerals every time, so two pairs share session keys. */
static void make_pair_rekey(struct pair *p, enum op_chan_cipher c, uint64_t rekey_bytes)
{
    p->init = new_eng_rekey(OP_CHAN_INITIATOR, c, 1, 2, 11, rekey_bytes);
    p->resp = new_eng_rekey(OP_CHAN_RESPONDER, c, 2, 1, 22, rekey_bytes);
    assert_int_equal(handshake(p), OP_OK);
}

static void make_pair(struct pair *p, enum op_chan_cipher c)
{
    make_pair_rekey(p, c, 0);
}

static void free_pair(struct pair *p)
{
    op_chan_eng_free(p->init);
    op_chan_eng_free(p->resp);
}

static void fill(uint8_t *b, size_t len, uint32_t i)
{
    for (size_t j = 0; j < len; j++)
        b[j] = (uint8_t)((i + j) & 0xff);
}

static size_t seal(struct op_chan_eng *e, const uint8_t *m, size_t len, uint8_t *out)
{
    size_t n;
    assert_int_equal(op_chan_eng_seal(e, m, len, out, len + OP_CHAN_FRAME_OVERHEAD, &n), OP_OK);
    assert_int_equal(n, len + OP_CHAN_FRAME_OVERHEAD);
    return n;
}

static void counters(struct op_chan_eng *e, uint64_t tx[OP_CHAN_TX_COUNT_],
                     uint64_t rx[OP_CHAN_RX_COUNT_])
{
    op_chan_eng_counters(e, tx, rx);
}

/* Runs check for XChaCha20-Poly1305 and, where the CPU has AES-NI, for
 * AES-256-GCM. */
static void for_each_cipher(void (*check)(enum op_chan_cipher c))
{
    check(OP_CHAN_CIPHER_XCHACHA);
    if (crypto_aead_aes256gcm_is_available())
        check(OP_CHAN_CIPHER_AESGCM);
}

/* ---- handshake ---- */

static void round_trip(enum op_chan_cipher c, enum op_chan_cipher expect)
{
    struct pair p;
    uint8_t msg[300], frame[400];
    const uint8_t *out;
    size_t used, len;
    uint64_t tx[OP_CHAN_TX_COUNT_], rx[OP_CHAN_RX_COUNT_];

    make_pair(&p, c);
    assert_true(op_chan_eng_established(p.init) && op_chan_eng_established(p.resp));
    assert_int_equal(op_chan_eng_cipher(p.init), expect);
    assert_int_equal(op_chan_eng_cipher(p.resp), expect);
    for (uint32_t i = 0; i < 3; i++) {
        struct op_chan_eng *from = i == 1 ? p.resp : p.init, *to = i == 1 ? p.init : p.resp;
        fill(msg, sizeof msg, i);
        size_t n = seal(from, msg, sizeof msg, frame);
        /* Big-endian ciphertext length, and no plaintext left visible. */
        assert_int_equal(frame[0] << 24 | frame[1] << 16 | frame[2] << 8 | frame[3], 316);
        assert_null(memmem(frame, n, msg + 10, 16));
        assert_int_equal(op_chan_eng_open(to, frame, n, &used, &out, &len), OP_OK);
        assert_int_equal(used, n);
        assert_int_equal(len, sizeof msg);
        assert_memory_equal(out, msg, sizeof msg);
    }
    counters(p.init, tx, rx);
    assert_int_equal(tx[OP_CHAN_frames_sealed], 2);
    assert_int_equal(tx[OP_CHAN_bytes_sealed], 600);
    assert_int_equal(rx[OP_CHAN_frames_opened], 1);
    assert_int_equal(rx[OP_CHAN_bytes_opened], 300);
    assert_int_equal(rx[OP_CHAN_auth_failed] + rx[OP_CHAN_handshake_failed], 0);
    free_pair(&p);
}

static void test_round_trip_xchacha(void **s)
{
    (void)s;
    round_trip(OP_CHAN_CIPHER_XCHACHA, OP_CHAN_CIPHER_XCHACHA);
}

static void test_round_trip_aesgcm(void **s)
{
    (void)s;
    if (!crypto_aead_aes256gcm_is_available())
        skip();
    round_trip(OP_CHAN_CIPHER_AESGCM, OP_CHAN_CIPHER_AESGCM);
    round_trip(OP_CHAN_CIPHER_AUTO, OP_CHAN_CIPHER_AESGCM);
}

/* Message 1 is the type byte, the ephemeral public key, then 17 bytes of
 * encrypted offer; a different ephemeral key gives different session keys. */
static void test_handshake_layout_and_fresh_keys(void **s)
{
    (void)s;
    uint8_t m1[OP_CHAN_HS_MSG_BYTES], e_pub[32], e_sec[32], msg[8] = "abcdefgh";
    uint8_t f1[64], f2[64];
    size_t n;
    struct op_chan_eng *i1 = new_eng(OP_CHAN_INITIATOR, OP_CHAN_CIPHER_XCHACHA, 1, 2, 11);
    assert_int_equal(op_chan_eng_hs_start(i1, m1, sizeof m1, &n), OP_INPROGRESS);
    memset(e_sec, 11, 32);
    crypto_scalarmult_base(e_pub, e_sec);
    assert_int_equal(m1[0], 0x01);
    assert_memory_equal(m1 + 1, e_pub, 32);
    /* A second start is a state error, not a second message. */
    assert_int_equal(op_chan_eng_hs_start(i1, m1, sizeof m1, &n), OP_ERR_STATE);
    op_chan_eng_free(i1);

    struct pair a = {new_eng(OP_CHAN_INITIATOR, OP_CHAN_CIPHER_XCHACHA, 1, 2, 11),
                     new_eng(OP_CHAN_RESPONDER, OP_CHAN_CIPHER_XCHACHA, 2, 1, 22)};
    struct pair b = {new_eng(OP_CHAN_INITIATOR, OP_CHAN_CIPHER_XCHACHA, 1, 2, 33),
                     new_eng(OP_CHAN_RESPONDER, OP_CHAN_CIPHER_XCHACHA, 2, 1, 22)};
    assert_int_equal(handshake(&a), OP_OK);
    assert_int_equal(handshake(&b), OP_OK);
    seal(a.init, msg, sizeof msg, f1);
    seal(b.init, msg, sizeof msg, f2);
    assert_memory_equal(f1, f2, 4);
    assert_memory_not_equal(f1 + 4, f2 + 4, sizeof msg + 16);
    /* Session b's frame does not open in session a. */
    const uint8_t *out;
    size_t used, len;
    assert_int_equal(op_chan_eng_open(a.resp, f2, 28, &used, &out, &len), OP_ERR_REFUSED);
    free_pair(&a);
    free_pair(&b);
}

static void expect_refused(struct pair *p, op_status_t want, enum op_chan_rx_counter who_counts,
                           struct op_chan_eng *counted)
{
    uint64_t tx[OP_CHAN_TX_COUNT_], rx[OP_CHAN_RX_COUNT_];
    uint8_t frame[64], msg[4] = {1, 2, 3, 4};
    size_t n;
    assert_int_equal(handshake(p), want);
    counters(counted, tx, rx);
    assert_int_equal(rx[who_counts], 1);
    assert_non_null(op_chan_eng_error(counted));
    /* Neither side can send a message after a refused handshake. */
    assert_int_equal(op_chan_eng_seal(p->init, msg, 4, frame, sizeof frame, &n), OP_ERR_STATE);
    assert_int_equal(op_chan_eng_seal(p->resp, msg, 4, frame, sizeof frame, &n), OP_ERR_STATE);
    free_pair(p);
}

static void test_wrong_keys_refused(void **s)
{
    (void)s;
    /* The agent pins key 1 but a holder of key 3 connects. */
    struct pair p = {new_eng(OP_CHAN_INITIATOR, OP_CHAN_CIPHER_AUTO, 3, 2, 11),
                     new_eng(OP_CHAN_RESPONDER, OP_CHAN_CIPHER_AUTO, 2, 1, 22)};
    expect_refused(&p, OP_ERR_REFUSED, OP_CHAN_handshake_failed, p.resp);
    /* The host pins key 2, the agent holds key 4: also refused by the agent,
     * since message 1 was encrypted to the pinned key. */
    struct pair q = {new_eng(OP_CHAN_INITIATOR, OP_CHAN_CIPHER_AUTO, 1, 2, 11),
                     new_eng(OP_CHAN_RESPONDER, OP_CHAN_CIPHER_AUTO, 4, 1, 22)};
    expect_refused(&q, OP_ERR_REFUSED, OP_CHAN_handshake_failed, q.resp);
}

static void test_forced_cipher_mismatch_refused(void **s)
{
    (void)s;
    if (!crypto_aead_aes256gcm_is_available())
        skip();
    struct pair p = {new_eng(OP_CHAN_INITIATOR, OP_CHAN_CIPHER_XCHACHA, 1, 2, 11),
                     new_eng(OP_CHAN_RESPONDER, OP_CHAN_CIPHER_AESGCM, 2, 1, 22)};
    expect_refused(&p, OP_ERR_UNSUPPORTED, OP_CHAN_handshake_failed, p.resp);
}

/* Every bit of both handshake messages matters. */
static void test_handshake_bit_flips_refused(void **s)
{
    (void)s;
    for (int which = 1; which <= 2; which++) {
        for (size_t bit = 0; bit < OP_CHAN_HS_MSG_BYTES * 8; bit += 3) {
            struct pair p = {new_eng(OP_CHAN_INITIATOR, OP_CHAN_CIPHER_XCHACHA, 1, 2, 11),
                             new_eng(OP_CHAN_RESPONDER, OP_CHAN_CIPHER_XCHACHA, 2, 1, 22)};
            uint8_t m1[OP_CHAN_HS_MSG_BYTES], m2[OP_CHAN_HS_MSG_BYTES], x[OP_CHAN_HS_MSG_BYTES];
            size_t n, used;
            uint64_t tx[OP_CHAN_TX_COUNT_], rx[OP_CHAN_RX_COUNT_];
            op_chan_eng_hs_start(p.init, m1, sizeof m1, &n);
            if (which == 1)
                m1[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            op_status_t st = op_chan_eng_hs_consume(p.resp, m1, n, &used, m2, sizeof m2, &n);
            struct op_chan_eng *judge = p.resp;
            if (which == 2) {
                assert_int_equal(st, OP_OK);
                m2[bit / 8] ^= (uint8_t)(1u << (bit % 8));
                st = op_chan_eng_hs_consume(p.init, m2, n, &used, x, sizeof x, &n);
                judge = p.init;
            }
            assert_true(st == OP_ERR_REFUSED || st == OP_ERR_MALFORMED);
            counters(judge, tx, rx);
            assert_int_equal(rx[OP_CHAN_handshake_failed] + rx[OP_CHAN_handshake_malformed], 1);
            assert_false(op_chan_eng_established(judge));
            free_pair(&p);
        }
    }
}

static void test_handshake_partial_input(void **s)
{
    (void)s;
    struct pair p = {new_eng(OP_CHAN_INITIATOR, OP_CHAN_CIPHER_XCHACHA, 1, 2, 11),
                     new_eng(OP_CHAN_RESPONDER, OP_CHAN_CIPHER_XCHACHA, 2, 1, 22)};
    uint8_t m1[OP_CHAN_HS_MSG_BYTES], m2[OP_CHAN_HS_MSG_BYTES];
    size_t n, used, n2;
    op_chan_eng_hs_start(p.init, m1, sizeof m1, &n);
    assert_int_equal(op_chan_eng_hs_consume(p.resp, m1, 49, &used, m2, sizeof m2, &n2),
                     OP_INPROGRESS);
    assert_int_equal(used, 0);
    assert_int_equal(n2, 0);
    assert_int_equal(op_chan_eng_hs_consume(p.resp, m1, 50, &used, m2, sizeof m2, &n2), OP_OK);
    /* A low-order ephemeral key (all zero) is refused, not used. */
    struct op_chan_eng *r = new_eng(OP_CHAN_RESPONDER, OP_CHAN_CIPHER_XCHACHA, 2, 1, 22);
    memset(m1 + 1, 0, 32);
    assert_int_equal(op_chan_eng_hs_consume(r, m1, 50, &used, m2, sizeof m2, &n2), OP_ERR_REFUSED);
    op_chan_eng_free(r);
    free_pair(&p);
}


/* ---- the wire format, recomputed independently (docs/channel.md) ---- */

struct kat_sym {
    uint8_t ck[64], h[64], k[32];
};

static void kat_hash(struct kat_sym *s, const uint8_t *d, size_t n)
{
    uint8_t buf[64 + 64];
    assert_true(n <= 64);
    memcpy(buf, s->h, 64);
    memcpy(buf + 64, d, n);
    crypto_generichash(s->h, 64, buf, 64 + n, NULL, 0);
}

static void kat_hkdf(const uint8_t ck[64], const uint8_t *ikm, size_t n, uint8_t o1[64],
                     uint8_t o2[64])
{
    uint8_t t[64], one = 1, two[65];
    crypto_generichash(t, 64, ikm, n, ck, 64);
    crypto_generichash(o1, 64, &one, 1, t, 64);
    memcpy(two, o1, 64);
    two[64] = 2;
    crypto_generichash(o2, 64, two, 65, t, 64);
}

static void kat_mix_dh(struct kat_sym *s, const uint8_t sec[32], const uint8_t pub[32])
{
    uint8_t dh[32], o2[64];
    assert_int_equal(crypto_scalarmult(dh, sec, pub), 0);
    kat_hkdf(s->ck, dh, 32, s->ck, o2);
    memcpy(s->k, o2, 32);
}

/* type || e || AEAD(k, nonce 0, ad = h, payload byte), hashing as it goes. */
static void kat_message(struct kat_sym *s, uint8_t type, const uint8_t e_pub[32], uint8_t payload,
                        uint8_t out[50])
{
    uint8_t nonce[24] = {0};
    out[0] = type;
    memcpy(out + 1, e_pub, 32);
    crypto_aead_xchacha20poly1305_ietf_encrypt(out + 33, NULL, &payload, 1, s->h, 64, NULL, nonce,
                                               s->k);
    kat_hash(s, out + 33, 17);
}

static void kat_for_cipher(enum op_chan_cipher c)
{
    struct op_chan_keypair si, sr, ei, er;
    struct kat_sym s;
    uint8_t m1[50], m2[50], g1[50], g2[50], o1[64], o2[64], frame[64], want[64];
    static const char name[] = "offpath-channel-v1 Noise_KK_25519_XChaChaPoly_BLAKE2b";
    fixed_keypair(1, &si);
    fixed_keypair(2, &sr);
    fixed_keypair(11, &ei);
    fixed_keypair(22, &er);

    crypto_generichash(s.h, 64, (const uint8_t *)name, sizeof name - 1, NULL, 0);
    memcpy(s.ck, s.h, 64);
    kat_hash(&s, si.pub, 32);
    kat_hash(&s, sr.pub, 32);
    uint8_t t1 = 1, t2 = 2;
    kat_hash(&s, &t1, 1);
    kat_hash(&s, ei.pub, 32);
    kat_mix_dh(&s, ei.sec, sr.pub); /* es */
    kat_mix_dh(&s, si.sec, sr.pub); /* ss */
    uint8_t offer = c == OP_CHAN_CIPHER_AESGCM ? 2 : 1;
    kat_message(&s, 1, ei.pub, offer, m1);
    kat_hash(&s, &t2, 1);
    kat_hash(&s, er.pub, 32);
    kat_mix_dh(&s, er.sec, ei.pub); /* ee */
    kat_mix_dh(&s, er.sec, si.pub); /* se */
    kat_message(&s, 2, er.pub, (uint8_t)c, m2);
    kat_hkdf(s.ck, NULL, 0, o1, o2); /* o1: host -> agent, o2: agent -> host */

    struct pair p = {new_eng(OP_CHAN_INITIATOR, c, 1, 2, 11), new_eng(OP_CHAN_RESPONDER, c, 2, 1, 22)};
    size_t n, used;
    assert_int_equal(op_chan_eng_hs_start(p.init, g1, sizeof g1, &n), OP_INPROGRESS);
    assert_memory_equal(g1, m1, 50);
    assert_int_equal(op_chan_eng_hs_consume(p.resp, g1, 50, &used, g2, sizeof g2, &n), OP_OK);
    assert_memory_equal(g2, m2, 50);
    assert_int_equal(op_chan_eng_hs_consume(p.init, g2, 50, &used, frame, sizeof frame, &n), OP_OK);

    /* Frames: BE32 ciphertext length, then the AEAD of the message with the
     * direction's key, nonce = little-endian sequence number, ad = header. */
    const uint8_t msg[5] = {'h', 'e', 'l', 'l', 'o'};
    for (uint64_t seq = 0; seq < 3; seq++) {
        for (int dir = 0; dir < 2; dir++) {
            uint8_t nonce[24] = {0}, hdr[4] = {0, 0, 0, 21};
            const uint8_t *key = dir == 0 ? o1 : o2;
            nonce[0] = (uint8_t)seq;
            memcpy(want, hdr, 4);
            if (c == OP_CHAN_CIPHER_AESGCM)
                crypto_aead_aes256gcm_encrypt(want + 4, NULL, msg, 5, hdr, 4, NULL, nonce, key);
            else
                crypto_aead_xchacha20poly1305_ietf_encrypt(want + 4, NULL, msg, 5, hdr, 4, NULL,
                                                           nonce, key);
            assert_int_equal(op_chan_eng_seal(dir == 0 ? p.init : p.resp, msg, 5, frame,
                                              sizeof frame, &n), OP_OK);
            assert_int_equal(n, 25);
            assert_memory_equal(frame, want, 25);
        }
    }
    free_pair(&p);
}

static void test_wire_format_known_answer(void **s)
{
    (void)s;
    for_each_cipher(kat_for_cipher);
}

/* ---- frames ---- */

/* Flipping any single bit of a frame never delivers it: the header is
 * associated data, the body is authenticated. */
static void test_frame_bit_flips_never_deliver(void **s)
{
    (void)s;
    uint8_t msg[32], frame[64];
    fill(msg, sizeof msg, 7);
    for (size_t bit = 0; bit < (sizeof msg + OP_CHAN_FRAME_OVERHEAD) * 8; bit++) {
        struct pair p;
        const uint8_t *out;
        size_t used, len;
        uint64_t tx[OP_CHAN_TX_COUNT_], rx[OP_CHAN_RX_COUNT_];
        make_pair(&p, OP_CHAN_CIPHER_XCHACHA);
        size_t n = seal(p.init, msg, sizeof msg, frame);
        frame[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        op_status_t st = op_chan_eng_open(p.resp, frame, n, &used, &out, &len);
        counters(p.resp, tx, rx);
        if (st == OP_INPROGRESS) { /* a longer length: waits, then truncation */
            assert_true(bit < 32);
            assert_int_equal(op_chan_eng_eof(p.resp, n), OP_ERR_TRUNCATED);
            counters(p.resp, tx, rx);
            assert_int_equal(rx[OP_CHAN_truncated], 1);
        } else if (st == OP_ERR_MALFORMED) {
            assert_int_equal(rx[OP_CHAN_bad_length], 1);
        } else {
            assert_int_equal(st, OP_ERR_REFUSED);
            assert_int_equal(rx[OP_CHAN_auth_failed], 1);
        }
        assert_int_equal(rx[OP_CHAN_frames_opened], 0);
        assert_null(out);
        free_pair(&p);
    }
}

static void test_replay_reorder_reflect_refused(void **s)
{
    (void)s;
    uint8_t m0[10], m1[10], f0[64], f1[64], copy[64];
    const uint8_t *out;
    size_t used, len, n0, n1;
    uint64_t tx[OP_CHAN_TX_COUNT_], rx[OP_CHAN_RX_COUNT_];
    struct pair p;
    fill(m0, 10, 0);
    fill(m1, 10, 1);

    /* Replay: the same frame twice. */
    make_pair(&p, OP_CHAN_CIPHER_XCHACHA);
    n0 = seal(p.init, m0, 10, f0);
    memcpy(copy, f0, n0);
    assert_int_equal(op_chan_eng_open(p.resp, f0, n0, &used, &out, &len), OP_OK);
    assert_memory_equal(out, m0, 10);
    assert_int_equal(op_chan_eng_open(p.resp, copy, n0, &used, &out, &len), OP_ERR_REFUSED);
    counters(p.resp, tx, rx);
    assert_int_equal(rx[OP_CHAN_frames_opened], 1);
    assert_int_equal(rx[OP_CHAN_auth_failed], 1);
    /* Sticky: even the genuine next frame is no longer accepted. */
    n1 = seal(p.init, m1, 10, f1);
    assert_int_equal(op_chan_eng_open(p.resp, f1, n1, &used, &out, &len), OP_ERR_STATE);
    free_pair(&p);

    /* Reorder: frame 1 before frame 0. */
    make_pair(&p, OP_CHAN_CIPHER_XCHACHA);
    n0 = seal(p.init, m0, 10, f0);
    n1 = seal(p.init, m1, 10, f1);
    assert_int_equal(op_chan_eng_open(p.resp, f1, n1, &used, &out, &len), OP_ERR_REFUSED);
    counters(p.resp, tx, rx);
    assert_int_equal(rx[OP_CHAN_frames_opened], 0);
    assert_int_equal(rx[OP_CHAN_auth_failed], 1);
    free_pair(&p);

    /* Reflection: the initiator's own frame sent back to it. */
    make_pair(&p, OP_CHAN_CIPHER_AUTO);
    n0 = seal(p.init, m0, 10, f0);
    assert_int_equal(op_chan_eng_open(p.init, f0, n0, &used, &out, &len), OP_ERR_REFUSED);
    free_pair(&p);
}

static void test_truncation_and_injection(void **s)
{
    (void)s;
    uint8_t m[100], f[200], junk[200];
    const uint8_t *out;
    size_t used, len;
    uint64_t tx[OP_CHAN_TX_COUNT_], rx[OP_CHAN_RX_COUNT_];
    struct pair p;
    fill(m, sizeof m, 3);

    make_pair(&p, OP_CHAN_CIPHER_XCHACHA);
    size_t n = seal(p.init, m, sizeof m, f);
    for (size_t cut = 0; cut < n; cut++) {
        assert_int_equal(op_chan_eng_open(p.resp, f, cut, &used, &out, &len), OP_INPROGRESS);
        assert_int_equal(used, 0);
    }
    assert_int_equal(op_chan_eng_eof(p.resp, 0), OP_OK);
    assert_int_equal(op_chan_eng_eof(p.resp, n - 1), OP_ERR_TRUNCATED);
    counters(p.resp, tx, rx);
    assert_int_equal(rx[OP_CHAN_truncated], 1);
    assert_int_equal(rx[OP_CHAN_frames_opened], 0);
    free_pair(&p);

    /* Injection: a well-formed length with bytes not from the peer. */
    make_pair(&p, OP_CHAN_CIPHER_XCHACHA);
    memset(junk, 0x5a, sizeof junk);
    junk[0] = 0, junk[1] = 0, junk[2] = 0, junk[3] = 116;
    assert_int_equal(op_chan_eng_open(p.resp, junk, 120, &used, &out, &len), OP_ERR_REFUSED);
    counters(p.resp, tx, rx);
    assert_int_equal(rx[OP_CHAN_auth_failed], 1);
    free_pair(&p);
}

static void test_bad_lengths(void **s)
{
    (void)s;
    static const uint32_t bad[] = {0, 1, 16, MAX_MSG + 17, 0xffffffffu};
    for (size_t i = 0; i < COUNT_OF(bad); i++) {
        struct pair p;
        uint8_t f[64] = {0};
        const uint8_t *out;
        size_t used, len;
        uint64_t tx[OP_CHAN_TX_COUNT_], rx[OP_CHAN_RX_COUNT_];
        make_pair(&p, OP_CHAN_CIPHER_XCHACHA);
        f[0] = (uint8_t)(bad[i] >> 24), f[1] = (uint8_t)(bad[i] >> 16);
        f[2] = (uint8_t)(bad[i] >> 8), f[3] = (uint8_t)bad[i];
        assert_int_equal(op_chan_eng_open(p.resp, f, 4, &used, &out, &len), OP_ERR_MALFORMED);
        counters(p.resp, tx, rx);
        assert_int_equal(rx[OP_CHAN_bad_length], 1);
        free_pair(&p);
    }
    /* Sizes the sender refuses: 0 and above the maximum. */
    struct pair p;
    uint8_t big[MAX_MSG + 1] = {0}, f[MAX_MSG + 64];
    size_t n;
    make_pair(&p, OP_CHAN_CIPHER_XCHACHA);
    assert_int_equal(op_chan_eng_seal(p.init, big, 0, f, sizeof f, &n), OP_ERR_INVAL);
    assert_int_equal(op_chan_eng_seal(p.init, big, MAX_MSG + 1, f, sizeof f, &n), OP_ERR_INVAL);
    assert_int_equal(op_chan_eng_seal(p.init, big, MAX_MSG, f, 10, &n), OP_ERR_NOSPACE);
    assert_int_equal(op_chan_eng_seal(p.init, big, MAX_MSG, f, sizeof f, &n), OP_OK);
    assert_int_equal(n, MAX_MSG + OP_CHAN_FRAME_OVERHEAD);
    free_pair(&p);
}

/* Many frames in one buffer (what one read returns) open one by one. */
static void test_batch_of_frames(void **s)
{
    (void)s;
    enum { N = 50 };
    uint8_t buf[N * (N + OP_CHAN_FRAME_OVERHEAD)], m[N];
    size_t at = 0, used, len;
    const uint8_t *out;
    uint64_t tx[OP_CHAN_TX_COUNT_], rx[OP_CHAN_RX_COUNT_];
    struct pair p;
    make_pair(&p, OP_CHAN_CIPHER_AUTO);
    for (uint32_t i = 0; i < N; i++) {
        fill(m, i + 1, i);
        at += seal(p.resp, m, i + 1, buf + at);
    }
    size_t pos = 0;
    for (uint32_t i = 0; i < N; i++) {
        assert_int_equal(op_chan_eng_open(p.init, buf + pos, at - pos, &used, &out, &len), OP_OK);
        fill(m, i + 1, i);
        assert_int_equal(len, i + 1);
        assert_memory_equal(out, m, len);
        pos += used;
    }
    assert_int_equal(pos, at);
    counters(p.init, tx, rx);
    assert_int_equal(rx[OP_CHAN_frames_opened], N);
    assert_int_equal(rx[OP_CHAN_bytes_opened], N * (N + 1) / 2);
    counters(p.resp, tx, rx);
    assert_int_equal(tx[OP_CHAN_frames_sealed], N);
    free_pair(&p);
}


/* ---- batch records ---- */

/* Stages messages of the given sizes into one record and seals it. */
static size_t seal_batch(struct op_chan_eng *e, const uint32_t *sizes, size_t n, uint8_t *rec,
                         size_t cap)
{
    uint8_t m[OP_CHAN_RECORD_MAX];
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        fill(m, sizes[i], (uint32_t)i);
        assert_int_equal(op_chan_eng_batch_add(e, rec, cap, &len, m, sizes[i]), OP_OK);
    }
    assert_int_equal(op_chan_eng_batch_seal(e, rec, cap, &len), OP_OK);
    return len;
}

/* Takes every message of the record at rec: same bytes passed each time,
 * *used 0 until the last, which reports the whole frame. */
static void open_batch(struct op_chan_eng *e, uint8_t *rec, size_t n, const uint32_t *sizes,
                       size_t count)
{
    uint8_t m[OP_CHAN_RECORD_MAX];
    for (size_t i = 0; i < count; i++) {
        const uint8_t *out;
        size_t used, len;
        assert_int_equal(op_chan_eng_open(e, rec, n, &used, &out, &len), OP_OK);
        assert_int_equal(used, i + 1 < count ? 0 : n);
        fill(m, sizes[i], (uint32_t)i);
        assert_int_equal(len, sizes[i]);
        assert_memory_equal(out, m, len);
    }
}

static void batch_round_trip(enum op_chan_cipher c)
{
    static const uint32_t sizes[] = {1, 256, 17, 4000, 600, 3, 1024, 255};
    uint8_t rec[OP_CHAN_RECORD_MAX + 64];
    uint64_t tx[OP_CHAN_TX_COUNT_], rx[OP_CHAN_RX_COUNT_];
    struct pair p;
    make_pair(&p, c);
    for (int round = 0; round < 3; round++) {
        size_t n = seal_batch(p.init, sizes, COUNT_OF(sizes), rec, sizeof rec);
        size_t plain = 0;
        for (size_t i = 0; i < COUNT_OF(sizes); i++)
            plain += OP_CHAN_BATCH_HDR + sizes[i];
        assert_int_equal(n, plain + OP_CHAN_FRAME_OVERHEAD);
        uint32_t word = (uint32_t)rec[0] << 24 | rec[1] << 16 | rec[2] << 8 | rec[3];
        assert_int_equal(word, OP_CHAN_BATCH_FLAG | (plain + OP_CHAN_TAG_BYTES));
        open_batch(p.resp, rec, n, sizes, COUNT_OF(sizes));
    }
    counters(p.init, tx, rx);
    assert_int_equal(tx[OP_CHAN_frames_sealed], 3 * COUNT_OF(sizes));
    assert_int_equal(tx[OP_CHAN_records_sealed], 3);
    counters(p.resp, tx, rx);
    assert_int_equal(rx[OP_CHAN_frames_opened], 3 * COUNT_OF(sizes));
    assert_int_equal(rx[OP_CHAN_records_opened], 3);
    free_pair(&p);
}

static void test_batch_records_round_trip(void **s)
{
    (void)s;
    for_each_cipher(batch_round_trip);
}

/* Single-message frames and batch records share one counter (nonce), in
 * the order they were sealed. */
static void test_batch_and_single_interleave(void **s)
{
    (void)s;
    static const uint32_t two[] = {40, 50};
    uint8_t rec[256], f[128], m[30];
    const uint8_t *out;
    size_t used, len;
    struct pair p;
    make_pair(&p, OP_CHAN_CIPHER_AUTO);
    fill(m, sizeof m, 9);
    size_t n1 = seal(p.init, m, sizeof m, f);
    size_t n2 = seal_batch(p.init, two, 2, rec, sizeof rec);
    assert_int_equal(op_chan_eng_open(p.resp, f, n1, &used, &out, &len), OP_OK);
    assert_memory_equal(out, m, sizeof m);
    open_batch(p.resp, rec, n2, two, 2);
    free_pair(&p);
}

/* A record takes messages up to OP_CHAN_RECORD_MAX of plaintext, or one
 * message of any allowed size; the caller's buffer bounds it too. */
static void test_batch_record_limits(void **s)
{
    (void)s;
    static uint8_t m[MAX_MSG], rec[OP_CHAN_RECORD_MAX + 64];
    const size_t each = MAX_MSG / 2 - OP_CHAN_BATCH_HDR; /* 4 fill 8 KiB */
    size_t len = 0;
    struct pair p;
    make_pair(&p, OP_CHAN_CIPHER_XCHACHA);
    for (int i = 0; i < 8; i++)
        assert_int_equal(op_chan_eng_batch_add(p.init, rec, sizeof rec, &len, m, each), OP_OK);
    assert_int_equal(len, OP_CHAN_FRAME_HDR + OP_CHAN_RECORD_MAX);
    assert_int_equal(op_chan_eng_batch_add(p.init, rec, sizeof rec, &len, m, 1), OP_ERR_NOSPACE);
    assert_int_equal(op_chan_eng_batch_add(p.init, rec, sizeof rec, &len, m, 0), OP_ERR_INVAL);
    assert_int_equal(op_chan_eng_batch_add(p.init, rec, sizeof rec, &len, m, MAX_MSG + 1),
                     OP_ERR_INVAL);
    assert_int_equal(op_chan_eng_batch_seal(p.init, rec, len + 15, &len), OP_ERR_NOSPACE);
    assert_int_equal(op_chan_eng_batch_seal(p.init, rec, sizeof rec, &len), OP_OK);
    /* An empty record is not a record; a buffer too small takes nothing. */
    len = 0;
    assert_int_equal(op_chan_eng_batch_seal(p.init, rec, sizeof rec, &len), OP_ERR_INVAL);
    assert_int_equal(op_chan_eng_batch_add(p.init, rec, 40, &len, m, 21), OP_ERR_NOSPACE);
    assert_int_equal(op_chan_eng_batch_add(p.init, rec, 44, &len, m, 20), OP_OK);
    free_pair(&p);
    assert_int_equal(op_chan_max_frame(100), OP_CHAN_RECORD_MAX + OP_CHAN_FRAME_OVERHEAD);
    assert_int_equal(op_chan_max_frame(1u << 20),
                     (1u << 20) + OP_CHAN_BATCH_HDR + OP_CHAN_FRAME_OVERHEAD);
}

/* Any flipped bit of a batch record delivers none of its messages. */
static void test_batch_bit_flips_deliver_nothing(void **s)
{
    (void)s;
    static const uint32_t three[] = {5, 9, 2};
    uint8_t rec[128];
    for (size_t bit = 0; bit < (16 + 12 + OP_CHAN_FRAME_OVERHEAD) * 8; bit++) {
        struct pair p;
        const uint8_t *out;
        size_t used, len;
        uint64_t tx[OP_CHAN_TX_COUNT_], rx[OP_CHAN_RX_COUNT_];
        make_pair(&p, OP_CHAN_CIPHER_AUTO);
        size_t n = seal_batch(p.init, three, 3, rec, sizeof rec);
        rec[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        op_status_t st = op_chan_eng_open(p.resp, rec, n, &used, &out, &len);
        counters(p.resp, tx, rx);
        if (st == OP_INPROGRESS)
            assert_true(bit < 32); /* a longer length: it waits for more */
        else if (st == OP_ERR_MALFORMED)
            assert_int_equal(rx[OP_CHAN_bad_length], 1);
        else
            assert_int_equal(rx[OP_CHAN_auth_failed], 1);
        assert_int_equal(rx[OP_CHAN_frames_opened], 0);
        assert_null(out);
        free_pair(&p);
    }
}

/* A peer with the key whose record's inner lengths do not add up (a bug or
 * a hostile peer) is refused before any message of it is delivered. */
static void test_batch_inner_lengths_checked(void **s)
{
    (void)s;
    static const int32_t change[] = {+1, -1, +100000, -10};
    for (size_t i = 0; i < COUNT_OF(change); i++) {
        uint8_t rec[128], m[10] = {0};
        size_t len = 0, used, got;
        const uint8_t *out;
        uint64_t tx[OP_CHAN_TX_COUNT_], rx[OP_CHAN_RX_COUNT_];
        struct pair p;
        make_pair(&p, OP_CHAN_CIPHER_AUTO);
        assert_int_equal(op_chan_eng_batch_add(p.init, rec, sizeof rec, &len, m, 10), OP_OK);
        assert_int_equal(op_chan_eng_batch_add(p.init, rec, sizeof rec, &len, m, 10), OP_OK);
        /* The second message's length, rewritten before the seal. */
        uint32_t v = (uint32_t)(10 + change[i]);
        rec[18] = (uint8_t)(v >> 24), rec[19] = (uint8_t)(v >> 16);
        rec[20] = (uint8_t)(v >> 8), rec[21] = (uint8_t)v;
        assert_int_equal(op_chan_eng_batch_seal(p.init, rec, sizeof rec, &len), OP_OK);
        assert_int_equal(op_chan_eng_open(p.resp, rec, len, &used, &out, &got), OP_ERR_MALFORMED);
        counters(p.resp, tx, rx);
        assert_int_equal(rx[OP_CHAN_bad_length], 1);
        assert_int_equal(rx[OP_CHAN_frames_opened], 0);
        assert_int_equal(rx[OP_CHAN_records_opened], 1);
        free_pair(&p);
    }
}

/* Both ends move to the next key after the same frame, with no message
 * between them: a pair that rekeys every three frames runs on, its frames
 * equal those of a pair with the same session keys that never rekeys until
 * the first rekey and differ from there, and the never-rekeying receiver
 * refuses the first frame under the new key. */
static void rekeys_in_step(enum op_chan_cipher c)
{
    enum { LEN = 100, FRAME = LEN + OP_CHAN_FRAME_OVERHEAD, FRAMES = 10 };
    uint8_t m[LEN], fr[FRAME], fk[FRAME], opened[FRAME]; /* frames open in place */
    const uint8_t *out;
    size_t used, len;
    uint64_t tx[OP_CHAN_TX_COUNT_], rx[OP_CHAN_RX_COUNT_];
    struct pair r, k;
    make_pair_rekey(&r, c, 3 * FRAME);
    make_pair(&k, c);
    for (uint32_t i = 0; i < FRAMES; i++) {
        fill(m, LEN, i);
        seal(r.init, m, LEN, fr);
        memcpy(opened, fr, FRAME);
        assert_int_equal(op_chan_eng_open(r.resp, opened, FRAME, &used, &out, &len), OP_OK);
        assert_memory_equal(out, m, LEN);
        if (i > 3)
            continue;
        seal(k.init, m, LEN, fk);
        if (i < 3) {
            assert_memory_equal(fr, fk, FRAME);
            assert_int_equal(op_chan_eng_open(k.resp, fk, FRAME, &used, &out, &len), OP_OK);
        } else {
            assert_memory_not_equal(fr + OP_CHAN_FRAME_HDR, fk + OP_CHAN_FRAME_HDR, LEN);
            assert_int_equal(op_chan_eng_open(k.resp, fr, FRAME, &used, &out, &len),
                             OP_ERR_REFUSED);
        }
    }
    counters(r.init, tx, rx);
    assert_int_equal(tx[OP_CHAN_tx_rekeys], FRAMES / 3);
    assert_int_equal(rx[OP_CHAN_rx_rekeys], 0);
    counters(r.resp, tx, rx);
    assert_int_equal(rx[OP_CHAN_rx_rekeys], FRAMES / 3);
    assert_int_equal(rx[OP_CHAN_frames_opened], FRAMES);
    /* The other direction keeps its own count. */
    for (uint32_t i = 0; i < 4; i++) {
        fill(m, LEN, i);
        seal(r.resp, m, LEN, fr);
        assert_int_equal(op_chan_eng_open(r.init, fr, FRAME, &used, &out, &len), OP_OK);
        assert_memory_equal(out, m, LEN);
    }
    counters(r.resp, tx, rx);
    assert_int_equal(tx[OP_CHAN_tx_rekeys], 1);
    counters(r.init, tx, rx);
    assert_int_equal(rx[OP_CHAN_rx_rekeys], 1);
    free_pair(&r);
    free_pair(&k);
}

static void test_rekeys_in_step(void **s)
{
    (void)s;
    for_each_cipher(rekeys_in_step);
}

/* Each cipher's implementations compute one function: libsodium's and
 * another (OpenSSL's, ours on VAES for AES-GCM) give the same bytes for
 * every length from 0 to 2100 and associated data from 0 to 700 bytes, each
 * opens the other's, and a refused record leaves no plaintext behind. */
static void agrees_with_libsodium(enum op_chan_cipher cipher, enum chan_aead_impl other)
{
    enum { MAX = 2100 };
    static const size_t ad_lens[] = {4, 0, 16, 33, 300, 700};
    static uint8_t m[MAX], a[MAX + 16], b[MAX + 16], ad[700];
    uint8_t key[32];
    struct chan_aead sod, ssl;
    randombytes_buf(key, sizeof key);
    randombytes_buf(m, sizeof m);
    randombytes_buf(ad, sizeof ad);
    assert_int_equal(chan_aead_init(&sod, cipher, key), OP_OK);
    assert_int_equal(chan_aead_init(&ssl, cipher, key), OP_OK);
    sod.impl = CHAN_AEAD_SODIUM;
    ssl.impl = other;
    for (size_t len = 0, k = 0; len <= MAX; len += len < 80 ? 1 : 61, k++) {
        uint64_t seq = len * 0x9e3779b97f4a7c15ull;
        size_t adl = ad_lens[k % COUNT_OF(ad_lens)];
        assert_true(chan_aead_seal(&sod, seq, ad, adl, m, len, a));
        assert_true(chan_aead_seal(&ssl, seq, ad, adl, m, len, b));
        assert_memory_equal(a, b, len + 16);
        assert_true(chan_aead_open(&ssl, seq, ad, adl, a, len + 16));
        assert_true(chan_aead_open(&sod, seq, ad, adl, b, len + 16));
        assert_memory_equal(a, m, len);
        assert_memory_equal(b, m, len);
        /* In place, then tampered: refused and wiped by both. */
        memcpy(a, m, len);
        assert_true(chan_aead_seal(&ssl, seq, ad, adl, a, len, a));
        memcpy(b, a, len + 16);
        a[len] ^= 1;
        b[len / 2] ^= (uint8_t)(len > 0 ? 4 : 0);
        b[len + 15] ^= (uint8_t)(len > 0 ? 0 : 4);
        assert_false(chan_aead_open(&ssl, seq, ad, adl, a, len + 16));
        assert_false(chan_aead_open(&sod, seq, ad, adl, b, len + 16));
        for (size_t j = 0; j + 16 <= len; j += 16)
            assert_null(memmem(a, len, m + j, 16));
    }
    chan_aead_free(&sod);
    chan_aead_free(&ssl);
}

static void test_aead_implementations_agree(void **s)
{
    (void)s;
    agrees_with_libsodium(OP_CHAN_CIPHER_XCHACHA, CHAN_AEAD_OPENSSL);
    if (!crypto_aead_aes256gcm_is_available())
        return;
    agrees_with_libsodium(OP_CHAN_CIPHER_AESGCM, CHAN_AEAD_OPENSSL);
    if (chan_vaes_available())
        for (int keys = 0; keys < 20; keys++)
            agrees_with_libsodium(OP_CHAN_CIPHER_AESGCM, CHAN_AEAD_VAES);
}

/* ---- keys ---- */

static void test_key_parsers(void **s)
{
    (void)s;
    struct op_chan_keypair kp, back;
    char why[128], line[200];
    uint8_t pub[32];
    fixed_keypair(9, &kp);
    snprintf(line, sizeof line, "offpath-x25519-secret %s\n",
             "0909090909090909090909090909090909090909090909090909090909090909");
    assert_int_equal(op_chan_parse_secret(line, strlen(line), &back, why), OP_OK);
    assert_memory_equal(back.sec, kp.sec, 32);
    assert_memory_equal(back.pub, kp.pub, 32);
    static const char *const bad[] = {
        "", "offpath-x25519-public 0909090909090909090909090909090909090909090909090909090909090909",
        "offpath-x25519-secret 09", "offpath-x25519-secret 090909090909090909090909090909090909"
                                    "0909090909090909090909090909g9",
        "offpath-x25519-secret 0909090909090909090909090909090909090909090909090909090909090909\n\n"};
    for (size_t i = 0; i < COUNT_OF(bad); i++) {
        why[0] = '\0';
        assert_int_equal(op_chan_parse_secret(bad[i], strlen(bad[i]), &back, why),
                         OP_ERR_MALFORMED);
        assert_true(strlen(why) > 0);
    }
    snprintf(line, sizeof line, "offpath-x25519-public %s", "00ff");
    assert_int_equal(op_chan_parse_public(line, strlen(line), pub, why), OP_ERR_MALFORMED);
}

static void test_key_files(void **s)
{
    (void)s;
    char dir[] = "/tmp/chtest/keysXXXXXX", name[128], path[160], why[256];
    struct op_chan_keypair kp, back;
    uint8_t pub[32];
    struct stat sb;
    assert_non_null(mkdtemp(dir));
    snprintf(name, sizeof name, "%s/agent", dir);
    assert_int_equal(op_chan_keypair_generate(&kp), OP_OK);
    assert_int_equal(op_chan_write_keys(name, &kp, why), OP_OK);
    snprintf(path, sizeof path, "%s.key", name);
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    assert_int_equal(op_chan_read_secret(path, &back, why), OP_OK);
    assert_memory_equal(&back, &kp, sizeof kp);
    /* Never replaces an existing key. */
    assert_int_not_equal(op_chan_write_keys(name, &kp, why), OP_OK);
    assert_non_null(strstr(why, "File exists"));
    chmod(path, 0640);
    assert_int_equal(op_chan_read_secret(path, &back, why), OP_ERR_REFUSED);
    assert_non_null(strstr(why, "readable by group or others"));
    snprintf(path, sizeof path, "%s.pub", name);
    assert_int_equal(op_chan_read_public(path, pub, why), OP_OK);
    assert_memory_equal(pub, kp.pub, 32);
    /* A public key where a secret one is expected names the problem. */
    chmod(path, 0600);
    assert_int_equal(op_chan_read_secret(path, &back, why), OP_ERR_MALFORMED);
    assert_non_null(strstr(why, "is not a secret key file"));
    assert_int_not_equal(op_chan_read_public("/tmp/chtest/none.pub", pub, why), OP_OK);
    assert_non_null(strstr(why, "No such file"));
    unlink(path);
    snprintf(path, sizeof path, "%s.key", name);
    unlink(path);
    rmdir(dir);
}

/* ---- addresses ---- */

static void test_addresses(void **s)
{
    (void)s;
    struct op_chan_addr a;
    char why[128];
    assert_int_equal(op_chan_addr_parse("tcp:127.0.0.1:43001", &a, why), OP_OK);
    assert_int_equal(a.kind, OP_CHAN_TCP);
    assert_string_equal(a.host, "127.0.0.1");
    assert_int_equal(a.port, 43001);
    assert_int_equal(op_chan_addr_parse("unix:/tmp/x.sock", &a, why), OP_OK);
    assert_int_equal(a.kind, OP_CHAN_UNIX);
    assert_string_equal(a.path, "/tmp/x.sock");
    assert_int_equal(op_chan_addr_parse("shm:agent-1", &a, why), OP_OK);
    assert_int_equal(a.kind, OP_CHAN_SHM);
    assert_string_equal(a.path, "agent-1");
    static const char *const bad[] = {"0000:03:00.0", "tcp:127.0.0.1", "tcp:127.0.0.1:0",
                                      "tcp::80", "tcp:h:65536", "unix:", "shm:a/b", "shm:",
                                      "udp:1.2.3.4:5"};
    for (size_t i = 0; i < COUNT_OF(bad); i++)
        assert_int_equal(op_chan_addr_parse(bad[i], &a, why), OP_ERR_INVAL);
}

/* ---- transports, end to end in one process ---- */

struct side {
    struct op_channel_config cfg;
    uint32_t count, size;
    op_status_t st;
    uint64_t got;
    uint64_t tx[OP_CHAN_TX_COUNT_], rx[OP_CHAN_RX_COUNT_]; /* at the end */
    char why[256];
};

struct sender {
    struct op_channel *c;
    uint32_t count, size;
    op_status_t st;
};

static void *send_all(void *arg)
{
    struct sender *s = arg;
    uint8_t *m = malloc(s->size);
    s->st = OP_OK;
    for (uint32_t i = 0; i < s->count && s->st == OP_OK; i++) {
        fill(m, s->size, i);
        s->st = op_channel_send(s->c, m, s->size, i + 1 < s->count ? OP_CHAN_MORE : 0);
    }
    free(m);
    return NULL;
}

/* One side: open, then send count messages (batched) from a second thread
 * while receiving count here, as the CLI does. */
static void *run_side(void *arg)
{
    struct side *sd = arg;
    struct op_channel *c;
    pthread_t t;
    uint8_t *m = malloc(sd->size);
    sd->st = op_channel_open(&sd->cfg, &c, sd->why);
    if (sd->st != OP_OK) {
        free(m);
        return NULL;
    }
    struct sender snd = {c, sd->count, sd->size, OP_OK};
    pthread_create(&t, NULL, send_all, &snd);
    for (uint32_t i = 0; i < sd->count && sd->st == OP_OK; i++) {
        const uint8_t *in;
        size_t len;
        sd->st = op_channel_recv(c, &in, &len);
        fill(m, sd->size, i);
        if (sd->st == OP_OK && (len != sd->size || memcmp(in, m, len) != 0))
            sd->st = OP_ERR_MALFORMED;
        if (sd->st == OP_OK)
            sd->got++;
    }
    pthread_join(t, NULL);
    if (sd->st == OP_OK)
        sd->st = snd.st;
    if (sd->st != OP_OK)
        snprintf(sd->why, sizeof sd->why, "%s", op_channel_error(c));
    op_channel_counters(c, sd->tx, sd->rx);
    op_channel_close(c);
    free(m);
    return NULL;
}

/* Sends count messages of size each way between a listener (a) and a
 * connector (b), every byte checked. */
static void run_pair_into(const char *addr, bool plaintext, uint32_t count, uint32_t size,
                          uint64_t rekey_bytes, struct side *sides)
{
    struct side a = {0}, b = {0};
    char why[128];
    pthread_t ta, tb;
    fixed_keypair(1, &b.cfg.local);
    fixed_keypair(2, &a.cfg.local);
    memcpy(a.cfg.peer_pub, b.cfg.local.pub, 32);
    memcpy(b.cfg.peer_pub, a.cfg.local.pub, 32);
    assert_int_equal(op_chan_addr_parse(addr, &a.cfg.addr, why), OP_OK);
    b.cfg.addr = a.cfg.addr;
    a.cfg.listen = true;
    a.cfg.max_msg = b.cfg.max_msg = 70000;
    a.cfg.timeout_ns = b.cfg.timeout_ns = 10 * OP_NS_PER_S;
    a.cfg.plaintext = b.cfg.plaintext = plaintext;
    a.cfg.rekey_bytes = b.cfg.rekey_bytes = rekey_bytes;
    a.count = b.count = count;
    a.size = b.size = size;
    pthread_create(&ta, NULL, run_side, &a);
    pthread_create(&tb, NULL, run_side, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    if (a.st != OP_OK || b.st != OP_OK)
        fail_msg("%s: listener %d (%s), connector %d (%s)", addr, a.st, a.why, b.st, b.why);
    assert_int_equal(a.got, count);
    assert_int_equal(b.got, count);
    sides[0] = a;
    sides[1] = b;
}

static void run_pair(const char *addr, bool plaintext, uint32_t count, uint32_t size)
{
    struct side sides[2];
    run_pair_into(addr, plaintext, count, size, 0, sides);
}

/* Rekeying every 4 KiB over real transports, batch records and all: every
 * message arrives intact and each side's count of new keys matches its
 * peer's. */
static void test_rekeys_over_transports(void **s)
{
    (void)s;
    static const char *const addrs[] = {"shm:offpath-unit-rekey", "unix:/tmp/chtest/r.sock"};
    for (size_t i = 0; i < COUNT_OF(addrs); i++) {
        struct side sd[2];
        run_pair_into(addrs[i], false, 3000, 200, 4096, sd);
        assert_true(sd[0].tx[OP_CHAN_tx_rekeys] > 0 && sd[1].tx[OP_CHAN_tx_rekeys] > 0);
        assert_int_equal(sd[0].tx[OP_CHAN_tx_rekeys], sd[1].rx[OP_CHAN_rx_rekeys]);
        assert_int_equal(sd[1].tx[OP_CHAN_tx_rekeys], sd[0].rx[OP_CHAN_rx_rekeys]);
    }
}

static void test_transports_end_to_end(void **s)
{
    (void)s;
    for (int plain = 0; plain <= 1; plain++) {
        run_pair("unix:/tmp/chtest/u.sock", plain, 2000, 256);
        run_pair("tcp:127.0.0.1:30911", plain, 2000, 256);
        run_pair("shm:offpath-unit-test", plain, 2000, 256);
    }
    /* Messages larger than a batch and than the shm ring's half. */
    run_pair("shm:offpath-unit-test", false, 40, 65536);
    run_pair("unix:/tmp/chtest/u.sock", false, 40, 65536);
    run_pair("tcp:127.0.0.1:30912", false, 1, 1);
}

static void test_wrong_key_over_transport(void **s)
{
    (void)s;
    struct side a = {0}, b = {0};
    pthread_t ta, tb;
    char why[128];
    fixed_keypair(1, &b.cfg.local);
    fixed_keypair(2, &a.cfg.local);
    fixed_keypair(3, &a.cfg.local); /* the agent holds key 3, the host pinned key 2 */
    struct op_chan_keypair k2;
    fixed_keypair(2, &k2);
    memcpy(b.cfg.peer_pub, k2.pub, 32);
    memcpy(a.cfg.peer_pub, b.cfg.local.pub, 32);
    assert_int_equal(op_chan_addr_parse("unix:/tmp/chtest/w.sock", &a.cfg.addr, why), OP_OK);
    b.cfg.addr = a.cfg.addr;
    a.cfg.listen = true;
    a.cfg.max_msg = b.cfg.max_msg = 1000;
    a.cfg.timeout_ns = b.cfg.timeout_ns = 5 * OP_NS_PER_S;
    a.count = b.count = 1;
    a.size = b.size = 10;
    pthread_create(&ta, NULL, run_side, &a);
    pthread_create(&tb, NULL, run_side, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    assert_int_equal(a.st, OP_ERR_REFUSED);
    assert_non_null(strstr(a.why, "handshake refused"));
    assert_int_equal(b.st, OP_ERR_IO);
    assert_non_null(strstr(b.why, "did the agent refuse our key?"));
}

struct idle_peer {
    struct op_channel_config cfg;
    op_status_t st;
    char why[256];
};

/* Opens (handshake included), then reads nothing for 1 s. */
static void *open_and_idle(void *arg)
{
    struct idle_peer *p = arg;
    struct op_channel *c;
    p->st = op_channel_open(&p->cfg, &c, p->why);
    if (p->st == OP_OK) {
        nanosleep(&(struct timespec){.tv_sec = 1}, NULL);
        op_channel_close(c);
    }
    return NULL;
}

/* A peer that stops reading: the sender gives up at its timeout, with the
 * reason, instead of blocking for ever. */
static void test_peer_not_reading_times_out(void **s)
{
    (void)s;
    static const char *const addrs[] = {"shm:offpath-unit-idle", "unix:/tmp/chtest/idle.sock",
                                        "tcp:127.0.0.1:30914"};
    for (size_t i = 0; i < COUNT_OF(addrs); i++) {
        struct idle_peer a = {0};
        struct op_channel_config b = {0};
        struct op_channel *c;
        char why[256], awhy[128];
        pthread_t t;
        fixed_keypair(2, &a.cfg.local);
        fixed_keypair(1, &b.local);
        memcpy(a.cfg.peer_pub, b.local.pub, 32);
        memcpy(b.peer_pub, a.cfg.local.pub, 32);
        assert_int_equal(op_chan_addr_parse(addrs[i], &a.cfg.addr, awhy), OP_OK);
        b.addr = a.cfg.addr;
        a.cfg.listen = true;
        a.cfg.max_msg = b.max_msg = 65536;
        a.cfg.timeout_ns = 5 * OP_NS_PER_S;
        b.timeout_ns = 300 * OP_NS_PER_MS;
        pthread_create(&t, NULL, open_and_idle, &a);
        assert_int_equal(op_channel_open(&b, &c, why), OP_OK);
        static uint8_t big[65536];
        op_status_t st = OP_OK;
        uint64_t t0 = op_now_ns();
        for (int k = 0; k < 2000 && st == OP_OK; k++) /* 128 MiB: more than any buffer */
            st = op_channel_send(c, big, sizeof big, 0);
        uint64_t took = op_now_ns() - t0;
        assert_int_equal(st, OP_ERR_TIMEOUT);
        assert_string_equal(op_channel_error(c), "the peer stopped reading (send timed out)");
        assert_true(took >= 250 * OP_NS_PER_MS && took < 950 * OP_NS_PER_MS);
        op_channel_close(c);
        pthread_join(t, NULL);
        assert_int_equal(a.st, OP_OK);
    }
}

static void test_no_peer_times_out(void **s)
{
    (void)s;
    struct op_channel_config cfg = {.max_msg = 100, .timeout_ns = 200 * OP_NS_PER_MS};
    struct op_channel *c;
    char why[256], awhy[128];
    static const char *const addrs[] = {"shm:offpath-unit-nobody", "unix:/tmp/chtest/nobody.sock",
                                        "tcp:127.0.0.1:30913"};
    for (size_t i = 0; i < COUNT_OF(addrs); i++) {
        assert_int_equal(op_chan_addr_parse(addrs[i], &cfg.addr, awhy), OP_OK);
        for (int listen = 0; listen <= 1; listen++) {
            cfg.listen = listen;
            uint64_t t0 = op_now_ns();
            op_status_t st = op_channel_open(&cfg, &c, why);
            uint64_t took = op_now_ns() - t0;
            assert_int_not_equal(st, OP_OK);
            assert_true(took >= 150 * OP_NS_PER_MS && took < 2 * OP_NS_PER_S);
            assert_true(strlen(why) > 0);
        }
    }
}

int main(void)
{
    mkdir("/tmp/chtest", 0700);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_xchacha),
        cmocka_unit_test(test_round_trip_aesgcm),
        cmocka_unit_test(test_handshake_layout_and_fresh_keys),
        cmocka_unit_test(test_wire_format_known_answer),
        cmocka_unit_test(test_wrong_keys_refused),
        cmocka_unit_test(test_forced_cipher_mismatch_refused),
        cmocka_unit_test(test_handshake_bit_flips_refused),
        cmocka_unit_test(test_handshake_partial_input),
        cmocka_unit_test(test_frame_bit_flips_never_deliver),
        cmocka_unit_test(test_replay_reorder_reflect_refused),
        cmocka_unit_test(test_truncation_and_injection),
        cmocka_unit_test(test_bad_lengths),
        cmocka_unit_test(test_batch_of_frames),
        cmocka_unit_test(test_batch_records_round_trip),
        cmocka_unit_test(test_batch_and_single_interleave),
        cmocka_unit_test(test_batch_record_limits),
        cmocka_unit_test(test_batch_bit_flips_deliver_nothing),
        cmocka_unit_test(test_batch_inner_lengths_checked),
        cmocka_unit_test(test_rekeys_in_step),
        cmocka_unit_test(test_aead_implementations_agree),
        cmocka_unit_test(test_key_parsers),
        cmocka_unit_test(test_key_files),
        cmocka_unit_test(test_addresses),
        cmocka_unit_test(test_transports_end_to_end),
        cmocka_unit_test(test_rekeys_over_transports),
        cmocka_unit_test(test_wrong_key_over_transport),
        cmocka_unit_test(test_no_peer_times_out),
        cmocka_unit_test(test_peer_not_reading_times_out),
    };
    return cmocka_run_group_tests_name("channel", tests, NULL, NULL);
}
