/* The frames' AEADs, each with more than one implementation, picked per
 * record by its length (bench/aead_cost prints them all):
 *
 * AES-256-GCM: ours on 512-bit VAES/VPCLMULQDQ (gcm_vaes.c) where the CPU
 * has them, the fastest at every length (0.07 us at 256 B, 7-8 GB/s from
 * 4 KiB on this machine); otherwise libsodium's for short records (0.20 us
 * at 256 B against OpenSSL's 0.26) and OpenSSL's stitched AES-NI/AVX code
 * for long ones (4.2 GB/s against libsodium's 1.8 at 64 KiB).
 *
 * XChaCha20-Poly1305 (CPUs without AES-NI): libsodium's for short records;
 * for long ones HChaCha20 (libsodium) derives the record's subkey and
 * OpenSSL's SIMD ChaCha20-Poly1305 seals with it, which is how the XChaCha
 * construction is defined (2.5x libsodium's rate from 4 KiB here).
 *
 * Every pair computes the same function of key, nonce, associated data and
 * message, so the pick is each side's own and never shows on the wire
 * (tests/unit/test_channel.c checks each against libsodium's). */
#include <string.h>

#include <openssl/evp.h>
#include <sodium.h>

#include "channel_internal.h"

/* Without VAES, below this many bytes libsodium's call is the cheaper. */
#define OPENSSL_FROM 512u

static const EVP_CIPHER *evp_cipher(enum op_chan_cipher c)
{
    return c == OP_CHAN_CIPHER_AESGCM ? EVP_aes_256_gcm() : EVP_chacha20_poly1305();
}

op_status_t chan_aead_init(struct chan_aead *a, enum op_chan_cipher c, const uint8_t key[32])
{
    bool aes = c == OP_CHAN_CIPHER_AESGCM;
    memset(a, 0, sizeof *a);
    a->cipher = c;
    memcpy(a->key, key, 32);
    a->evp = EVP_CIPHER_CTX_new();
    if (a->evp == NULL)
        return OP_ERR_NOMEM;
    /* AES-GCM's key schedule once, each record sets only its nonce;
     * ChaCha's key is per record (the HChaCha20 subkey). */
    if (EVP_EncryptInit_ex(a->evp, evp_cipher(c), NULL, aes ? key : NULL, NULL) != 1)
        return OP_ERR_UNSUPPORTED;
    if (!aes)
        return OP_OK;
    a->aes = aligned_alloc(16, (sizeof *a->aes + 15) & ~(size_t)15);
    if (a->aes == NULL)
        return OP_ERR_NOMEM;
    crypto_aead_aes256gcm_beforenm(a->aes, key);
    if (chan_vaes_available() && chan_vaes_new(key, &a->vaes) != OP_OK)
        return OP_ERR_NOMEM;
    return OP_OK;
}

op_status_t chan_aead_rekey(struct chan_aead *a, const uint8_t key[32])
{
    memcpy(a->key, key, 32);
    if (a->cipher != OP_CHAN_CIPHER_AESGCM)
        return OP_OK; /* ChaCha's key is taken per record */
    if (EVP_EncryptInit_ex(a->evp, NULL, NULL, key, NULL) != 1)
        return OP_ERR_UNSUPPORTED;
    crypto_aead_aes256gcm_beforenm(a->aes, key);
    if (a->vaes != NULL)
        chan_vaes_rekey(a->vaes, key);
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

static enum chan_aead_impl pick(const struct chan_aead *a, size_t len)
{
    if (a->impl != CHAN_AEAD_AUTO)
        return a->impl;
    if (a->vaes != NULL)
        return CHAN_AEAD_VAES;
    return len >= OPENSSL_FROM ? CHAN_AEAD_OPENSSL : CHAN_AEAD_SODIUM;
}

/* OpenSSL's key and 96-bit IV for a record: AES-GCM's key is already set
 * and its IV is the nonce's first 12 bytes; XChaCha's are HChaCha20 of the
 * nonce's first 16 bytes and 4 zero bytes followed by its last 8. */
struct evp_record {
    const uint8_t *key;
    uint8_t subkey[32];
    uint8_t iv[12];
};

static void evp_record_of(const struct chan_aead *a, const uint8_t nonce[24],
                          struct evp_record *r)
{
    if (a->cipher == OP_CHAN_CIPHER_AESGCM) {
        r->key = NULL;
        memcpy(r->iv, nonce, 12);
        return;
    }
    crypto_core_hchacha20(r->subkey, nonce, a->key, NULL);
    r->key = r->subkey;
    memset(r->iv, 0, 4);
    memcpy(r->iv + 4, nonce + 16, 8);
}

static bool evp_seal(const struct chan_aead *a, const uint8_t nonce[24], const uint8_t *ad,
                     size_t ad_len, const uint8_t *m, size_t len, uint8_t *c)
{
    struct evp_record r;
    EVP_CIPHER_CTX *x = a->evp;
    int n;
    evp_record_of(a, nonce, &r);
    bool ok = EVP_EncryptInit_ex(x, NULL, NULL, r.key, r.iv) == 1 &&
              EVP_EncryptUpdate(x, NULL, &n, ad, (int)ad_len) == 1 &&
              EVP_EncryptUpdate(x, c, &n, m, (int)len) == 1 &&
              EVP_EncryptFinal_ex(x, c + n, &n) == 1 &&
              EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_GET_TAG, OP_CHAN_TAG_BYTES, c + len) == 1;
    sodium_memzero(&r, sizeof r);
    return ok;
}

/* Decrypts before it knows the tag is good, so a refused record's bytes
 * are wiped: nothing unauthenticated stays in the caller's buffer. */
static bool evp_open(const struct chan_aead *a, const uint8_t nonce[24], const uint8_t *ad,
                     size_t ad_len, uint8_t *c, size_t len)
{
    struct evp_record r;
    EVP_CIPHER_CTX *x = a->evp;
    int n;
    evp_record_of(a, nonce, &r);
    bool ok = EVP_DecryptInit_ex(x, NULL, NULL, r.key, r.iv) == 1 &&
              EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_TAG, OP_CHAN_TAG_BYTES, c + len) == 1 &&
              EVP_DecryptUpdate(x, NULL, &n, ad, (int)ad_len) == 1 &&
              EVP_DecryptUpdate(x, c, &n, c, (int)len) == 1 &&
              EVP_DecryptFinal_ex(x, c + n, &n) == 1;
    sodium_memzero(&r, sizeof r);
    if (!ok)
        sodium_memzero(c, len);
    return ok;
}

static bool sodium_seal(const struct chan_aead *a, const uint8_t nonce[24], const uint8_t *ad,
                        size_t ad_len, const uint8_t *m, size_t len, uint8_t *c)
{
    if (a->cipher == OP_CHAN_CIPHER_AESGCM)
        return crypto_aead_aes256gcm_encrypt_afternm(c, NULL, m, len, ad, ad_len, NULL, nonce,
                                                     a->aes) == 0;
    return crypto_aead_xchacha20poly1305_ietf_encrypt(c, NULL, m, len, ad, ad_len, NULL, nonce,
                                                      a->key) == 0;
}

static bool sodium_open(const struct chan_aead *a, const uint8_t nonce[24], const uint8_t *ad,
                        size_t ad_len, uint8_t *c, size_t clen)
{
    if (a->cipher == OP_CHAN_CIPHER_AESGCM)
        return crypto_aead_aes256gcm_decrypt_afternm(c, NULL, NULL, c, clen, ad, ad_len, nonce,
                                                     a->aes) == 0;
    return crypto_aead_xchacha20poly1305_ietf_decrypt(c, NULL, NULL, c, clen, ad, ad_len, nonce,
                                                      a->key) == 0;
}

bool chan_aead_seal(struct chan_aead *a, uint64_t seq, const uint8_t *ad, size_t ad_len,
                    const uint8_t *m, size_t len, uint8_t *c)
{
    uint8_t nonce[24];
    chan_nonce(seq, nonce);
    switch (pick(a, len)) {
    case CHAN_AEAD_VAES:
        if (a->vaes == NULL)
            return false;
        chan_vaes_seal(a->vaes, nonce, ad, ad_len, m, len, c);
        return true;
    case CHAN_AEAD_OPENSSL:
        return evp_seal(a, nonce, ad, ad_len, m, len, c);
    default:
        return sodium_seal(a, nonce, ad, ad_len, m, len, c);
    }
}

bool chan_aead_open(struct chan_aead *a, uint64_t seq, const uint8_t *ad, size_t ad_len,
                    uint8_t *c, size_t clen)
{
    uint8_t nonce[24];
    if (clen < OP_CHAN_TAG_BYTES)
        return false;
    chan_nonce(seq, nonce);
    switch (pick(a, clen - OP_CHAN_TAG_BYTES)) {
    case CHAN_AEAD_VAES:
        return a->vaes != NULL &&
               chan_vaes_open(a->vaes, nonce, ad, ad_len, c, clen - OP_CHAN_TAG_BYTES);
    case CHAN_AEAD_OPENSSL:
        return evp_open(a, nonce, ad, ad_len, c, clen - OP_CHAN_TAG_BYTES);
    default:
        return sodium_open(a, nonce, ad, ad_len, c, clen);
    }
}
