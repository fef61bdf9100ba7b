/* The fuzz targets' fixed channel session: static keys 1 (host) and 2
 * (agent), ephemeral keys 11 and 22, so every run derives the same session
 * keys and the corpus can hold genuine frames the target must accept. */
#ifndef FUZZ_CHANNEL_PAIR_H
#define FUZZ_CHANNEL_PAIR_H

#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "offpath/channel.h"

#define FUZZ_MAX_MSG 300u
/* Where a target asks for rekeying: a new key every 128 frame bytes (every
 * few frames of the fuzz messages). */
#define FUZZ_REKEY_BYTES 128u

static inline void fuzz_require(int cond)
{
    if (!cond)
        abort(); /* tests/fuzz only: a violated property is the finding */
}

static inline struct op_chan_eng *fuzz_eng(enum op_chan_role role, enum op_chan_cipher c,
                                           uint64_t rekey_bytes)
{
    struct op_chan_eng_config cfg = {
        .role = role, .cipher = c, .max_msg = FUZZ_MAX_MSG, .rekey_bytes = rekey_bytes};
    uint8_t self = role == OP_CHAN_INITIATOR ? 1 : 2, peer = role == OP_CHAN_INITIATOR ? 2 : 1;
    uint8_t peer_sec[32];
    struct op_chan_eng *e = NULL;
    fuzz_require(sodium_init() >= 0);
    memset(cfg.local.sec, self, 32);
    crypto_scalarmult_base(cfg.local.pub, cfg.local.sec);
    memset(peer_sec, peer, 32);
    crypto_scalarmult_base(cfg.peer_pub, peer_sec);
    memset(cfg.ephemeral_sec, role == OP_CHAN_INITIATOR ? 11 : 22, 32);
    fuzz_require(op_chan_eng_new(&cfg, &e) == OP_OK);
    return e;
}

/* Message k the genuine host sends: (k % 40) * 7 + 1 bytes of (k + j). */
static inline size_t fuzz_msg(uint32_t k, uint8_t out[FUZZ_MAX_MSG])
{
    size_t len = (k % 40) * 7 + 1;
    for (size_t j = 0; j < len; j++)
        out[j] = (uint8_t)(k + j);
    return len;
}

/* An established pair (rekey_bytes 0: the default); the handshake
 * messages go to m1/m2 when not NULL. */
static inline void fuzz_pair(enum op_chan_cipher c, uint64_t rekey_bytes, struct op_chan_eng **init,
                             struct op_chan_eng **resp, uint8_t m1[OP_CHAN_HS_MSG_BYTES],
                             uint8_t m2[OP_CHAN_HS_MSG_BYTES])
{
    uint8_t a[OP_CHAN_HS_MSG_BYTES], b[OP_CHAN_HS_MSG_BYTES], none[OP_CHAN_HS_MSG_BYTES];
    size_t n, used;
    *init = fuzz_eng(OP_CHAN_INITIATOR, c, rekey_bytes);
    *resp = fuzz_eng(OP_CHAN_RESPONDER, c, rekey_bytes);
    fuzz_require(op_chan_eng_hs_start(*init, a, sizeof a, &n) == OP_INPROGRESS);
    fuzz_require(op_chan_eng_hs_consume(*resp, a, n, &used, b, sizeof b, &n) == OP_OK);
    fuzz_require(op_chan_eng_hs_consume(*init, b, n, &used, none, sizeof none, &n) == OP_OK);
    if (m1 != NULL)
        memcpy(m1, a, sizeof a);
    if (m2 != NULL)
        memcpy(m2, b, sizeof b);
}

#endif
