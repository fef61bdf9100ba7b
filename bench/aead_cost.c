/* bench/aead_cost: what one AEAD call costs on this CPU, the floor under the
 * secure channel's per-message time (docs/PERFORMANCE.md): microseconds per
 * seal of one record of 256 B .. 64 KiB through src/channel's own cipher
 * layer, for each implementation it has: AES-256-GCM on libsodium and on
 * OpenSSL (the channel picks per record length; this is where the
 * switch-over comes from) and XChaCha20-Poly1305, with the throughput in
 * GB/s. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offpath/common.h"
#include "../src/channel/channel_internal.h"

static double per_call_us(struct chan_aead *a, size_t len, uint8_t *m, uint8_t *c)
{
    uint8_t ad[4] = {0};
    size_t calls = (64u << 20) / len;
    uint64_t t0 = op_now_ns();
    for (size_t i = 0; i < calls; i++)
        if (!chan_aead_seal(a, i, ad, sizeof ad, m, len, c))
            return -1;
    return (double)(op_now_ns() - t0) / 1e3 / (double)calls;
}

int main(void)
{
    static const size_t sizes[] = {256, 1024, 4096, 16384, 65536};
    static const struct {
        const char *name;
        enum op_chan_cipher cipher;
        enum chan_gcm_impl impl;
    } impls[] = {{"aes256gcm-libsodium", OP_CHAN_CIPHER_AESGCM, CHAN_GCM_SODIUM},
                 {"aes256gcm-openssl", OP_CHAN_CIPHER_AESGCM, CHAN_GCM_OPENSSL},
                 {"aes256gcm-vaes", OP_CHAN_CIPHER_AESGCM, CHAN_GCM_VAES},
                 {"xchacha20poly1305", OP_CHAN_CIPHER_XCHACHA, CHAN_GCM_AUTO}};
    uint8_t key[32] = {1};
    uint8_t *m = calloc(1, 65536), *c = malloc(65536 + 16);
    if (sodium_init() < 0 || m == NULL || c == NULL)
        return 1;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (size_t i = 0; i < sizeof impls / sizeof impls[0]; i++) {
            struct chan_aead a;
            if ((impls[i].cipher == OP_CHAN_CIPHER_AESGCM && !crypto_aead_aes256gcm_is_available()) ||
                (impls[i].impl == CHAN_GCM_VAES && !chan_vaes_available()))
                continue;
            if (chan_aead_init(&a, impls[i].cipher, key) != OP_OK)
                return 1;
            a.impl = impls[i].impl;
            double us = per_call_us(&a, sizes[s], m, c);
            chan_aead_free(&a);
            printf("aead %-20s size %6zu us_per_call %.3f gb_per_s %.2f\n", impls[i].name,
                   sizes[s], us, (double)sizes[s] / us / 1e3);
        }
    free(m);
    free(c);
    return 0;
}
