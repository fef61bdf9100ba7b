/* libFuzzer target: the channel's AEAD implementations against libsodium's,
 * differentially. The input is a key (32 bytes), a record counter (8), an
 * associated-data length (1 byte, up to 255) and then the associated data
 * and the message. Properties, for AES-256-GCM (OpenSSL's, ours on VAES
 * where the CPU has it) and XChaCha20-Poly1305 (HChaCha20 + OpenSSL's
 * ChaCha20-Poly1305): each seals to libsodium's bytes, opens libsodium's
 * record to the message, and refuses it with any one bit flipped (the
 * position drawn from the input), wiping what it decrypted. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "channel_pair.h"
#include "../../src/channel/channel_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_one(enum op_chan_cipher cipher, enum chan_aead_impl impl, const uint8_t *key, uint64_t seq, const uint8_t *ad,
                      size_t ad_len, const uint8_t *m, size_t len, const uint8_t *want, size_t flip)
{
    struct chan_aead a;
    uint8_t *c = malloc(len + OP_CHAN_TAG_BYTES);
    fuzz_require(c != NULL && chan_aead_init(&a, cipher, key) == OP_OK);
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

static void check_cipher(enum op_chan_cipher cipher, const uint8_t *key, uint64_t seq,
                         const uint8_t *ad, size_t ad_len, const uint8_t *m, size_t len)
{
    struct chan_aead ref;
    uint8_t *want = malloc(len + OP_CHAN_TAG_BYTES);
    fuzz_require(want != NULL && chan_aead_init(&ref, cipher, key) == OP_OK);
    ref.impl = CHAN_AEAD_SODIUM;
    fuzz_require(chan_aead_seal(&ref, seq, ad, ad_len, m, len, want));
    size_t flip = (size_t)(seq % ((len + OP_CHAN_TAG_BYTES) * 8));
    check_one(cipher, CHAN_AEAD_OPENSSL, key, seq, ad, ad_len, m, len, want, flip);
    if (cipher == OP_CHAN_CIPHER_AESGCM && chan_vaes_available())
        check_one(cipher, CHAN_AEAD_VAES, key, seq, ad, ad_len, m, len, want, flip);
    chan_aead_free(&ref);
    free(want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 41 || sodium_init() < 0)
        return 0;
    const uint8_t *key = data;
    uint64_t seq;
    memcpy(&seq, data + 32, sizeof seq);
    size_t ad_len = data[40];
    if (size - 41 < ad_len)
        return 0;
    const uint8_t *ad = data + 41, *m = ad + ad_len;
    size_t len = size - 41 - ad_len;
    check_cipher(OP_CHAN_CIPHER_XCHACHA, key, seq, ad, ad_len, m, len);
    if (crypto_aead_aes256gcm_is_available())
        check_cipher(OP_CHAN_CIPHER_AESGCM, key, seq, ad, ad_len, m, len);
    return 0;
}
