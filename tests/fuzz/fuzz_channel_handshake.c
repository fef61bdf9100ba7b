/* libFuzzer target for the channel handshake and the key-file parsers.
 * The first 50 bytes go to a fresh agent as message 1, the next 50 to the
 * fixed host (after its genuine message 1) as message 2. Properties: a
 * message is accepted only if it is the genuine one (nobody without the
 * pinned secret keys can make another), a refusal is counted exactly once
 * and leaves the engine unable to seal; key parsers accept only the exact
 * format, and a parsed secret key re-derives its public key. */
#include <stddef.h>
#include <stdint.h>

#include "channel_pair.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_refusal(struct op_chan_eng *e, op_status_t st)
{
    uint64_t tx[OP_CHAN_TX_COUNT_], rx[OP_CHAN_RX_COUNT_];
    uint8_t m[4] = {0}, f[64];
    size_t n;
    op_chan_eng_counters(e, tx, rx);
    fuzz_require(st != OP_OK && !op_chan_eng_established(e));
    fuzz_require(rx[OP_CHAN_handshake_failed] + rx[OP_CHAN_handshake_malformed] == 1);
    fuzz_require(op_chan_eng_seal(e, m, sizeof m, f, sizeof f, &n) == OP_ERR_STATE);
}

static void fuzz_handshake(const uint8_t *data, size_t size)
{
    uint8_t g1[OP_CHAN_HS_MSG_BYTES], g2[OP_CHAN_HS_MSG_BYTES], out[OP_CHAN_HS_MSG_BYTES];
    struct op_chan_eng *gi, *gr;
    size_t used, n;
    fuzz_pair(OP_CHAN_CIPHER_XCHACHA, 0, &gi, &gr, g1, g2);
    op_chan_eng_free(gi);
    op_chan_eng_free(gr);

    struct op_chan_eng *resp = fuzz_eng(OP_CHAN_RESPONDER, OP_CHAN_CIPHER_XCHACHA, 0);
    size_t n1 = size < OP_CHAN_HS_MSG_BYTES ? size : OP_CHAN_HS_MSG_BYTES;
    op_status_t st = op_chan_eng_hs_consume(resp, data, n1, &used, out, sizeof out, &n);
    if (n1 < OP_CHAN_HS_MSG_BYTES)
        fuzz_require(st == OP_INPROGRESS && used == 0 && n == 0);
    else if (st == OP_OK)
        fuzz_require(memcmp(data, g1, sizeof g1) == 0 && n == OP_CHAN_HS_MSG_BYTES);
    else
        check_refusal(resp, st);
    op_chan_eng_free(resp);
    if (size < 2 * OP_CHAN_HS_MSG_BYTES)
        return;
    struct op_chan_eng *init = fuzz_eng(OP_CHAN_INITIATOR, OP_CHAN_CIPHER_XCHACHA, 0);
    fuzz_require(op_chan_eng_hs_start(init, out, sizeof out, &n) == OP_INPROGRESS);
    st = op_chan_eng_hs_consume(init, data + OP_CHAN_HS_MSG_BYTES, OP_CHAN_HS_MSG_BYTES, &used,
                                out, sizeof out, &n);
    if (st == OP_OK)
        fuzz_require(memcmp(data + OP_CHAN_HS_MSG_BYTES, g2, sizeof g2) == 0);
    else
        check_refusal(init, st);
    op_chan_eng_free(init);
}

static void fuzz_keys(const uint8_t *data, size_t size)
{
    char why[128];
    uint8_t pub[32];
    struct op_chan_keypair kp;
    const char *text = (const char *)data;
    if (op_chan_parse_public(text, size, pub, why) == OP_OK)
        fuzz_require(size >= 86 && memcmp(text, "offpath-x25519-public ", 22) == 0);
    else
        fuzz_require(why[0] != '\0');
    if (op_chan_parse_secret(text, size, &kp, why) == OP_OK) {
        uint8_t again[32];
        crypto_scalarmult_base(again, kp.sec);
        fuzz_require(memcmp(again, kp.pub, 32) == 0);
    } else {
        fuzz_require(why[0] != '\0');
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_handshake(data, size);
    fuzz_keys(data, size);
    return 0;
}
