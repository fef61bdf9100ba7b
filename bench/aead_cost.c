/* bench/aead_cost: what one AEAD call costs on this CPU, the floor under the
 * secure channel's per-message time (docs/PERFORMANCE.md): microseconds per
 * seal of one record of 256 B .. 64 KiB through src/channel's own cipher
 * layer, for each implementation it has: AES-256-GCM on libsodium, on
 * OpenSSL and on VAES, XChaCha20-Poly1305 on libsodium and on OpenSSL (the
 * channel picks per record length; this is where the choices come from),
 * with the throughput in GB/s, and the cost of sealing and then opening
 * the record (what each message costs the two ends together).
 *
 * The "auto-" lines are what the channel itself runs: the implementation
 * it picks for that length. bench/channel reads the auto line at the batch
 * record's size for its rate_ratio_ceiling. Each figure is the least of
 * several short trials, so a busy neighbour shows as fewer good trials
 * rather than a slower figure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offpath/common.h"
#include "../src/channel/channel_internal.h"

#define TRIALS 25
#define TRIAL_BYTES (4u << 20)

struct cost {
    double seal_us, seal_open_us;
};

static double least(double a, double b)
{
    return a < b ? a : b;
}

static bool measure(struct chan_aead *a, size_t len, uint8_t *m, uint8_t *c, struct cost *out)
{
    static const uint8_t ad[4] = {0};
    size_t calls = TRIAL_BYTES / len;
    out->seal_us = out->seal_open_us = 1e9;
    for (int t = 0; t < TRIALS; t++) {
        uint64_t t0 = op_now_ns();
        for (size_t i = 0; i < calls; i++)
            if (!chan_aead_seal(a, i, ad, sizeof ad, m, len, c))
                return false;
        uint64_t t1 = op_now_ns();
        for (size_t i = 0; i < calls; i++)
            if (!chan_aead_seal(a, i, ad, sizeof ad, m, len, c) ||
                !chan_aead_open(a, i, ad, sizeof ad, c, len + OP_CHAN_TAG_BYTES))
                return false;
        uint64_t t2 = op_now_ns();
        out->seal_us = least(out->seal_us, (double)(t1 - t0) / 1e3 / (double)calls);
        out->seal_open_us = least(out->seal_open_us, (double)(t2 - t1) / 1e3 / (double)calls);
    }
    return true;
}

int main(void)
{
    static const size_t sizes[] = {256, 1024, 4096, 16384, 65536};
    static const struct {
        const char *name;
        enum op_chan_cipher cipher;
        enum chan_aead_impl impl;
    } impls[] = {{"aes256gcm-libsodium", OP_CHAN_CIPHER_AESGCM, CHAN_AEAD_SODIUM},
                 {"aes256gcm-openssl", OP_CHAN_CIPHER_AESGCM, CHAN_AEAD_OPENSSL},
                 {"aes256gcm-vaes", OP_CHAN_CIPHER_AESGCM, CHAN_AEAD_VAES},
                 {"auto-aes256gcm", OP_CHAN_CIPHER_AESGCM, CHAN_AEAD_AUTO},
                 {"xchacha20poly1305-libsodium", OP_CHAN_CIPHER_XCHACHA, CHAN_AEAD_SODIUM},
                 {"xchacha20poly1305-openssl", OP_CHAN_CIPHER_XCHACHA, CHAN_AEAD_OPENSSL},
                 {"auto-xchacha20poly1305", OP_CHAN_CIPHER_XCHACHA, CHAN_AEAD_AUTO}};
    uint8_t key[32] = {1};
    uint8_t *m = calloc(1, 65536), *c = malloc(65536 + OP_CHAN_TAG_BYTES);
    if (sodium_init() < 0 || m == NULL || c == NULL)
        return 1;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (size_t i = 0; i < sizeof impls / sizeof impls[0]; i++) {
            struct chan_aead a;
            struct cost k;
            if ((impls[i].cipher == OP_CHAN_CIPHER_AESGCM && !crypto_aead_aes256gcm_is_available()) ||
                (impls[i].impl == CHAN_AEAD_VAES && !chan_vaes_available()))
                continue;
            if (chan_aead_init(&a, impls[i].cipher, key) != OP_OK)
                return 1;
            a.impl = impls[i].impl;
            bool ok = measure(&a, sizes[s], m, c, &k);
            chan_aead_free(&a);
            if (!ok)
                return 1;
            printf("aead %-28s size %6zu us_per_call %.3f gb_per_s %.2f seal_open_us %.3f\n",
                   impls[i].name, sizes[s], k.seal_us, (double)sizes[s] / k.seal_us / 1e3,
                   k.seal_open_us);
        }
    free(m);
    free(c);
    return 0;
}
