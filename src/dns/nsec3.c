/* NSEC3 (RFC 5155) for pre-signed zones: the hashed owner of a name and
 * the NSEC3 record matching or covering it.
 *
 * A zone uses NSEC3 when its apex has an NSEC3PARAM with SHA-1 (the only
 * algorithm defined). The NSEC3 records are ordinary nodes of the store,
 * one label (the base32hex hash) below the apex; the store's canonical
 * order sorts those labels as the hashes sort, so the record covering a
 * hash is the nearest NSEC3 node before it, wrapping to the last one. */
#include <string.h>

#include "dns_internal.h"

/* ---- SHA-1 (FIPS 180-4), the only NSEC3 hash ---- */
struct sha1 {
    uint32_t h[5];
    uint8_t buf[64];
    size_t len; /* bytes so far */
};

static uint32_t rol(uint32_t x, unsigned n) { return x << n | x >> (32 - n); }

static void sha1_block(uint32_t h[5], const uint8_t *p)
{
    uint32_t w[80], a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 80; i++)
        w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    for (int i = 0; i < 80; i++) {
        uint32_t f = i < 20 ? ((b & c) | (~b & d)) + 0x5a827999u
                   : i < 40 ? (b ^ c ^ d) + 0x6ed9eba1u
                   : i < 60 ? ((b & c) | (b & d) | (c & d)) + 0x8f1bbcdcu
                            : (b ^ c ^ d) + 0xca62c1d6u;
        uint32_t t = rol(a, 5) + f + e + w[i];
        e = d;
        d = c;
        c = rol(b, 30);
        b = a;
        a = t;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e;
}

static void sha1_init(struct sha1 *s)
{
    *s = (struct sha1){{0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u, 0xc3d2e1f0u}, {0}, 0};
}

static void sha1_add(struct sha1 *s, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        s->buf[s->len++ % 64] = p[i];
        if (s->len % 64 == 0)
            sha1_block(s->h, s->buf);
    }
}

static void sha1_end(struct sha1 *s, uint8_t out[20])
{
    uint64_t bits = (uint64_t)s->len * 8;
    uint8_t pad = 0x80, zero = 0, len[8];
    sha1_add(s, &pad, 1);
    while (s->len % 64 != 56)
        sha1_add(s, &zero, 1);
    for (int i = 0; i < 8; i++)
        len[i] = (uint8_t)(bits >> (56 - 8 * i));
    sha1_add(s, len, 8);
    for (int i = 0; i < 20; i++)
        out[i] = (uint8_t)(s->h[i / 4] >> (24 - 8 * (i % 4)));
}

/* ---- RFC 5155 section 5: IH(salt, x, k) ---- */
static void nsec3_hash(const struct dns_zone *z, const uint8_t *name, uint8_t out[20])
{
    struct sha1 s;
    sha1_init(&s);
    sha1_add(&s, name, dns_name_len(name));
    sha1_add(&s, z->nsec3.salt, z->nsec3.salt_len);
    sha1_end(&s, out);
    for (unsigned k = 0; k < z->nsec3.iterations; k++) {
        sha1_init(&s);
        sha1_add(&s, out, 20);
        sha1_add(&s, z->nsec3.salt, z->nsec3.salt_len);
        sha1_end(&s, out);
    }
}

/* The hashed owner: base32hex (lower case, as the store keeps owners)
 * of the hash, one label in front of the zone's origin. */
static void hashed_owner(const struct dns_zone *z, const uint8_t *name,
                         uint8_t out[OP_DNS_NAME_MAX])
{
    static const char b32[] = "0123456789abcdefghijklmnopqrstuv";
    uint8_t h[20];
    nsec3_hash(z, name, h);
    out[0] = 32;
    for (unsigned i = 0; i < 32; i++) {
        unsigned bit = i * 5, byte = bit / 8, sh = bit % 8;
        unsigned v = (unsigned)h[byte] << 8 | (byte + 1 < 20 ? h[byte + 1] : 0);
        out[1 + i] = (uint8_t)b32[(v >> (11 - sh)) & 31];
    }
    memcpy(out + 33, z->origin, z->origin_len);
}

static bool has_nsec3(const struct dns_zone *z, size_t k)
{
    return dns_node_rrset(z, &z->nodes[k], T_NSEC3) != NULL;
}

const struct dns_node *dns_nsec3_find(const struct dns_zone *z, const uint8_t *name, bool *match)
{
    uint8_t owner[OP_DNS_NAME_MAX];
    size_t ins;
    hashed_owner(z, name, owner);
    long i = dns_zone_find(z, owner, &ins);
    *match = i >= 0 && has_nsec3(z, (size_t)i);
    if (*match)
        return &z->nodes[i];
    for (size_t k = ins; k > 0; k--) /* the nearest before it */
        if (has_nsec3(z, k - 1))
            return &z->nodes[k - 1];
    for (size_t k = z->nnodes; k > 0; k--) /* before the first: the last covers it */
        if (has_nsec3(z, k - 1))
            return &z->nodes[k - 1];
    return NULL;
}

/* NSEC3PARAM at the apex: algorithm (1 octet), flags, iterations (2), salt
 * length and salt. A zone with none, another algorithm, or an origin too
 * long for a hashed owner (33 octets more) keeps NSEC. */
void dns_nsec3_setup(struct dns_zone *z)
{
    const struct dns_rrset *set = dns_node_rrset(z, &z->nodes[z->apex], T_NSEC3PARAM);
    z->nsec3.on = false;
    if (set == NULL)
        return;
    const struct dns_rec *r = &z->recs[set->first];
    const uint8_t *rd = dns_rec_rdata(z, r);
    if (r->rdlen < 5 || rd[0] != 1 || r->rdlen != 5 + rd[4] ||
        z->origin_len + 33 > OP_DNS_NAME_MAX)
        return;
    z->nsec3.iterations = (uint16_t)(rd[2] << 8 | rd[3]);
    z->nsec3.salt_len = rd[4];
    memcpy(z->nsec3.salt, rd + 5, rd[4]);
    z->nsec3.on = true;
}
