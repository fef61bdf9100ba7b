/* Unit tests of the switch module: the topology parser (every malformed line
 * it must name), and the engine's input path on a one-TOR topology: each kind
 * of foreign, broken or hostile packet is dropped with its own counter, and
 * every received packet is accounted for exactly once. Last, groups freed and
 * installed again on the in-memory fabric when leaders leave and rejoin. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "incsim.h"
#include "offpath/switch.h"
#include "offpath/wire.h"

static uint32_t ip4(unsigned a, unsigned b, unsigned c, unsigned d)
{
    return (uint32_t)a << 24 | (uint32_t)b << 16 | (uint32_t)c << 8 | (uint32_t)d;
}

/* ---- topology parser ------------------------------------------------- */

static void parse_ok(const char *text, struct op_topo *topo)
{
    char err[256] = "";
    if (op_topo_parse(text, topo, err, sizeof(err)) != OP_OK)
        fail_msg("rejected: %s\n%s", err, text);
}

/* Rejected, and the message starts with the line number and says what. */
static void parse_bad(const char *text, int line, const char *what)
{
    struct op_topo topo;
    char err[256] = "", prefix[32];
    assert_int_equal(op_topo_parse(text, &topo, err, sizeof(err)), OP_ERR_MALFORMED);
    snprintf(prefix, sizeof(prefix), "line %d: ", line);
    if (strncmp(err, prefix, strlen(prefix)) != 0 || strstr(err, what) == NULL)
        fail_msg("want '%s...%s', got '%s' for:\n%s", prefix, what, err, text);
}

static void test_topo_valid(void **state)
{
    (void)state;
    struct op_topo t;
    parse_ok("# a comment line\n"
             "\n"
             "spine s0 10.0.0.1 port 5000   # trailing comment\n"
             "tor t0 10.0.1.1 hosts 10.1.0.1-10.1.0.10 spines s0,s1\n"
             "\t tor t1 10.0.1.2 port 4792 hosts 10.1.1.1-10.1.1.1\r\n"
             "spine s1 10.0.0.2", /* after a TOR that names it; no final newline */
             &t);
    assert_int_equal(t.n, 4);
    assert_string_equal(t.sw[0].name, "s0");
    assert_true(t.sw[0].spine);
    assert_int_equal(t.sw[0].ip, ip4(10, 0, 0, 1));
    assert_int_equal(t.sw[0].port, 5000);
    assert_int_equal(t.sw[0].index, 0);
    assert_false(t.sw[1].spine);
    assert_int_equal(t.sw[1].port, OP_ROCE_UDP_PORT);
    assert_int_equal(t.sw[1].index, 0);
    assert_int_equal(t.sw[1].host_lo, ip4(10, 1, 0, 1));
    assert_int_equal(t.sw[1].host_hi, ip4(10, 1, 0, 10));
    assert_int_equal(t.sw[1].n_up, 2);
    assert_int_equal(t.sw[1].up[0], 0);
    assert_int_equal(t.sw[1].up[1], 3);
    assert_int_equal(t.sw[2].port, 4792);
    assert_int_equal(t.sw[2].index, 1);
    assert_int_equal(t.sw[2].n_up, 0);
    assert_int_equal(t.sw[2].host_lo, t.sw[2].host_hi);
    assert_true(t.sw[3].spine);
    assert_int_equal(t.sw[3].index, 1);
    /* ports at both ends of their range */
    parse_ok("tor a 1.1.1.1 port 1 hosts 2.2.2.2-2.2.2.3\ntor b 1.1.1.2 hosts "
             "3.0.0.0-3.0.0.1 port 65535\n",
             &t);
    assert_int_equal(t.sw[0].port, 1);
    assert_int_equal(t.sw[1].port, 65535);
}

static void test_topo_malformed(void **state)
{
    (void)state;
    parse_bad("router r 10.0.0.1\n", 1, "expected 'tor' or 'spine'");
    parse_bad("# c\ntor t 10.0.0.1 hosts 10.1.0.1-10.1.0.2 colour red\n", 2, "unknown word 'colour'");
    parse_bad("spine s 10.0.0.1 hosts 10.1.0.1-10.1.0.2\n", 1, "unknown word 'hosts'");
    parse_bad("tor t 10.0.0.1\n", 1, "no 'hosts' range");
    parse_bad("tor t 10.0.0.1 port 99\n", 1, "no 'hosts' range");
    parse_bad("tor t 10.0.0.1 hosts\n", 1, "'hosts' wants a value");
    parse_bad("tor t\n", 1, "wants 'tor <name> <ip>'");
    parse_bad("spine s 10.0.0.300\n", 1, "bad address '10.0.0.300'");
    parse_bad("spine s 10.0.0\n", 1, "bad address");
    parse_bad("tor t 10.0.0.1 hosts 10.1.0.1-10.1.0.x\n", 1, "bad host range");
    parse_bad("tor t 10.0.0.1 hosts 10.1.0.1\n", 1, "wants <first-ip>-<last-ip>");
    parse_bad("tor t 10.0.0.1 hosts 10.1.0.9-10.1.0.1\n", 1, "bad host range '10.1.0.9-10.1.0.1'");
    parse_bad("spine s 10.0.0.1 port 0\n", 1, "bad port '0'");
    parse_bad("\n\nspine s 10.0.0.1 port 70000\n", 3, "bad port '70000'");
    parse_bad("spine s 10.0.0.1 port -1\n", 1, "bad port");
    parse_bad("spine s 10.0.0.1\nspine s 10.0.0.2\n", 2, "used twice");
    parse_bad("spine s 10.0.0.1\ntor s 10.0.0.2 hosts 1.0.0.1-1.0.0.2\n", 2, "used twice");
    parse_bad("spine abcdefghijabcdefghijabcdefghijab 10.0.0.1\n", 1, "too long");
    parse_bad("tor t 10.0.0.1 hosts 1.0.0.1-1.0.0.2 spines a,b,c,d,e,f,g,h,i\n", 1,
              "more than 8 spines");
    parse_bad("spine s 1.1.1.1 port 1 port 2 port 3 port 4 port 5 port 6 port 7 x\n", 1,
              "too many words");
}

/* Errors found after the whole file is read name the line of the switch at
 * fault; a file without any TOR names its last line. */
static void test_topo_malformed_resolved(void **state)
{
    (void)state;
    parse_bad("spine s0 10.0.0.1\n"
              "tor t0 10.0.1.1 hosts 10.1.0.1-10.1.0.10 spines s0\n"
              "# the next one names a spine nobody declared\n"
              "tor t1 10.0.1.2 hosts 10.1.1.1-10.1.1.10 spines s0,s9\n",
              4, "unknown spine 's9'");
    parse_bad("tor t0 10.0.1.1 hosts 10.1.0.1-10.1.0.10\n"
              "tor t1 10.0.1.2 hosts 10.1.1.1-10.1.1.10 spines t0\n",
              2, "unknown spine 't0'"); /* a TOR is no spine */
    parse_bad("tor t0 10.0.1.1 hosts 10.1.0.1-10.1.0.10\n"
              "\n"
              "tor t1 10.0.1.2 hosts 10.1.0.10-10.1.0.20\n",
              3, "host ranges of 't0' and 't1' overlap");
    parse_bad("tor t0 10.0.1.1 hosts 10.1.0.5-10.1.0.6\n"
              "tor t1 10.0.1.2 hosts 10.1.0.1-10.1.0.20\n",
              2, "overlap"); /* one range inside the other */
    parse_bad("spine s0 10.0.0.1\n"
              "tor t0 10.0.1.1 hosts 10.1.0.1-10.1.0.10 spines s0,s0\n",
              2, "names spine 's0' twice");
    parse_bad("spine s0 10.0.0.1\n"
              "tor t0 10.0.0.1 hosts 10.1.0.1-10.1.0.10 spines s0\n",
              2, "same address");
    parse_bad("spine s0 10.0.0.1\n# only spines\n", 2, "no tor");
    parse_bad("", 0, "no tor");
    parse_bad("# nothing\n", 1, "no tor");
}

static void test_topo_line_length(void **state)
{
    (void)state;
    /* 511 bytes is the longest line: a comment padded to length */
    char text[1200];
    const char *tor = "tor t 10.0.0.1 hosts 10.1.0.1-10.1.0.2 #";
    size_t n = strlen(tor);
    memcpy(text, tor, n);
    memset(text + n, 'x', 511 - n);
    strcpy(text + 511, "\n");
    struct op_topo t;
    parse_ok(text, &t);
    assert_int_equal(t.n, 1);
    memcpy(text, "# ok\n", 5);
    memcpy(text + 5, tor, n);
    memset(text + 5 + n, 'x', 512 - n);
    strcpy(text + 5 + 512, "\n");
    parse_bad(text, 2, "line longer than 511 bytes");
}

static void test_topo_too_many_switches(void **state)
{
    (void)state;
    char text[8192];
    size_t off = 0;
    for (int i = 0; i <= OP_TOPO_MAX_SWITCHES; i++)
        off += (size_t)snprintf(text + off, sizeof(text) - off, "spine s%d 10.0.0.%d\n", i, i + 1);
    parse_bad(text, OP_TOPO_MAX_SWITCHES + 1, "more than 64 switches");
}

static void test_topo_lookup(void **state)
{
    (void)state;
    struct op_topo t;
    parse_ok("spine s0 10.0.0.1\n"
             "tor t0 10.0.1.1 hosts 10.1.0.1-10.1.0.10 spines s0\n"
             "tor t1 10.0.1.2 hosts 10.1.1.0-10.1.1.255\n",
             &t);
    assert_int_equal(op_topo_find(&t, "s0"), 0);
    assert_int_equal(op_topo_find(&t, "t1"), 2);
    assert_int_equal(op_topo_find(&t, "t2"), -1);
    assert_int_equal(op_topo_find(&t, ""), -1);
    assert_int_equal(op_topo_find(&t, "t"), -1);
    assert_int_equal(op_topo_tor_of(&t, ip4(10, 1, 0, 1)), 1);
    assert_int_equal(op_topo_tor_of(&t, ip4(10, 1, 0, 10)), 1);
    assert_int_equal(op_topo_tor_of(&t, ip4(10, 1, 0, 11)), -1);
    assert_int_equal(op_topo_tor_of(&t, ip4(10, 1, 0, 0)), -1);
    assert_int_equal(op_topo_tor_of(&t, ip4(10, 1, 1, 0)), 2);
    assert_int_equal(op_topo_tor_of(&t, ip4(10, 1, 1, 255)), 2);
    assert_int_equal(op_topo_tor_of(&t, ip4(10, 0, 0, 1)), -1); /* a spine serves no host */
    assert_int_equal(op_topo_tor_of(&t, 0), -1);
}

static void test_topo_load(void **state)
{
    (void)state;
    struct op_topo t;
    char err[256] = "", path[] = "/tmp/offpath-topo-XXXXXX";
    assert_int_equal(op_topo_load("/nonexistent/offpath.topo", &t, err, sizeof(err)),
                     op_status_from_errno(ENOENT));
    assert_non_null(strstr(err, "/nonexistent/offpath.topo"));
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    static const char text[] = "tor t0 10.0.1.1 hosts 10.1.0.1-10.1.0.10\n";
    assert_int_equal(write(fd, text, sizeof(text) - 1), (ssize_t)sizeof(text) - 1);
    assert_int_equal(op_topo_load(path, &t, err, sizeof(err)), OP_OK);
    assert_int_equal(t.n, 1);
    assert_int_equal(write(fd, "\0", 1), 1); /* a NUL byte makes it a binary file */
    assert_int_equal(op_topo_load(path, &t, err, sizeof(err)), OP_ERR_MALFORMED);
    assert_non_null(strstr(err, "NUL"));
    close(fd);
    unlink(path);
}

/* ---- engine: a one-TOR switch fed by hand ------------------------------ */

#define TOR_IP ip4(10, 0, 0, 1)
#define HOST(i) ip4(10, 0, 1, (i))     /* the TOR serves HOST(1) .. HOST(10) */
#define STRANGER ip4(10, 9, 9, 9)      /* under no TOR */
#define PORT OP_ROCE_UDP_PORT
#define T0 (5 * OP_NS_PER_S)
#define OUT_MAX 16

struct rig {
    struct op_topo topo;
    struct op_sw *sw;
    struct op_pktbuf txbuf;
    struct op_txq q;
    uint8_t *out[OUT_MAX]; /* copies of what the switch sent since the last clear */
    struct op_flow out_flow[OUT_MAX];
    uint32_t out_len[OUT_MAX];
    int n_out;
    uint16_t group;
    uint64_t token;
    uint16_t window;
};

static void rig_flush(void *ctx, struct op_txq *q)
{
    struct rig *r = ctx;
    for (int i = 0; i < q->n; i++) {
        assert_true(r->n_out < OUT_MAX);
        r->out[r->n_out] = malloc(q->pkts[i].len);
        assert_non_null(r->out[r->n_out]);
        memcpy(r->out[r->n_out], q->pkts[i].data, q->pkts[i].len);
        r->out_flow[r->n_out] = q->pkts[i].flow;
        r->out_len[r->n_out] = q->pkts[i].len;
        r->n_out++;
    }
    q->n = 0;
}

static void rig_clear(struct rig *r)
{
    for (int i = 0; i < r->n_out; i++)
        free(r->out[i]);
    r->n_out = 0;
}

static void rig_init(struct rig *r, void (*tune)(struct op_sw_config *))
{
    memset(r, 0, sizeof(*r));
    parse_ok("tor t0 10.0.0.1 hosts 10.0.1.1-10.0.1.10\n", &r->topo);
    struct op_sw_config cfg;
    op_sw_config_default(&cfg);
    cfg.topo = &r->topo;
    cfg.self = 0;
    if (tune != NULL)
        tune(&cfg);
    assert_int_equal(op_sw_create(&cfg, &r->sw), OP_OK);
    assert_int_equal(op_pktbuf_init(&r->txbuf, 4), OP_OK);
    r->q = (struct op_txq){.pkts = r->txbuf.pkts, .cap = r->txbuf.n, .flush = rig_flush, .ctx = r};
}

static void rig_free(struct rig *r)
{
    rig_clear(r);
    op_sw_destroy(r->sw);
    op_pktbuf_free(&r->txbuf);
}

/* A packet from src:port as the TOR receives it at time T0. */
static void feed_at(struct rig *r, uint32_t src, uint16_t port, const uint8_t *data, size_t len)
{
    uint8_t buf[OP_IO_BUF_SIZE];
    memcpy(buf, data, len);
    struct op_pkt p = {.flow = {.src.v4 = src, .dst.v4 = TOR_IP, .src_port = port, .dst_port = PORT},
                       .len = (uint32_t)len,
                       .data = buf};
    op_sw_input(r->sw, &p, T0, &r->q);
    rig_flush(r, &r->q);
}

static void feed(struct rig *r, uint32_t src, const uint8_t *data, size_t len)
{
    feed_at(r, src, PORT, data, len);
}

/* An INC packet from src to the TOR, sealed with the ICRC of that flow. */
static size_t build(uint32_t src, const struct op_inc_hdr *h, const void *payload, size_t len,
                    uint8_t *out)
{
    struct op_flow f = {.src.v4 = src, .dst.v4 = TOR_IP, .src_port = PORT, .dst_port = PORT};
    size_t n = op_inc_encode(h, 0, payload, len, out, OP_IO_BUF_SIZE);
    assert_true(n > 0);
    n = op_icrc_seal(&f, out, n, OP_IO_BUF_SIZE);
    assert_true(n > 0);
    return n;
}

/* A data packet of count int32 elements, all equal to value. */
static size_t build_data(const struct rig *r, uint32_t src, uint32_t rank, uint32_t seq,
                         uint16_t count, int32_t value, uint8_t *out)
{
    struct op_inc_hdr h = {.version = OP_INC_VERSION, .kind = OP_INC_KIND_DATA,
                           .group_id = r->group, .op = OP_RED_SUM, .dtype = OP_RED_INT32,
                           .src_rank = rank, .token = r->token, .seq = seq,
                           .slot = (uint16_t)(seq % (r->window ? r->window : 1)), .count = count};
    uint8_t payload[OP_INC_MAX_DATA];
    for (uint16_t i = 0; i < count; i++) {
        uint32_t v = (uint32_t)value;
        payload[4 * i] = (uint8_t)(v >> 24);
        payload[4 * i + 1] = (uint8_t)(v >> 16);
        payload[4 * i + 2] = (uint8_t)(v >> 8);
        payload[4 * i + 3] = (uint8_t)v;
    }
    return build(src, &h, payload, (size_t)count * 4, out);
}

/* A control message as a leader writes it (member rank, master HOST(1)). */
static size_t build_ctrl(uint32_t src, uint32_t rank, unsigned type, uint16_t members,
                         uint8_t *out)
{
    struct op_inc_ctrl c = {.sup_mpi_type = 1, .master_num = 1, .query_notify_hop = (uint8_t)type,
                            .sup_comm_type = 1, .sup_allreduce_op = 0xffff,
                            .sup_data_type = 0xffff, .sup_max_data_size = 0xffff,
                            .global_group_size = members, .true_comm_id = 3, .job_id = 7,
                            .dst_ip = HOST(1), .src_ip = src, .window = 0xffff,
                            .max_children = 0xffff};
    if (type == OP_INC_CTRL_NOTIFY)
        c.spine_ip = TOR_IP; /* the one-TOR tree's root */
    uint8_t payload[OP_INC_CTRL_LEN];
    op_inc_ctrl_encode(&c, payload);
    struct op_inc_hdr h = {.version = OP_INC_VERSION, .kind = OP_INC_KIND_CTRL, .src_rank = rank};
    return build(src, &h, payload, sizeof(payload), out);
}

/* HOST(1) .. HOST(n) query, the master HOST(1) notifies: the TOR installs the
 * group and tells each member its id and token. */
static void rig_join(struct rig *r, uint16_t n)
{
    uint8_t pkt[OP_IO_BUF_SIZE];
    for (uint16_t i = 1; i <= n; i++) {
        feed(r, HOST(i), pkt, build_ctrl(HOST(i), i - 1u, OP_INC_CTRL_QUERY, n, pkt));
        assert_int_equal(r->n_out, 1); /* on to the master */
        assert_int_equal(r->out_flow[0].dst.v4, HOST(1));
        rig_clear(r);
    }
    feed(r, HOST(1), pkt, build_ctrl(HOST(1), 0, OP_INC_CTRL_NOTIFY, n, pkt));
    assert_int_equal(r->n_out, n);
    struct op_inc_pkt ip;
    struct op_inc_ctrl c;
    assert_int_equal(op_inc_decode(r->out[0], r->out_len[0], &ip), OP_OK);
    assert_int_equal(op_inc_ctrl_decode(ip.payload, ip.payload_len, &c), OP_OK);
    assert_int_equal(c.query_notify_hop & 0x0f, OP_INC_CTRL_NOTIFY);
    assert_true(ip.hdr.group_id != 0);
    r->group = ip.hdr.group_id;
    r->token = ip.hdr.token;
    r->window = c.window;
    assert_true(r->window > 0);
    rig_clear(r);
    assert_int_equal(op_sw_counters(r->sw)[OP_SW_C_groups_live], 1);
}

/* Counted on the way in, whatever becomes of the packet. */
static bool intake_counter(unsigned c)
{
    return c == OP_SW_C_rx_inc || c == OP_SW_C_rx_ctrl || c == OP_SW_C_queries ||
           c == OP_SW_C_kills || c == OP_SW_C_retransmissions;
}

/* Feed one packet: exactly counter c goes up by one, and nothing is sent. */
static void expect_drop(struct rig *r, uint32_t src, const uint8_t *data, size_t len, unsigned c)
{
    uint64_t before[OP_SW_C_ENGINE_COUNT_];
    memcpy(before, op_sw_counters(r->sw), sizeof(before));
    feed(r, src, data, len);
    const uint64_t *now = op_sw_counters(r->sw);
    for (unsigned i = 0; i < OP_SW_C_ENGINE_COUNT_; i++) {
        uint64_t want = before[i] + (i == c || i == OP_SW_C_rx_pkts);
        if (intake_counter(i) && now[i] == before[i] + 1)
            want = now[i];
        if (now[i] != want)
            fail_msg("packet of %zu bytes: %s went %llu -> %llu, expected a drop by %s", len,
                     op_sw_counter_name(i), (unsigned long long)before[i],
                     (unsigned long long)now[i], op_sw_counter_name(c));
    }
    assert_int_equal(r->n_out, 0);
}

/* Each data packet ends in exactly one of these. */
static const unsigned data_outcomes[] = {
    OP_SW_C_drop_foreign,  OP_SW_C_drop_malformed,  OP_SW_C_drop_icrc,
    OP_SW_C_drop_unknown_group, OP_SW_C_drop_bad_token, OP_SW_C_drop_not_member,
    OP_SW_C_drop_mismatch, OP_SW_C_drop_stale,      OP_SW_C_contributions,
    OP_SW_C_duplicates,
};

static uint64_t outcome_sum(const uint64_t *c)
{
    uint64_t n = 0;
    for (size_t i = 0; i < sizeof(data_outcomes) / sizeof(data_outcomes[0]); i++)
        n += c[data_outcomes[i]];
    return n;
}

static void test_sw_foreign_and_truncated(void **state)
{
    (void)state;
    struct rig r;
    rig_init(&r, NULL);
    uint8_t pkt[OP_IO_BUF_SIZE], junk[200];
    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (uint8_t)(i * 37 + 11);
    expect_drop(&r, HOST(1), junk, 0, OP_SW_C_drop_foreign);
    expect_drop(&r, HOST(1), junk, 5, OP_SW_C_drop_foreign);
    expect_drop(&r, HOST(1), junk, sizeof(junk), OP_SW_C_drop_foreign);
    expect_drop(&r, STRANGER, junk, sizeof(junk), OP_SW_C_drop_foreign);

    /* RoCEv2, ICRC right, but not INC: an RC send, a UD send to another QP,
     * and a UD send to the INC QP with the wrong Q_Key. */
    struct op_flow f = {.src.v4 = HOST(1), .dst.v4 = TOR_IP, .src_port = PORT, .dst_port = PORT};
    struct op_bth bth = {.opcode = OP_RC_SEND_ONLY, .pkey = 0xffff, .dest_qp = 0x11, .psn = 5};
    memset(pkt, 0xab, 80);
    op_bth_encode(&bth, pkt);
    expect_drop(&r, HOST(1), pkt, op_icrc_seal(&f, pkt, 76, sizeof(pkt)), OP_SW_C_drop_foreign);
    bth.opcode = OP_UD_SEND_ONLY;
    op_bth_encode(&bth, pkt);
    struct op_deth deth = {.qkey = OP_INC_QKEY, .src_qp = 0x11};
    op_deth_encode(&deth, pkt + OP_BTH_LEN);
    expect_drop(&r, HOST(1), pkt, op_icrc_seal(&f, pkt, 76, sizeof(pkt)), OP_SW_C_drop_foreign);
    bth.dest_qp = OP_INC_QPN;
    deth.qkey = OP_INC_QKEY + 1;
    op_bth_encode(&bth, pkt);
    op_deth_encode(&deth, pkt + OP_BTH_LEN);
    expect_drop(&r, HOST(1), pkt, op_icrc_seal(&f, pkt, 76, sizeof(pkt)), OP_SW_C_drop_foreign);

    /* Every truncation of valid INC packets: too short to be INC at all, or
     * INC with a missing tail. Data of 4 int32 (no pad), of 3 bytes (a pad
     * byte), and a control packet. */
    r.group = 77;
    r.token = 99;
    r.window = 32;
    size_t lens[3];
    uint8_t pkts[3][OP_INC_MAX_PKT];
    lens[0] = build_data(&r, HOST(1), 0, 0, 4, 1, pkts[0]);
    struct op_inc_hdr h = {.version = OP_INC_VERSION, .kind = OP_INC_KIND_DATA, .group_id = 77,
                           .op = OP_RED_MAX, .dtype = OP_RED_UINT8, .token = 99, .count = 3};
    lens[1] = build(HOST(1), &h, "abc", 3, pkts[1]);
    assert_int_equal(lens[1], OP_INC_PREFIX_LEN + 3 + 1 + OP_ICRC_LEN);
    lens[2] = build_ctrl(HOST(1), 0, OP_INC_CTRL_QUERY, 1, pkts[2]);
    assert_int_equal(lens[2], OP_INC_PREFIX_LEN + OP_INC_CTRL_LEN + OP_ICRC_LEN);
    for (int k = 0; k < 3; k++)
        for (size_t len = 0; len < lens[k]; len++)
            expect_drop(&r, HOST(1), pkts[k], len,
                        len < OP_INC_PREFIX_LEN ? OP_SW_C_drop_foreign : OP_SW_C_drop_malformed);
    /* ... and a byte too many */
    pkts[0][lens[0]] = 0;
    expect_drop(&r, HOST(1), pkts[0], lens[0] + 1, OP_SW_C_drop_malformed);
    /* whole, they decode: no group 77 here */
    expect_drop(&r, HOST(1), pkts[0], lens[0], OP_SW_C_drop_unknown_group);
    expect_drop(&r, HOST(1), pkts[1], lens[1], OP_SW_C_drop_unknown_group);

    /* Headers that decode but break a rule of docs/wire.md, resealed. */
    h.dtype = OP_RED_FLOAT32; /* MAX of float is fine: BAND of float is not */
    h.op = OP_RED_BAND;
    h.count = 1;
    expect_drop(&r, HOST(1), pkt, build(HOST(1), &h, "abcd", 4, pkt), OP_SW_C_drop_malformed);
    h.op = OP_RED_SUM;
    h.count = 2; /* announces 8 bytes, carries 4 */
    expect_drop(&r, HOST(1), pkt, build(HOST(1), &h, "abcd", 4, pkt), OP_SW_C_drop_malformed);
    h.count = 1;
    h.version = 2;
    expect_drop(&r, HOST(1), pkt, build(HOST(1), &h, "abcd", 4, pkt), OP_SW_C_drop_malformed);

    const uint64_t *c = op_sw_counters(r.sw);
    assert_int_equal(c[OP_SW_C_rx_pkts], outcome_sum(c));
    assert_int_equal(c[OP_SW_C_rx_inc], 2);
    assert_int_equal(c[OP_SW_C_tx_pkts], 0);
    rig_free(&r);
}

static void test_sw_hostile_data(void **state)
{
    (void)state;
    struct rig r;
    rig_init(&r, NULL);
    rig_join(&r, 3);
    uint64_t start[OP_SW_C_ENGINE_COUNT_];
    memcpy(start, op_sw_counters(r.sw), sizeof(start));
    uint8_t pkt[OP_IO_BUF_SIZE];
    size_t n = build_data(&r, HOST(2), 1, 0, 8, 5, pkt);

    /* broken ICRC: in the ICRC, in the payload, or sealed for another sender */
    pkt[n - 1] ^= 0x80;
    expect_drop(&r, HOST(2), pkt, n, OP_SW_C_drop_icrc);
    pkt[n - 1] ^= 0x80;
    pkt[OP_INC_PREFIX_LEN] ^= 1;
    expect_drop(&r, HOST(2), pkt, n, OP_SW_C_drop_icrc);
    pkt[OP_INC_PREFIX_LEN] ^= 1;
    expect_drop(&r, HOST(3), pkt, n, OP_SW_C_drop_icrc);

    /* the group's id and token, from outside the group */
    expect_drop(&r, STRANGER, pkt, build_data(&r, STRANGER, 1, 0, 8, 5, pkt),
                OP_SW_C_drop_not_member);
    expect_drop(&r, HOST(9), pkt, build_data(&r, HOST(9), 1, 0, 8, 5, pkt),
                OP_SW_C_drop_not_member); /* under this TOR, not in the group */
    expect_drop(&r, HOST(2), pkt, build_data(&r, HOST(2), 2, 0, 8, 5, pkt),
                OP_SW_C_drop_not_member); /* a member claiming another's rank */
    expect_drop(&r, HOST(2), pkt, build_data(&r, HOST(2), 77, 0, 8, 5, pkt),
                OP_SW_C_drop_not_member); /* a rank beyond the group */
    n = build_data(&r, HOST(2), 1, 0, 8, 5, pkt);
    feed_at(&r, HOST(2), PORT + 1, pkt, n); /* the member's address, another port */
    assert_int_equal(op_sw_counters(r.sw)[OP_SW_C_drop_icrc], start[OP_SW_C_drop_icrc] + 4);
    struct op_flow f = {.src.v4 = HOST(2), .dst.v4 = TOR_IP, .src_port = PORT + 1,
                        .dst_port = PORT};
    n = op_icrc_seal(&f, pkt, n - OP_ICRC_LEN, sizeof(pkt));
    feed_at(&r, HOST(2), PORT + 1, pkt, n);
    assert_int_equal(op_sw_counters(r.sw)[OP_SW_C_drop_not_member],
                     start[OP_SW_C_drop_not_member] + 5);
    /* a result travelling up, into the root */
    struct op_inc_hdr h = {.version = OP_INC_VERSION, .kind = OP_INC_KIND_DATA,
                           .flags = OP_INC_F_RESULT, .group_id = r.group, .op = OP_RED_SUM,
                           .dtype = OP_RED_INT32, .token = r.token, .count = 1};
    expect_drop(&r, HOST(1), pkt, build(HOST(1), &h, "\0\0\0\1", 4, pkt), OP_SW_C_drop_not_member);

    /* an unknown group, a wrong token */
    uint16_t group = r.group;
    r.group = (uint16_t)(group + 1);
    expect_drop(&r, HOST(1), pkt, build_data(&r, HOST(1), 0, 0, 8, 5, pkt),
                OP_SW_C_drop_unknown_group);
    r.group = 0;
    expect_drop(&r, HOST(1), pkt, build_data(&r, HOST(1), 0, 0, 8, 5, pkt),
                OP_SW_C_drop_unknown_group);
    r.group = group;
    r.token ^= 1ull << 40;
    expect_drop(&r, HOST(1), pkt, build_data(&r, HOST(1), 0, 0, 8, 5, pkt), OP_SW_C_drop_bad_token);
    r.token ^= 1ull << 40;

    /* slot that is not seq % window; a seq that runs a window ahead */
    h = (struct op_inc_hdr){.version = OP_INC_VERSION, .kind = OP_INC_KIND_DATA, .group_id = r.group,
                            .op = OP_RED_SUM, .dtype = OP_RED_INT32, .token = r.token,
                            .seq = 3, .slot = 4, .count = 1};
    expect_drop(&r, HOST(1), pkt, build(HOST(1), &h, "\0\0\0\1", 4, pkt), OP_SW_C_drop_malformed);
    expect_drop(&r, HOST(1), pkt, build_data(&r, HOST(1), 0, r.window + 3u, 8, 5, pkt),
                OP_SW_C_drop_stale);

    /* The group still works: two contributions, a duplicate, a mismatch, the last. */
    feed(&r, HOST(1), pkt, build_data(&r, HOST(1), 0, 0, 8, 5, pkt));
    feed(&r, HOST(2), pkt, build_data(&r, HOST(2), 1, 0, 8, 6, pkt));
    expect_drop(&r, HOST(3), pkt, build_data(&r, HOST(3), 2, 0, 7, 7, pkt), OP_SW_C_drop_mismatch);
    feed(&r, HOST(2), pkt, build_data(&r, HOST(2), 1, 0, 8, 100, pkt));
    assert_int_equal(r.n_out, 0); /* a duplicate before the result: nothing to resend */
    feed(&r, HOST(3), pkt, build_data(&r, HOST(3), 2, 0, 8, 7, pkt));
    assert_int_equal(r.n_out, 3);
    for (int i = 0; i < 3; i++) {
        struct op_inc_pkt ip;
        assert_int_equal(op_inc_decode(r.out[i], r.out_len[i], &ip), OP_OK);
        assert_true(op_icrc_check(&r.out_flow[i], r.out[i], r.out_len[i]));
        assert_int_equal(r.out_flow[i].dst.v4, HOST(i + 1));
        assert_int_equal(ip.hdr.flags, OP_INC_F_RESULT);
        assert_int_equal(ip.hdr.token, r.token);
        assert_int_equal(ip.payload_len, 32);
        for (size_t k = 0; k < 32; k += 4)
            assert_memory_equal(ip.payload + k, "\0\0\0\x12", 4); /* 5 + 6 + 7, the 100 ignored */
    }
    rig_clear(&r);
    feed(&r, HOST(3), pkt, build_data(&r, HOST(3), 2, 0, 8, 7, pkt));
    assert_int_equal(r.n_out, 1); /* a retransmission after the result: resent to it alone */
    assert_int_equal(r.out_flow[0].dst.v4, HOST(3));
    rig_clear(&r);

    const uint64_t *c = op_sw_counters(r.sw);
    assert_int_equal(c[OP_SW_C_contributions], 3);
    assert_int_equal(c[OP_SW_C_duplicates], 2);
    assert_int_equal(c[OP_SW_C_results_sent], 3);
    assert_int_equal(c[OP_SW_C_results_resent], 1);
    assert_int_equal(c[OP_SW_C_chunks_aggregated], 1);
    /* every packet since the join ended in exactly one outcome */
    assert_int_equal(c[OP_SW_C_rx_pkts] - start[OP_SW_C_rx_pkts], outcome_sum(c) - outcome_sum(start));
    rig_free(&r);
}

/* Round `seq` from HOST(1..3), `how` marking HOST(2)'s: 0 not, 1 FECN in
 * place (a queue's CE as the path hands it on), 2 the INC flag (a switch
 * below). Returns whether the results say CONGESTED (all three alike). */
static bool round_congested(struct rig *r, uint32_t seq, int how)
{
    uint8_t pkt[OP_IO_BUF_SIZE];
    for (uint32_t i = 1; i <= 3; i++) {
        size_t n = build_data(r, HOST(i), i - 1, seq, 4, (int32_t)(seq + i), pkt);
        if (i == 2 && how == 1)
            pkt[OP_BTH_FECN_BYTE] |= OP_BTH_FECN_BIT; /* ICRC-masked: still valid */
        if (i == 2 && how == 2) {
            struct op_inc_pkt ip;
            assert_int_equal(op_inc_decode(pkt, n, &ip), OP_OK);
            ip.hdr.flags |= OP_INC_F_CONGESTED;
            n = build(HOST(i), &ip.hdr, ip.payload, ip.payload_len, pkt);
        }
        feed(r, HOST(i), pkt, n);
    }
    assert_int_equal(r->n_out, 3);
    bool congested = false;
    for (int k = 0; k < 3; k++) {
        struct op_inc_pkt ip;
        assert_int_equal(op_inc_decode(r->out[k], r->out_len[k], &ip), OP_OK);
        assert_true(ip.hdr.flags & OP_INC_F_RESULT);
        assert_int_equal(ip.hdr.seq, seq);
        assert_int_equal(ip.payload[3], (uint8_t)(3 * seq + 6)); /* the sum, exact */
        if (k > 0)
            assert_int_equal(congested, (ip.hdr.flags & OP_INC_F_CONGESTED) != 0);
        congested = (ip.hdr.flags & OP_INC_F_CONGESTED) != 0;
    }
    rig_clear(r);
    return congested;
}

/* A round that a queue marked on its way, as FECN or as the flag, comes
 * back CONGESTED to every member; the next unmarked round does not. */
static void test_sw_congestion_echoed_in_results(void **state)
{
    (void)state;
    struct rig r;
    rig_init(&r, NULL);
    rig_join(&r, 3);
    assert_false(round_congested(&r, 0, 0));
    assert_true(round_congested(&r, 1, 1));
    assert_false(round_congested(&r, 2, 0));
    assert_true(round_congested(&r, 3, 2));
    assert_false(round_congested(&r, 4, 0));
    assert_int_equal(op_sw_counters(r.sw)[OP_SW_C_congestion_seen], 2);
    rig_free(&r);
}

static void small_packets(struct op_sw_config *cfg) { cfg->max_data = 16; }

static void test_sw_payload_over_group_max(void **state)
{
    (void)state;
    struct rig r;
    rig_init(&r, small_packets);
    rig_join(&r, 2);
    uint8_t pkt[OP_IO_BUF_SIZE];
    expect_drop(&r, HOST(1), pkt, build_data(&r, HOST(1), 0, 0, 5, 1, pkt), OP_SW_C_drop_malformed);
    feed(&r, HOST(1), pkt, build_data(&r, HOST(1), 0, 0, 4, 1, pkt));
    assert_int_equal(op_sw_counters(r.sw)[OP_SW_C_contributions], 1);
    rig_free(&r);
}

/* A query sealed for src:port, as a leader on that port sends it. */
static size_t ctrl_from_port(uint32_t src, uint16_t port, uint32_t rank, unsigned type,
                             uint16_t members, uint8_t *pkt)
{
    size_t n = build_ctrl(src, rank, type, members, pkt);
    struct op_flow f = {.src.v4 = src, .dst.v4 = TOR_IP, .src_port = port, .dst_port = PORT};
    return op_icrc_seal(&f, pkt, n - OP_ICRC_LEN, OP_IO_BUF_SIZE);
}

/* The leaders of a node's second socket share its address on a port of
 * their own: the queries reach the master on its port, the notify reaches
 * each member on its own, and a leader on the fabric's port of the same
 * host stays apart. */
static void test_sw_leaders_off_the_fabric_port(void **state)
{
    (void)state;
    struct rig r;
    rig_init(&r, NULL);
    uint8_t pkt[OP_IO_BUF_SIZE];
    const uint16_t other = PORT + 3;
    feed_at(&r, HOST(1), other, pkt, ctrl_from_port(HOST(1), other, 0, OP_INC_CTRL_QUERY, 2, pkt));
    feed_at(&r, HOST(2), other, pkt, ctrl_from_port(HOST(2), other, 1, OP_INC_CTRL_QUERY, 2, pkt));
    assert_int_equal(r.n_out, 2);
    for (int i = 0; i < 2; i++) { /* both to the master, on its port */
        assert_int_equal(r.out_flow[i].dst.v4, HOST(1));
        assert_int_equal(r.out_flow[i].dst_port, other);
    }
    rig_clear(&r);
    feed_at(&r, HOST(1), other, pkt, ctrl_from_port(HOST(1), other, 0, OP_INC_CTRL_NOTIFY, 2, pkt));
    assert_int_equal(r.n_out, 2);
    for (int i = 0; i < 2; i++)
        assert_int_equal(r.out_flow[i].dst_port, other);
    assert_int_equal(op_sw_counters(r.sw)[OP_SW_C_groups_live], 1);
    assert_int_equal(op_sw_counters(r.sw)[OP_SW_C_drop_not_member], 0);
    rig_free(&r);
}

static void test_sw_hostile_control(void **state)
{
    (void)state;
    struct rig r;
    rig_init(&r, NULL);
    rig_join(&r, 2);
    uint8_t pkt[OP_IO_BUF_SIZE];
    /* from under no TOR, or from a member's address but another port (a
     * leader of another group on that host: no member of this one) */
    expect_drop(&r, STRANGER, pkt, build_ctrl(STRANGER, 0, OP_INC_CTRL_QUERY, 2, pkt),
                OP_SW_C_drop_not_member);
    struct op_inc_ctrl kc;
    size_t n = build_ctrl(HOST(1), 0, OP_INC_CTRL_KILL, 2, pkt);
    assert_int_equal(op_inc_ctrl_decode(pkt + OP_INC_PREFIX_LEN, OP_INC_CTRL_LEN, &kc), OP_OK);
    struct op_inc_hdr kh = {.version = OP_INC_VERSION, .kind = OP_INC_KIND_CTRL,
                            .group_id = r.group, .token = r.token};
    uint8_t kp[OP_INC_CTRL_LEN];
    op_inc_ctrl_encode(&kc, kp);
    n = build(HOST(1), &kh, kp, sizeof(kp), pkt);
    struct op_flow f = {.src.v4 = HOST(1), .dst.v4 = TOR_IP, .src_port = 9, .dst_port = PORT};
    n = op_icrc_seal(&f, pkt, n - OP_ICRC_LEN, sizeof(pkt));
    feed_at(&r, HOST(1), 9, pkt, n);
    assert_int_equal(op_sw_counters(r.sw)[OP_SW_C_drop_not_member], 2);
    assert_int_equal(op_sw_counters(r.sw)[OP_SW_C_groups_freed], 0);
    /* a query naming someone else as its sender */
    n = build_ctrl(HOST(2), 0, OP_INC_CTRL_QUERY, 2, pkt);
    f = (struct op_flow){.src.v4 = HOST(3), .dst.v4 = TOR_IP, .src_port = PORT, .dst_port = PORT};
    n = op_icrc_seal(&f, pkt, n - OP_ICRC_LEN, sizeof(pkt));
    expect_drop(&r, HOST(3), pkt, n, OP_SW_C_drop_not_member);
    /* a kill with the wrong token leaves the group alone */
    struct op_inc_ctrl c;
    n = build_ctrl(HOST(1), 0, OP_INC_CTRL_KILL, 2, pkt);
    assert_int_equal(op_inc_ctrl_decode(pkt + OP_INC_PREFIX_LEN, OP_INC_CTRL_LEN, &c), OP_OK);
    struct op_inc_hdr h = {.version = OP_INC_VERSION, .kind = OP_INC_KIND_CTRL,
                           .group_id = r.group, .token = r.token + 2};
    uint8_t payload[OP_INC_CTRL_LEN];
    op_inc_ctrl_encode(&c, payload);
    expect_drop(&r, HOST(1), pkt, build(HOST(1), &h, payload, sizeof(payload), pkt),
                OP_SW_C_drop_bad_token);
    assert_int_equal(op_sw_counters(r.sw)[OP_SW_C_groups_live], 1);
    /* with the token from a member it is obeyed: the kill reaches every member */
    h.token = r.token;
    feed(&r, HOST(2), pkt, build(HOST(2), &h, payload, sizeof(payload), pkt));
    assert_int_equal(r.n_out, 0); /* HOST(2) is rank 1, not 0 */
    h.src_rank = 1;
    feed(&r, HOST(2), pkt, build(HOST(2), &h, payload, sizeof(payload), pkt));
    assert_int_equal(r.n_out, 2);
    assert_int_equal(op_sw_counters(r.sw)[OP_SW_C_groups_live], 0);
    rig_clear(&r);
    rig_free(&r);
}

static void test_sw_lease(void **state)
{
    (void)state;
    struct rig r;
    rig_init(&r, NULL);
    rig_join(&r, 1);
    uint8_t pkt[OP_IO_BUF_SIZE];
    op_sw_timer(r.sw, T0, &r.q);
    uint64_t next = op_sw_next_timer(r.sw);
    assert_true(next > T0 && next <= T0 + 250 * OP_NS_PER_MS);
    op_sw_timer(r.sw, T0 + 29 * OP_NS_PER_S, &r.q);
    assert_int_equal(op_sw_counters(r.sw)[OP_SW_C_groups_live], 1);
    op_sw_timer(r.sw, T0 + 31 * OP_NS_PER_S, &r.q);
    assert_int_equal(op_sw_counters(r.sw)[OP_SW_C_groups_expired], 1);
    assert_int_equal(op_sw_counters(r.sw)[OP_SW_C_groups_live], 0);
    expect_drop(&r, HOST(1), pkt, build_data(&r, HOST(1), 0, 0, 1, 1, pkt),
                OP_SW_C_drop_unknown_group);
    assert_int_equal(r.n_out, 0);
    rig_free(&r);
}

static void test_sw_create_rejects_bad_config(void **state)
{
    (void)state;
    struct op_topo topo;
    parse_ok("spine s0 10.0.0.1\ntor t0 10.0.1.1 hosts 10.1.0.1-10.1.0.9 spines s0\n", &topo);
    struct op_sw_config good, cfg;
    op_sw_config_default(&good);
    good.topo = &topo;
    good.self = 1;
    struct op_sw *sw = NULL;
    assert_int_equal(op_sw_create(&good, &sw), OP_OK);
    op_sw_destroy(sw);
    op_sw_destroy(NULL);
#define REJECT(field, value)                                                                       \
    do {                                                                                           \
        cfg = good;                                                                                \
        cfg.field = value;                                                                         \
        sw = NULL;                                                                                 \
        assert_int_equal(op_sw_create(&cfg, &sw), OP_ERR_INVAL);                                   \
        assert_null(sw);                                                                           \
    } while (0)
    REJECT(topo, NULL);
    REJECT(self, -1);
    REJECT(self, 2);
    REJECT(window, 0);
    REJECT(max_children, 0);
    REJECT(max_groups, 0);
    REJECT(max_data, 0);
    REJECT(max_data, 7);
    REJECT(max_data, 12);
    REJECT(max_data, 1020);
    REJECT(max_data, OP_INC_MAX_DATA + 8);
#undef REJECT
    cfg = good;
    cfg.max_data = 8;
    cfg.window = 1;
    assert_int_equal(op_sw_create(&cfg, &sw), OP_OK);
    op_sw_destroy(sw);
    cfg.max_data = OP_INC_MAX_DATA;
    assert_int_equal(op_sw_create(&cfg, &sw), OP_OK);
    op_sw_destroy(sw);

    /* a SPINE's index picks its group id range: only 32 of them have one */
    char text[4096];
    size_t off = 0;
    for (int i = 0; i < 33; i++)
        off += (size_t)snprintf(text + off, sizeof(text) - off, "spine s%d 10.0.0.%d\n", i, i + 1);
    snprintf(text + off, sizeof(text) - off, "tor t 10.0.1.1 hosts 10.1.0.1-10.1.0.2\n");
    parse_ok(text, &topo);
    cfg = good;
    cfg.self = 31;
    assert_int_equal(op_sw_create(&cfg, &sw), OP_OK);
    op_sw_destroy(sw);
    cfg.self = 32;
    assert_int_equal(op_sw_create(&cfg, &sw), OP_ERR_INVAL);
}

static void test_sw_counter_names_and_stats(void **state)
{
    (void)state;
    assert_string_equal(op_sw_counter_name(OP_SW_C_rx_pkts), "rx_pkts");
    assert_string_equal(op_sw_counter_name(OP_SW_C_drop_icrc), "drop_icrc");
    assert_string_equal(op_sw_counter_name(OP_SW_C_COUNT_ - 1), "captured");
    assert_null(op_sw_counter_name(OP_SW_C_COUNT_));
    struct rig r;
    rig_init(&r, NULL);
    feed(&r, HOST(1), (const uint8_t *)"x", 1);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    op_sw_print_stats(r.sw, f, true);
    fflush(f);
    assert_non_null(strstr(text, "{\"switch\": \"t0\", \"role\": \"tor\""));
    assert_non_null(strstr(text, "\"rx_pkts\": 1, "));
    assert_non_null(strstr(text, "\"drop_foreign\": 1, "));
    fclose(f);
    free(text);
    f = open_memstream(&text, &len);
    assert_non_null(f);
    op_sw_print_stats(r.sw, f, false);
    fclose(f);
    assert_non_null(strstr(text, "switch t0 (tor) counters:"));
    assert_non_null(strstr(text, "drop_foreign"));
    free(text);
    rig_free(&r);
}

/* ---- the fabric: leave, switches restart, rejoin ----------------------- */

/* Every leader sums count int64 values; the result must be exact. */
static void fabric_sum(struct sim *s, size_t count)
{
    int64_t *buf = calloc((size_t)s->n_leaders * count, sizeof(*buf));
    assert_non_null(buf);
    for (int l = 0; l < s->n_leaders; l++) {
        int64_t *v = buf + (size_t)l * count;
        for (size_t i = 0; i < count; i++)
            v[i] = (l + 1) * 1000 + (int64_t)i;
        assert_int_equal(op_inc_eng_allreduce(s->leader[l], v, v, count, OP_RED_INT64, OP_RED_SUM,
                                              s->now, &s->q),
                         OP_OK);
    }
    assert_true(sim_run(s));
    int64_t n = s->n_leaders;
    for (int l = 0; l < s->n_leaders; l++) {
        assert_int_equal(op_inc_eng_status(s->leader[l]), OP_OK);
        for (size_t i = 0; i < count; i++)
            assert_int_equal(buf[(size_t)l * count + i], 1000 * n * (n + 1) / 2 + n * (int64_t)i);
    }
    free(buf);
}

static void restart_switches(struct sim *s, uint16_t window)
{
    for (int i = 0; i < s->n_sw; i++) {
        struct op_sw_config cfg;
        op_sw_config_default(&cfg);
        cfg.topo = &s->topo;
        cfg.self = i;
        cfg.window = window;
        cfg.max_data = 64;
        op_sw_destroy(s->sw[i]);
        assert_int_equal(op_sw_create(&cfg, &s->sw[i]), OP_OK);
    }
}

/* The same leader engines leave a group and join again: every switch frees
 * the group on the master's kill and installs a new one, whose window (wider
 * after the switches restart) and sequence numbers start afresh. */
static void test_fabric_rejoin_after_leave(void **state)
{
    (void)state;
    struct sim s;
    struct sim_spec spec = {.tors = 2, .spines = 1, .leaders = 3, .window = 4, .max_data = 64,
                            .seed = 3};
    sim_init(&s, &spec);
    assert_int_equal(sim_join(&s, 1), OP_OK);
    fabric_sum(&s, 100); /* 13 chunks through 4 slots */
    for (int l = 0; l < s.n_leaders; l++)
        assert_int_equal(op_inc_eng_leave(s.leader[l], s.now, &s.q), OP_OK);
    assert_true(sim_run(&s));
    for (int l = 0; l < s.n_leaders; l++)
        assert_int_equal(op_inc_eng_status(s.leader[l]), OP_OK);
    assert_int_equal(sim_sw_total(&s, OP_SW_C_groups_live), 0);
    assert_int_equal(sim_sw_total(&s, OP_SW_C_groups_freed), 3);

    restart_switches(&s, 16);
    for (int l = 0; l < s.n_leaders; l++)
        assert_int_equal(op_inc_eng_join(s.leader[l], s.now, &s.q), OP_OK);
    assert_true(sim_run(&s));
    for (int l = 0; l < s.n_leaders; l++) {
        assert_int_equal(op_inc_eng_status(s.leader[l]), OP_OK);
        assert_int_equal(op_inc_eng_caps(s.leader[l])->window, 16);
    }
    fabric_sum(&s, 300);
    assert_int_equal(sim_sw_total(&s, OP_SW_C_drop_stale), 0);
    sim_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topo_valid),
        cmocka_unit_test(test_topo_malformed),
        cmocka_unit_test(test_topo_malformed_resolved),
        cmocka_unit_test(test_topo_line_length),
        cmocka_unit_test(test_topo_too_many_switches),
        cmocka_unit_test(test_topo_lookup),
        cmocka_unit_test(test_topo_load),
        cmocka_unit_test(test_sw_foreign_and_truncated),
        cmocka_unit_test(test_sw_hostile_data),
        cmocka_unit_test(test_sw_payload_over_group_max),
        cmocka_unit_test(test_sw_hostile_control),
        cmocka_unit_test(test_sw_leaders_off_the_fabric_port),
        cmocka_unit_test(test_sw_lease),
        cmocka_unit_test(test_sw_congestion_echoed_in_results),
        cmocka_unit_test(test_sw_create_rejects_bad_config),
        cmocka_unit_test(test_sw_counter_names_and_stats),
        cmocka_unit_test(test_fabric_rejoin_after_leave),
    };
    return cmocka_run_group_tests_name("switch", tests, NULL, NULL);
}
