/* Unit tests of the switch on the path (offpath/switch.h, op_sw_path_*)
 * over mock frame backends: ARP/NDP/echo answered for its own address
 * only, frames routed between ports (MACs rewritten, TTL one less, the
 * IPv4 checksum still right), nothing sent towards a neighbour whose MAC is
 * not known yet (asked for), TTL and no-route drops, ECMP keeping a flow on
 * one port, INC to our address handed to the engine, the egress shaped to
 * the link's rate with its queue's tail drops, a link taken down, and the
 * counters of every port balancing. Also the path derived from a namespace
 * topology (routes, ports, refusals). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "frame_mock.h"
#include "offpath/nstopo.h"
#include "offpath/switch.h"

#define ETH 14

static const uint8_t mac_sw[3][6] = {{2, 0, 0, 0, 0, 0xa0}, {2, 0, 0, 0, 0, 0xa1},
                                     {2, 0, 0, 0, 0, 0xa2}};
static const uint8_t mac_peer[3][6] = {{2, 0, 0, 0, 0, 0xb0}, {2, 0, 0, 0, 0, 0xb1},
                                       {2, 0, 0, 0, 0, 0xb2}};
#define OWN 0x0a0000feu
#define PEER(i) (0x0a000001u + (uint32_t)(i)) /* the neighbour on port i */
#define FAR 0x0a000063u                        /* behind ports 1 and 2 */
static const uint8_t own6[16] = {0xfd, [15] = 0xfe}, peer6_0[16] = {0xfd, [15] = 1};

struct rig {
    struct op_sw_path *p;
    struct mock *m[3];
};

/* Three ports: peers 10.0.0.1..3; FAR reachable over ports 1 and 2. */
static void rig_config(struct op_sw_path_config *c, int ports)
{
    memset(c, 0, sizeof *c);
    c->own4 = op_addr_ipv4(OWN);
    c->own6 = op_addr_ipv6(own6);
    c->inc_port = 4791;
    c->n_ports = ports;
    for (int i = 0; i < ports; i++) {
        snprintf(c->ports[i].name, sizeof c->ports[i].name, "p%d", i);
        c->ports[i].peer4 = op_addr_ipv4(PEER(i));
        c->routes[c->n_routes].dst = op_addr_ipv4(PEER(i));
        c->routes[c->n_routes].n_ports = 1;
        c->routes[c->n_routes++].ports[0] = (uint8_t)i;
    }
    c->ports[0].peer6 = op_addr_ipv6(peer6_0);
    c->routes[c->n_routes].dst = op_addr_ipv6(peer6_0);
    c->routes[c->n_routes].n_ports = 1;
    c->routes[c->n_routes++].ports[0] = 0;
    if (ports == 3) {
        struct op_sw_route *r = &c->routes[c->n_routes++];
        r->dst = op_addr_ipv4(FAR);
        r->n_ports = 2;
        r->ports[0] = 1;
        r->ports[1] = 2;
    }
}

static void rig_open(struct rig *r, struct op_sw_path_config *c, struct op_sw *sw)
{
    char err[256] = "";
    for (int i = 0; i < c->n_ports; i++) {
        r->m[i] = mock_new_mac(mac_sw[i]);
        c->ports[i].io = &r->m[i]->io;
    }
    assert_int_equal(op_sw_path_create(c, sw, NULL, &r->p, err, sizeof err), OP_OK);
    assert_int_equal(op_sw_path_run_once(r->p, 0), 0); /* the first questions leave */
    for (int i = 0; i < c->n_ports; i++)
        r->m[i]->n_out = 0;
}

static uint64_t ctr(const struct rig *r, int port, enum op_sw_path_counter c)
{
    uint64_t v[OP_SW_PATH_C_COUNT_];
    op_sw_path_counters(r->p, port, v);
    return v[c];
}

static void run(struct rig *r) { (void)op_sw_path_run_once(r->p, 0); }

/* Every frame received is counted once: control, forwarded, to_inc or a drop. */
static void assert_balanced(const struct rig *r, int ports)
{
    for (int i = 0; i < ports; i++) {
        uint64_t v[OP_SW_PATH_C_COUNT_];
        op_sw_path_counters(r->p, i, v);
        uint64_t fates = v[OP_SW_PATH_C_control] + v[OP_SW_PATH_C_forwarded] +
                         v[OP_SW_PATH_C_to_inc] + v[OP_SW_PATH_C_drop_no_route] +
                         v[OP_SW_PATH_C_drop_no_neigh] + v[OP_SW_PATH_C_drop_ttl] +
                         v[OP_SW_PATH_C_drop_local] + v[OP_SW_PATH_C_drop_other] +
                         v[OP_SW_PATH_C_drop_injected];
        assert_int_equal(v[OP_SW_PATH_C_rx_frames], fates);
    }
}

/* A UDP frame as the neighbour on port `from` sends it, with this TOS. */
static void inject_udp_tos(struct mock *m, int from, uint32_t src, uint32_t dst, uint16_t sport,
                           uint16_t dport, uint8_t ttl, uint8_t tos, const char *payload)
{
    struct op_flow f = {.src = op_addr_ipv4(src), .dst = op_addr_ipv4(dst), .src_port = sport,
                        .dst_port = dport};
    struct op_frame_l2 l2 = {.tos = tos};
    memcpy(l2.src_mac, mac_peer[from], 6);
    memcpy(l2.dst_mac, mac_sw[from], 6);
    uint8_t *fr = m->in[m->n_in];
    size_t hdr = op_udp_frame_hdr_len(OP_AF_IPV4), len = strlen(payload);
    memcpy(fr + hdr, payload, len);
    m->in_len[m->n_in] = (uint32_t)op_udp_frame_build(fr, 2048, &f, &l2, len);
    fr[ETH + 8] = ttl;
    fr[ETH + 10] = fr[ETH + 11] = 0; /* the checksum again for this TTL */
    uint32_t sum = 0;
    for (int i = 0; i < 20; i += 2)
        sum += (uint32_t)(fr[ETH + i] << 8 | fr[ETH + i + 1]);
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    fr[ETH + 10] = (uint8_t)(~sum >> 8);
    fr[ETH + 11] = (uint8_t)~sum;
    m->n_in++;
}

static void inject_udp(struct mock *m, int from, uint32_t src, uint32_t dst, uint16_t sport,
                       uint16_t dport, uint8_t ttl, const char *payload)
{
    inject_udp_tos(m, from, src, dst, sport, dport, ttl, 0, payload);
}

/* The neighbour on port `from` asks for target (ARP, or NDP for IPv6). */
static void inject_question(struct mock *m, int from, const struct op_addr *asker,
                            const struct op_addr *target)
{
    m->in_len[m->n_in] =
        (uint32_t)op_neigh_solicit_build(m->in[m->n_in], 2048, asker, mac_peer[from], target);
    m->n_in++;
}

static void learn_peer(struct rig *r, int port)
{
    struct op_addr a = op_addr_ipv4(PEER(port)), us = op_addr_ipv4(OWN);
    inject_question(r->m[port], port, &a, &us);
    run(r);
    r->m[port]->n_out = 0;
}

static bool ipv4_checksum_ok(const uint8_t *ip)
{
    uint32_t sum = 0;
    for (int i = 0; i < 20; i += 2)
        sum += (uint32_t)(ip[i] << 8 | ip[i + 1]);
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return sum == 0xffff;
}

static void test_answers_for_its_own_addresses_only(void **state)
{
    (void)state;
    struct op_sw_path_config c;
    struct rig r;
    rig_config(&c, 2);
    rig_open(&r, &c, NULL);
    struct op_addr a = op_addr_ipv4(PEER(0)), us = op_addr_ipv4(OWN), other = op_addr_ipv4(PEER(1));
    struct op_addr a6 = op_addr_ipv6(peer6_0), us6 = op_addr_ipv6(own6);
    inject_question(r.m[0], 0, &a, &us);
    inject_question(r.m[0], 0, &a, &other); /* not ours: taken, not answered */
    inject_question(r.m[0], 0, &a6, &us6);
    run(&r);
    assert_int_equal(r.m[0]->n_out, 2);
    assert_int_equal(r.m[1]->n_out, 0);
    assert_memory_equal(r.m[0]->out[0], mac_peer[0], 6);
    assert_int_equal(r.m[0]->out[0][ETH + 7], 2);                  /* ARP reply */
    assert_memory_equal(r.m[0]->out[0] + ETH + 8, mac_sw[0], 6);   /* our port's MAC */
    assert_int_equal(r.m[0]->out[1][ETH + 40], 136);               /* neighbour advertisement */
    assert_int_equal(ctr(&r, 0, OP_SW_PATH_C_control), 3);
    /* the two answers, after the questions for the neighbour sent at start */
    assert_int_equal(ctr(&r, 0, OP_SW_PATH_C_tx_frames) - ctr(&r, 0, OP_SW_PATH_C_neigh_asked), 2);
    assert_balanced(&r, 2);
    op_sw_path_destroy(r.p);
}

static void test_forwards_once_the_next_hop_is_known(void **state)
{
    (void)state;
    struct op_sw_path_config c;
    struct rig r;
    rig_config(&c, 2);
    rig_open(&r, &c, NULL);
    /* port 1's neighbour not known: dropped, and asked for */
    inject_udp(r.m[0], 0, PEER(0), PEER(1), 1000, 2000, 64, "first");
    run(&r);
    assert_int_equal(ctr(&r, 0, OP_SW_PATH_C_drop_no_neigh), 1);
    assert_int_equal(r.m[1]->n_out, 0); /* asked a second ago already */
    learn_peer(&r, 1);
    inject_udp(r.m[0], 0, PEER(0), PEER(1), 1000, 2000, 64, "second");
    run(&r);
    assert_int_equal(r.m[1]->n_out, 1);
    const uint8_t *f = r.m[1]->out[0];
    assert_memory_equal(f, mac_peer[1], 6);
    assert_memory_equal(f + 6, mac_sw[1], 6);
    assert_int_equal(f[ETH + 8], 63);
    assert_true(ipv4_checksum_ok(f + ETH));
    assert_memory_equal(f + ETH + 28, "second", 6);
    assert_int_equal(ctr(&r, 0, OP_SW_PATH_C_forwarded), 1);
    /* the question at start, the answer to the neighbour's, the frame */
    assert_int_equal(ctr(&r, 1, OP_SW_PATH_C_tx_frames), 3);
    assert_balanced(&r, 2);
    op_sw_path_destroy(r.p);
}

static void test_drops_ttl_no_route_and_local(void **state)
{
    (void)state;
    struct op_sw_path_config c;
    struct rig r;
    rig_config(&c, 2);
    rig_open(&r, &c, NULL);
    learn_peer(&r, 1);
    inject_udp(r.m[0], 0, PEER(0), PEER(1), 1, 2, 1, "ttl");          /* would reach 0 */
    inject_udp(r.m[0], 0, PEER(0), 0x0b000001u, 1, 2, 64, "nowhere"); /* no route */
    inject_udp(r.m[0], 0, PEER(0), OWN, 1, 4791, 64, "inc");          /* no engine here */
    inject_udp(r.m[0], 0, PEER(0), 0xe0000001u, 1, 2, 64, "group");   /* multicast */
    run(&r);
    assert_int_equal(r.m[1]->n_out, 0);
    assert_int_equal(ctr(&r, 0, OP_SW_PATH_C_drop_ttl), 1);
    assert_int_equal(ctr(&r, 0, OP_SW_PATH_C_drop_no_route), 1);
    assert_int_equal(ctr(&r, 0, OP_SW_PATH_C_drop_local), 1);
    assert_int_equal(ctr(&r, 0, OP_SW_PATH_C_drop_other), 1);
    assert_balanced(&r, 2);
    op_sw_path_destroy(r.p);
}

static void test_ecmp_keeps_a_flow_on_one_port(void **state)
{
    (void)state;
    struct op_sw_path_config c;
    struct rig r;
    rig_config(&c, 3);
    rig_open(&r, &c, NULL);
    learn_peer(&r, 1);
    learn_peer(&r, 2);
    for (int flow = 0; flow < 16; flow++)
        for (int k = 0; k < 4; k++)
            inject_udp(r.m[0], 0, PEER(0), FAR, (uint16_t)(49152 + flow * 7), 4791, 64, "x");
    run(&r);
    assert_int_equal(r.m[1]->n_out + r.m[2]->n_out, 64);
    assert_true(r.m[1]->n_out > 0 && r.m[2]->n_out > 0); /* 16 flows use both */
    for (int p = 1; p <= 2; p++) /* each port carries whole flows: 4 frames each */
        assert_int_equal(r.m[p]->n_out % 4, 0);
    for (int p = 1; p <= 2; p++)
        for (int i = 0; i + 1 < r.m[p]->n_out; i += 4)
            for (int k = 1; k < 4; k++) /* the same source port four times in a row */
                assert_memory_equal(r.m[p]->out[i] + ETH + 20, r.m[p]->out[i + k] + ETH + 20, 2);
    assert_balanced(&r, 3);
    op_sw_path_destroy(r.p);
}

/* An INC engine of a TOR of two hosts; topo outlives it. */
static struct op_sw *tor_engine(struct op_topo *topo)
{
    char err[200];
    assert_int_equal(op_topo_parse("tor t1 10.0.0.254 hosts 10.0.0.1-10.0.0.2\n", topo, err,
                                   sizeof err),
                     OP_OK);
    struct op_sw_config sc;
    op_sw_config_default(&sc);
    sc.topo = topo;
    sc.self = 0;
    struct op_sw *sw;
    assert_int_equal(op_sw_create(&sc, &sw), OP_OK);
    return sw;
}

static void test_inc_to_our_address_reaches_the_engine(void **state)
{
    (void)state;
    struct op_topo topo;
    struct op_sw *sw = tor_engine(&topo);
    struct op_sw_path_config c;
    struct rig r;
    rig_config(&c, 2);
    rig_open(&r, &c, sw);
    inject_udp(r.m[0], 0, PEER(0), OWN, 49152, 4791, 64, "not an INC packet");
    inject_udp(r.m[0], 0, PEER(0), OWN, 49152, 4792, 64, "another port");
    inject_udp_tos(r.m[0], 0, PEER(0), OWN, 49152, 4791, 64, OP_ECN_CE, "a marked non-INC one");
    run(&r);
    assert_int_equal(ctr(&r, 0, OP_SW_PATH_C_to_inc), 2);
    assert_int_equal(ctr(&r, 0, OP_SW_PATH_C_ecn_seen), 1);
    assert_int_equal(ctr(&r, 0, OP_SW_PATH_C_drop_local), 1);
    assert_int_equal(op_sw_counters(sw)[OP_SW_C_rx_pkts], 2);
    assert_int_equal(op_sw_counters(sw)[OP_SW_C_drop_malformed] +
                         op_sw_counters(sw)[OP_SW_C_drop_foreign],
                     2);
    assert_balanced(&r, 2);
    op_sw_path_destroy(r.p);
    op_sw_destroy(sw);
}

/* Port 1 at 8 Mbit/s (a byte a microsecond) with a 1500-byte burst, this
 * queue and ECN threshold, its peer known and the questions' time on the
 * wire passed; big: a 999-byte payload of c (1041-byte frames). */
static void shaped_rig(struct rig *r, uint32_t queue, uint32_t ecn, char c, char big[1000])
{
    static struct op_sw_path_config cfg;
    rig_config(&cfg, 2);
    cfg.ports[1].rate_bps = 8000000;
    cfg.ports[1].queue_bytes = queue;
    cfg.ports[1].burst_bytes = 1500;
    cfg.ports[1].ecn_bytes = ecn;
    rig_open(r, &cfg, NULL);
    learn_peer(r, 1);
    usleep(5000);
    r->m[1]->n_out = 0;
    memset(big, c, 999);
    big[999] = '\0';
}

static void test_egress_shaped_to_the_link_rate(void **state)
{
    (void)state;
    struct rig r;
    char big[1000];
    shaped_rig(&r, 3000, 0, 'z', big);
    for (int i = 0; i < 6; i++) /* 1041-byte frames */
        inject_udp(r.m[0], 0, PEER(0), PEER(1), 1, 2, 64, big);
    run(&r);
    /* the burst (1500 B) lets two frames go at once; two wait (2082 B of
     * the 3000); two find the queue full */
    assert_int_equal(r.m[1]->n_out, 2);
    assert_int_equal(ctr(&r, 1, OP_SW_PATH_C_queue_drops), 2);
    usleep(1500); /* a frame's time on the wire: the third goes */
    run(&r);
    assert_in_range(r.m[1]->n_out, 3, 4);
    usleep(5000);
    run(&r);
    assert_int_equal(r.m[1]->n_out, 4);
    assert_int_equal(ctr(&r, 0, OP_SW_PATH_C_forwarded), 6);
    assert_balanced(&r, 2);
    op_sw_path_destroy(r.p);
}

/* ECN at the shaped queue: a frame that finds ecn_bytes or more held leaves
 * with CE if its sender set ECT, untouched if not; the first, into an empty
 * queue, is not marked. Checksums stay right; the counter counts the marks. */
static void test_ecn_marks_what_finds_the_queue_long(void **state)
{
    (void)state;
    struct rig r;
    char big[1000];
    shaped_rig(&r, 6000, 1000, 'e', big);
    const uint8_t tos[5] = {OP_ECN_ECT0, OP_ECN_ECT0, 0x28 /* not ECT */, 0x28 | OP_ECN_ECT1,
                            OP_ECN_ECT0};
    /* the last as the engine's own INC packets leave (our address, the
     * fabric's port): marked, it also gets the BTH's FECN */
    for (int i = 0; i < 5; i++) /* 1041-byte frames: 0, 1041, 2082, 3123, 4164 B find held */
        inject_udp_tos(r.m[0], 0, i == 4 ? OWN : PEER(0), PEER(1), i == 4 ? 4791 : 1,
                       (uint16_t)(10 + i), 64, tos[i], big);
    run(&r);
    for (int k = 0; k < 100 && r.m[1]->n_out < 5; k++) {
        usleep(1000);
        run(&r);
    }
    assert_int_equal(r.m[1]->n_out, 5);
    const uint8_t want[5] = {OP_ECN_ECT0, OP_ECN_CE, 0x28, 0x28 | OP_ECN_CE, OP_ECN_CE};
    for (int i = 0; i < 5; i++) {
        struct op_frame_info info;
        assert_int_equal(op_frame_parse(r.m[1]->out[i], r.m[1]->out_len[i], &info), OP_FRAME_OK);
        assert_int_equal(info.flow.dst_port, 10 + i); /* in order */
        assert_int_equal(r.m[1]->out[i][ETH + 1], want[i]);
        assert_true(ipv4_checksum_ok(r.m[1]->out[i] + ETH));
        uint8_t bth4 = r.m[1]->out[i][info.payload_off + OP_BTH_FECN_BYTE];
        assert_int_equal(bth4, i == 4 ? ('e' | OP_BTH_FECN_BIT) : 'e');
    }
    assert_int_equal(ctr(&r, 1, OP_SW_PATH_C_ecn_marked), 3);
    assert_int_equal(ctr(&r, 1, OP_SW_PATH_C_queue_drops), 0);
    assert_balanced(&r, 2);
    op_sw_path_destroy(r.p);
}

static void test_a_link_taken_down_loses_what_is_sent(void **state)
{
    (void)state;
    struct op_sw_path_config c;
    struct rig r;
    rig_config(&c, 2);
    c.ports[1].down_after_ms = 50; /* up while the neighbour is learnt */
    c.ports[1].down_for_ms = 100000;
    rig_open(&r, &c, NULL);
    learn_peer(&r, 1);
    usleep(60000);
    uint64_t before = ctr(&r, 1, OP_SW_PATH_C_injected_drops);
    assert_int_equal(before, 0);
    for (int i = 0; i < 5; i++)
        inject_udp(r.m[0], 0, PEER(0), PEER(1), 1, 2, 64, "lost");
    run(&r);
    assert_int_equal(r.m[1]->n_out, 0);
    assert_int_equal(ctr(&r, 1, OP_SW_PATH_C_injected_drops) - before, 5);
    assert_int_equal(ctr(&r, 0, OP_SW_PATH_C_forwarded), 5);
    /* down both ways: what the far end sends is lost too */
    for (int i = 0; i < 3; i++)
        inject_udp(r.m[1], 1, PEER(1), PEER(0), 1, 2, 64, "back");
    run(&r);
    assert_int_equal(ctr(&r, 1, OP_SW_PATH_C_drop_injected), 3);
    assert_int_equal(r.m[0]->n_out, 0);
    assert_balanced(&r, 2);
    op_sw_path_destroy(r.p);
}

/* down inc:2+D: up whatever the time until the port's second INC packet,
 * then down both ways. */
static void test_a_link_down_from_its_second_inc_packet(void **state)
{
    (void)state;
    struct op_topo topo;
    struct op_sw *sw = tor_engine(&topo);
    struct op_sw_path_config c;
    struct rig r;
    rig_config(&c, 2);
    c.ports[0].down_at_inc = 2;
    c.ports[0].down_for_ms = 100000;
    rig_open(&r, &c, sw);
    learn_peer(&r, 1);
    usleep(20000);
    for (int i = 0; i < 4; i++)
        inject_udp(r.m[0], 0, PEER(0), PEER(1), 1, 2, 64, "before");
    run(&r);
    assert_int_equal(ctr(&r, 0, OP_SW_PATH_C_forwarded), 4);
    assert_int_equal(r.m[1]->n_out, 4);
    inject_udp(r.m[0], 0, PEER(0), OWN, 49152, 4791, 64, "the first INC packet");
    inject_udp(r.m[0], 0, PEER(0), PEER(1), 1, 2, 64, "between");
    inject_udp(r.m[0], 0, PEER(0), OWN, 49152, 4791, 64, "the second");
    run(&r);
    assert_int_equal(ctr(&r, 0, OP_SW_PATH_C_to_inc), 2);
    assert_int_equal(ctr(&r, 0, OP_SW_PATH_C_forwarded), 5);
    for (int i = 0; i < 3; i++)
        inject_udp(r.m[0], 0, PEER(0), PEER(1), 1, 2, 64, "after");
    inject_udp(r.m[0], 0, PEER(0), OWN, 49152, 4791, 64, "the third");
    run(&r);
    assert_int_equal(ctr(&r, 0, OP_SW_PATH_C_drop_injected), 4);
    assert_int_equal(ctr(&r, 0, OP_SW_PATH_C_forwarded), 5);
    assert_int_equal(r.m[1]->n_out, 5);
    assert_balanced(&r, 2);
    op_sw_path_destroy(r.p);
    op_sw_destroy(sw);
}

static void test_loss_on_what_a_port_receives(void **state)
{
    (void)state;
    struct op_sw_path_config c;
    struct rig r;
    rig_config(&c, 2);
    c.ports[0].rx_drop_rate = 0.5;
    rig_open(&r, &c, NULL);
    learn_peer(&r, 1);
    for (int i = 0; i < 400; i++)
        inject_udp(r.m[0], 0, PEER(0), PEER(1), 1, 2, 64, "maybe");
    for (int k = 0; k < 10; k++)
        run(&r);
    uint64_t lost = ctr(&r, 0, OP_SW_PATH_C_drop_injected);
    assert_in_range(lost, 140, 260); /* 200 expected; 6 sigma is 60 */
    assert_int_equal(ctr(&r, 0, OP_SW_PATH_C_forwarded), 400 - lost);
    assert_int_equal(r.m[1]->n_out, 400 - lost);
    assert_balanced(&r, 2);
    op_sw_path_destroy(r.p);
}

static void test_refuses_bad_configurations(void **state)
{
    (void)state;
    struct op_sw_path_config c;
    struct op_sw_path *p = NULL;
    char err[256];
    rig_config(&c, 2);
    c.routes[0].ports[0] = 5; /* no such port */
    for (int i = 0; i < 2; i++)
        c.ports[i].io = &mock_new_mac(mac_sw[i])->io;
    assert_int_equal(op_sw_path_create(&c, NULL, NULL, &p, err, sizeof err), OP_ERR_INVAL);
    assert_non_null(strstr(err, "route 0"));
    rig_config(&c, 2);
    c.routes[1].dst = c.routes[0].dst; /* twice the same destination */
    for (int i = 0; i < 2; i++)
        c.ports[i].io = &mock_new_mac(mac_sw[i])->io;
    assert_int_equal(op_sw_path_create(&c, NULL, NULL, &p, err, sizeof err), OP_ERR_INVAL);
    assert_non_null(strstr(err, "twice"));
    assert_null(p);
}

static const char net[] = "topo u\nspine s1 10.255.0.1 fd00:ff::1\nspine s2 10.255.0.2 fd00:ff::2\n"
                          "tor t1 10.1.0.254 fd00:1::fe\ntor t2 10.2.0.254 fd00:2::fe\n"
                          "host h1 10.1.0.1 fd00:1::1\nhost h2 10.1.0.2 fd00:1::2\n"
                          "host h3 10.2.0.1 fd00:2::1\n"
                          "link h1 t1 rate 1gbit queue 256kb loss 1% delay 100us\n"
                          "link h2 t1 rate 1gbit queue 256kb\n"
                          "link h3 t2 rate 1gbit queue 256kb\n"
                          "link t1 s1 rate 2gbit queue 512kb\nlink t1 s2 rate 2gbit queue 512kb\n"
                          "link t2 s1 rate 2gbit queue 512kb\nlink t2 s2 rate 2gbit queue 512kb\n";

static void test_path_from_a_namespace_topology(void **state)
{
    (void)state;
    static struct op_nstopo t;
    static struct op_sw_path_config c;
    char err[256];
    assert_int_equal(op_nstopo_parse(net, &t, NULL, err, sizeof err), OP_OK);
    int t1 = op_nstopo_find(&t, "t1");
    assert_int_equal(op_sw_path_from_net(&t, t1, "all", &c, err, sizeof err), OP_OK);
    assert_int_equal(c.n_ports, 4);
    assert_int_equal(c.own4.v4, 0x0a0100feu);
    assert_int_equal(c.inc_port, OP_ROCE_UDP_PORT);
    int h1 = op_sw_path_port_find(&c, "h1"), s1 = op_sw_path_port_find(&c, "s1"),
        s2 = op_sw_path_port_find(&c, "s2");
    assert_true(h1 >= 0 && s1 >= 0 && s2 >= 0);
    assert_int_equal(c.ports[h1].rate_bps, 1000000000ull);
    assert_int_equal(c.ports[h1].queue_bytes, 256 * 1024);
    assert_int_equal(c.ports[h1].peer4.v4, 0x0a010001u);
    assert_int_equal(c.ports[s1].rate_bps, 2000000000ull);
    /* the link's faults: both ways at the TOR's end of a host's link */
    assert_true(c.ports[h1].drop_rate == 0.01 && c.ports[h1].rx_drop_rate == 0.01);
    assert_int_equal(c.ports[h1].delay_us, 100);
    assert_true(c.ports[s1].drop_rate == 0 && c.ports[s1].rx_drop_rate == 0);
    /* 6 other nodes, both families */
    assert_int_equal(c.n_routes, 2 * 6);
    for (int i = 0; i < c.n_routes; i++) {
        const struct op_sw_route *r = &c.routes[i];
        struct op_addr h3 = op_addr_ipv4(0x0a020001u), hh1 = op_addr_ipv4(0x0a010001u);
        if (op_addr_eq(&r->dst, &h3)) { /* the other rack: over both spines */
            assert_int_equal(r->n_ports, 2);
            assert_true((r->ports[0] == s1 && r->ports[1] == s2) ||
                        (r->ports[0] == s2 && r->ports[1] == s1));
        }
        if (op_addr_eq(&r->dst, &hh1)) {
            assert_int_equal(r->n_ports, 1);
            assert_int_equal(r->ports[0], h1);
        }
    }
    /* named ports, one renamed */
    assert_int_equal(op_sw_path_from_net(&t, t1, "eth1=h1,h2,s1,s2", &c, err, sizeof err), OP_OK);
    assert_int_equal(op_sw_path_port_find(&c, "eth1"), 0);
    /* refusals name the fault */
    assert_int_equal(op_sw_path_from_net(&t, t1, "h1,h2,s1", &c, err, sizeof err), OP_ERR_INVAL);
    assert_non_null(strstr(err, "s2"));
    assert_int_equal(op_sw_path_from_net(&t, t1, "h3", &c, err, sizeof err), OP_ERR_INVAL);
    assert_non_null(strstr(err, "h3"));
    assert_int_equal(op_sw_path_from_net(&t, t1, "h1,h1", &c, err, sizeof err), OP_ERR_INVAL);
    assert_non_null(strstr(err, "twice"));
    assert_int_equal(op_sw_path_from_net(&t, t1, "h1,,h2", &c, err, sizeof err), OP_ERR_INVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_answers_for_its_own_addresses_only),
        cmocka_unit_test(test_forwards_once_the_next_hop_is_known),
        cmocka_unit_test(test_drops_ttl_no_route_and_local),
        cmocka_unit_test(test_ecmp_keeps_a_flow_on_one_port),
        cmocka_unit_test(test_inc_to_our_address_reaches_the_engine),
        cmocka_unit_test(test_egress_shaped_to_the_link_rate),
        cmocka_unit_test(test_ecn_marks_what_finds_the_queue_long),
        cmocka_unit_test(test_a_link_taken_down_loses_what_is_sent),
        cmocka_unit_test(test_a_link_down_from_its_second_inc_packet),
        cmocka_unit_test(test_loss_on_what_a_port_receives),
        cmocka_unit_test(test_refuses_bad_configurations),
        cmocka_unit_test(test_path_from_a_namespace_topology),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
