/* libFuzzer target: the channel's AES-256-GCM implementations against
 * libsodium's, differentially. The input is a key (32 bytes), a record
 * counter (8), an associated-data length (1 byte, up to 255) and then the
 * associated data and the message. Properties: every implementation
 * (OpenSSL's, ours on VAES where the CPU has it) seals to libsodium's bytes,
 * opens libsodium's record to the message, and refuses it with any one bit
 * flipped (the position drawn from the input), wiping what it decrypted. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "channel_pair.h"
#include "../../src/channel/channel_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_one(enum chan_gcm_impl impl, const uint8_t *key, uint64_t seq, const uint8_t *ad,
                      size_t ad_len, const uint8_t *m, size_t len, const uint8_t *want, size_t flip)
{
    struct chan_aead a;
    uint8_t *c = malloc(len + OP_CHAN_TAG_BYTES);
    fuzz_require(c != NULL && chan_aead_init(&a, OP_CHAN_CIPHER_AESGCM, key) == OP_OK);
    a.impl = impl;
    fuzz_require(chan_aead_seal(&a, seq, ad, ad_len, m, len, c));
    fuzz_require(memcmp(c, want, len + OP_CHAN_TAG_BYTES) == 0);
    fuzz_require(chan_aead_open(&a, seq, ad, ad_len, c, len + OP_CHAN_TAG_BYTES));
    fuzz_require(memcmp(c, m, len) == 0);
    memcpy(c, want, len + OP_CHAN_TAG_BYTES);
    c[flip / 8] ^= (uint8_t)(1u << (flip % 8));
    fuzz_require(!chan_aead_open(&a, seq, ad, ad_len, c, len + OP_CHAN_TAG_BYTES));
    for (size_t i = 0; i < len; i++)
        fuzz_require(c[i] == 0);
    chan_aead_free(&a);
    free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 41 || sodium_init() < 0 || !crypto_aead_aes256gcm_is_available())
        return 0;
    const uint8_t *key = data;
    uint64_t seq;
    memcpy(&seq, data + 32, sizeof seq);
    size_t ad_len = data[40];
    if (size - 41 < ad_len)
        return 0;
    const uint8_t *ad = data + 41, *m = ad + ad_len;
    size_t len = size - 41 - ad_len;
    struct chan_aead ref;
    uint8_t *want = malloc(len + OP_CHAN_TAG_BYTES);
    fuzz_require(want != NULL && chan_aead_init(&ref, OP_CHAN_CIPHER_AESGCM, key) == OP_OK);
    ref.impl = CHAN_GCM_SODIUM;
    fuzz_require(chan_aead_seal(&ref, seq, ad, ad_len, m, len, want));
    size_t flip = (size_t)(seq % ((len + OP_CHAN_TAG_BYTES) * 8));
    check_one(CHAN_GCM_OPENSSL, key, seq, ad, ad_len, m, len, want, flip);
    if (chan_vaes_available())
        check_one(CHAN_GCM_VAES, key, seq, ad, ad_len, m, len, want, flip);
    chan_aead_free(&ref);
    free(want);
    return 0;
}
