/* Tests for `offpath topo`'s topology files and plan: the example parses to
 * what it says, malformed lines are refused naming the line and counted,
 * routes take shortest paths with both spines as equal-cost next hops, and
 * the plan's commands are exactly those the docs describe. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "offpath/nstopo.h"
#include "offpath/topo.h"
#include "offpath/wire/inc.h"

static const char two_racks[] =
    "topo tr\n"
    "spine s1 10.255.0.1\nspine s2 10.255.0.2\n"
    "tor t1 10.1.0.254\ntor t2 10.2.0.254\n"
    "host h1 10.1.0.1  # first\nhost h2 10.1.0.2\nhost h5 10.2.0.1\n"
    "link h1 t1 rate 1gbit queue 256kb\nlink h2 t1 rate 100mbit queue 64kb\n"
    "link h5 t2 rate 1gbit queue 256kb\n"
    "link t1 s1 rate 2gbit queue 512kb\nlink t1 s2 rate 2gbit queue 512kb\n"
    "link s1 t2 rate 2gbit queue 512kb\nlink t2 s2 rate 2gbit queue 512kb\n";

static struct op_nstopo topo;

static void test_parse_example(void **state)
{
    (void)state;
    struct op_nstopo_stats st;
    char err[256];
    assert_int_equal(op_nstopo_parse(two_racks, &topo, &st, err, sizeof(err)), OP_OK);
    assert_string_equal(topo.name, "tr");
    assert_int_equal(topo.n_nodes, 7);
    assert_int_equal(topo.n_links, 7);
    assert_int_equal(st.lines, 15);
    assert_int_equal(st.malformed, 0);
    int h2 = op_nstopo_find(&topo, "h2");
    assert_int_equal(h2, 5);
    assert_int_equal(op_nstopo_find(&topo, "10.1.0.2"), h2);
    assert_int_equal(op_nstopo_find(&topo, "10.9.9.9"), -1);
    assert_int_equal(topo.nodes[h2].role, OP_NSTOPO_HOST);
    assert_int_equal(topo.nodes[h2].ip, 0x0a010002u);
    assert_int_equal(topo.links[1].rate_bps, 100000000u);
    assert_int_equal(topo.links[1].queue, 65536);
    char ns[64];
    op_nstopo_netns(&topo, h2, ns, sizeof(ns));
    assert_string_equal(ns, "opt-tr-h2");
}

static void expect_bad(const char *text, const char *why, uint32_t malformed)
{
    struct op_nstopo_stats st;
    char err[256];
    assert_int_equal(op_nstopo_parse(text, &topo, &st, err, sizeof(err)), OP_ERR_MALFORMED);
    if (strstr(err, why) == NULL)
        fail_msg("'%s' does not say '%s'", err, why);
    assert_int_equal(st.malformed, malformed);
}

#define HEAD "topo x\nhost h1 10.0.0.1\ntor t1 10.0.0.254\n"
#define LINK "link h1 t1 rate 1gbit queue 64kb\n"

static void test_link_faults(void **state)
{
    (void)state;
    struct op_nstopo_stats st;
    char err[256];
    assert_int_equal(op_nstopo_parse(HEAD "link h1 t1 rate 1gbit queue 64kb delay 250us loss 0.5%\n",
                                     &topo, &st, err, sizeof(err)),
                     OP_OK);
    assert_int_equal(topo.links[0].delay_us, 250);
    assert_true(topo.links[0].loss > 0.00499 && topo.links[0].loss < 0.00501);
    assert_int_equal(op_nstopo_parse(HEAD "link h1 t1 rate 1gbit queue 64kb loss 100% delay 2ms\n",
                                     &topo, &st, err, sizeof(err)),
                     OP_OK);
    assert_int_equal(topo.links[0].delay_us, 2000);
    assert_true(topo.links[0].loss == 1.0);
    assert_int_equal(op_nstopo_parse(HEAD "link h1 t1 rate 1gbit queue 64kb down 2000+1500\n",
                                     &topo, &st, err, sizeof(err)),
                     OP_OK);
    assert_int_equal(topo.links[0].down_after_ms, 2000);
    assert_int_equal(topo.links[0].down_for_ms, 1500);
    assert_int_equal(topo.links[0].down_at_inc, 0);
    assert_int_equal(op_nstopo_parse(HEAD "link h1 t1 rate 1gbit queue 64kb down inc:300+700\n",
                                     &topo, &st, err, sizeof(err)),
                     OP_OK);
    assert_int_equal(topo.links[0].down_after_ms, 0);
    assert_int_equal(topo.links[0].down_for_ms, 700);
    assert_int_equal(topo.links[0].down_at_inc, 300);
    assert_int_equal(op_nstopo_parse(HEAD LINK, &topo, &st, err, sizeof(err)), OP_OK);
    assert_int_equal(topo.links[0].delay_us, 0);
    assert_true(topo.links[0].loss == 0);
}

static void test_malformed(void **state)
{
    (void)state;
    expect_bad(HEAD LINK "bogus 1\n", "line 5: unknown keyword 'bogus'", 1);
    expect_bad(HEAD LINK "host h1 10.0.0.9\n", "line 5: node 'h1' declared twice", 1);
    expect_bad(HEAD LINK "host h2 10.0.0.1\n", "line 5: address 10.0.0.1 given twice", 1);
    expect_bad(HEAD LINK "host H2 10.0.0.2\n", "line 5: bad node name 'H2'", 1);
    expect_bad(HEAD LINK "host averyveryverylongname 10.0.0.2\n", "line 5: bad node name", 1);
    expect_bad(HEAD LINK "host h2 10.0.0.256\n", "line 5: bad address '10.0.0.256'", 1);
    expect_bad(HEAD LINK "host h2 127.0.0.2\n", "line 5: bad address", 1);
    expect_bad(HEAD LINK "host h2 10.0.0.2:80\n", "line 5: bad address", 1);
    expect_bad(HEAD LINK "host h2\n", "line 5: host wants a name, an IPv4 address", 1);
    expect_bad(HEAD "link h1 t1 rate 1gbps queue 64kb\n", "line 4: bad rate '1gbps'", 1);
    expect_bad(HEAD "link h1 t1 rate 1kbit queue 64kb\n", "line 4: bad rate", 1);
    expect_bad(HEAD "link h1 t1 rate 1gbit queue 1kb\n", "line 4: bad queue '1kb'", 1);
    expect_bad(HEAD "link h1 t1 rate 1gbit queue 99999999999999999999kb\n", "line 4: bad queue",
               1);
    expect_bad(HEAD "link h1 t1 rate 1gbit\n", "line 4: link wants", 1);
    expect_bad(HEAD "link h1 t1 rate 1gbit queue 64kb loss\n", "line 4: 'loss' wants a value", 1);
    expect_bad(HEAD "link h1 t1 rate 1gbit queue 64kb loss 1\n", "line 4: bad loss '1'", 1);
    expect_bad(HEAD "link h1 t1 rate 1gbit queue 64kb loss 101%\n", "line 4: bad loss", 1);
    expect_bad(HEAD "link h1 t1 rate 1gbit queue 64kb loss -1%\n", "line 4: bad loss", 1);
    expect_bad(HEAD "link h1 t1 rate 1gbit queue 64kb delay 2s\n", "line 4: bad delay '2s'", 1);
    expect_bad(HEAD "link h1 t1 rate 1gbit queue 64kb delay 1001ms\n", "line 4: bad delay", 1);
    expect_bad(HEAD "link h1 t1 rate 1gbit queue 64kb loss 1% loss 2%\n",
               "line 4: 'loss' after the queue", 1);
    expect_bad(HEAD "link h1 t1 rate 1gbit queue 64kb jitter 1ms\n",
               "line 4: 'jitter' after the queue", 1);
    expect_bad(HEAD "link h1 t1 rate 1gbit queue 64kb down 100\n", "line 4: bad down '100'", 1);
    expect_bad(HEAD "link h1 t1 rate 1gbit queue 64kb down 100+0\n", "line 4: bad down", 1);
    expect_bad(HEAD "link h1 t1 rate 1gbit queue 64kb down +5\n", "line 4: bad down", 1);
    expect_bad(HEAD "link h1 t1 rate 1gbit queue 64kb down 1+5x\n", "line 4: bad down", 1);
    expect_bad(HEAD "link h1 t1 rate 1gbit queue 64kb down inc:5\n", "line 4: bad down", 1);
    expect_bad(HEAD "link h1 t1 rate 1gbit queue 64kb down inc:0+5\n", "line 4: bad down", 1);
    expect_bad(HEAD "link h1 t1 rate 1gbit queue 64kb down inc:+1+5\n", "line 4: bad down", 1);
    expect_bad(HEAD "link h1 t1 rate 1gbit queue 64kb down inc+1+5\n", "line 4: bad down", 1);
    expect_bad(HEAD "link h1 t9 rate 1gbit queue 64kb\n", "line 4: link to undeclared node 't9'",
               1);
    expect_bad(HEAD LINK "link t1 h1 rate 1gbit queue 64kb\n", "line 5: link t1-h1 given twice",
               1);
    expect_bad(HEAD LINK "host h2 10.0.0.2\nlink h1 h2 rate 1gbit queue 64kb\n",
               "line 6: link h1-h2: links join", 1);
    expect_bad(HEAD LINK "topo y\n", "line 5: a second topo line", 1);
    expect_bad("topo X\n", "line 1: bad topo name 'X'", 1);
    expect_bad(HEAD LINK "host h2 10.0.0.2 fe80::1\n", "line 5: bad IPv6 address 'fe80::1'", 1);
    expect_bad(HEAD LINK "host h2 10.0.0.2 ff02::1\n", "line 5: bad IPv6 address", 1);
    expect_bad(HEAD LINK "host h2 10.0.0.2 ::1\n", "line 5: bad IPv6 address", 1);
    expect_bad(HEAD LINK "host h2 10.0.0.2 fd00::1::2\n", "line 5: bad IPv6 address", 1);
    expect_bad(HEAD LINK "host h2 10.0.0.2 10.0.0.3\n", "line 5: bad IPv6 address", 1);
    expect_bad("topo x\nhost h1 10.0.0.1 fd00::1\ntor t1 10.0.0.254 fd00::1\n",
               "line 3: address fd00::1 given twice", 1);
    expect_bad("topo x\nhost h1 10.0.0.1 fd00::1\ntor t1 10.0.0.254\n" LINK,
               "line 3: IPv6 on h1 but not on t1", 1);
    /* every bad line counted, the first named */
    expect_bad(HEAD LINK "a\nb\nhost h9\n", "line 5: unknown keyword 'a'", 3);
    /* what only the whole file shows, naming the line of the node */
    expect_bad("host h1 10.0.0.1\ntor t1 10.0.0.254\n" LINK, "no 'topo NAME' line", 1);
    expect_bad(HEAD "host h2 10.0.0.2\n" LINK, "line 4: host h2 has 0 links", 1);
    expect_bad(HEAD LINK "spine s1 10.9.0.1\n", "line 5: s1 has no link", 1);
    expect_bad("topo x\ntor t1 10.0.0.254\nspine s1 10.9.0.1\nlink t1 s1 rate 1gbit queue 64kb\n",
               "line 4: no host", 1);
    char longline[600];
    memset(longline, 'a', sizeof(longline) - 1);
    longline[sizeof(longline) - 1] = '\0';
    expect_bad(longline, "line 1: longer than", 1);
}

static void test_next_hops(void **state)
{
    (void)state;
    assert_int_equal(op_nstopo_parse(two_racks, &topo, NULL, NULL, 0), OP_OK);
    uint16_t hops[OP_NSTOPO_MAX_PATHS];
    int h1 = op_nstopo_find(&topo, "h1"), h2 = op_nstopo_find(&topo, "h2"),
        h5 = op_nstopo_find(&topo, "h5"), t1 = op_nstopo_find(&topo, "t1"),
        t2 = op_nstopo_find(&topo, "t2"), s1 = op_nstopo_find(&topo, "s1"),
        s2 = op_nstopo_find(&topo, "s2");
    assert_int_equal(op_nstopo_next_hops(&topo, h1, h5, hops), 1);
    assert_int_equal(hops[0], t1);
    assert_int_equal(op_nstopo_next_hops(&topo, t1, h5, hops), 2); /* both spines */
    assert_int_equal(hops[0], s1);
    assert_int_equal(hops[1], s2);
    assert_int_equal(op_nstopo_next_hops(&topo, s2, h5, hops), 1);
    assert_int_equal(hops[0], t2);
    assert_int_equal(op_nstopo_next_hops(&topo, t1, h2, hops), 1); /* within the rack */
    assert_int_equal(hops[0], h2);
    assert_int_equal(op_nstopo_next_hops(&topo, h1, h1, hops), 0);
}

struct capture {
    char lines[512][256];
    int n, stop_at;
};

static bool capture(int argc, const char *const *argv, void *ctx)
{
    struct capture *c = ctx;
    char *out = c->lines[c->n];
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < argc; i++) {
        int n = snprintf(out + len, sizeof(c->lines[0]) - len, "%s%s", i > 0 ? " " : "", argv[i]);
        assert_true(n > 0 && (size_t)n < sizeof(c->lines[0]) - len);
        len += (size_t)n;
    }
    return ++c->n != c->stop_at;
}

static bool has(const struct capture *c, const char *line)
{
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->lines[i], line) == 0)
            return true;
    return false;
}

static void test_mtu(void **state)
{
    (void)state;
    static struct capture c;
    memset(&c, 0, sizeof(c));
    struct op_nstopo_stats st;
    char err[256];
    assert_int_equal(op_nstopo_parse(HEAD LINK, &topo, &st, err, sizeof(err)), OP_OK);
    assert_int_equal(op_nstopo_mtu(&topo), 1500);
    assert_int_equal(op_nstopo_parse("topo x\nmtu 3800\nhost h1 10.0.0.1\ntor t1 10.0.0.254\n" LINK,
                                     &topo, &st, err, sizeof(err)),
                     OP_OK);
    assert_int_equal(op_nstopo_mtu(&topo), 3800);
    assert_true(op_nstopo_plan(&topo, capture, &c));
    assert_true(has(&c, "ip -n opt-x-h1 link set t1 mtu 3800 up"));
    assert_true(has(&c, "ip -n opt-x-t1 link set h1 mtu 3800 up"));
    expect_bad(HEAD LINK "mtu 9001\n", "line 5: mtu wants one number, 1280..9000", 1);
    expect_bad(HEAD LINK "mtu 1000\n", "line 5: mtu wants one number", 1);
    expect_bad(HEAD LINK "mtu 1500 1500\n", "line 5: mtu wants one number", 1);
    expect_bad(HEAD LINK "mtu 1500\nmtu 1600\n", "line 6: a second mtu line", 1);
}

static void test_plan(void **state)
{
    (void)state;
    static struct capture c;
    memset(&c, 0, sizeof(c));
    assert_int_equal(op_nstopo_parse(two_racks, &topo, NULL, NULL, 0), OP_OK);
    assert_true(op_nstopo_plan(&topo, capture, &c));
    /* 3 a node, 9 a link, a route from every node to every other */
    assert_int_equal(c.n, 3 * 7 + 7 * 9 + 7 * 6);
    assert_string_equal(c.lines[0], "ip netns add opt-tr-s1");
    assert_true(has(&c, "ip -n opt-tr-t1 link set lo up"));
    assert_true(has(&c, "ip netns exec opt-tr-t1 sysctl -q -w net.ipv4.conf.all.rp_filter=0 "
                        "net.ipv4.conf.default.rp_filter=0 net.ipv4.ip_forward=1"));
    assert_true(has(&c, "ip netns exec opt-tr-h1 sysctl -q -w net.ipv4.conf.all.rp_filter=0 "
                        "net.ipv4.conf.default.rp_filter=0 net.ipv4.ip_forward=0"));
    assert_true(
        has(&c, "ip link add t1 netns opt-tr-h2 type veth peer name h2 netns opt-tr-t1"));
    assert_true(has(&c, "ip -n opt-tr-t1 addr add 10.1.0.254/32 dev h2"));
    assert_true(has(&c, "ip -n opt-tr-h2 link set t1 up"));
    assert_true(has(&c, "ip netns exec opt-tr-h2 ethtool -K t1 tx off"));
    assert_true(has(&c, "ip netns exec opt-tr-t1 ethtool -K h2 tx off"));
    assert_true(has(&c, "tc -n opt-tr-h2 qdisc add dev t1 root tbf rate 100000000bit burst "
                        "16384 limit 65536"));
    assert_true(has(&c, "tc -n opt-tr-t1 qdisc add dev s1 root tbf rate 2000000000bit burst "
                        "250000 limit 524288"));
    assert_true(has(&c, "ip -n opt-tr-h1 route add 10.1.0.254/32 dev t1"));
    assert_true(has(&c, "ip -n opt-tr-h1 route add 10.2.0.1/32 via 10.1.0.254 dev t1 onlink"));
    assert_true(has(&c, "ip -n opt-tr-t1 route add 10.2.0.1/32 nexthop via 10.255.0.1 dev s1 "
                        "onlink nexthop via 10.255.0.2 dev s2 onlink"));
    assert_true(has(&c, "ip -n opt-tr-s1 route add 10.1.0.2/32 via 10.1.0.254 dev t1 onlink"));
    /* an emit that stops stops the plan */
    memset(&c, 0, sizeof(c));
    c.stop_at = 5;
    assert_false(op_nstopo_plan(&topo, capture, &c));
    assert_int_equal(c.n, 5);
}

static void test_plan_ipv6(void **state)
{
    (void)state;
    static struct capture c;
    memset(&c, 0, sizeof(c));
    static const char v6[] = "topo s\nspine s1 10.9.0.1 fd00:9::1\nspine s2 10.9.0.2 fd00:9::2\n"
                             "tor t1 10.1.0.254 fd00:1::fe\ntor t2 10.2.0.254 fd00:2::fe\n"
                             "host h1 10.1.0.1 fd00:1::1\nhost h2 10.2.0.1 fd00:2::1\n"
                             "link h1 t1 rate 1gbit queue 64kb\nlink h2 t2 rate 1gbit queue 64kb\n"
                             "link t1 s1 rate 1gbit queue 64kb\nlink t1 s2 rate 1gbit queue 64kb\n"
                             "link t2 s1 rate 1gbit queue 64kb\nlink t2 s2 rate 1gbit queue 64kb\n";
    assert_int_equal(op_nstopo_parse(v6, &topo, NULL, NULL, 0), OP_OK);
    assert_true(topo.ip6);
    assert_int_equal(op_nstopo_find(&topo, "fd00:2:0::1"), op_nstopo_find(&topo, "h2"));
    assert_true(op_nstopo_plan(&topo, capture, &c));
    /* 3 a node, 11 a link (an IPv6 address on each end too), two routes a pair */
    assert_int_equal(c.n, 3 * 6 + 11 * 6 + 2 * 6 * 5);
    assert_true(has(&c, "ip netns exec opt-s-s1 sysctl -q -w net.ipv4.conf.all.rp_filter=0 "
                        "net.ipv4.conf.default.rp_filter=0 net.ipv4.ip_forward=1 "
                        "net.ipv6.conf.all.forwarding=1 net.ipv6.conf.default.accept_dad=0"));
    assert_true(has(&c, "ip -n opt-s-t1 addr add fd00:1::fe/128 dev h1 nodad"));
    assert_true(has(&c, "ip -n opt-s-h1 -6 route add fd00:1::fe/128 dev t1"));
    assert_true(has(&c, "ip -n opt-s-t1 -6 route add fd00:2::1/128 nexthop via fd00:9::1 dev s1 "
                        "onlink nexthop via fd00:9::2 dev s2 onlink"));
    assert_true(has(&c, "ip -n opt-s-t1 route add 10.2.0.1/32 nexthop via 10.9.0.1 dev s1 "
                        "onlink nexthop via 10.9.0.2 dev s2 onlink"));
}

static void test_burst(void **state)
{
    (void)state;
    assert_int_equal(op_nstopo_burst(8000), 16384);
    assert_int_equal(op_nstopo_burst(1000000000), 125000);
    assert_int_equal(op_nstopo_burst(100000000000ull), 12500000);
}

/* The switches' file for two racks reads back through the switches' own
 * parser: two spines, each TOR with its hosts' range and both spines. */
static void test_switches_file(void **state)
{
    (void)state;
    struct op_nstopo_stats st;
    char err[256], text[2048];
    assert_int_equal(op_nstopo_parse(two_racks, &topo, &st, err, sizeof(err)), OP_OK);
    assert_int_equal(op_nstopo_switches(&topo, text, sizeof text, err, sizeof err), OP_OK);
    assert_non_null(strstr(text, "tor t1 10.1.0.254 hosts 10.1.0.1-10.1.0.2 spines s1,s2\n"));
    assert_non_null(strstr(text, "tor t2 10.2.0.254 hosts 10.2.0.1-10.2.0.1 spines s1,s2\n"));
    static struct op_topo sw;
    assert_int_equal(op_topo_parse(text, &sw, err, sizeof err), OP_OK);
    assert_int_equal(sw.n, 4);
    int t2 = op_topo_find(&sw, "t2");
    assert_true(t2 >= 0);
    assert_int_equal(op_topo_tor_of(&sw, 0x0a020001u), t2);
    assert_int_equal(op_topo_tor_of(&sw, 0x0a010002u), op_topo_find(&sw, "t1"));
    assert_int_equal(sw.sw[t2].n_up, 2);
    assert_int_equal(op_nstopo_switches(&topo, text, 40, err, sizeof err), OP_ERR_NOSPACE);
}

/* Refused, naming the host: one whose address lies inside another TOR's
 * hosts' range, one under two TORs. */
static void test_switches_file_refused(void **state)
{
    (void)state;
    struct op_nstopo_stats st;
    char err[256], text[2048];
    static const char interleaved[] =
        "topo x\ntor t1 10.1.0.254\ntor t2 10.2.0.254\n"
        "host a 10.1.0.1\nhost b 10.1.0.9\nhost c 10.1.0.5\n"
        "link a t1 rate 1gbit queue 64kb\nlink b t1 rate 1gbit queue 64kb\n"
        "link c t2 rate 1gbit queue 64kb\n";
    assert_int_equal(op_nstopo_parse(interleaved, &topo, &st, err, sizeof(err)), OP_OK);
    assert_int_equal(op_nstopo_switches(&topo, text, sizeof text, err, sizeof err), OP_ERR_INVAL);
    assert_string_equal(err, "host c (under t2) lies in the address range of t1's hosts");
    /* the parser refuses a host with two links; a topology built in code may not */
    static const char one_tor[] =
        "topo y\ntor t1 10.1.0.254\ntor t2 10.2.0.254\nspine s 10.255.0.1\n"
        "host a 10.1.0.1\nlink a t1 rate 1gbit queue 64kb\n"
        "link t1 s rate 1gbit queue 64kb\nlink t2 s rate 1gbit queue 64kb\n";
    assert_int_equal(op_nstopo_parse(one_tor, &topo, &st, err, sizeof(err)), OP_OK);
    topo.links[topo.n_links++] = (struct op_nstopo_link){
        .a = (uint16_t)op_nstopo_find(&topo, "a"), .b = (uint16_t)op_nstopo_find(&topo, "t2"),
        .rate_bps = 1000000000, .queue = 65536};
    assert_int_equal(op_nstopo_switches(&topo, text, sizeof text, err, sizeof err), OP_ERR_INVAL);
    assert_string_equal(err, "host a: linked to more than one TOR");
}

/* topo up's switches take INC's largest chunk, so that leaders at MTU 9000
 * get what they ask for (nstopo cannot see wire's constant). */
static void test_switches_take_the_largest_chunk(void **state)
{
    (void)state;
    assert_int_equal(OP_NSTOPO_SWITCH_MAX_DATA, OP_INC_MAX_DATA);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_example), cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_link_faults), cmocka_unit_test(test_mtu),
        cmocka_unit_test(test_next_hops),     cmocka_unit_test(test_plan),
        cmocka_unit_test(test_switches_take_the_largest_chunk),
        cmocka_unit_test(test_plan_ipv6),     cmocka_unit_test(test_burst),
        cmocka_unit_test(test_switches_file), cmocka_unit_test(test_switches_file_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
