/* Response rate limiting (the scheme of BIND's and Knot's RRL): an
 * authoritative server is a reflector an attacker can aim at a victim by
 * spoofing its address, so the answers to one client network are limited.
 * Answers are bucketed by the client's network (IPv4 /24, IPv6 /56) and
 * what they say: a positive answer by its name and type, a negative or
 * error answer by its rcode alone (random names then share one bucket).
 * Each bucket holds --rrl-rate tokens a second, spent one an answer; past
 * them an answer is dropped, except every --rrl-slip-th, which goes out
 * truncated and empty (TC set, the question only): a real client behind
 * the spoofed flood asks again over TCP, which is not limited, and the
 * reflection is no larger than the query.
 *
 * One table per worker thread or lcore, touched by it alone (no locks):
 * the limit holds per worker, so a client whose queries the kernel or RSS
 * spreads over N workers gets up to N times the rate. The table is fixed
 * (no allocation while serving); when a bucket's slot is taken by another,
 * the older one is evicted, which can only let an answer through. */
#include <stdlib.h>
#include <string.h>

#include "dns_internal.h"

#define RRL_SLOTS 4096 /* a power of 2 */
#define RRL_PROBES 4
#define HDR 12

struct rrl_bucket {
    uint64_t key; /* 0: empty */
    uint32_t second;
    uint32_t tokens;
    uint32_t limited; /* answers limited this second, for the slip */
};

struct op_dns_rrl {
    unsigned rate, slip;
    struct rrl_bucket b[RRL_SLOTS];
};

struct op_dns_rrl *op_dns_rrl_new(unsigned rate, unsigned slip)
{
    struct op_dns_rrl *r = calloc(1, sizeof(*r));
    if (r != NULL) {
        r->rate = rate;
        r->slip = slip;
    }
    return r;
}

void op_dns_rrl_free(struct op_dns_rrl *r) { free(r); }

static uint64_t mix(uint64_t h, uint64_t v)
{
    h = (h ^ v) * 0x9e3779b97f4a7c15u;
    return h ^ h >> 31;
}

/* The question's name and type in an answer we wrote (uncompressed, right
 * after the header): its end, 0 if the answer has none. */
static size_t question_end(const uint8_t *a, size_t len)
{
    if (len < HDR || (a[4] << 8 | a[5]) != 1)
        return 0;
    size_t at = HDR;
    while (at < len && a[at] != 0 && a[at] < 64)
        at += 1 + (size_t)a[at];
    return at < len && a[at] == 0 && at + 5 <= len ? at + 5 : 0;
}

/* The bucket an answer falls in: the client's network, the rcode, and for
 * a positive answer the name (case folded) and type asked. */
static uint64_t bucket_key(const uint8_t *client, bool ipv6, const uint8_t *a, size_t len)
{
    size_t net = ipv6 ? 7 : 3; /* /56, /24 */
    uint64_t h = mix(0x5bd1e995u, ipv6);
    for (size_t i = 0; i < net; i++)
        h = mix(h, client[i]);
    unsigned rcode = len >= HDR ? a[3] & 0xf : 0xff;
    h = mix(h, rcode);
    size_t end = rcode == 0 ? question_end(a, len) : 0;
    for (size_t i = HDR; i < end; i++)
        h = mix(h, dns_lc(a[i]));
    return h | 1; /* never 0, the empty slot */
}

static struct rrl_bucket *find_bucket(struct op_dns_rrl *r, uint64_t key)
{
    size_t at = (size_t)(key >> 20) & (RRL_SLOTS - 1);
    struct rrl_bucket *oldest = &r->b[at];
    for (unsigned i = 0; i < RRL_PROBES; i++) {
        struct rrl_bucket *b = &r->b[(at + i) & (RRL_SLOTS - 1)];
        if (b->key == key || b->key == 0)
            return b;
        if (b->second < oldest->second)
            oldest = b;
    }
    return oldest;
}

/* An answer cut to its header and question, TC set, no records (the OPT
 * goes too: the client asks again over TCP, where size does not matter). */
static size_t slip(uint8_t *a, size_t len)
{
    size_t end = question_end(a, len);
    if (end == 0)
        end = len < HDR ? len : HDR;
    if (end >= HDR) {
        a[2] |= 0x02; /* TC */
        memset(a + 6, 0, 6); /* no answer, authority or additional records */
    }
    return end;
}

enum op_dns_rrl_verdict op_dns_rrl_check(struct op_dns_rrl *r, const uint8_t *client,
                                         bool ipv6, uint8_t *answer, size_t *len,
                                         uint64_t now_ns, uint64_t *c)
{
    if (r == NULL || r->rate == 0)
        return OP_DNS_RRL_PASS;
    uint64_t key = bucket_key(client, ipv6, answer, *len);
    uint32_t second = (uint32_t)(now_ns / 1000000000u);
    struct rrl_bucket *b = find_bucket(r, key);
    if (b->key != key || b->second != second)
        *b = (struct rrl_bucket){.key = key, .second = second, .tokens = r->rate};
    if (b->tokens > 0) {
        b->tokens--;
        return OP_DNS_RRL_PASS;
    }
    if (r->slip > 0 && ++b->limited % r->slip == 0) {
        *len = slip(answer, *len);
        c[OP_DNS_C_rrl_slipped]++;
        return OP_DNS_RRL_SLIP;
    }
    c[OP_DNS_C_rrl_dropped]++;
    return OP_DNS_RRL_DROP;
}
