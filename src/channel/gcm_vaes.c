/* AES-256-GCM on 512-bit vectors (VAES and VPCLMULQDQ, AVX-512), for CPUs
 * that have them: four AES blocks per instruction, eight vectors in flight
 * and GHASH on thirty-two blocks per reduction, where OpenSSL 3.0's code
 * (Debian 12) works on 128-bit registers. Same function as libsodium's and OpenSSL's AES-256-GCM (96-bit
 * nonce, 16-byte tag); tests/unit/test_channel.c checks it against both for
 * every length from 0 to 2100 bytes and for every key it draws.
 *
 * GHASH runs as POLYVAL (RFC 8452, appendix A): with every block
 * byte-reversed, GF(2^128) elements are plain little-endian polynomials, so
 * a carry-less multiply is the product, and multiplying by H becomes a
 * Montgomery product a*b*x^-128 mod x^128 + x^127 + x^126 + x^121 + 1 with
 * the key mulX(reverse(H)). Products of up to thirty-two blocks by the
 * powers H^32..H^1 are summed unreduced (reduction is linear) and reduced
 * once; each product is Karatsuba's three multiplies, since the carry-less
 * multiplies, not the AES rounds, were the busier unit (GHASH alone ran at
 * 30 GB/s, counter mode alone at 33).
 *
 * Why eight vectors a round: an AES round's result feeds the next round a
 * few cycles later, so four vectors (sixteen blocks) left the AES units
 * waiting on their own latency; eight independent chains keep them busy
 * (bench/aead_cost at 16 KiB on this Zen 5: 12.7 -> 18.5 GB/s sealing,
 * 21.2 with Karatsuba, 23.4 with the rounds unrolled). That is about what
 * the two vector units allow: counter mode alone runs at 34.5 GB/s, GHASH
 * alone at 34.2, and the AES rounds and the carry-less multiplies share
 * the units.
 * The next round's keystream is issued before this round's GHASH so the
 * two overlap. A tail under 512 bytes runs on four vectors a piece, so a
 * short record computes no keystream it does not use.
 *
 * Every instruction used is constant-time in its data (AES rounds and
 * carry-less multiplies; no table lookups), as with AES-NI. */
#include <cpuid.h>
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "channel_internal.h"

#define VAES_TARGET                                                                                \
    __attribute__((target("aes,pclmul,avx2,avx512f,avx512bw,avx512vl,vaes,vpclmulqdq")))
/* The loop's helpers are inlined whatever the optimisation level, so its
 * sixteen blocks stay in registers instead of round-tripping memory. */
#define VAES_INLINE VAES_TARGET __attribute__((always_inline)) inline
#define ROUNDS 14
#define VECTORS 8                  /* per loop round */
#define BLOCKS (4 * VECTORS)       /* 32 */
#define CHUNK (64 * VECTORS)       /* 512 bytes */
#define TAIL_VECTORS (VECTORS / 2) /* a tail's piece: 256 bytes */
/* Loops over the vectors are unrolled so their arrays become registers. */
#define EACH_VECTOR _Pragma("GCC unroll 8") for

struct chan_vaes {
    __m128i rk[ROUNDS + 1];
    __m512i rk4[ROUNDS + 1]; /* each round key in all four lanes */
    /* POLYVAL keys: pow[BLOCKS - k] = H^k (k = 1..BLOCKS), then BLOCKS
     * zeros, so the n blocks of a short run load their powers H^n..H^1 (and
     * zeros past them) from pow + BLOCKS - n. */
    __m128i pow[2 * BLOCKS];
    /* Karatsuba's middle keys: each pow entry's two halves xored, in both
     * halves, so a block costs three carry-less multiplies, not four. */
    __m128i powk[2 * BLOCKS];
};

/* CPUID and XCR0 rather than __builtin_cpu_supports, which older clangs
 * (Debian 12's 14, the fuzz build's) do not know "vaes" for. */
bool chan_vaes_available(void)
{
    unsigned a, b, c, d, lo, hi;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return false;
    bool aes = c & (1u << 25), pclmul = c & (1u << 1), osxsave = c & (1u << 27);
    if (!aes || !pclmul || !osxsave || !__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return false;
    bool avx512 = (b & (1u << 16)) && (b & (1u << 30)) && (b & (1u << 31)); /* F, BW, VL */
    bool vaes = (c & (1u << 9)) && (c & (1u << 10));                        /* VAES, VPCLMULQDQ */
    if (!avx512 || !vaes)
        return false;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 0xe6u) == 0xe6u; /* the OS saves SSE, AVX and all of AVX-512's state */
}

/* ---- AES-256 ---- */

/* One step of FIPS-197's key expansion: w xor its shifted copies (the
 * running xor of the previous four words) xor the assist word. */
VAES_TARGET static __m128i expand_step(__m128i w, __m128i assist)
{
    w = _mm_xor_si128(w, _mm_slli_si128(w, 4));
    w = _mm_xor_si128(w, _mm_slli_si128(w, 4));
    w = _mm_xor_si128(w, _mm_slli_si128(w, 4));
    return _mm_xor_si128(w, assist);
}

#define EXPAND_PAIR(i, rcon)                                                                       \
    do {                                                                                           \
        rk[i] = expand_step(rk[(i) - 2],                                                           \
                            _mm_shuffle_epi32(_mm_aeskeygenassist_si128(rk[(i) - 1], rcon), 0xff)); \
        if ((i) + 1 <= ROUNDS)                                                                     \
            rk[(i) + 1] = expand_step(                                                             \
                rk[(i) - 1], _mm_shuffle_epi32(_mm_aeskeygenassist_si128(rk[i], 0), 0xaa));     \
    } while (0)

VAES_TARGET static void expand_key(__m128i rk[ROUNDS + 1], const uint8_t key[32])
{
    rk[0] = _mm_loadu_si128((const __m128i *)key);
    rk[1] = _mm_loadu_si128((const __m128i *)(key + 16));
    /* aeskeygenassist needs its round constant as an immediate. */
    EXPAND_PAIR(2, 0x01);
    EXPAND_PAIR(4, 0x02);
    EXPAND_PAIR(6, 0x04);
    EXPAND_PAIR(8, 0x08);
    EXPAND_PAIR(10, 0x10);
    EXPAND_PAIR(12, 0x20);
    EXPAND_PAIR(14, 0x40);
}

VAES_TARGET static __m128i aes_block(const struct chan_vaes *g, __m128i b)
{
    b = _mm_xor_si128(b, g->rk[0]);
    for (int r = 1; r < ROUNDS; r++)
        b = _mm_aesenc_si128(b, g->rk[r]);
    return _mm_aesenclast_si128(b, g->rk[ROUNDS]);
}

/* ---- POLYVAL ---- */

VAES_INLINE static __m512i byte_reverse_mask(void)
{
    return _mm512_broadcast_i32x4(
        _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}

/* (hi * x^128 + lo) * x^-128 mod the POLYVAL polynomial: twice, the low 64
 * bits times x^-64 (= x^64 + x^63 + x^62 + x^57) folded in. */
VAES_INLINE static __m128i reduce(__m128i lo, __m128i hi)
{
    const __m128i poly = _mm_set_epi64x((long long)0xc200000000000000ull, 1);
    for (int i = 0; i < 2; i++)
        lo = _mm_xor_si128(_mm_shuffle_epi32(lo, 0x4e), _mm_clmulepi64_si128(lo, poly, 0x10));
    return _mm_xor_si128(hi, lo);
}

VAES_TARGET static __m128i dot(__m128i a, __m128i b)
{
    __m128i lo = _mm_clmulepi64_si128(a, b, 0x00), hi = _mm_clmulepi64_si128(a, b, 0x11);
    __m128i mid =
        _mm_xor_si128(_mm_clmulepi64_si128(a, b, 0x01), _mm_clmulepi64_si128(a, b, 0x10));
    return reduce(_mm_xor_si128(lo, _mm_slli_si128(mid, 8)),
                  _mm_xor_si128(hi, _mm_srli_si128(mid, 8)));
}

/* v * x: the POLYVAL form of GHASH's key (RFC 8452's mulX_POLYVAL). */
VAES_TARGET static __m128i mul_x(__m128i v)
{
    uint64_t w[2];
    _mm_storeu_si128((__m128i *)w, v);
    uint64_t carry = w[1] >> 63;
    w[1] = w[1] << 1 | w[0] >> 63;
    w[0] <<= 1;
    if (carry) {
        w[1] ^= 0xc200000000000000ull;
        w[0] ^= 1;
    }
    return _mm_loadu_si128((const __m128i *)w);
}

VAES_INLINE static __m128i xor_lanes(__m512i z)
{
    __m256i h = _mm256_xor_si256(_mm512_castsi512_si256(z), _mm512_extracti64x4_epi64(z, 1));
    return _mm_xor_si128(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* Absorbs n (1..BLOCKS) byte-reversed blocks x (lanes past n zero) into s:
 * s = (s + x_0) H^n + x_1 H^(n-1) + ... + x_(n-1) H. */
VAES_INLINE static __m128i absorb(const struct chan_vaes *g, __m128i s, __m512i x[VECTORS],
                                  size_t n)
{
    __m512i lo = _mm512_setzero_si512(), hi = lo, mid = lo;
    x[0] = _mm512_xor_si512(x[0], _mm512_zextsi128_si512(s));
    EACH_VECTOR (size_t j = 0; j < VECTORS; j++) {
        if (4 * j >= n)
            break;
        __m512i p = _mm512_loadu_si512(&g->pow[BLOCKS - n + 4 * j]);
        __m512i pk = _mm512_loadu_si512(&g->powk[BLOCKS - n + 4 * j]);
        __m512i xk = _mm512_xor_si512(x[j], _mm512_shuffle_epi32(x[j], 0x4e));
        lo = _mm512_xor_si512(lo, _mm512_clmulepi64_epi128(x[j], p, 0x00));
        hi = _mm512_xor_si512(hi, _mm512_clmulepi64_epi128(x[j], p, 0x11));
        mid = _mm512_xor_si512(mid, _mm512_clmulepi64_epi128(xk, pk, 0x00));
    }
    mid = _mm512_ternarylogic_epi64(mid, lo, hi, 0x96);
    lo = _mm512_xor_si512(lo, _mm512_bslli_epi128(mid, 8));
    hi = _mm512_xor_si512(hi, _mm512_bsrli_epi128(mid, 8));
    return reduce(xor_lanes(lo), xor_lanes(hi));
}

static __mmask64 chunk_mask(size_t left, size_t j)
{
    size_t at = 64 * j;
    if (left <= at)
        return 0;
    return left - at >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << (left - at)) - 1;
}

/* Absorbs up to CHUNK bytes of p (zero-padded to whole blocks). */
VAES_TARGET static __m128i absorb_bytes(const struct chan_vaes *g, __m128i s, const uint8_t *p,
                                        size_t len)
{
    __m512i x[VECTORS];
    EACH_VECTOR (size_t j = 0; j < VECTORS; j++)
        x[j] = _mm512_shuffle_epi8(_mm512_maskz_loadu_epi8(chunk_mask(len, j), p + 64 * j),
                                   byte_reverse_mask());
    return absorb(g, s, x, (len + 15) / 16);
}

/* ---- setup ---- */

VAES_TARGET static void schedule(struct chan_vaes *g, const uint8_t key[32])
{
    expand_key(g->rk, key);
    for (int r = 0; r <= ROUNDS; r++)
        g->rk4[r] = _mm512_broadcast_i32x4(g->rk[r]);
}

VAES_TARGET static void derive_powers(struct chan_vaes *g)
{
    __m128i h = aes_block(g, _mm_setzero_si128());
    __m128i k = mul_x(_mm_shuffle_epi8(h, _mm512_castsi512_si128(byte_reverse_mask())));
    __m128i p = k;
    memset(g->pow, 0, sizeof g->pow);
    memset(g->powk, 0, sizeof g->powk);
    for (int i = 1; i <= BLOCKS; i++) {
        g->pow[BLOCKS - i] = p;
        g->powk[BLOCKS - i] = _mm_xor_si128(p, _mm_shuffle_epi32(p, 0x4e));
        p = dot(p, k);
    }
}

void chan_vaes_rekey(struct chan_vaes *g, const uint8_t key[32])
{
    schedule(g, key);
    derive_powers(g);
}

op_status_t chan_vaes_new(const uint8_t key[32], struct chan_vaes **out)
{
    struct chan_vaes *g = aligned_alloc(64, sizeof *g);
    *out = NULL;
    if (g == NULL)
        return OP_ERR_NOMEM;
    chan_vaes_rekey(g, key);
    *out = g;
    return OP_OK;
}

void chan_vaes_free(struct chan_vaes *g)
{
    if (g == NULL)
        return;
    sodium_memzero(g, sizeof *g);
    free(g);
}

/* ---- seal and open ---- */

/* The counter blocks as byte-reversed vectors: GCM's 32-bit big-endian
 * counter is then each lane's low dword, stepped with one vector add. */
struct ctr {
    __m512i next; /* blocks next..next+3 */
};

VAES_TARGET static __m128i ctr_start(struct ctr *c, const uint8_t iv[12])
{
    uint8_t j0[16];
    memcpy(j0, iv, 12);
    j0[12] = j0[13] = j0[14] = 0;
    j0[15] = 1;
    __m128i block = _mm_loadu_si128((const __m128i *)j0);
    __m512i rev = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(block), byte_reverse_mask());
    c->next = _mm512_add_epi32(rev, _mm512_set_epi32(0, 0, 0, 4, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 1));
    return block; /* J0, whose encryption masks the tag */
}

/* The next nv vectors of keystream, round by round across the vectors so
 * the AES units always have independent work. */
VAES_INLINE static void keystream(const struct chan_vaes *g, struct ctr *c, __m512i ks[VECTORS],
                                  int nv)
{
    const __m512i four = _mm512_set_epi32(0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4);
    EACH_VECTOR (int j = 0; j < nv; j++) {
        ks[j] = _mm512_xor_si512(_mm512_shuffle_epi8(c->next, byte_reverse_mask()), g->rk4[0]);
        c->next = _mm512_add_epi32(c->next, four);
    }
    /* The rounds unrolled too: as a loop, GCC copied every vector to
     * another register each round (21.3 -> 23.4 GB/s at 16 KiB). */
    _Pragma("GCC unroll 13") for (int r = 1; r < ROUNDS; r++)
        EACH_VECTOR (int j = 0; j < nv; j++)
            ks[j] = _mm512_aesenc_epi128(ks[j], g->rk4[r]);
    EACH_VECTOR (int j = 0; j < nv; j++)
        ks[j] = _mm512_aesenclast_epi128(ks[j], g->rk4[ROUNDS]);
}

/* CTR on one whole chunk: out = in ^ ks; x gets the ciphertext side (out
 * when sealing, in when opening), byte-reversed for GHASH. */
VAES_INLINE static void xor_chunk(const __m512i ks[VECTORS], const uint8_t *in, uint8_t *out,
                                  __m512i x[VECTORS], bool sealing)
{
    EACH_VECTOR (size_t j = 0; j < VECTORS; j++) {
        __m512i d = _mm512_loadu_si512(in + 64 * j);
        __m512i o = _mm512_xor_si512(d, ks[j]);
        _mm512_storeu_si512(out + 64 * j, o);
        x[j] = _mm512_shuffle_epi8(sealing ? o : d, byte_reverse_mask());
    }
}

/* CTR and GHASH on a tail piece of 1..64 * TAIL_VECTORS bytes. */
VAES_INLINE static __m128i crypt_piece(const struct chan_vaes *g, struct ctr *c, __m128i s,
                                       const uint8_t *in, uint8_t *out, size_t len, bool sealing)
{
    __m512i ks[VECTORS], x[VECTORS];
    keystream(g, c, ks, TAIL_VECTORS);
    EACH_VECTOR (size_t j = 0; j < TAIL_VECTORS; j++) {
        __mmask64 m = chunk_mask(len, j);
        __m512i d = _mm512_maskz_loadu_epi8(m, in + 64 * j);
        __m512i o = _mm512_maskz_mov_epi8(m, _mm512_xor_si512(d, ks[j]));
        _mm512_mask_storeu_epi8(out + 64 * j, m, o);
        x[j] = _mm512_shuffle_epi8(sealing ? o : d, byte_reverse_mask());
    }
    return absorb(g, s, x, (len + 15) / 16);
}

/* CTR over in[0..len) into out, absorbing the ciphertext into s. */
VAES_INLINE static __m128i crypt(const struct chan_vaes *g, struct ctr *c, __m128i s,
                                 const uint8_t *in, uint8_t *out, size_t len, bool sealing)
{
    size_t chunks = len / CHUNK, at = 0;
    __m512i ks[VECTORS], x[VECTORS];
    if (chunks > 0)
        keystream(g, c, ks, VECTORS);
    for (size_t i = 0; i < chunks; i++, at += CHUNK) {
        xor_chunk(ks, in + at, out + at, x, sealing);
        if (i + 1 < chunks)
            keystream(g, c, ks, VECTORS);
        s = absorb(g, s, x, BLOCKS);
    }
    for (size_t piece = 64 * TAIL_VECTORS; at < len; at += piece)
        s = crypt_piece(g, c, s, in + at, out + at, len - at < piece ? len - at : piece, sealing);
    return s;
}

VAES_TARGET static __m128i run(const struct chan_vaes *g, const uint8_t iv[12], const uint8_t *ad,
                               size_t ad_len, const uint8_t *in, uint8_t *out, size_t len,
                               bool sealing)
{
    struct ctr c;
    __m128i s = _mm_setzero_si128();
    __m128i j0 = ctr_start(&c, iv);
    for (size_t at = 0; at < ad_len; at += CHUNK)
        s = absorb_bytes(g, s, ad + at, ad_len - at < CHUNK ? ad_len - at : CHUNK);
    /* Two expansions of crypt, each with its direction's loads fixed. */
    s = sealing ? crypt(g, &c, s, in, out, len, true) : crypt(g, &c, s, in, out, len, false);
    /* The lengths block, byte-reversed: bit lengths of the data (low half)
     * and of the associated data (high half). */
    __m512i x[VECTORS] = {_mm512_zextsi128_si512(_mm_set_epi64x((long long)(ad_len * 8),
                                                                 (long long)(len * 8)))};
    s = absorb(g, s, x, 1);
    s = _mm_shuffle_epi8(s, _mm512_castsi512_si128(byte_reverse_mask()));
    return _mm_xor_si128(s, aes_block(g, j0));
}

VAES_TARGET void chan_vaes_seal(const struct chan_vaes *g, const uint8_t iv[12], const uint8_t *ad,
                                size_t ad_len, const uint8_t *m, size_t len, uint8_t *c)
{
    __m128i tag = run(g, iv, ad, ad_len, m, c, len, true);
    _mm_storeu_si128((__m128i *)(c + len), tag);
}

VAES_TARGET bool chan_vaes_open(const struct chan_vaes *g, const uint8_t iv[12], const uint8_t *ad,
                                size_t ad_len, uint8_t *c, size_t len)
{
    uint8_t tag[16];
    _mm_storeu_si128((__m128i *)tag, run(g, iv, ad, ad_len, c, c, len, false));
    if (crypto_verify_16(tag, c + len) == 0)
        return true;
    sodium_memzero(c, len); /* decrypted before the tag was known */
    return false;
}
