/* bench/dns_cost: what offpath's responder costs per query on this CPU,
 * without any I/O: the bench/dns query mix (the same 12 templates: hits,
 * NXDOMAIN, a CNAME chain, a wildcard, a referral, DO on a quarter) over
 * tests/dns/example.zone, each answered by op_dns_respond many times on
 * one thread; prints ns per query for each template and for the mix. This
 * is the part of a DNS answer the lookup and codec own (docs/PERFORMANCE.md:
 * the rest of bench/dns's ~2 us per answer is the kernel's AF_XDP path).
 * Usage: dns_cost ZONEFILE [ROUNDS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offpath/dns.h"

static const struct {
    const char *name;
    uint16_t type;
    bool dnssec_ok;
} queries[] = {
    {"www.example.test", 1, false},    {"web.example.test", 1, false},
    {"example.test", 15, false},       {"mail.example.test", 1, true},
    {"nothere.example.test", 1, false}, {"nope.example.test", 28, false},
    {"chain1.example.test", 1, false}, {"x.wild.example.test", 16, true},
    {"host.sub.example.test", 1, false}, {"ns1.example.test", 28, true},
    {"web.example.test", 28, false},   {"example.test", 6, false},
};
#define NQ (sizeof queries / sizeof queries[0])

/* A query as kxdpgun sends it: no RD, EDNS with a 1232-byte payload, DO
 * where asked. */
static size_t query(uint8_t *q, const char *name, uint16_t type, bool dnssec_ok, uint16_t id)
{
    size_t n = 0;
    uint8_t hdr[12] = {(uint8_t)(id >> 8), (uint8_t)id, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1};
    memcpy(q, hdr, sizeof hdr);
    n = sizeof hdr;
    for (const char *p = name; *p != '\0';) {
        const char *dot = strchr(p, '.');
        size_t len = dot != NULL ? (size_t)(dot - p) : strlen(p);
        q[n++] = (uint8_t)len;
        memcpy(q + n, p, len);
        n += len;
        p += len + (dot != NULL);
    }
    q[n++] = 0;
    uint8_t tail[] = {(uint8_t)(type >> 8), (uint8_t)type, 0, 1,           /* QTYPE, IN */
                      0, 0, 41, 0x04, 0xd0, 0, 0, dnssec_ok ? 0x80 : 0, 0, /* OPT: 1232, DO */
                      0, 0};
    memcpy(q + n, tail, sizeof tail);
    return n + sizeof tail;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: dns_cost ZONEFILE [ROUNDS]\n");
        return 2;
    }
    long rounds = argc > 2 ? atol(argv[2]) : 200000;
    struct op_dns_zones *z;
    struct op_dns_load_err err;
    const char *files[] = {argv[1]};
    if (op_dns_zones_load(files, 1, &z, &err) != OP_OK) {
        fprintf(stderr, "dns_cost: %s\n", err.msg);
        return 1;
    }
    static uint8_t q[NQ][300], out[4096];
    size_t qlen[NQ];
    for (size_t i = 0; i < NQ; i++)
        qlen[i] = query(q[i], queries[i].name, queries[i].type, queries[i].dnssec_ok,
                        (uint16_t)i);
    uint64_t c[OP_DNS_C_COUNT_] = {0};
    struct op_dns_query_info qi = {.tcp = false, .udp_max = 1232};
    double total = 0;
    printf("%-24s %5s %3s %6s %8s\n", "query", "type", "DO", "bytes", "ns/query");
    for (size_t i = 0; i < NQ; i++) {
        size_t alen = 0;
        uint64_t t0 = op_now_ns();
        for (long r = 0; r < rounds; r++)
            alen = op_dns_respond(z, &qi, q[i], qlen[i], out, sizeof out, c);
        double ns = (double)(op_now_ns() - t0) / (double)rounds;
        total += ns;
        printf("%-24s %5u %3s %6zu %8.1f\n", queries[i].name, queries[i].type,
               queries[i].dnssec_ok ? "yes" : "no", alen, ns);
    }
    printf("mix_ns_per_query %.1f\n", total / (double)NQ);
    op_dns_zones_free(z);
    return op_dns_counters_balanced(c) ? 0 : 1;
}
