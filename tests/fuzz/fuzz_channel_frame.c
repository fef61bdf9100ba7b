/* libFuzzer target for the channel's frame decoder: the input (after a
 * first byte whose bit 0 chooses the cipher and bit 1 rekeying every few
 * frames) is the byte stream arriving at the agent of the fixed
 * session, single-message frames and batch records mixed.
 * Properties: a delivered message is exactly the genuine message of its
 * index (nothing forged, repeated or out of order) and lies inside the
 * frame being opened, the decoder never reads past the input, and every
 * refusal is counted once. */
#include <stddef.h>
#include <stdint.h>

#include "channel_pair.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct op_chan_eng *init, *resp;
    uint8_t want[FUZZ_MAX_MSG];
    uint64_t tx[OP_CHAN_TX_COUNT_], rx[OP_CHAN_RX_COUNT_];
    if (size < 1)
        return 0;
    enum op_chan_cipher c = (data[0] & 1) && crypto_aead_aes256gcm_is_available()
                                ? OP_CHAN_CIPHER_AESGCM
                                : OP_CHAN_CIPHER_XCHACHA;
    fuzz_pair(c, (data[0] & 2) ? FUZZ_REKEY_BYTES : 0, &init, &resp, NULL, NULL);
    uint8_t *buf = malloc(size); /* opened in place: a copy, and exactly sized for ASan */
    fuzz_require(buf != NULL);
    memcpy(buf, data + 1, size - 1);
    size_t at = 0, len = size - 1;
    uint32_t k = 0;
    op_status_t st;
    for (;;) {
        const uint8_t *msg;
        size_t used, mlen;
        st = op_chan_eng_open(resp, buf + at, len - at, &used, &msg, &mlen);
        if (st != OP_OK)
            break;
        /* used is 0 until a batch record's last message */
        fuzz_require(used == 0 || (used >= OP_CHAN_FRAME_OVERHEAD + 1 && used <= len - at));
        fuzz_require(msg >= buf + at + OP_CHAN_FRAME_HDR && msg + mlen <= buf + len);
        fuzz_require(fuzz_msg(k, want) == mlen && memcmp(msg, want, mlen) == 0);
        at += used;
        k++;
    }
    if (st == OP_INPROGRESS)
        st = op_chan_eng_eof(resp, len - at) == OP_OK ? OP_OK : OP_ERR_TRUNCATED;
    op_chan_eng_counters(resp, tx, rx);
    fuzz_require(rx[OP_CHAN_frames_opened] == k);
    uint64_t refusals = rx[OP_CHAN_auth_failed] + rx[OP_CHAN_bad_length] + rx[OP_CHAN_truncated];
    fuzz_require(refusals == (st == OP_OK ? 0u : 1u));
    fuzz_require(st == OP_OK || op_chan_eng_error(resp) != NULL);
    free(buf);
    op_chan_eng_free(init);
    op_chan_eng_free(resp);
    return 0;
}
