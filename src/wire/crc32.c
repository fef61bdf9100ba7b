/* zlib-compatible CRC-32 (reflected polynomial 0xEDB88320).
 *
 * Two engines, chosen per call without any mutable state of ours:
 * - on x86-64 CPUs with PCLMULQDQ, 16-byte blocks are folded with carry-less
 *   multiplication (Intel, "Fast CRC Computation for Generic Polynomials
 *   Using PCLMULQDQ Instruction", 2009; the bit-reflected constants below are
 *   the ones Linux's crc32-pclmul and zlib-chromium use for this polynomial);
 *   where the CPU also has AVX-512 and VPCLMULQDQ, buffers of 256 bytes and
 *   more (a 4 KiB RoCE packet's ICRC) fold four 512-bit lanes at a time, the
 *   same method with the constants for 2048 bits: [x^(2048+32) mod P]' << 1
 *   and [x^(2048-32) mod P]' << 1, ' the 32-bit reflection;
 * - everything else, and the tail, goes through slicing-by-8 over the static
 *   const tables generated into crc32_table.h. */
#include <stdint.h>
#include <string.h>

#include "crc32_internal.h"
#include "crc32_table.h"
#include "offpath/wire.h"

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t crc_byte(uint32_t reg, uint8_t b)
{
    return crc32_table[0][(reg ^ b) & 0xffu] ^ (reg >> 8);
}

/* Eight bytes at once: the register folded into the first word, each byte
 * looked up in the table for its distance from the end of the block. */
static uint32_t crc_block8(uint32_t reg, const uint8_t *p)
{
    uint32_t a = le32(p) ^ reg;
    uint32_t b = le32(p + 4);
    return crc32_table[7][a & 0xffu] ^ crc32_table[6][(a >> 8) & 0xffu] ^
           crc32_table[5][(a >> 16) & 0xffu] ^ crc32_table[4][a >> 24] ^
           crc32_table[3][b & 0xffu] ^ crc32_table[2][(b >> 8) & 0xffu] ^
           crc32_table[1][(b >> 16) & 0xffu] ^ crc32_table[0][b >> 24];
}

uint32_t wire_crc32_slice8(uint32_t reg, const uint8_t *p, size_t len)
{
    for (; len > 0 && ((uintptr_t)p & 7u) != 0; len--)
        reg = crc_byte(reg, *p++);
    for (; len >= 8; len -= 8, p += 8)
        reg = crc_block8(reg, p);
    for (; len > 0; len--)
        reg = crc_byte(reg, *p++);
    return reg;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define CLMUL_TARGET __attribute__((target("pclmul,sse2")))

bool wire_crc32_has_clmul(void)
{
    return __builtin_cpu_supports("pclmul");
}

/* x * k (low and high 64-bit halves separately), plus next: one fold of 128
 * bits forward by the distance k encodes. */
CLMUL_TARGET static inline __m128i clmul_fold(__m128i x, __m128i k, __m128i next)
{
    __m128i lo = _mm_clmulepi64_si128(x, k, 0x00);
    __m128i hi = _mm_clmulepi64_si128(x, k, 0x11);
    return _mm_xor_si128(_mm_xor_si128(lo, hi), next);
}

CLMUL_TARGET static inline __m128i load128(const uint8_t *p)
{
    return _mm_loadu_si128((const __m128i *)(const void *)p);
}

/* 128 bits to 64, to 32, then a Barrett reduction to the register. */
CLMUL_TARGET static uint32_t clmul_reduce(__m128i x)
{
    const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0);
    const __m128i k5 = _mm_set_epi64x(0, 0x0163cd6124);
    const __m128i poly = _mm_set_epi64x(0x01f7011641, 0x01db710641); /* mu, P */
    const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);
    x = _mm_xor_si128(_mm_srli_si128(x, 8), _mm_clmulepi64_si128(x, k3k4, 0x10));
    __m128i hi = _mm_srli_si128(x, 4);
    x = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x, low32), k5, 0x00), hi);
    __m128i t = _mm_clmulepi64_si128(_mm_and_si128(x, low32), poly, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), poly, 0x00);
    return (uint32_t)_mm_cvtsi128_si32(_mm_srli_si128(_mm_xor_si128(x, t), 4));
}

/* Packet headers (16..63 bytes) in one lane: no tables to pull into the
 * cache, which is what a latency path coming out of the kernel pays for.
 * x0: what goes into the first block (the register, or a block before). */
CLMUL_TARGET static uint32_t clmul_short(__m128i x0, const uint8_t *p, size_t len)
{
    const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0); /* fold by 128 */
    __m128i a = _mm_xor_si128(load128(p), x0);
    for (p += 16, len -= 16; len >= 16; p += 16, len -= 16)
        a = clmul_fold(a, k3k4, load128(p));
    return clmul_reduce(a);
}

#define VCLMUL_TARGET __attribute__((target("pclmul,sse2,avx512f,vpclmulqdq")))

bool wire_crc32_has_vclmul(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq");
}

/* clmul_fold on four 128-bit lanes at once */
VCLMUL_TARGET static inline __m512i vclmul_fold(__m512i x, __m512i k, __m512i next)
{
    __m512i lo = _mm512_clmulepi64_epi128(x, k, 0x00);
    __m512i hi = _mm512_clmulepi64_epi128(x, k, 0x11);
    return _mm512_ternarylogic_epi64(lo, hi, next, 0x96); /* lo ^ hi ^ next */
}

VCLMUL_TARGET static inline __m512i load512(const uint8_t *p)
{
    return _mm512_loadu_si512((const void *)p);
}

VCLMUL_TARGET static uint32_t vclmul_from(__m128i x0, const uint8_t *p, size_t len)
{
    const __m512i k2048 = _mm512_broadcast_i32x4(_mm_set_epi64x(0x01322d1430, 0x011542778a));
    const __m512i k512 = _mm512_broadcast_i32x4(_mm_set_epi64x(0x01c6e41596, 0x0154442bd4));
    const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0); /* fold by 128 */
    __m512i a = _mm512_xor_si512(load512(p), _mm512_zextsi128_si512(x0));
    __m512i b = load512(p + 64), c = load512(p + 128), d = load512(p + 192);
    for (p += 256, len -= 256; len >= 256; p += 256, len -= 256) {
        a = vclmul_fold(a, k2048, load512(p));
        b = vclmul_fold(b, k2048, load512(p + 64));
        c = vclmul_fold(c, k2048, load512(p + 128));
        d = vclmul_fold(d, k2048, load512(p + 192));
    }
    a = vclmul_fold(vclmul_fold(vclmul_fold(a, k512, b), k512, c), k512, d);
    for (; len >= 64; p += 64, len -= 64)
        a = vclmul_fold(a, k512, load512(p));
    /* its four lanes, each 128 bits after the one before */
    __m128i x = _mm512_extracti32x4_epi32(a, 0);
    x = clmul_fold(x, k3k4, _mm512_extracti32x4_epi32(a, 1));
    x = clmul_fold(x, k3k4, _mm512_extracti32x4_epi32(a, 2));
    x = clmul_fold(x, k3k4, _mm512_extracti32x4_epi32(a, 3));
    for (; len >= 16; p += 16, len -= 16)
        x = clmul_fold(x, k3k4, load128(p));
    return clmul_reduce(x);
}

VCLMUL_TARGET uint32_t wire_crc32_vclmul(uint32_t reg, const uint8_t *p, size_t len)
{
    return vclmul_from(_mm_cvtsi32_si128((int)reg), p, len);
}

/* x0 into the first block, then p[0..len) by the widest engine there is. */
CLMUL_TARGET static uint32_t clmul_from(__m128i x0, const uint8_t *p, size_t len)
{
    const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596, 0x0154442bd4); /* fold by 512 */
    const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0); /* fold by 128 */
    if (len >= WIRE_CRC32_VCLMUL_MIN && wire_crc32_has_vclmul())
        return vclmul_from(x0, p, len);
    if (len < 64)
        return clmul_short(x0, p, len);
    __m128i a = _mm_xor_si128(load128(p), x0);
    __m128i b = load128(p + 16), c = load128(p + 32), d = load128(p + 48);
    for (p += 64, len -= 64; len >= 64; p += 64, len -= 64) {
        a = clmul_fold(a, k1k2, load128(p));
        b = clmul_fold(b, k1k2, load128(p + 16));
        c = clmul_fold(c, k1k2, load128(p + 32));
        d = clmul_fold(d, k1k2, load128(p + 48));
    }
    a = clmul_fold(clmul_fold(clmul_fold(a, k3k4, b), k3k4, c), k3k4, d);
    for (; len >= 16; p += 16, len -= 16)
        a = clmul_fold(a, k3k4, load128(p));
    return clmul_reduce(a);
}

CLMUL_TARGET uint32_t wire_crc32_clmul(uint32_t reg, const uint8_t *p, size_t len)
{
    return clmul_from(_mm_cvtsi32_si128((int)reg), p, len);
}

/* The 12 bytes make a block of their own behind 4 zero bytes (which leave
 * the zero register as it is), the register folded into their first 4, as
 * into any message's; that block folded 128 bits forward goes into p's
 * first. */
CLMUL_TARGET uint32_t wire_crc32_clmul_lead12(uint32_t reg, const uint8_t lead[12],
                                              const uint8_t *p, size_t len)
{
    const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0); /* fold by 128 */
    uint8_t block[16] = {0};
    memcpy(block + 4, lead, 12);
    __m128i x = _mm_xor_si128(load128(block), _mm_slli_si128(_mm_cvtsi32_si128((int)reg), 4));
    return clmul_from(clmul_fold(x, k3k4, _mm_setzero_si128()), p, len);
}
#else
uint32_t wire_crc32_clmul_lead12(uint32_t reg, const uint8_t lead[12], const uint8_t *p,
                                 size_t len)
{
    return wire_crc32_slice8(wire_crc32_slice8(reg, lead, 12), p, len);
}

bool wire_crc32_has_clmul(void)
{
    return false;
}

bool wire_crc32_has_vclmul(void)
{
    return false;
}

uint32_t wire_crc32_vclmul(uint32_t reg, const uint8_t *p, size_t len)
{
    return wire_crc32_slice8(reg, p, len);
}

uint32_t wire_crc32_clmul(uint32_t reg, const uint8_t *p, size_t len)
{
    return wire_crc32_slice8(reg, p, len);
}
#endif

uint32_t op_crc32(uint32_t crc, const void *data, size_t len)
{
    const uint8_t *p = data;
    uint32_t reg = ~crc;
    if (p == NULL)
        return crc;
    if (len >= WIRE_CRC32_CLMUL_MIN && wire_crc32_has_clmul()) {
        size_t n = len & ~(size_t)15;
        reg = wire_crc32_clmul(reg, p, n);
        p += n;
        len -= n;
    }
    return ~wire_crc32_slice8(reg, p, len);
}
