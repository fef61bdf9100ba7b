/* bench/aead_cost: what one AEAD call costs on this CPU, the floor under the
 * secure channel's per-message time (docs/PERFORMANCE.md): microseconds per
 * seal of one message of 256 B, 4 KiB and 64 KiB with libsodium's
 * AES-256-GCM (precomputed key, as src/channel uses it) and
 * XChaCha20-Poly1305, and the throughput in GB/s. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "offpath/common.h"

static double per_call_us(size_t len, int aes, const crypto_aead_aes256gcm_state *st,
                          const uint8_t key[32], uint8_t *m, uint8_t *c)
{
    uint8_t nonce[24] = {0}, ad[4] = {0};
    size_t calls = (64u << 20) / len;
    uint64_t t0 = op_now_ns();
    for (size_t i = 0; i < calls; i++) {
        memcpy(nonce, &i, sizeof i);
        if (aes)
            crypto_aead_aes256gcm_encrypt_afternm(c, NULL, m, len, ad, 4, NULL, nonce, st);
        else
            crypto_aead_xchacha20poly1305_ietf_encrypt(c, NULL, m, len, ad, 4, NULL, nonce, key);
    }
    return (double)(op_now_ns() - t0) / 1e3 / (double)calls;
}

int main(void)
{
    static const size_t sizes[] = {256, 4096, 65536};
    uint8_t key[32] = {1};
    crypto_aead_aes256gcm_state *st = aligned_alloc(16, sizeof *st + 16);
    uint8_t *m = calloc(1, 65536), *c = malloc(65536 + 16);
    if (sodium_init() < 0 || st == NULL || m == NULL || c == NULL)
        return 1;
    int aes_ok = crypto_aead_aes256gcm_is_available();
    if (aes_ok)
        crypto_aead_aes256gcm_beforenm(st, key);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (int aes = aes_ok; aes >= 0; aes--) {
            double us = per_call_us(sizes[i], aes, st, key, m, c);
            printf("aead %-18s size %6zu us_per_call %.3f gb_per_s %.2f\n",
                   aes ? "aes256gcm" : "xchacha20poly1305", sizes[i], us,
                   (double)sizes[i] / us / 1e3);
        }
    free(st);
    free(m);
    free(c);
    return 0;
}
