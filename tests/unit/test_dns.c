/* The DNS codec, zone-file reader and responder, driven with plain buffers:
 * malformed names and messages (each rejected with its counter, never a
 * crash), malformed zone files (file:line: reason), and the answers'
 * sections record by record. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "offpath/dns.h"
#include "offpath/wire.h"

#define T_A 1
#define T_NS 2
#define T_CNAME 5
#define T_SOA 6
#define T_MX 15
#define T_TXT 16
#define T_AAAA 28
#define T_OPT 41
#define T_DNAME 39
#define T_DS 43
#define T_RRSIG 46
#define T_NSEC 47
#define T_NSEC3 50
#define T_ANY 255

static const char zone_text[] =
    "$ORIGIN example.test.\n"
    "$TTL 3600\n"
    "@ SOA ns1 hostmaster ( 1 7200 3600 1209600\n"
    "      300 ) ; minimum\n"
    "@ NS ns1\n"
    "@ MX 10 mail\n"
    "ns1 A 192.0.2.53\n"
    "mail A 192.0.2.25\n"
    "www CNAME web\n"
    "web A 192.0.2.80\n"
    "web A 192.0.2.81\n"
    "c1 CNAME c2\n"
    "c2 CNAME www\n"
    "loop CNAME loop\n"
    "*.wild TXT \"wild\"\n"
    "a.b.ent A 192.0.2.7\n"
    "sub NS ns.sub\n"
    "ns.sub A 192.0.2.200\n"
    "dn DNAME area\n"
    "host.area A 192.0.2.90\n"
    "long DNAME "
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa."
    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb."
    "ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc.example.test.\n"
    "big TXT \"" /* 3 x 200 bytes: more than 512 */
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"\n"
    "big TXT \""
    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\"\n"
    "big TXT \""
    "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
    "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc\"\n";

/* ---- a small message builder and reader ---- */
struct msg {
    uint8_t b[4096];
    size_t n;
};

static void put16(struct msg *m, unsigned v)
{
    m->b[m->n++] = (uint8_t)(v >> 8);
    m->b[m->n++] = (uint8_t)v;
}

static void put_name(struct msg *m, const char *dotted)
{
    while (*dotted != 0) {
        const char *dot = strchr(dotted, '.');
        size_t l = dot ? (size_t)(dot - dotted) : strlen(dotted);
        m->b[m->n++] = (uint8_t)l;
        memcpy(m->b + m->n, dotted, l);
        m->n += l;
        dotted += l + (dot ? 1 : 0);
    }
    m->b[m->n++] = 0;
}

static void put_query(struct msg *m, uint16_t flags, const char *name, uint16_t type)
{
    m->n = 0;
    put16(m, 0x1234);
    put16(m, flags);
    put16(m, 1);
    put16(m, 0);
    put16(m, 0);
    put16(m, 0);
    put_name(m, name);
    put16(m, type);
    put16(m, 1);
}

/* Appends an OPT (arcount +1): payload size, version, DO. */
static void put_opt(struct msg *m, unsigned size, unsigned version, int dnssec)
{
    m->b[11]++;
    m->b[m->n++] = 0;
    put16(m, T_OPT);
    put16(m, size);
    put16(m, version & 0xff); /* ext rcode 0, version */
    put16(m, dnssec ? 0x8000 : 0);
    put16(m, 0);
}

struct rr {
    char name[300];
    uint16_t type;
    uint32_t ttl;
    uint8_t rd[512];
    size_t rdlen;
    size_t rdata_off;
};

struct ans {
    struct op_dns_hdr h;
    struct rr rr[3][32];
    unsigned n[3];
    uint8_t raw[OP_DNS_MSG_MAX];
    size_t len;
};

static void name_text(const uint8_t *w, char *out)
{
    size_t o = 0;
    if (*w == 0)
        strcpy(out, ".");
    for (; *w != 0; w += 1 + *w) {
        memcpy(out + o, w + 1, *w);
        o += *w;
        out[o++] = '.';
        out[o] = 0;
    }
}

/* Every section record by record; fails the test on any malformed part. */
static void parse_answer(struct ans *a)
{
    assert_int_equal(op_dns_hdr_decode(a->raw, a->len, &a->h), OP_OK);
    size_t off = OP_DNS_HDR_LEN;
    struct op_dns_rr rr;
    for (unsigned i = 0; i < a->h.qdcount; i++)
        assert_int_equal(op_dns_question_decode(a->raw, a->len, &off, &rr), OP_DNS_W_OK);
    unsigned counts[3] = {a->h.ancount, a->h.nscount, a->h.arcount};
    for (int s = 0; s < 3; s++) {
        assert_true(counts[s] <= 32); /* what struct ans holds */
        a->n[s] = counts[s];
        for (unsigned i = 0; i < counts[s]; i++) {
            assert_int_equal(op_dns_rr_decode(a->raw, a->len, &off, &rr), OP_DNS_W_OK);
            struct rr *x = &a->rr[s][i];
            name_text(rr.name, x->name);
            x->type = rr.type;
            x->ttl = rr.ttl;
            x->rdlen = rr.rdlen;
            x->rdata_off = rr.rdata_off;
            memcpy(x->rd, a->raw + rr.rdata_off, rr.rdlen < 512 ? rr.rdlen : 512);
        }
    }
    assert_int_equal(off, a->len);
}

struct fixture {
    struct op_dns_zones *z;
    uint64_t c[OP_DNS_C_COUNT_];
};

static struct fixture *fx;

static int setup(void **state)
{
    (void)state;
    struct op_dns_load_err err;
    fx = calloc(1, sizeof(*fx));
    assert_non_null(fx);
    assert_int_equal(op_dns_zones_parse(zone_text, strlen(zone_text), NULL, &fx->z, &err), OP_OK);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    op_dns_zones_free(fx->z);
    free(fx);
    return 0;
}

/* Ask; 0-length answers are drops. */
static size_t ask(const struct msg *q, bool tcp, struct ans *a)
{
    struct op_dns_query_info qi = {.tcp = tcp, .udp_max = OP_DNS_UDP_DEFAULT};
    a->len = op_dns_respond(fx->z, &qi, q->b, q->n, a->raw, sizeof(a->raw), fx->c);
    if (a->len > 0)
        parse_answer(a);
    return a->len;
}

static struct ans *query(const char *name, uint16_t type)
{
    static struct ans a;
    struct msg q;
    put_query(&q, 0x0100, name, type);
    assert_true(ask(&q, false, &a) > 0);
    return &a;
}

#define RCODE(a) ((a)->h.flags & 0xf)
#define AA(a) (((a)->h.flags & 0x0400) != 0)
#define TC(a) (((a)->h.flags & 0x0200) != 0)

/* ---- names ---- */
static void test_name_compression(void **state)
{
    (void)state;
    /* "a.b." at 0, then "c" + pointer to 0 at 5 */
    const uint8_t m[] = {1, 'a', 1, 'b', 0, 1, 'c', 0xc0, 0x00};
    uint8_t name[OP_DNS_NAME_MAX];
    size_t len, off = 5;
    assert_int_equal(op_dns_name_decode(m, sizeof(m), &off, name, &len), OP_DNS_W_OK);
    const uint8_t want[] = {1, 'c', 1, 'a', 1, 'b', 0};
    assert_int_equal(len, sizeof(want));
    assert_memory_equal(name, want, sizeof(want));
    assert_int_equal(off, 9);
}

static void test_name_malformed(void **state)
{
    (void)state;
    uint8_t name[OP_DNS_NAME_MAX];
    size_t len, off;
    const uint8_t self[] = {0xc0, 0x00};
    off = 0;
    assert_int_equal(op_dns_name_decode(self, 2, &off, name, &len), OP_DNS_W_PTR_FORWARD);
    const uint8_t fwd[] = {0xc0, 0x02, 1, 'a', 0};
    off = 0;
    assert_int_equal(op_dns_name_decode(fwd, 5, &off, name, &len), OP_DNS_W_PTR_FORWARD);
    /* label at 0, pointer at 2 back to 0: reading from 0 would come back */
    const uint8_t loop[] = {1, 'a', 0xc0, 0x00};
    off = 0;
    assert_int_equal(op_dns_name_decode(loop, 4, &off, name, &len), OP_DNS_W_PTR_LOOP);
    /* two names pointing at each other: 0 -> 4 is forward */
    const uint8_t pair[] = {1, 'a', 0xc0, 0x04, 1, 'b', 0xc0, 0x00};
    off = 4;
    assert_int_equal(op_dns_name_decode(pair, 8, &off, name, &len), OP_DNS_W_PTR_FORWARD);
    const uint8_t big_label[] = {64, 'a'};
    off = 0;
    assert_int_equal(op_dns_name_decode(big_label, 2, &off, name, &len), OP_DNS_W_LABEL_TYPE);
    const uint8_t ext[] = {0x80, 0};
    off = 0;
    assert_int_equal(op_dns_name_decode(ext, 2, &off, name, &len), OP_DNS_W_LABEL_TYPE);
    const uint8_t cut[] = {3, 'a', 'b'};
    off = 0;
    assert_int_equal(op_dns_name_decode(cut, 3, &off, name, &len), OP_DNS_W_TRUNCATED);
    const uint8_t no_root[] = {1, 'a'};
    off = 0;
    assert_int_equal(op_dns_name_decode(no_root, 2, &off, name, &len), OP_DNS_W_TRUNCATED);
    const uint8_t half_ptr[] = {0xc0};
    off = 0;
    assert_int_equal(op_dns_name_decode(half_ptr, 1, &off, name, &len), OP_DNS_W_TRUNCATED);
    /* 5 labels of 63 = 320 octets: too long */
    uint8_t longn[400];
    size_t n = 0;
    for (int i = 0; i < 5; i++) {
        longn[n++] = 63;
        memset(longn + n, 'x', 63);
        n += 63;
    }
    longn[n++] = 0;
    off = 0;
    assert_int_equal(op_dns_name_decode(longn, n, &off, name, &len), OP_DNS_W_NAME_LONG);
    /* 4 labels of 63 = 256 + root: one octet too many */
    n = 0;
    for (int i = 0; i < 4; i++) {
        longn[n++] = 63;
        memset(longn + n, 'x', 63);
        n += 63;
    }
    longn[n++] = 0;
    off = 0;
    assert_int_equal(op_dns_name_decode(longn, n, &off, name, &len), OP_DNS_W_NAME_LONG);
    /* 3 x 63 + 61 + root = 255: the longest name */
    longn[3 * 64] = 61;
    longn[3 * 64 + 62] = 0;
    off = 0;
    assert_int_equal(op_dns_name_decode(longn, 3 * 64 + 63, &off, name, &len), OP_DNS_W_OK);
    assert_int_equal(len, 255);
}

/* ---- malformed queries: a drop or FORMERR, counted by reason ---- */
static void expect_formerr(struct msg *q, enum op_dns_counter reason)
{
    struct ans a;
    uint64_t before = fx->c[reason], fe = fx->c[OP_DNS_C_rcode_formerr];
    assert_true(ask(q, false, &a) > 0);
    assert_int_equal(RCODE(&a), 1);
    assert_int_equal(a.h.id, 0x1234);
    assert_true(a.h.flags & 0x8000);
    assert_int_equal(a.h.ancount + a.h.nscount + a.h.arcount, 0);
    assert_int_equal(fx->c[reason], before + 1);
    assert_int_equal(fx->c[OP_DNS_C_rcode_formerr], fe + 1);
}

static void test_malformed_queries(void **state)
{
    (void)state;
    struct msg q;
    struct ans a;
    put_query(&q, 0, "www.example.test", T_A);
    q.n = 11;
    assert_int_equal(ask(&q, false, &a), 0);
    assert_int_equal(fx->c[OP_DNS_C_drop_short], 1);
    put_query(&q, 0x8000, "www.example.test", T_A);
    assert_int_equal(ask(&q, false, &a), 0);
    assert_int_equal(fx->c[OP_DNS_C_drop_response], 1);

    put_query(&q, 0, "www.example.test", T_A);
    q.b[5] = 0; /* qdcount 0 */
    expect_formerr(&q, OP_DNS_C_formerr_qdcount);
    put_query(&q, 0, "www.example.test", T_A);
    q.b[5] = 2;
    expect_formerr(&q, OP_DNS_C_formerr_qdcount);
    put_query(&q, 0, "www.example.test", T_A);
    q.n -= 3; /* the question's class cut */
    expect_formerr(&q, OP_DNS_C_formerr_truncated);
    put_query(&q, 0, "www.example.test", T_A);
    q.b[q.n++] = 0; /* a byte after the question */
    expect_formerr(&q, OP_DNS_C_formerr_trailing);
    put_query(&q, 0, "www.example.test", T_A);
    q.b[7] = 1; /* an answer record claimed, none there */
    expect_formerr(&q, OP_DNS_C_formerr_truncated);
    put_query(&q, 0, "www.example.test", T_A);
    q.b[12] = 0xc0; /* the question's name points at itself */
    q.b[13] = 12;
    expect_formerr(&q, OP_DNS_C_formerr_ptr_forward);
    put_query(&q, 0, "www.example.test", T_A);
    q.b[12] = 0x41;
    expect_formerr(&q, OP_DNS_C_formerr_label_type);
    put_query(&q, 0, "www.example.test", T_A);
    put_opt(&q, 1232, 0, 0);
    put_opt(&q, 1232, 0, 0);
    expect_formerr(&q, OP_DNS_C_formerr_opt);
    put_query(&q, 0, "www.example.test", T_A);
    put_opt(&q, 1232, 0, 0);
    q.b[q.n - 1] = 4; /* RDLENGTH 4 with nothing after it */
    expect_formerr(&q, OP_DNS_C_formerr_rdata_len);
    put_query(&q, 0, "www.example.test", T_A);
    put_opt(&q, 1232, 0, 0);
    q.b[q.n - 1] = 3; /* an option header cut short */
    q.b[q.n++] = 0;
    q.b[q.n++] = 1;
    q.b[q.n++] = 0;
    expect_formerr(&q, OP_DNS_C_formerr_opt);
    /* an answer record in a query */
    put_query(&q, 0, "www.example.test", T_A);
    q.b[7] = 1;
    put_name(&q, "x");
    put16(&q, T_A);
    put16(&q, 1);
    put16(&q, 0);
    put16(&q, 0);
    put16(&q, 0);
    expect_formerr(&q, OP_DNS_C_formerr_section);
    assert_true(op_dns_counters_balanced(fx->c));
}

static void test_refused_notimp_badvers(void **state)
{
    (void)state;
    struct msg q;
    struct ans a;
    put_query(&q, 0x0100, "www.example.org", T_A);
    assert_true(ask(&q, false, &a) > 0);
    assert_int_equal(RCODE(&a), 5);
    assert_false(AA(&a));
    assert_int_equal(fx->c[OP_DNS_C_refused_zone], 1);
    put_query(&q, 0x0100, "www.example.test", T_A);
    q.b[q.n - 1] = 3; /* class CH */
    assert_true(ask(&q, false, &a) > 0);
    assert_int_equal(RCODE(&a), 5);
    assert_int_equal(fx->c[OP_DNS_C_refused_class], 1);
    put_query(&q, 0x0100 | 2 << 11, "www.example.test", T_A); /* opcode STATUS */
    assert_true(ask(&q, false, &a) > 0);
    assert_int_equal(RCODE(&a), 4);
    assert_int_equal(a.h.flags & 0x7800, 2 << 11);
    put_query(&q, 0x0100, "www.example.test", T_A);
    put_opt(&q, 1232, 1, 0);
    assert_true(ask(&q, false, &a) > 0);
    assert_int_equal(RCODE(&a), 0);
    assert_int_equal(a.n[0], 0);
    assert_int_equal(a.n[2], 1);
    assert_int_equal(a.rr[2][0].type, T_OPT);
    assert_int_equal(a.rr[2][0].ttl >> 24, 1); /* BADVERS = 16: upper 8 bits 1 */
    assert_int_equal(fx->c[OP_DNS_C_rcode_badvers], 1);
}

/* ---- answers ---- */
static void test_exact_and_additional(void **state)
{
    (void)state;
    struct ans *a = query("Web.Example.Test", T_A);
    assert_int_equal(RCODE(a), 0);
    assert_true(AA(a));
    assert_int_equal(a->n[0], 2);
    /* the owner is compressed to the question, so it has the question's case */
    assert_string_equal(a->rr[0][0].name, "Web.Example.Test.");
    const uint8_t w80[] = {192, 0, 2, 80}, w81[] = {192, 0, 2, 81};
    assert_memory_equal(a->rr[0][0].rd, w80, 4);
    assert_memory_equal(a->rr[0][1].rd, w81, 4);
    assert_int_equal(a->n[1] + a->n[2], 0);
    a = query("example.test", T_MX);
    assert_int_equal(a->n[0], 1);
    assert_int_equal(a->n[2], 1); /* mail's A */
    assert_string_equal(a->rr[2][0].name, "mail.example.test.");
    assert_int_equal(a->rr[2][0].type, T_A);
    /* the MX's exchange was compressed: 2 bytes of preference + 7 + pointer */
    assert_int_equal(a->rr[0][0].rdlen, 2 + 5 + 2);
}

static void test_negative(void **state)
{
    (void)state;
    struct ans *a = query("nothere.example.test", T_A);
    assert_int_equal(RCODE(a), 3);
    assert_true(AA(a));
    assert_int_equal(a->n[0], 0);
    assert_int_equal(a->n[1], 1);
    assert_int_equal(a->rr[1][0].type, T_SOA);
    assert_int_equal(a->rr[1][0].ttl, 300); /* min(SOA TTL, MINIMUM) */
    a = query("www.example.test", T_MX); /* CNAME then NODATA at web */
    assert_int_equal(RCODE(a), 0);
    assert_int_equal(a->n[0], 1);
    assert_int_equal(a->rr[0][0].type, T_CNAME);
    assert_int_equal(a->rr[1][0].type, T_SOA);
    a = query("b.ent.example.test", T_A); /* empty non-terminal: NODATA */
    assert_int_equal(RCODE(a), 0);
    assert_int_equal(a->n[0], 0);
    assert_int_equal(a->n[1], 1);
    a = query("x.b.ent.example.test", T_A);
    assert_int_equal(RCODE(a), 3);
}

static void test_wildcard_cname(void **state)
{
    (void)state;
    struct ans *a = query("anything.wild.example.test", T_TXT);
    assert_int_equal(RCODE(a), 0);
    assert_int_equal(a->n[0], 1);
    assert_string_equal(a->rr[0][0].name, "anything.wild.example.test.");
    assert_int_equal(a->rr[0][0].rdlen, 5);
    a = query("x.y.wild.example.test", T_A); /* wildcard NODATA */
    assert_int_equal(RCODE(a), 0);
    assert_int_equal(a->n[0], 0);
    assert_int_equal(a->rr[1][0].type, T_SOA);
    uint64_t followed = fx->c[OP_DNS_C_cname_followed];
    a = query("c1.example.test", T_A);
    assert_int_equal(RCODE(a), 0);
    assert_int_equal(a->n[0], 5); /* c1 -> c2 -> www -> web (2 A) */
    assert_string_equal(a->rr[0][0].name, "c1.example.test.");
    assert_string_equal(a->rr[0][2].name, "www.example.test.");
    assert_int_equal(a->rr[0][3].type, T_A);
    a = query("loop.example.test", T_A);
    assert_int_equal(a->n[0], 1);
    assert_int_equal(fx->c[OP_DNS_C_cname_followed], followed + 3); /* the loop: none */
}

/* RFC 6672: a name below a DNAME gets the DNAME, a CNAME to the name with
 * the DNAME's owner replaced by its target, and what that name has; the
 * owner itself is not redirected; a substitution over 255 octets is
 * YXDOMAIN with the DNAME alone. */
static void test_dname(void **state)
{
    (void)state;
    uint64_t synth = fx->c[OP_DNS_C_dname_synthesized];
    struct ans *a = query("host.dn.example.test", T_A);
    assert_int_equal(RCODE(a), 0);
    assert_true(AA(a));
    assert_int_equal(a->n[0], 3);
    assert_string_equal(a->rr[0][0].name, "dn.example.test.");
    assert_int_equal(a->rr[0][0].type, T_DNAME);
    assert_string_equal(a->rr[0][1].name, "host.dn.example.test.");
    assert_int_equal(a->rr[0][1].type, T_CNAME);
    assert_int_equal(a->rr[0][1].ttl, 3600);
    assert_int_equal(a->rr[0][1].rdlen, 5 + 5 + 2); /* host, area, then a pointer */
    assert_string_equal(a->rr[0][2].name, "host.area.example.test.");
    assert_int_equal(a->rr[0][2].type, T_A);
    assert_int_equal(fx->c[OP_DNS_C_dname_synthesized], synth + 1);
    a = query("host.dn.example.test", T_CNAME); /* the CNAME asked for: not followed */
    assert_int_equal(a->n[0], 2);
    a = query("dn.example.test", T_A); /* the owner: NODATA */
    assert_int_equal(RCODE(a), 0);
    assert_int_equal(a->n[0], 0);
    assert_int_equal(a->rr[1][0].type, T_SOA);
    a = query("dn.example.test", T_DNAME);
    assert_int_equal(a->n[0], 1);
    assert_int_equal(a->rr[0][0].type, T_DNAME);
    uint64_t yx = fx->c[OP_DNS_C_rcode_yxdomain];
    char longname[200];
    memset(longname, 'x', 63);
    strcpy(longname + 63, ".long.example.test");
    a = query(longname, T_A);
    assert_int_equal(RCODE(a), 6);
    assert_int_equal(a->n[0], 1);
    assert_int_equal(a->rr[0][0].type, T_DNAME);
    assert_int_equal(fx->c[OP_DNS_C_rcode_yxdomain], yx + 1);
    /* Fits, leads nowhere, and leaves no room in 512 octets for the SOA:
     * NXDOMAIN without it, not truncated (as Knot). */
    a = query("a.long.example.test", T_A);
    assert_int_equal(RCODE(a), 3);
    assert_false(TC(a));
    assert_int_equal(a->n[0], 2);
    assert_int_equal(a->n[1], 0);
}

static void test_referral(void **state)
{
    (void)state;
    struct ans *a = query("host.sub.example.test", T_A);
    assert_int_equal(RCODE(a), 0);
    assert_false(AA(a));
    assert_int_equal(a->n[0], 0);
    assert_int_equal(a->n[1], 1);
    assert_int_equal(a->rr[1][0].type, T_NS);
    assert_string_equal(a->rr[1][0].name, "sub.example.test.");
    assert_int_equal(a->n[2], 1);
    assert_string_equal(a->rr[2][0].name, "ns.sub.example.test.");
    a = query("sub.example.test", T_DS); /* the parent's: NODATA, not a referral */
    assert_true(AA(a));
    assert_int_equal(a->rr[1][0].type, T_SOA);
}

static void test_truncation_and_edns(void **state)
{
    (void)state;
    struct msg q;
    struct ans a;
    put_query(&q, 0, "big.example.test", T_TXT);
    assert_true(ask(&q, false, &a) > 0);
    assert_true(TC(&a));
    assert_int_equal(a.n[0], 0); /* the RRset did not fit whole */
    assert_true(a.len <= 512);
    put_opt(&q, 4096, 0, 0);
    assert_true(ask(&q, false, &a) > 0);
    assert_false(TC(&a));
    assert_int_equal(a.n[0], 3);
    assert_int_equal(a.rr[2][0].type, T_OPT);
    assert_int_equal(a.rr[2][0].rdlen, 0);
    put_query(&q, 0, "big.example.test", T_TXT);
    assert_true(ask(&q, true, &a) > 0); /* TCP: no limit */
    assert_false(TC(&a));
    assert_int_equal(a.n[0], 3);
    put_query(&q, 0, "example.test", T_ANY);
    assert_true(ask(&q, false, &a) > 0);
    assert_int_equal(a.n[0], 1); /* RFC 8482: one RRset */
    assert_int_equal(a.rr[0][0].type, T_NS);
}

/* ---- DNSSEC: the committed pre-signed zone ---- */
static struct op_dns_zones *load_signed(void)
{
    const char *files[] = {OP_DNS_TEST_DIR "/signed.zone.signed"};
    struct op_dns_zones *z;
    struct op_dns_load_err err;
    assert_int_equal(op_dns_zones_load(files, 1, &z, &err), OP_OK);
    return z;
}

static size_t count_type(const struct ans *a, int s, uint16_t type)
{
    size_t n = 0;
    for (unsigned i = 0; i < a->n[s]; i++)
        n += a->rr[s][i].type == type;
    return n;
}

static void test_dnssec(void **state)
{
    (void)state;
    struct op_dns_zones *keep = fx->z;
    fx->z = load_signed();
    struct msg q;
    struct ans a;
    put_query(&q, 0, "www.signed.test", T_A);
    put_opt(&q, 1232, 0, 1);
    assert_true(ask(&q, false, &a) > 0);
    assert_int_equal(count_type(&a, 0, T_A), 1);
    assert_int_equal(count_type(&a, 0, T_RRSIG), 1);
    put_query(&q, 0, "www.signed.test", T_A); /* no DO: no signatures */
    assert_true(ask(&q, false, &a) > 0);
    assert_int_equal(a.n[0], 1);
    put_query(&q, 0, "nothere.signed.test", T_A);
    put_opt(&q, 1232, 0, 1);
    assert_true(ask(&q, false, &a) > 0);
    assert_int_equal(RCODE(&a), 3);
    assert_int_equal(count_type(&a, 1, T_SOA), 1);
    assert_int_equal(count_type(&a, 1, T_NSEC), 2); /* the name's and the wildcard's */
    assert_int_equal(count_type(&a, 1, T_RRSIG), 3);
    put_query(&q, 0, "x.wild.signed.test", T_A);
    put_opt(&q, 1232, 0, 1);
    assert_true(ask(&q, false, &a) > 0);
    assert_int_equal(count_type(&a, 0, T_RRSIG), 1);
    assert_int_equal(a.rr[0][1].rd[3], 3); /* RRSIG labels: *.wild.signed.test has 3 */
    assert_int_equal(count_type(&a, 1, T_NSEC), 1); /* no closer match */
    put_query(&q, 0, "x.secure.signed.test", T_A);
    put_opt(&q, 1232, 0, 1);
    assert_true(ask(&q, false, &a) > 0);
    assert_int_equal(count_type(&a, 1, T_NS), 1);
    assert_int_equal(count_type(&a, 1, T_DS), 1);
    assert_int_equal(count_type(&a, 1, T_RRSIG), 1);
    assert_int_equal(count_type(&a, 2, T_A), 1); /* glue, unsigned */
    assert_int_equal(count_type(&a, 2, T_RRSIG), 0);
    op_dns_zones_free(fx->z);
    fx->z = keep;
}

/* NSEC3: the hashes of RFC 5155 appendix A (salt aabbccdd, 12 iterations)
 * find the records whose owners are those hashes. */
static const char nsec3_zone[] =
    "$ORIGIN example.\n$TTL 3600\n@ SOA ns1 hm 1 3600 300 3600000 3600\n@ NS ns1\n"
    "@ NSEC3PARAM 1 0 12 aabbccdd\na A 192.0.2.1\nns1 A 192.0.2.53\n"
    "0p9mhaveqvm6t7vbl5lop2u3t2rp3tom NSEC3 1 0 12 aabbccdd 2t7b4g4vsa5smi47k61mv5bv1a22bojr "
    "NS SOA RRSIG NSEC3PARAM\n"
    "2t7b4g4vsa5smi47k61mv5bv1a22bojr NSEC3 1 0 12 aabbccdd 35mthgpgcu1qg68fab165klnsnk3dpvl A\n"
    "35mthgpgcu1qg68fab165klnsnk3dpvl NSEC3 1 0 12 aabbccdd 0p9mhaveqvm6t7vbl5lop2u3t2rp3tom A\n";

static bool has_owner(const struct ans *a, int s, uint16_t type, const char *owner)
{
    for (unsigned i = 0; i < a->n[s]; i++)
        if (a->rr[s][i].type == type && strcmp(a->rr[s][i].name, owner) == 0)
            return true;
    return false;
}

static void test_nsec3(void **state)
{
    (void)state;
    struct op_dns_zones *keep = fx->z;
    struct op_dns_load_err err;
    assert_int_equal(op_dns_zones_parse(nsec3_zone, strlen(nsec3_zone), NULL, &fx->z, &err), OP_OK);
    struct msg q;
    struct ans a;
    put_query(&q, 0, "a.example", T_TXT); /* NODATA: the name's own NSEC3 */
    put_opt(&q, 1232, 0, 1);
    assert_true(ask(&q, false, &a) > 0);
    assert_int_equal(RCODE(&a), 0);
    assert_int_equal(count_type(&a, 1, T_NSEC3), 1);
    assert_true(has_owner(&a, 1, T_NSEC3, "35mthgpgcu1qg68fab165klnsnk3dpvl.example."));
    put_query(&q, 0, "b.example", T_A); /* NXDOMAIN: the closest encloser's, and covers */
    put_opt(&q, 1232, 0, 1);
    assert_true(ask(&q, false, &a) > 0);
    assert_int_equal(RCODE(&a), 3);
    assert_true(has_owner(&a, 1, T_NSEC3, "0p9mhaveqvm6t7vbl5lop2u3t2rp3tom.example."));
    assert_true(count_type(&a, 1, T_NSEC3) >= 2);
    put_query(&q, 0, "b.example", T_A); /* no DO: no proof */
    assert_true(ask(&q, false, &a) > 0);
    assert_int_equal(count_type(&a, 1, T_NSEC3), 0);
    op_dns_zones_free(fx->z);
    /* An origin too long for a hashed owner (33 octets more): NSEC3 is off,
     * the answer comes without a proof (and nothing overruns). */
    char origin[240], text[600];
    memset(origin, 'a', sizeof(origin));
    for (int i = 0; i < 3; i++) /* four labels of 55: 225 octets in wire form */
        origin[i * 56 + 55] = '.';
    origin[223] = 0;
    snprintf(text, sizeof(text), "$ORIGIN %s.\n@ 60 SOA ns hm 1 2 3 4 5\n"
             "@ 60 NSEC3PARAM 1 0 0 -\n", origin);
    assert_int_equal(op_dns_zones_parse(text, strlen(text), NULL, &fx->z, &err), OP_OK);
    char qname[300];
    snprintf(qname, sizeof(qname), "b.%s", origin);
    put_query(&q, 0, qname, T_A);
    put_opt(&q, 1232, 0, 1);
    assert_true(ask(&q, false, &a) > 0);
    assert_int_equal(RCODE(&a), 3);
    assert_int_equal(count_type(&a, 1, T_NSEC3), 0);
    op_dns_zones_free(fx->z);
    fx->z = keep;
}

/* ---- zone files ---- */
static void expect_zone_error(const char *text, int reason, const char *where)
{
    struct op_dns_zones *z = NULL;
    struct op_dns_load_err err;
    assert_int_not_equal(op_dns_zones_parse(text, strlen(text), "example.test.", &z, &err), OP_OK);
    assert_null(z);
    if (err.reason != reason || strstr(err.msg, where) == NULL)
        fail_msg("want %s at '%s', got: %s", op_dns_zone_err_name(reason), where, err.msg);
}

/* NSEC3 with opt-out (tests/dns/signed3o.zone.signed, signed by Knot):
 * unsigned delegations and an empty non-terminal above only such have no
 * NSEC3, so their denial is the closest provable encloser proof: the
 * apex's NSEC3 and the one covering the next closer name (RFC 5155 7.2.7). */
static void test_nsec3_opt_out(void **state)
{
    (void)state;
    const char *files[] = {OP_DNS_TEST_DIR "/signed3o.zone.signed"};
    struct op_dns_zones *keep = fx->z;
    struct op_dns_load_err err;
    assert_int_equal(op_dns_zones_load(files, 1, &fx->z, &err), OP_OK);
    static const struct {
        const char *name;
        int rcode, aa, nsec3;
    } cases[] = {
        {"insec2.signed3o.test", 0, 0, 2},         /* referral: the proof, no DS */
        {"x.insec2.signed3o.test", 0, 0, 2},       /* below it: the same */
        {"optent.signed3o.test", 0, 1, 2},         /* NODATA at the bare non-terminal */
        {"nothere.optent.signed3o.test", 3, 1, 3}, /* NXDOMAIN: and the wildcard's */
        {"www.signed3o.test", 0, 1, 0},            /* signed data: no denial */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct msg q;
        struct ans a;
        put_query(&q, 0, cases[i].name, T_A);
        put_opt(&q, 1232, 0, 1);
        assert_true(ask(&q, false, &a) > 0);
        assert_int_equal(RCODE(&a), cases[i].rcode);
        assert_int_equal(AA(&a), cases[i].aa);
        assert_int_equal(count_type(&a, 1, T_NSEC3), cases[i].nsec3);
    }
    op_dns_zones_free(fx->z);
    fx->z = keep;
}

/* AXFR (and IXFR, answered whole) over TCP from an allowed client: the
 * apex's SOA, every record of the zone once, the SOA again, in as many
 * messages as their size needs, each with the query's id, QR and AA; over
 * UDP, without the permission, or for a name that is no apex: REFUSED. */
static void test_zone_transfer(void **state)
{
    (void)state;
    enum { CAP = 512 };
    static const uint16_t types[] = {252, 251}; /* AXFR, IXFR */
    struct op_dns_xfr x;
    struct op_dns_query_info qi = {.tcp = true, .udp_max = OP_DNS_UDP_DEFAULT, .xfr = &x};
    struct msg q;
    struct ans a;
    for (size_t t = 0; t < 2; t++) {
        uint64_t started = fx->c[OP_DNS_C_xfr_started], later = fx->c[OP_DNS_C_xfr_messages];
        put_query(&q, 0, "example.test", types[t]);
        a.len = op_dns_respond(fx->z, &qi, q.b, q.n, a.raw, CAP, fx->c);
        parse_answer(&a);
        assert_int_equal(RCODE(&a), 0);
        assert_true(AA(&a));
        assert_int_equal(a.h.qdcount, 1);
        assert_int_equal(a.rr[0][0].type, T_SOA);
        size_t records = a.n[0], messages = 1, soas = count_type(&a, 0, T_SOA);
        uint16_t last = a.rr[0][a.n[0] - 1].type;
        while (x.active) {
            a.len = op_dns_xfr_next(&x, a.raw, CAP, fx->c);
            assert_true(a.len > 0 && a.len <= CAP);
            parse_answer(&a);
            assert_int_equal(a.h.id, 0x1234);
            assert_int_equal(a.h.flags & 0x8400, 0x8400); /* QR, AA */
            assert_int_equal(RCODE(&a), 0);
            assert_int_equal(a.h.qdcount, 0);
            assert_true(a.n[0] > 0);
            records += a.n[0];
            soas += count_type(&a, 0, T_SOA);
            last = a.rr[0][a.n[0] - 1].type;
            messages++;
        }
        assert_int_equal(op_dns_xfr_next(&x, a.raw, CAP, fx->c), 0);
        assert_int_equal(records, op_dns_zones_records(fx->z) + 1);
        assert_int_equal(soas, 2);
        assert_int_equal(last, T_SOA);
        assert_true(messages > 3);
        assert_int_equal(fx->c[OP_DNS_C_xfr_started], started + 1);
        assert_int_equal(fx->c[OP_DNS_C_xfr_messages], later + messages - 1);
    }
    uint64_t refused = fx->c[OP_DNS_C_refused_xfr];
    put_query(&q, 0, "www.example.test", 252); /* not an apex */
    a.len = op_dns_respond(fx->z, &qi, q.b, q.n, a.raw, CAP, fx->c);
    parse_answer(&a);
    assert_int_equal(RCODE(&a), 5);
    assert_false(x.active);
    put_query(&q, 0, "example.test", 252);
    qi.xfr = NULL; /* not allowed */
    a.len = op_dns_respond(fx->z, &qi, q.b, q.n, a.raw, CAP, fx->c);
    parse_answer(&a);
    assert_int_equal(RCODE(&a), 5);
    struct ans *u = query("example.test", 252); /* UDP */
    assert_int_equal(RCODE(u), 5);
    assert_int_equal(fx->c[OP_DNS_C_refused_xfr], refused + 3);
}

/* NOTIFY (RFC 1996): opcode 4 with AA, the zone's SOA as question and
 * answer; only a NOERROR response of the same id and opcode acknowledges
 * it; a zone counts as changed when its serial moved or it is new. */
static void test_notify_messages(void **state)
{
    (void)state;
    struct ans a;
    a.len = op_dns_notify_build(fx->z, 0, 0x4242, a.raw, sizeof(a.raw));
    parse_answer(&a);
    assert_int_equal(a.h.id, 0x4242);
    assert_int_equal(a.h.flags, 4 << 11 | 0x0400);
    assert_int_equal(a.h.qdcount, 1);
    assert_int_equal(a.n[0], 1);
    assert_int_equal(a.rr[0][0].type, T_SOA);
    assert_string_equal(a.rr[0][0].name, "example.test.");
    assert_int_equal(op_dns_notify_build(fx->z, 0, 1, a.raw, 20), 0); /* no room */
    uint8_t r[OP_DNS_HDR_LEN];
    struct op_dns_hdr h = {.id = 0x4242, .flags = 0x8000 | 4 << 11 | 0x0400};
    op_dns_hdr_encode(&h, r);
    assert_true(op_dns_notify_acked(r, sizeof(r), 0x4242));
    assert_false(op_dns_notify_acked(r, sizeof(r), 0x4243));
    assert_false(op_dns_notify_acked(r, sizeof(r) - 1, 0x4242));
    static const uint16_t wrong[] = {4 << 11 | 0x0400, 0x8000 | 0x0400, 0x8000 | 4 << 11 | 5};
    for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
        h.flags = wrong[i]; /* not a response; a QUERY's; REFUSED */
        op_dns_hdr_encode(&h, r);
        assert_false(op_dns_notify_acked(r, sizeof(r), 0x4242));
    }
    assert_true(op_dns_zone_changed(NULL, fx->z, 0));
    assert_false(op_dns_zone_changed(fx->z, fx->z, 0));
    char text[sizeof(zone_text)];
    memcpy(text, zone_text, sizeof(zone_text));
    char *serial = strstr(text, "( 1 7200");
    assert_non_null(serial);
    serial[2] = '2';
    struct op_dns_zones *next;
    struct op_dns_load_err err;
    assert_int_equal(op_dns_zones_parse(text, strlen(text), NULL, &next, &err), OP_OK);
    assert_true(op_dns_zone_changed(fx->z, next, 0));
    op_dns_zones_free(next);
}

/* NSID (RFC 5001): a client whose OPT carries option 3 gets the server's
 * identity in ours, room for it kept even when the answer is truncated;
 * no identity, no EDNS or no option 3: a bare OPT or none. */
static void test_nsid(void **state)
{
    (void)state;
    static const uint8_t id[] = "ns1.test";
    struct op_dns_query_info qi = {.udp_max = OP_DNS_UDP_DEFAULT, .nsid = id, .nsid_len = 8};
    static const char *const names[] = {"www.example.test", "big.example.test"};
    for (size_t i = 0; i < 2; i++) {
        static struct msg q;
        static struct ans a;
        put_query(&q, 0, names[i], T_TXT);
        put_opt(&q, 512, 0, 0);
        q.b[q.n - 1] = 4; /* RDLEN 4: option 3, length 0 */
        put16(&q, 3);
        put16(&q, 0);
        a.len = op_dns_respond(fx->z, &qi, q.b, q.n, a.raw, sizeof(a.raw), fx->c);
        parse_answer(&a);
        assert_true(a.len <= 512);
        assert_int_equal(TC(&a), i == 1); /* big: truncated, and still its NSID */
        assert_int_equal(RCODE(&a), 0);
        assert_true(a.n[2] > 0);
        const struct rr *opt = &a.rr[2][a.n[2] - 1];
        assert_int_equal(opt->type, T_OPT);
        assert_int_equal(opt->rdlen, 4 + 8);
        assert_memory_equal(opt->rd, "\x00\x03\x00\x08ns1.test", 12);
        qi.nsid_len = 0; /* none configured */
        a.len = op_dns_respond(fx->z, &qi, q.b, q.n, a.raw, sizeof(a.raw), fx->c);
        parse_answer(&a);
        assert_int_equal(a.rr[2][a.n[2] - 1].rdlen, 0);
        qi.nsid_len = 8;
    }
}

/* --allow-transfer's networks: IPv4 ones match IPv4-mapped clients too. */
static void test_transfer_acl(void **state)
{
    (void)state;
    struct op_dns_acl acl[3];
    assert_int_equal(op_dns_acl_parse("192.0.2.0/25", &acl[0]), OP_OK);
    assert_int_equal(op_dns_acl_parse("2001:db8::/33", &acl[1]), OP_OK);
    assert_int_equal(op_dns_acl_parse("127.0.0.1", &acl[2]), OP_OK);
    assert_int_equal(acl[2].prefix, 32);
    static const char *const bad[] = {"", "/8", "192.0.2.0/33", "2001:db8::/129", "1.2.3",
                                      "192.0.2.0/", "192.0.2.0/x", "host.example", "::1/-1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_not_equal(op_dns_acl_parse(bad[i], &acl[0]), OP_OK);
    assert_int_equal(op_dns_acl_parse("192.0.2.0/25", &acl[0]), OP_OK);
    struct sockaddr_in v4 = {.sin_family = AF_INET};
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6};
    static const struct {
        const char *addr;
        bool allowed;
    } cases[] = {{"192.0.2.1", true},     {"192.0.2.127", true},     {"192.0.2.128", false},
                 {"127.0.0.1", true},     {"127.0.0.2", false},      {"2001:db8::1", true},
                 {"2001:db8:7fff::1", true}, {"2001:db8:8000::1", false},
                 {"::ffff:192.0.2.5", true}, {"::ffff:10.0.0.1", false}, {"::1", false}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const void *sa = &v4;
        if (inet_pton(AF_INET, cases[i].addr, &v4.sin_addr) != 1) {
            assert_int_equal(inet_pton(AF_INET6, cases[i].addr, &v6.sin6_addr), 1);
            sa = &v6;
        }
        assert_int_equal(op_dns_acl_allows(acl, 3, sa), cases[i].allowed);
    }
    assert_false(op_dns_acl_allows(acl, 0, &v4));
}

static void test_zone_errors(void **state)
{
    (void)state;
    const char *soa = "@ 60 SOA ns hm 1 2 3 4 5\n";
    char text[1024];
    snprintf(text, sizeof(text), "%s"
             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 60 A 1.2.3.4\n", soa);
    expect_zone_error(text, OP_DNS_Z_bad_name, "<text>:2: bad_name: label longer than 63");
    snprintf(text, sizeof(text), "%s\nx 60 A 1.2.3\n", soa);
    expect_zone_error(text, OP_DNS_Z_bad_rdata, "<text>:3: bad_rdata: A: field 1");
    snprintf(text, sizeof(text), "%sx 60 BOGUS 1\n", soa);
    expect_zone_error(text, OP_DNS_Z_bad_type, "<text>:2: bad_type");
    snprintf(text, sizeof(text), "%sx 60 TXT ( \"a\"\n", soa);
    expect_zone_error(text, OP_DNS_Z_syntax, "<text>:2: syntax");
    snprintf(text, sizeof(text), "%sx 60 TXT \"unterminated\n", soa);
    expect_zone_error(text, OP_DNS_Z_syntax, "<text>:2: syntax");
    snprintf(text, sizeof(text), "%sx 60 A 1.2.3.4\nx 60 CNAME y\n", soa);
    expect_zone_error(text, OP_DNS_Z_cname_conflict, "cname_conflict");
    expect_zone_error("x 60 A 1.2.3.4\n", OP_DNS_Z_no_soa, "no_soa");
    snprintf(text, sizeof(text), "%swww.other.test. 60 A 1.2.3.4\n", soa);
    expect_zone_error(text, OP_DNS_Z_out_of_zone, "<text>:2: out_of_zone");
    snprintf(text, sizeof(text), "%sx 99999999999 A 1.2.3.4\n", soa);
    expect_zone_error(text, OP_DNS_Z_bad_ttl, "<text>:2: bad_ttl");
    snprintf(text, sizeof(text), "%s$INCLUDE other.zone\n", soa);
    expect_zone_error(text, OP_DNS_Z_bad_directive, "<text>:2: bad_directive");
    snprintf(text, sizeof(text), "%s$FOO bar\n", soa);
    expect_zone_error(text, OP_DNS_Z_bad_directive, "<text>:2: bad_directive: unknown directive '$FOO'");
    snprintf(text, sizeof(text), "%sx 60 MX 10\n", soa);
    expect_zone_error(text, OP_DNS_Z_bad_rdata, "<text>:2: bad_rdata: MX: field 2");
    snprintf(text, sizeof(text), "%sx 60 A 1.2.3.4 5\n", soa);
    expect_zone_error(text, OP_DNS_Z_bad_rdata, "<text>:2: bad_rdata: A: 1 fields too many");
    snprintf(text, sizeof(text), "%sx..y 60 A 1.2.3.4\n", soa);
    expect_zone_error(text, OP_DNS_Z_bad_name, "<text>:2: bad_name: empty label");
    snprintf(text, sizeof(text), "%sx 60 NSEC3 1 0 1 abc 0p9mhave A\n", soa); /* odd salt */
    expect_zone_error(text, OP_DNS_Z_bad_rdata, "<text>:2: bad_rdata: NSEC3: field 4");
    snprintf(text, sizeof(text), "%sx 60 NSEC3 1 0 1 - 0p9mhavw A\n", soa); /* w: not base32hex */
    expect_zone_error(text, OP_DNS_Z_bad_rdata, "<text>:2: bad_rdata: NSEC3: field 5");
    snprintf(text, sizeof(text), "%sx 60 TYPE9 \\# 3 0a0b\n", soa);
    expect_zone_error(text, OP_DNS_Z_bad_rdata, "<text>:2: bad_rdata: bad generic");
    struct op_dns_zones *z;
    struct op_dns_load_err err;
    assert_int_not_equal(op_dns_zones_parse("x 60 A 1.2.3.4\n", 15, NULL, &z, &err), OP_OK);
    assert_int_equal(err.reason, OP_DNS_Z_no_origin);
    const char *files[] = {OP_DNS_TEST_DIR "/does-not-exist.zone"};
    assert_int_not_equal(op_dns_zones_load(files, 1, &z, &err), OP_OK);
    assert_int_equal(err.reason, OP_DNS_Z_open);
    assert_non_null(strstr(err.msg, "does-not-exist.zone: open: No such file"));
}

static void test_zone_files(void **state)
{
    (void)state;
    const char *files[] = {OP_DNS_TEST_DIR "/example.zone", OP_DNS_TEST_DIR "/second.zone"};
    struct op_dns_zones *z;
    struct op_dns_load_err err;
    assert_int_equal(op_dns_zones_load(files, 2, &z, &err), OP_OK);
    assert_int_equal(op_dns_zones_count(z), 2);
    assert_int_equal(op_dns_zones_records(z), 78); /* 72 + 2 included; 4 in second */
    const char *twice[] = {files[0], files[0]};
    struct op_dns_zones *z2;
    assert_int_not_equal(op_dns_zones_load(twice, 2, &z2, &err), OP_OK);
    assert_int_equal(err.reason, OP_DNS_Z_duplicate_zone);
    struct op_dns_zones *keep = fx->z;
    fx->z = z;
    struct ans *a = query("inc2.example.test", T_TXT); /* from $INCLUDE */
    assert_int_equal(a->n[0], 1);
    a = query("escaped.example.test", T_TXT);
    const char want[] = "quote \" backslash \\ byte A semi;colon";
    assert_int_equal(a->rr[0][0].rd[0], strlen(want));
    assert_memory_equal(a->rr[0][0].rd + 1, want, strlen(want));
    a = query("txtmulti.example.test", T_TXT); /* two strings over two lines */
    assert_int_equal(a->rr[0][0].rdlen, 9 + 9);
    a = query("web.example.test", T_A); /* TTL and class in either order */
    assert_int_equal(a->rr[0][0].ttl, 300);
    a = query("host.second.test", T_A);
    assert_int_equal(a->n[0], 1);
    fx->z = keep;
    op_dns_zones_free(z);
}

/* ---- ARP and ICMP echo for the DPDK models (src/wire/frame_ctl.c) ---- */
static const uint8_t our_mac[6] = {2, 0, 0, 0, 0, 1}, their_mac[6] = {2, 0, 0, 0, 0, 2};
#define OUR_IP 0xc6120001u   /* 198.18.0.1 */
#define THEIR_IP 0xc6120002u /* 198.18.0.2 */

static uint16_t sum16(const uint8_t *p, size_t n)
{
    uint32_t s = 0;
    for (size_t i = 0; i + 1 < n; i += 2)
        s += (uint32_t)p[i] << 8 | p[i + 1];
    if (n & 1)
        s += (uint32_t)p[n - 1] << 8;
    while (s >> 16)
        s = (s & 0xffff) + (s >> 16);
    return (uint16_t)~s;
}

static size_t arp_request(uint8_t *f, uint32_t target)
{
    static const uint8_t head[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 2,
                                   0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1};
    memcpy(f, head, sizeof(head));
    memcpy(f + 22, their_mac, 6);
    const uint8_t spa[4] = {198, 18, 0, 2}, tpa[4] = {(uint8_t)(target >> 24),
                                                      (uint8_t)(target >> 16),
                                                      (uint8_t)(target >> 8), (uint8_t)target};
    memcpy(f + 28, spa, 4);
    memset(f + 32, 0, 6);
    memcpy(f + 38, tpa, 4);
    memset(f + 42, 0, 18); /* Ethernet padding */
    return 60;
}

static void test_arp_reply(void **state)
{
    (void)state;
    uint8_t f[64];
    size_t n = arp_request(f, OUR_IP);
    assert_int_equal(op_arp_reply_in_place(f, n, OUR_IP, our_mac), 42);
    assert_memory_equal(f, their_mac, 6);
    assert_memory_equal(f + 6, our_mac, 6);
    assert_int_equal(f[21], 2); /* reply */
    assert_memory_equal(f + 22, our_mac, 6);
    const uint8_t ours[4] = {198, 18, 0, 1}, theirs[4] = {198, 18, 0, 2};
    assert_memory_equal(f + 28, ours, 4);
    assert_memory_equal(f + 32, their_mac, 6);
    assert_memory_equal(f + 38, theirs, 4);
    n = arp_request(f, THEIR_IP + 1); /* someone else's address */
    assert_int_equal(op_arp_reply_in_place(f, n, OUR_IP, our_mac), 0);
    n = arp_request(f, OUR_IP);
    f[21] = 2; /* a reply is not answered */
    assert_int_equal(op_arp_reply_in_place(f, n, OUR_IP, our_mac), 0);
    n = arp_request(f, OUR_IP);
    assert_int_equal(op_arp_reply_in_place(f, 41, OUR_IP, our_mac), 0); /* cut */
}

static size_t echo_request(uint8_t *f, uint32_t dst)
{
    memcpy(f, our_mac, 6);
    memcpy(f + 6, their_mac, 6);
    f[12] = 0x08;
    f[13] = 0;
    uint8_t *ip = f + 14;
    const uint8_t iph[20] = {0x45, 0, 0, 20 + 8 + 4, 0, 1, 0x40, 0, 64, 1, 0, 0, 198, 18, 0, 2,
                             (uint8_t)(dst >> 24), (uint8_t)(dst >> 16), (uint8_t)(dst >> 8),
                             (uint8_t)dst};
    memcpy(ip, iph, 20);
    uint16_t c = sum16(ip, 20);
    ip[10] = (uint8_t)(c >> 8);
    ip[11] = (uint8_t)c;
    uint8_t *icmp = ip + 20;
    const uint8_t body[12] = {8, 0, 0, 0, 0x15, 0x15, 0, 7, 'p', 'i', 'n', 'g'};
    memcpy(icmp, body, 12);
    c = sum16(icmp, 12);
    icmp[2] = (uint8_t)(c >> 8);
    icmp[3] = (uint8_t)c;
    return 14 + 32;
}

static void test_icmp_echo_reply(void **state)
{
    (void)state;
    uint8_t f[64] = {0};
    size_t n = echo_request(f, OUR_IP);
    assert_int_equal(op_icmp_echo_reply_in_place(f, n + 14, OUR_IP, our_mac), n); /* padding cut */
    assert_memory_equal(f, their_mac, 6);
    const uint8_t src[4] = {198, 18, 0, 1}, dst[4] = {198, 18, 0, 2};
    assert_memory_equal(f + 26, src, 4);
    assert_memory_equal(f + 30, dst, 4);
    assert_int_equal(f[34], 0); /* echo reply */
    assert_int_equal(sum16(f + 14, 20), 0);  /* both checksums valid */
    assert_int_equal(sum16(f + 34, 12), 0);
    assert_memory_equal(f + 42, "ping", 4);
    n = echo_request(f, THEIR_IP);
    assert_int_equal(op_icmp_echo_reply_in_place(f, n, OUR_IP, our_mac), 0);
    n = echo_request(f, OUR_IP);
    f[45] ^= 1; /* a bad ICMP checksum */
    assert_int_equal(op_icmp_echo_reply_in_place(f, n, OUR_IP, our_mac), 0);
    n = echo_request(f, OUR_IP);
    assert_int_equal(op_icmp_echo_reply_in_place(f, n - 1, OUR_IP, our_mac), 0); /* cut */
}

/* ---- IPv6 framing (src/wire/frame6.c) ---- */
static const uint8_t our_ip6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 1};
static const uint8_t their_ip6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 2};

/* The ICMPv6/UDP checksum the way RFC 8200 section 8.1 spells it, apart
 * from frame6.c: the pseudo-header laid out in a buffer, then summed. */
static uint16_t sum_pseudo6(const uint8_t *ip, uint8_t next, const uint8_t *p, size_t n)
{
    uint8_t buf[40 + 1500] = {0};
    memcpy(buf, ip + 8, 32);
    buf[34] = (uint8_t)(n >> 8);
    buf[35] = (uint8_t)n;
    buf[39] = next;
    memcpy(buf + 40, p, n);
    return sum16(buf, 40 + n);
}

/* An IPv6 frame of next header nh from src to dst carrying body (its
 * checksum at csum_at filled in when csum_at < n). */
static size_t ipv6_frame(uint8_t *f, const uint8_t src[16], const uint8_t dst[16], uint8_t nh,
                         uint8_t hops, const uint8_t *body, size_t n, size_t csum_at)
{
    memcpy(f, our_mac, 6);
    memcpy(f + 6, their_mac, 6);
    f[12] = 0x86;
    f[13] = 0xdd;
    uint8_t *ip = f + 14;
    memset(ip, 0, 8);
    ip[0] = 0x60;
    ip[4] = (uint8_t)(n >> 8);
    ip[5] = (uint8_t)n;
    ip[6] = nh;
    ip[7] = hops;
    memcpy(ip + 8, src, 16);
    memcpy(ip + 24, dst, 16);
    memcpy(ip + 40, body, n);
    if (csum_at < n) {
        uint16_t c = sum_pseudo6(ip, nh, ip + 40, n);
        ip[40 + csum_at] = (uint8_t)(c >> 8);
        ip[40 + csum_at + 1] = (uint8_t)c;
    }
    return 14 + 40 + n;
}

static void test_udp6_frames(void **state)
{
    (void)state;
    uint8_t f[256] = {0}, mac[6];
    const char *payload = "a DNS query";
    size_t plen = strlen(payload);
    struct op_flow out = {.src = op_addr_ipv6(our_ip6), .dst = op_addr_ipv6(their_ip6),
                          .src_port = 53, .dst_port = 40000};
    struct op_frame_l2 l2 = {.tos = 0};
    memcpy(l2.src_mac, our_mac, 6);
    memcpy(l2.dst_mac, their_mac, 6);
    memcpy(f + OP_UDP6_FRAME_HDR_LEN, payload, plen);
    size_t n = op_udp_frame_headers(f, &out, &l2, plen);
    assert_int_equal(n, 62 + plen);
    uint8_t *ip = f + 14;
    assert_int_equal(sum_pseudo6(ip, 17, ip + 40, 8 + plen), 0); /* the checksum is right */
    struct op_flow in;
    size_t off, len;
    assert_int_equal(op_udp_frame_parse(f, n + 6, &in, mac, &off, &len), OP_FRAME_OK);
    assert_int_equal(in.src.family, OP_AF_IPV6);
    assert_int_equal(in.dst.family, OP_AF_IPV6);
    assert_memory_equal(in.src.v6, our_ip6, 16);
    assert_memory_equal(in.dst.v6, their_ip6, 16);
    assert_int_equal(in.src_port, 53);
    assert_int_equal(in.dst_port, 40000);
    assert_memory_equal(mac, our_mac, 6);
    assert_int_equal(off, 62);
    assert_int_equal(len, plen);
    struct {
        size_t at;
        uint8_t value;
        unsigned verdict;
    } bad[] = {
        {60, 0, OP_FRAME_BAD_UDP},                    /* zero checksum: not in IPv6 */
        {61, 0, OP_FRAME_BAD_UDP},
        {20, 44, OP_FRAME_FRAGMENT},                  /* a fragment header */
        {20, 0, OP_FRAME_NOT_UDP},                    /* hop-by-hop options */
        {14, 0x40, OP_FRAME_BAD_IP},                /* version 4 inside */
        {18, 0x7f, OP_FRAME_BAD_IP},                /* payload past the frame */
        {12, 0x08, OP_FRAME_NOT_IP},                  /* another EtherType */
        {59, 0, OP_FRAME_BAD_UDP},                    /* UDP length wrong */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t g[256];
        memcpy(g, f, n);
        g[bad[i].at] = bad[i].value;
        if (bad[i].at == 60 || bad[i].at == 61)
            g[60] = g[61] = 0;
        assert_int_equal(op_udp_frame_parse(g, n, &in, mac, &off, &len), bad[i].verdict);
    }
    assert_int_equal(op_udp_frame_parse(f, 14 + 39, &in, mac, &off, &len), OP_FRAME_SHORT);
    assert_int_equal(op_udp_frame_parse(f, n - 1, &in, mac, &off, &len), OP_FRAME_BAD_IP);
}

static size_t solicit(uint8_t *f, const uint8_t *src, const uint8_t target[16], uint8_t hops,
                      bool lladdr_option)
{
    const uint8_t group[16] = {0xff, 2, [11] = 1, 0xff, target[13], target[14], target[15]};
    uint8_t body[32] = {135, 0};
    memcpy(body + 8, target, 16);
    body[24] = 1; /* the source link-layer address */
    body[25] = 1;
    memcpy(body + 26, their_mac, 6);
    return ipv6_frame(f, src, group, 58, hops, body, lladdr_option ? 32 : 24, 2);
}

static void test_ndp_advert(void **state)
{
    (void)state;
    uint8_t f[128] = {0};
    size_t n = solicit(f, their_ip6, our_ip6, 255, false);
    assert_int_equal(op_ndp_advert_in_place(f, n, sizeof f, our_ip6, our_mac), 86);
    assert_memory_equal(f, their_mac, 6);
    assert_memory_equal(f + 6, our_mac, 6);
    uint8_t *ip = f + 14, *na = ip + 40;
    assert_int_equal(ip[4] << 8 | ip[5], 32);
    assert_int_equal(ip[6], 58);
    assert_int_equal(ip[7], 255);
    assert_memory_equal(ip + 8, our_ip6, 16);
    assert_memory_equal(ip + 24, their_ip6, 16);
    assert_int_equal(na[0], 136);
    assert_int_equal(na[4], 0x60); /* solicited, override */
    assert_memory_equal(na + 8, our_ip6, 16);
    assert_int_equal(na[24], 2); /* the target link-layer address */
    assert_int_equal(na[25], 1);
    assert_memory_equal(na + 26, our_mac, 6);
    assert_int_equal(sum_pseudo6(ip, 58, na, 32), 0);
    /* duplicate address detection: from ::, answered to all nodes */
    const uint8_t none[16] = {0}, all[16] = {0xff, 2, [15] = 1}, all_mac[6] = {0x33, 0x33, 0, 0,
                                                                               0, 1};
    n = solicit(f, none, our_ip6, 255, false);
    assert_int_equal(op_ndp_advert_in_place(f, n, sizeof f, our_ip6, our_mac), 86);
    assert_memory_equal(f, all_mac, 6);
    assert_memory_equal(f + 14 + 24, all, 16);
    assert_int_equal(f[14 + 40 + 4], 0x20); /* not solicited */
    assert_int_equal(sum_pseudo6(f + 14, 58, f + 54, 32), 0);
    /* refused, the frame untouched */
    struct {
        const uint8_t *target;
        uint8_t hops;
        size_t cap;
        size_t corrupt; /* a body byte flipped: the checksum fails */
    } no[] = {{their_ip6, 255, 128, 0}, {our_ip6, 64, 128, 0}, {our_ip6, 255, 85, 0},
              {our_ip6, 255, 128, 30}};
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        n = solicit(f, their_ip6, no[i].target, no[i].hops, true);
        if (no[i].corrupt)
            f[14 + 40 + no[i].corrupt] ^= 1;
        uint8_t before[128];
        memcpy(before, f, sizeof f);
        assert_int_equal(op_ndp_advert_in_place(f, n, no[i].cap, our_ip6, our_mac), 0);
        assert_memory_equal(f, before, sizeof f);
    }
    n = solicit(f, their_ip6, our_ip6, 255, true);
    assert_int_equal(op_ndp_advert_in_place(f, n - 9, sizeof f, our_ip6, our_mac), 0); /* cut */
}

static void test_icmp6_echo_reply(void **state)
{
    (void)state;
    uint8_t f[128] = {0};
    const uint8_t body[12] = {128, 0, 0, 0, 0x15, 0x15, 0, 7, 'p', 'i', 'n', 'g'};
    size_t n = ipv6_frame(f, their_ip6, our_ip6, 58, 64, body, 12, 2);
    assert_int_equal(op_icmp6_echo_reply_in_place(f, n + 4, our_ip6, our_mac), n);
    assert_memory_equal(f, their_mac, 6);
    assert_memory_equal(f + 6, our_mac, 6);
    assert_memory_equal(f + 14 + 8, our_ip6, 16);
    assert_memory_equal(f + 14 + 24, their_ip6, 16);
    assert_int_equal(f[54], 129);
    assert_memory_equal(f + 58, body + 4, 8);
    assert_int_equal(sum_pseudo6(f + 14, 58, f + 54, 12), 0);
    n = ipv6_frame(f, their_ip6, their_ip6, 58, 64, body, 12, 2); /* not to us */
    assert_int_equal(op_icmp6_echo_reply_in_place(f, n, our_ip6, our_mac), 0);
    n = ipv6_frame(f, their_ip6, our_ip6, 58, 64, body, 12, 12); /* no checksum */
    assert_int_equal(op_icmp6_echo_reply_in_place(f, n, our_ip6, our_mac), 0);
    n = ipv6_frame(f, their_ip6, our_ip6, 58, 64, body, 12, 2);
    f[54] = 129; /* a reply is not answered */
    assert_int_equal(op_icmp6_echo_reply_in_place(f, n, our_ip6, our_mac), 0);
}

/* The answer to name/type as the UDP path would send it, into buf. */
static size_t rrl_answer(const char *name, uint16_t type, uint8_t *buf, size_t cap)
{
    static struct msg q;
    struct op_dns_query_info qi = {.udp_max = OP_DNS_UDP_DEFAULT};
    put_query(&q, 0, name, type);
    put_opt(&q, 1232, 0, 0);
    return op_dns_respond(fx->z, &qi, q.b, q.n, buf, cap, fx->c);
}

/* One check of the answer to name/type for client at second t. */
static enum op_dns_rrl_verdict rrl_ask(struct op_dns_rrl *r, const uint8_t *client, bool ipv6,
                                       const char *name, uint16_t type, uint64_t t,
                                       size_t *len_out)
{
    static uint8_t buf[4096];
    size_t len = rrl_answer(name, type, buf, sizeof buf), whole = len;
    enum op_dns_rrl_verdict v =
        op_dns_rrl_check(r, client, ipv6, buf, &len, t * 1000000000ull + 5, fx->c);
    if (v == OP_DNS_RRL_SLIP) { /* cut to header and question, TC set, no records */
        assert_true(len < whole);
        assert_true(buf[2] & 0x02);
        assert_memory_equal(buf + 6, "\0\0\0\0\0\0", 6);
        assert_int_equal(buf[4] << 8 | buf[5], 1);
    } else {
        assert_int_equal(len, whole);
    }
    if (len_out != NULL)
        *len_out = len;
    return v;
}

static void test_rrl(void **state)
{
    (void)state;
    const uint8_t a[4] = {198, 18, 0, 2}, a_net[4] = {198, 18, 0, 77}, b[4] = {198, 18, 1, 2};
    struct op_dns_rrl *r = op_dns_rrl_new(3, 2);
    assert_non_null(r);
    memset(fx->c, 0, sizeof fx->c);
    for (int i = 0; i < 3; i++)
        assert_int_equal(rrl_ask(r, a, false, "www.example.test", T_A, 100, NULL),
                         OP_DNS_RRL_PASS);
    /* past the rate: dropped, every second one slipped; the /24 shares it */
    size_t len;
    assert_int_equal(rrl_ask(r, a_net, false, "www.example.test", T_A, 100, NULL),
                     OP_DNS_RRL_DROP);
    assert_int_equal(rrl_ask(r, a, false, "www.example.test", T_A, 100, &len), OP_DNS_RRL_SLIP);
    assert_int_equal(len, 12 + 18 + 4); /* www.example.test, type, class */
    assert_int_equal(rrl_ask(r, a, false, "www.example.test", T_A, 100, NULL), OP_DNS_RRL_DROP);
    assert_int_equal(rrl_ask(r, a, false, "WWW.Example.test", T_A, 100, NULL), OP_DNS_RRL_SLIP);
    assert_int_equal(fx->c[OP_DNS_C_rrl_dropped], 2);
    assert_int_equal(fx->c[OP_DNS_C_rrl_slipped], 2);
    /* another network, another name or type: buckets of their own */
    assert_int_equal(rrl_ask(r, b, false, "www.example.test", T_A, 100, NULL), OP_DNS_RRL_PASS);
    assert_int_equal(rrl_ask(r, a, false, "web.example.test", T_A, 100, NULL), OP_DNS_RRL_PASS);
    assert_int_equal(rrl_ask(r, a, false, "www.example.test", T_AAAA, 100, NULL),
                     OP_DNS_RRL_PASS);
    /* the next second: the rate again */
    for (int i = 0; i < 3; i++)
        assert_int_equal(rrl_ask(r, a, false, "www.example.test", T_A, 101, NULL),
                         OP_DNS_RRL_PASS);
    assert_int_equal(rrl_ask(r, a, false, "www.example.test", T_A, 101, NULL), OP_DNS_RRL_DROP);
    /* NXDOMAIN: one bucket for every name (a random-name flood) */
    for (int i = 0; i < 3; i++) {
        char name[64];
        snprintf(name, sizeof name, "rnd%d.example.test", i);
        assert_int_equal(rrl_ask(r, a, false, name, T_A, 102, NULL), OP_DNS_RRL_PASS);
    }
    assert_int_equal(rrl_ask(r, a, false, "rnd9.example.test", T_A, 102, NULL), OP_DNS_RRL_DROP);
    /* IPv6: a /56 shares a bucket, the next /56 does not */
    const uint8_t v6[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, [15] = 1};
    uint8_t same[16], other[16];
    memcpy(same, v6, 16);
    same[8] = 0xff;
    memcpy(other, v6, 16);
    other[6] = 1;
    for (int i = 0; i < 3; i++)
        assert_int_equal(rrl_ask(r, v6, true, "www.example.test", T_A, 103, NULL),
                         OP_DNS_RRL_PASS);
    assert_int_equal(rrl_ask(r, same, true, "www.example.test", T_A, 103, NULL), OP_DNS_RRL_DROP);
    assert_int_equal(rrl_ask(r, other, true, "www.example.test", T_A, 103, NULL),
                     OP_DNS_RRL_PASS);
    op_dns_rrl_free(r);
    /* no slip: every limited answer dropped; rate 0 or no table: no limit */
    r = op_dns_rrl_new(1, 0);
    assert_int_equal(rrl_ask(r, a, false, "www.example.test", T_A, 5, NULL), OP_DNS_RRL_PASS);
    for (int i = 0; i < 4; i++)
        assert_int_equal(rrl_ask(r, a, false, "www.example.test", T_A, 5, NULL),
                         OP_DNS_RRL_DROP);
    op_dns_rrl_free(r);
    r = op_dns_rrl_new(0, 2);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(rrl_ask(r, a, false, "www.example.test", T_A, 5, NULL), OP_DNS_RRL_PASS);
        assert_int_equal(rrl_ask(NULL, a, false, "www.example.test", T_A, 5, NULL),
                         OP_DNS_RRL_PASS);
    }
    op_dns_rrl_free(r);
    /* thousands of networks: the fixed table evicts, and never limits a new one */
    r = op_dns_rrl_new(1, 2);
    for (unsigned i = 0; i < 20000; i++) {
        const uint8_t net[4] = {10, (uint8_t)(i >> 8), (uint8_t)i, 1};
        assert_int_equal(rrl_ask(r, net, false, "www.example.test", T_A, 7, NULL),
                         OP_DNS_RRL_PASS);
    }
    op_dns_rrl_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name_compression),
        cmocka_unit_test(test_name_malformed),
        cmocka_unit_test(test_malformed_queries),
        cmocka_unit_test(test_refused_notimp_badvers),
        cmocka_unit_test(test_exact_and_additional),
        cmocka_unit_test(test_negative),
        cmocka_unit_test(test_wildcard_cname),
        cmocka_unit_test(test_dname),
        cmocka_unit_test(test_referral),
        cmocka_unit_test(test_truncation_and_edns),
        cmocka_unit_test(test_dnssec),
        cmocka_unit_test(test_nsec3),
        cmocka_unit_test(test_nsec3_opt_out),
        cmocka_unit_test(test_zone_transfer),
        cmocka_unit_test(test_transfer_acl),
        cmocka_unit_test(test_notify_messages),
        cmocka_unit_test(test_nsid),
        cmocka_unit_test(test_zone_errors),
        cmocka_unit_test(test_zone_files),
        cmocka_unit_test(test_arp_reply),
        cmocka_unit_test(test_icmp_echo_reply),
        cmocka_unit_test(test_udp6_frames),
        cmocka_unit_test(test_ndp_advert),
        cmocka_unit_test(test_icmp6_echo_reply),
        cmocka_unit_test(test_rrl),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
