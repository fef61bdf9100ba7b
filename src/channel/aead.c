/* The frames' AEADs. AES-256-GCM has three implementations here: ours on
 * 512-bit VAES/VPCLMULQDQ (gcm_vaes.c) where the CPU has them, the fastest
 * at every length (0.07 us at 256 B, 7-8 GB/s from 4 KiB on this machine);
 * otherwise libsodium's for short records (0.20 us at 256 B against
 * OpenSSL's 0.26) and OpenSSL's stitched AES-NI/AVX code for long ones
 * (4.2 GB/s against libsodium's 1.8 at 64 KiB). bench/aead_cost prints all
 * three. They compute the same function of key, 96-bit nonce, associated
 * data and message, so the pick is each side's own and never shows on the
 * wire (tests/unit/test_channel.c checks each against libsodium's). */
#include <string.h>

#include <openssl/evp.h>
#include <sodium.h>

#include "channel_internal.h"

/* Without VAES, below this many bytes libsodium's call is the cheaper
 * (bench/aead_cost). */
#define OPENSSL_FROM 512u

op_status_t chan_aead_init(struct chan_aead *a, enum op_chan_cipher c, const uint8_t key[32])
{
    memset(a, 0, sizeof *a);
    a->cipher = c;
    memcpy(a->key, key, 32);
    if (c != OP_CHAN_CIPHER_AESGCM)
        return OP_OK;
    a->aes = aligned_alloc(16, (sizeof *a->aes + 15) & ~(size_t)15);
    a->evp = EVP_CIPHER_CTX_new();
    if (a->aes == NULL || a->evp == NULL)
        return OP_ERR_NOMEM;
    crypto_aead_aes256gcm_beforenm(a->aes, key);
    if (chan_vaes_available() && chan_vaes_new(key, &a->vaes) != OP_OK)
        return OP_ERR_NOMEM;
    /* The key schedule once; each record sets only its nonce. */
    if (EVP_EncryptInit_ex(a->evp, EVP_aes_256_gcm(), NULL, key, NULL) != 1)
        return OP_ERR_UNSUPPORTED;
    return OP_OK;
}

void chan_aead_free(struct chan_aead *a)
{
    if (a->aes != NULL) {
        sodium_memzero(a->aes, sizeof *a->aes);
        free(a->aes);
    }
    EVP_CIPHER_CTX_free(a->evp); /* clears its key schedule */
    chan_vaes_free(a->vaes);
    sodium_memzero(a, sizeof *a);
}

void chan_nonce(uint64_t seq, uint8_t out[24])
{
    memset(out, 0, 24);
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(seq >> (8 * i));
}

static enum chan_gcm_impl pick(const struct chan_aead *a, size_t len)
{
    if (a->impl != CHAN_GCM_AUTO)
        return a->impl;
    if (a->vaes != NULL)
        return CHAN_GCM_VAES;
    return len >= OPENSSL_FROM ? CHAN_GCM_OPENSSL : CHAN_GCM_SODIUM;
}

static bool evp_seal(EVP_CIPHER_CTX *x, const uint8_t iv[12], const uint8_t *ad, size_t ad_len,
                     const uint8_t *m, size_t len, uint8_t *c)
{
    int n;
    return EVP_EncryptInit_ex(x, NULL, NULL, NULL, iv) == 1 &&
           EVP_EncryptUpdate(x, NULL, &n, ad, (int)ad_len) == 1 &&
           EVP_EncryptUpdate(x, c, &n, m, (int)len) == 1 &&
           EVP_EncryptFinal_ex(x, c + n, &n) == 1 &&
           EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_GET_TAG, OP_CHAN_TAG_BYTES, c + len) == 1;
}

/* Decrypts before it knows the tag is good, so a refused record's bytes
 * are wiped: nothing unauthenticated stays in the caller's buffer. */
static bool evp_open(EVP_CIPHER_CTX *x, const uint8_t iv[12], const uint8_t *ad, size_t ad_len,
                     uint8_t *c, size_t len)
{
    int n;
    bool ok = EVP_DecryptInit_ex(x, NULL, NULL, NULL, iv) == 1 &&
              EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_SET_TAG, OP_CHAN_TAG_BYTES, c + len) == 1 &&
              EVP_DecryptUpdate(x, NULL, &n, ad, (int)ad_len) == 1 &&
              EVP_DecryptUpdate(x, c, &n, c, (int)len) == 1 &&
              EVP_DecryptFinal_ex(x, c + n, &n) == 1;
    if (!ok)
        sodium_memzero(c, len);
    return ok;
}

bool chan_aead_seal(struct chan_aead *a, uint64_t seq, const uint8_t *ad, size_t ad_len,
                    const uint8_t *m, size_t len, uint8_t *c)
{
    uint8_t nonce[24];
    chan_nonce(seq, nonce);
    if (a->cipher != OP_CHAN_CIPHER_AESGCM)
        return crypto_aead_xchacha20poly1305_ietf_encrypt(c, NULL, m, len, ad, ad_len, NULL,
                                                          nonce, a->key) == 0;
    switch (pick(a, len)) {
    case CHAN_GCM_VAES:
        if (a->vaes == NULL)
            return false;
        chan_vaes_seal(a->vaes, nonce, ad, ad_len, m, len, c);
        return true;
    case CHAN_GCM_OPENSSL:
        return evp_seal(a->evp, nonce, ad, ad_len, m, len, c);
    default:
        return crypto_aead_aes256gcm_encrypt_afternm(c, NULL, m, len, ad, ad_len, NULL, nonce,
                                                     a->aes) == 0;
    }
}

bool chan_aead_open(struct chan_aead *a, uint64_t seq, const uint8_t *ad, size_t ad_len,
                    uint8_t *c, size_t clen)
{
    uint8_t nonce[24];
    if (clen < OP_CHAN_TAG_BYTES)
        return false;
    chan_nonce(seq, nonce);
    if (a->cipher != OP_CHAN_CIPHER_AESGCM)
        return crypto_aead_xchacha20poly1305_ietf_decrypt(c, NULL, NULL, c, clen, ad, ad_len,
                                                          nonce, a->key) == 0;
    switch (pick(a, clen - OP_CHAN_TAG_BYTES)) {
    case CHAN_GCM_VAES:
        return a->vaes != NULL &&
               chan_vaes_open(a->vaes, nonce, ad, ad_len, c, clen - OP_CHAN_TAG_BYTES);
    case CHAN_GCM_OPENSSL:
        return evp_open(a->evp, nonce, ad, ad_len, c, clen - OP_CHAN_TAG_BYTES);
    default:
        return crypto_aead_aes256gcm_decrypt_afternm(c, NULL, NULL, c, clen, ad, ad_len, nonce,
                                                     a->aes) == 0;
    }
}
