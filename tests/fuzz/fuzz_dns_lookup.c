/* libFuzzer target for the responder over a fixed zone with every kind of
 * node (wildcards, CNAME chains and loops, DNAMEs into a loop, onto their
 * own subtree and out of the zone, a delegation, an empty non-terminal,
 * signatures and NSEC). The first input byte picks UDP or
 * TCP (bit 0), the zone as it is or with NSEC3 denial (bit 1: the same
 * zone with an NSEC3PARAM and NSEC3 records added) and a client allowed
 * zone transfers (bit 2); the rest is the query. Properties: nothing crashes; every answer
 * decodes whole (header counts, names, RDATA, nothing after), echoes the
 * query's id with QR set, fits the size the transport allows; the
 * counters balance after every query. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offpath/dns.h"
#include "offpath/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char zone[] =
    "$ORIGIN f.test.\n$TTL 60\n"
    "@ SOA ns hm 1 2 3 4 30\n@ NS ns\n@ MX 1 mx\n@ RRSIG SOA 13 2 60 20300101000000 "
    "20200101000000 1 f.test. AAAA\n@ NSEC a.f.test. SOA NS MX RRSIG NSEC\n"
    "ns A 192.0.2.1\nmx AAAA 2001:db8::1\na CNAME b\nb CNAME c\nc CNAME a\nw CNAME *.wild\n"
    "*.wild TXT \"x\" \"y\"\n*.wild RRSIG TXT 13 3 60 20300101000000 20200101000000 1 f.test. "
    "AAAA\nx.y.ent A 192.0.2.2\nsub NS ns.sub\nsub DS 1 13 2 00ff\nns.sub A 192.0.2.3\n"
    "d DNAME a.f.test.\ne DNAME x.e.f.test.\no DNAME out.example.\n"
    "srv SRV 1 2 3 mx\nbig TXT \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
    "aaaaaaaaaaaaaaaaaaa\" \"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\"\n";

/* Added for the NSEC3 variant: hashed owners that sort around whatever a
 * name hashes to, so both matching and covering (and the wrap) happen. */
static const char nsec3_part[] =
    "@ NSEC3PARAM 1 0 2 abcd\n"
    "0p9mhaveqvm6t7vbl5lop2u3t2rp3tom NSEC3 1 0 2 abcd 80000000000000000000000000000000 A\n"
    "80000000000000000000000000000000 NSEC3 1 0 2 abcd g0000000000000000000000000000000 TXT\n"
    "g0000000000000000000000000000000 NSEC3 1 0 2 abcd 0p9mhaveqvm6t7vbl5lop2u3t2rp3tom NS DS\n"
    "g0000000000000000000000000000000 RRSIG NSEC3 13 3 60 20300101000000 20200101000000 1 "
    "f.test. AAAA\n";

static void require(int cond)
{
    if (!cond)
        abort();
}

/* Loaded once: the harness's own state, not the library's. */
static struct op_dns_zones *zones(bool nsec3)
{
    static struct op_dns_zones *z[2];
    static char text[sizeof(zone) + sizeof(nsec3_part)];
    struct op_dns_load_err err;
    if (z[nsec3] != NULL)
        return z[nsec3];
    snprintf(text, sizeof(text), "%s%s", zone, nsec3 ? nsec3_part : "");
    if (op_dns_zones_parse(text, strlen(text), NULL, &z[nsec3], &err) != OP_OK) {
        fprintf(stderr, "fuzz_dns_lookup: the harness's zone: %s\n", err.msg);
        abort();
    }
    return z[nsec3];
}

static void check_answer(const uint8_t *q, size_t qlen, const uint8_t *a, size_t n)
{
    struct op_dns_hdr h;
    require(op_dns_hdr_decode(a, n, &h) == OP_OK);
    require(a[0] == q[0] && a[1] == q[1] && (h.flags & 0x8000));
    require(h.qdcount <= 1 && qlen >= OP_DNS_HDR_LEN);
    size_t off = OP_DNS_HDR_LEN;
    struct op_dns_rr rr;
    for (unsigned i = 0; i < h.qdcount; i++)
        require(op_dns_question_decode(a, n, &off, &rr) == OP_DNS_W_OK);
    unsigned total = (unsigned)h.ancount + h.nscount + h.arcount;
    for (unsigned i = 0; i < total; i++)
        require(op_dns_rr_decode(a, n, &off, &rr) == OP_DNS_W_OK);
    require(off == n);
}

/* Bit 3: the answer through a rate limit of one a second (src/dns/rrl.c),
 * asked three times from the query's first bytes as the client: the
 * first passes untouched, the second is dropped, the third slipped, and
 * that one still decodes whole, TC set. */
static void rate_limited(const uint8_t *q, size_t qlen, uint8_t *a, size_t n)
{
    static struct op_dns_rrl *r;
    static uint8_t copy[OP_DNS_MSG_MAX];
    static uint64_t second = 1;
    uint64_t c[OP_DNS_C_COUNT_] = {0};
    uint8_t client[16] = {0};
    memcpy(client, q, qlen < 16 ? qlen : 16);
    if (r == NULL)
        require((r = op_dns_rrl_new(1, 2)) != NULL);
    second++; /* a fresh second: every bucket full again */
    enum op_dns_rrl_verdict want[3] = {OP_DNS_RRL_PASS, OP_DNS_RRL_DROP, OP_DNS_RRL_SLIP};
    size_t len = n;
    for (int i = 0; i < 3; i++) {
        len = n;
        memcpy(copy, a, n);
        require(op_dns_rrl_check(r, client, q[0] & 1, copy, &len, second * 1000000000u, c) ==
                want[i]);
        require(i == 2 ? len <= n : len == n && memcmp(copy, a, n) == 0);
    }
    require(c[OP_DNS_C_rrl_dropped] == 1 && c[OP_DNS_C_rrl_slipped] == 1);
    struct op_dns_hdr h;
    require(op_dns_hdr_decode(copy, len, &h) == OP_OK && (h.flags & 0x0200));
    require(h.ancount == 0 && h.nscount == 0 && h.arcount == 0);
    check_answer(q, qlen, copy, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static uint8_t out[OP_DNS_MSG_MAX];
    uint64_t c[OP_DNS_C_COUNT_] = {0};
    struct op_dns_xfr xfr = {0};
    /* bit 2: a client allowed transfers (which then run to their end in
     * messages of 512 bytes, each one checked, at most 10000) */
    struct op_dns_query_info qi = {.tcp = data[0] & 1, .udp_max = OP_DNS_UDP_DEFAULT,
                                   .xfr = (data[0] & 4) ? &xfr : NULL};
    size_t cap = (data[0] & 4) ? OP_DNS_UDP_MIN : sizeof(out);
    size_t n = op_dns_respond(zones(data[0] & 2), &qi, data + 1, size - 1, out, cap, c);
    require(op_dns_counters_balanced(c) && c[OP_DNS_C_received] == 1);
    if (n == 0)
        return 0;
    require(qi.tcp || n <= OP_DNS_UDP_DEFAULT);
    check_answer(data + 1, size - 1, out, n);
    if (data[0] & 8)
        rate_limited(data + 1, size - 1, out, n);
    for (unsigned i = 0; xfr.active; i++) {
        require(qi.tcp && i < 10000);
        n = op_dns_xfr_next(&xfr, out, OP_DNS_UDP_MIN, c);
        require(n > 0 && n <= OP_DNS_UDP_MIN);
        struct op_dns_hdr h;
        require(op_dns_hdr_decode(out, n, &h) == OP_OK && h.qdcount == 0);
        size_t off = OP_DNS_HDR_LEN;
        struct op_dns_rr rr;
        for (unsigned k = 0; k < h.ancount; k++)
            require(op_dns_rr_decode(out, n, &off, &rr) == OP_DNS_W_OK);
        require(off == n && h.id == (uint16_t)(data[1] << 8 | data[2]));
    }
    return 0;
}
