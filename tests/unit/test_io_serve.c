/* Unit tests of op_io_frames_serve over a mock frame backend: what a host's
 * stack owes its neighbours (ARP, NDP, echo answered for our address only),
 * packets taken from frames to our address and port, neighbours learnt and
 * asked for while packets wait (held, released in order, dropped and
 * counted when nobody answers or no room is left), and counters that
 * balance. Frames are checked at RFC offsets written out here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "frame_mock.h"
#include "offpath/io.h"

#define ETH 14

static const uint8_t our_mac[6] = {0x02, 0, 0, 0, 0, 0x01};
static const uint8_t peer_mac[6] = {0x02, 0, 0, 0, 0, 0x02};
static const uint32_t our_ip = 0x0a000001u, peer_ip = 0x0a000002u;
static const uint8_t our_ip6[16] = {0xfd, 0, [15] = 1}, peer_ip6[16] = {0xfd, 0, [15] = 2};

static struct mock *mock_new(void) { return mock_new_mac(our_mac); }

/* The serving layer on a mock, for addr (v4 or v6 by the flag). */
static struct op_io *served(struct mock **m, bool v6)
{
    *m = mock_new();
    struct op_addr a = v6 ? op_addr_ipv6(our_ip6) : op_addr_ipv4(our_ip);
    struct op_io *io = NULL;
    assert_int_equal(op_io_frames_serve(&(*m)->io, &a, 4791, &io), OP_OK);
    return io;
}

static uint64_t sc(const struct op_io *io, enum op_io_serve_counter c)
{
    uint64_t v[OP_IO_SERVE_C_COUNT_];
    op_io_serve_counters(io, v);
    return v[c];
}

static uint64_t ioc(const struct op_io *io, enum op_io_counter c)
{
    uint64_t v[OP_IO_C_COUNT_];
    op_io_counters(io, v);
    return v[c];
}

static struct op_addr peer(bool v6) { return v6 ? op_addr_ipv6(peer_ip6) : op_addr_ipv4(peer_ip); }

/* A UDP frame from the peer to dst_port with payload "frame N". */
static void inject_udp(struct mock *m, bool v6, uint16_t dst_port, int n)
{
    struct op_flow f = {.src = peer(v6), .dst = v6 ? op_addr_ipv6(our_ip6) : op_addr_ipv4(our_ip),
                        .src_port = 5555, .dst_port = dst_port};
    struct op_frame_l2 l2 = {.tos = 0};
    memcpy(l2.src_mac, peer_mac, 6);
    memcpy(l2.dst_mac, our_mac, 6);
    uint8_t *fr = m->in[m->n_in];
    size_t hdr = op_udp_frame_hdr_len(f.dst.family);
    int len = snprintf((char *)fr + hdr, 64, "frame %d", n);
    m->in_len[m->n_in++] = (uint32_t)op_udp_frame_build(fr, 2048, &f, &l2, (size_t)len);
}

/* The peer asks for target (ARP or NDP, as our layer would). */
static void inject_question(struct mock *m, bool v6, const struct op_addr *target)
{
    struct op_addr from = peer(v6);
    m->in_len[m->n_in] =
        (uint32_t)op_neigh_solicit_build(m->in[m->n_in], 2048, &from, peer_mac, target);
    m->n_in++;
}

static struct op_pktbuf bufs(int n)
{
    struct op_pktbuf b;
    assert_int_equal(op_pktbuf_init(&b, n), OP_OK);
    return b;
}

static void test_serve_refuses_what_it_cannot_serve(void **state)
{
    (void)state;
    struct op_io *udp = NULL, *io = NULL;
    struct op_addr lo = op_addr_ipv4(0x7f000001u), any = op_addr_ipv4(0);
    assert_int_equal(op_io_udp_open(0x7f000001u, 0, &udp), OP_OK);
    assert_int_equal(op_io_frames_serve(udp, &lo, 4791, &io), OP_ERR_INVAL); /* no frames */
    op_io_close(udp);
    struct mock *m = mock_new();
    assert_int_equal(op_io_frames_serve(&m->io, &any, 4791, &io), OP_ERR_INVAL);
    assert_int_equal(op_io_frames_serve(&m->io, &lo, 0, &io), OP_ERR_INVAL);
    assert_null(io);
    op_io_close(&m->io);
}

static void test_serve_answers_questions_for_us_only(void **state)
{
    (void)state;
    for (int v6 = 0; v6 < 2; v6++) {
        struct mock *m;
        struct op_io *io = served(&m, v6);
        struct op_addr us = v6 ? op_addr_ipv6(our_ip6) : op_addr_ipv4(our_ip);
        struct op_addr other = v6 ? op_addr_ipv6((const uint8_t[16]){0xfd, [15] = 9})
                                  : op_addr_ipv4(0x0a000009u);
        inject_question(m, v6, &other);
        inject_question(m, v6, &us);
        struct op_pktbuf b = bufs(8);
        assert_int_equal(op_io_recv(io, b.pkts, b.n), 0);
        assert_int_equal(m->n_out, 1);
        assert_int_equal(sc(io, OP_IO_SERVE_C_control_replies), 1);
        assert_int_equal(sc(io, OP_IO_SERVE_C_rx_not_ours), 1);
        const uint8_t *r = m->out[0];
        assert_memory_equal(r, peer_mac, 6);
        assert_memory_equal(r + 6, our_mac, 6);
        if (v6) {
            assert_int_equal(r[ETH + 40], 136); /* neighbour advertisement */
            assert_memory_equal(r + ETH + 40 + 8, our_ip6, 16);
        } else {
            assert_int_equal(r[ETH + 7], 2); /* ARP reply */
            assert_memory_equal(r + ETH + 8, our_mac, 6);
        }
        op_pktbuf_free(&b);
        op_io_close(io);
    }
}

static void test_serve_takes_our_udp_and_learns_the_sender(void **state)
{
    (void)state;
    for (int v6 = 0; v6 < 2; v6++) {
        struct mock *m;
        struct op_io *io = served(&m, v6);
        inject_udp(m, v6, 4791, 1);
        inject_udp(m, v6, 4792, 2); /* another port: not ours */
        struct op_pktbuf b = bufs(8);
        assert_int_equal(op_io_recv(io, b.pkts, b.n), 1);
        assert_int_equal(b.pkts[0].len, 7);
        assert_memory_equal(b.pkts[0].data, "frame 1", 7);
        struct op_addr from = peer(v6);
        assert_true(op_addr_eq(&b.pkts[0].flow.src, &from));
        assert_int_equal(b.pkts[0].flow.src_port, 5555);
        assert_int_equal(sc(io, OP_IO_SERVE_C_rx_not_ours), 1);
        /* the answer goes straight to the sender's MAC: nothing asked, nothing held */
        b.pkts[0].flow = op_flow_reverse(&b.pkts[0].flow);
        assert_int_equal(op_io_send(io, b.pkts, 1), 1);
        assert_int_equal(m->n_out, 1);
        assert_int_equal(sc(io, OP_IO_SERVE_C_neigh_asked) + sc(io, OP_IO_SERVE_C_tx_held), 0);
        struct op_frame_info in;
        assert_int_equal(op_frame_parse(m->out[0], m->out_len[0], &in), OP_FRAME_OK);
        assert_memory_equal(in.dst_mac, peer_mac, 6);
        assert_memory_equal(in.src_mac, our_mac, 6);
        assert_int_equal(in.flow.src_port, 4791);
        assert_int_equal(in.flow.dst_port, 5555);
        assert_int_equal(in.payload_len, 7);
        assert_memory_equal(m->out[0] + in.payload_off, "frame 1", 7);
        op_pktbuf_free(&b);
        op_io_close(io);
    }
}

static void fill(struct op_pktbuf *b, int n, bool v6)
{
    for (int i = 0; i < n; i++) {
        b->pkts[i].flow = (struct op_flow){.dst = peer(v6), .dst_port = 6000};
        b->pkts[i].len = (uint32_t)snprintf((char *)b->pkts[i].data, 32, "held %03d", i);
    }
}

/* To a neighbour not known: one question, the packets held; the answer
 * releases them in order with its MAC. */
static void test_serve_holds_until_the_neighbour_answers(void **state)
{
    (void)state;
    for (int v6 = 0; v6 < 2; v6++) {
        struct mock *m;
        struct op_io *io = served(&m, v6);
        struct op_pktbuf b = bufs(8);
        fill(&b, 5, v6);
        assert_int_equal(op_io_send(io, b.pkts, 5), 5);
        assert_int_equal(ioc(io, OP_IO_C_tx_pkts), 5);
        assert_int_equal(sc(io, OP_IO_SERVE_C_tx_held), 5);
        assert_int_equal(sc(io, OP_IO_SERVE_C_neigh_asked), 1);
        assert_int_equal(m->n_out, 1); /* the question only */
        struct op_frame_info q;
        (void)op_frame_parse(m->out[0], m->out_len[0], &q);
        assert_int_equal(q.kind, v6 ? OP_FRAME_KIND_IPV6 : OP_FRAME_KIND_ARP);
        /* the peer answers (our question, turned into its reply by its stack) */
        struct op_addr target = peer(v6);
        memcpy(m->in[0], m->out[0], m->out_len[0]);
        m->in_len[0] = (uint32_t)op_frame_control_reply(m->in[0], m->out_len[0], 2048, &target,
                                                        peer_mac);
        assert_int_not_equal(m->in_len[0], 0);
        m->n_in = 1;
        assert_int_equal(op_io_recv(io, b.pkts, b.n), 0);
        assert_int_equal(m->n_out, 6);
        for (int i = 0; i < 5; i++) {
            struct op_frame_info in;
            char want[16];
            snprintf(want, sizeof want, "held %03d", i);
            assert_int_equal(op_frame_parse(m->out[1 + i], m->out_len[1 + i], &in), OP_FRAME_OK);
            assert_memory_equal(in.dst_mac, peer_mac, 6);
            assert_int_equal(in.payload_len, 8);
            assert_memory_equal(m->out[1 + i] + in.payload_off, want, 8);
        }
        assert_int_equal(sc(io, OP_IO_SERVE_C_tx_unresolved), 0);
        op_pktbuf_free(&b);
        op_io_close(io);
    }
}

/* Nobody answers: asked again each second, dropped and counted after 3 s. */
static void test_serve_gives_up_on_silence(void **state)
{
    (void)state;
    struct mock *m;
    struct op_io *io = served(&m, false);
    struct op_pktbuf b = bufs(4);
    fill(&b, 3, false);
    uint64_t t0 = op_now_ns();
    assert_int_equal(op_io_send(io, b.pkts, 3), 3);
    assert_true(op_io_deadline(io) <= op_now_ns() + OP_NS_PER_S);
    op_io_poll(io, t0 + OP_NS_PER_S / 2);
    assert_int_equal(sc(io, OP_IO_SERVE_C_neigh_asked), 1); /* not again yet */
    op_io_poll(io, t0 + 1200 * OP_NS_PER_MS);
    assert_int_equal(sc(io, OP_IO_SERVE_C_neigh_asked), 2);
    op_io_poll(io, t0 + 3100 * OP_NS_PER_MS);
    assert_int_equal(sc(io, OP_IO_SERVE_C_tx_unresolved), 3);
    assert_int_equal(op_io_deadline(io), UINT64_MAX); /* nothing waits now */
    assert_int_equal(m->n_out, 2); /* two questions, no data */
    op_pktbuf_free(&b);
    op_io_close(io);
}

/* More than OP_IO_SERVE_PENDING waiting: the rest are counted drops; a
 * family other than ours is a drop too; so is what the backend refuses. */
static void test_serve_counts_what_it_cannot_send(void **state)
{
    (void)state;
    struct mock *m;
    struct op_io *io = served(&m, false);
    int n = OP_IO_SERVE_PENDING + 10;
    struct op_pktbuf b = bufs(n);
    fill(&b, n, false);
    b.pkts[0].flow.dst = op_addr_ipv6(peer_ip6);
    assert_int_equal(op_io_send(io, b.pkts, n), OP_IO_SERVE_PENDING);
    assert_int_equal(ioc(io, OP_IO_C_tx_pkts), OP_IO_SERVE_PENDING);
    assert_int_equal(ioc(io, OP_IO_C_tx_drops), 10);
    assert_int_equal(sc(io, OP_IO_SERVE_C_tx_held), OP_IO_SERVE_PENDING);
    assert_int_equal(sc(io, OP_IO_SERVE_C_tx_unresolved), 9);
    op_io_close(io);

    io = served(&m, false);
    inject_udp(m, false, 4791, 1); /* the peer becomes known */
    assert_int_equal(op_io_recv(io, b.pkts, 8), 1);
    fill(&b, 10, false);
    m->accept = 4;
    assert_int_equal(op_io_send(io, b.pkts, 10), 4);
    assert_int_equal(ioc(io, OP_IO_C_tx_pkts), 4);
    assert_int_equal(ioc(io, OP_IO_C_tx_drops), 6);
    op_pktbuf_free(&b);
    op_io_close(io);
}

/* A capture around a frame backend writes its frames as they are, both
 * ways: under the serving layer, the peer's question and our answer. */
static void test_capture_of_frames(void **state)
{
    (void)state;
    char path[] = "/tmp/op_serve_capXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct op_pcap *w;
    assert_int_equal(op_pcap_open(path, &w), OP_OK);
    struct mock *m = mock_new();
    struct op_io *cap = NULL, *io = NULL;
    struct op_addr us = op_addr_ipv4(our_ip);
    assert_int_equal(op_io_pcap_wrap(&m->io, w, &cap), OP_OK);
    assert_true(op_io_has_frames(cap));
    assert_int_equal(op_io_frames_serve(cap, &us, 4791, &io), OP_OK);
    inject_question(m, false, &us);
    struct op_pktbuf b = bufs(4);
    assert_int_equal(op_io_recv(io, b.pkts, b.n), 0);
    assert_int_equal(m->n_out, 1);
    uint8_t want[2][42]; /* the mock goes with the io */
    memcpy(want[0], m->in[0], 42);
    memcpy(want[1], m->out[0], 42);
    op_io_close(io);
    assert_int_equal(op_pcap_count(w), 2);
    assert_int_equal(op_pcap_close(w), OP_OK);
    uint8_t file[512];
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(file, 1, sizeof file, f);
    fclose(f);
    unlink(path);
    assert_int_equal(n, OP_PCAP_FILE_HDR_LEN + 2 * (OP_PCAP_REC_HDR_LEN + 42));
    const uint8_t *rec = file + OP_PCAP_FILE_HDR_LEN;
    for (int i = 0; i < 2; i++, rec += OP_PCAP_REC_HDR_LEN + 42) {
        uint64_t ts;
        uint32_t caplen;
        assert_int_equal(op_pcap_record_parse(rec, &ts, &caplen), OP_OK);
        assert_int_equal(caplen, 42);
        assert_memory_equal(rec + OP_PCAP_REC_HDR_LEN, want[i], 42);
    }
    op_pktbuf_free(&b);
}

/* The fault layer around a frame backend: frames dropped, doubled, held
 * for the delay and let go in order, and dropped to an address whose link
 * is down; its counters and the io's balance. */
static void test_fault_on_frames(void **state)
{
    (void)state;
    struct op_frame fr[4];
    struct op_pktbuf b = bufs(4);
    op_pktbuf_frames(&b, fr);
    for (int i = 0; i < 4; i++) {
        struct op_flow f = {.src = op_addr_ipv4(our_ip), .dst = op_addr_ipv4(peer_ip + (i == 3)),
                            .src_port = 1, .dst_port = 2};
        struct op_frame_l2 l2 = {.tos = 0};
        fr[i].data[OP_UDP_FRAME_HDR_LEN] = (uint8_t)i;
        fr[i].len = (uint32_t)op_udp_frame_build(fr[i].data, OP_IO_BUF_SIZE, &f, &l2, 1);
    }
    struct {
        struct op_fault_cfg cfg;
        int sent_now, sent_later;
        uint64_t dropped, duplicated, delayed;
    } cases[] = {
        {{.drop = 1.0, .seed = 1}, 0, 0, 4, 0, 0},
        {{.dup = 1.0, .seed = 1}, 8, 0, 0, 4, 0},
        {{.delay_us = 1000, .seed = 1}, 0, 4, 0, 0, 4},
        {{.down_ip = peer_ip + 1, .down_until_ns = UINT64_MAX, .seed = 1}, 3, 0, 1, 0, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        struct mock *m = mock_new();
        struct op_io *io = NULL;
        assert_int_equal(op_io_fault_wrap(&m->io, &cases[k].cfg, &io), OP_OK);
        assert_true(op_io_has_frames(io));
        assert_int_equal(op_io_send_frames(io, fr, 4), 4); /* the network's faults, not ours */
        assert_int_equal(m->n_out, cases[k].sent_now);
        op_io_poll(io, op_now_ns() + 2 * OP_NS_PER_MS);
        assert_int_equal(m->n_out, cases[k].sent_now + cases[k].sent_later);
        for (int i = 0; i < m->n_out && cases[k].sent_later > 0; i++)
            assert_int_equal(m->out[i][OP_UDP_FRAME_HDR_LEN], i); /* in order */
        uint64_t c[OP_FAULT_C_COUNT_];
        op_io_fault_counters(io, c);
        assert_int_equal(c[OP_FAULT_C_dropped], cases[k].dropped);
        assert_int_equal(c[OP_FAULT_C_duplicated], cases[k].duplicated);
        assert_int_equal(c[OP_FAULT_C_delayed], cases[k].delayed);
        assert_int_equal(ioc(io, OP_IO_C_tx_pkts), (uint64_t)m->n_out);
        op_io_close(io);
    }
    op_pktbuf_free(&b);
}

/* Backends by name: every form, and refusals that say what is wrong. */
static void test_spec_names(void **state)
{
    (void)state;
    struct op_io_spec sp;
    char why[160];
    assert_true(op_io_spec_parse("udp:127.0.0.1:4791", &sp, why, sizeof why));
    assert_int_equal(sp.kind, OP_IO_SPEC_UDP);
    assert_int_equal(sp.ep.port, 4791);
    assert_int_equal(sp.ep.addr.v4, 0x7f000001u);
    assert_true(op_io_spec_parse("udp:[::]:53", &sp, why, sizeof why)); /* a wildcard: udp only */
    assert_true(op_io_spec_parse("xdp:veth0:[fd00::1]:4791", &sp, why, sizeof why));
    assert_int_equal(sp.kind, OP_IO_SPEC_XDP);
    assert_string_equal(sp.ifname, "veth0");
    assert_int_equal(sp.queues, 0);
    assert_true(op_addr_is_ipv6(&sp.ep.addr));
    assert_true(op_io_spec_parse("xdpall:eth1@4:10.0.0.1:4791", &sp, why, sizeof why));
    assert_int_equal(sp.kind, OP_IO_SPEC_XDP_SERVED);
    assert_string_equal(sp.ifname, "eth1");
    assert_int_equal(sp.queues, 4);
    assert_true(op_io_spec_parse("frames:sw0p1@64", &sp, why, sizeof why));
    assert_int_equal(sp.kind, OP_IO_SPEC_XDP_FRAMES);
    assert_string_equal(sp.ifname, "sw0p1");
    assert_int_equal(sp.queues, 64);
    static const struct {
        const char *text, *says;
    } bad[] = {
        {"", "a backend is"},
        {"tcp:1.2.3.4:5", "a backend is"},
        {"udp:1.2.3.4", "ADDR:PORT"},
        {"udp:1.2.3.4:0", "ADDR:PORT"},
        {"xdp:10.0.0.1:4791", "ADDR:PORT"},        /* "10.0.0.1" taken as the interface */
        {"xdp::10.0.0.1:4791", "an interface"},
        {"xdp:veth0:0.0.0.0:4791", "wildcard"},
        {"xdpall:veth0@0:10.0.0.1:1", "an interface"},
        {"xdpall:veth0@65:10.0.0.1:1", "an interface"},
        {"xdpall:veth0@:10.0.0.1:1", "an interface"},
        {"xdpall:veth0@1x:10.0.0.1:1", "an interface"},
        {"frames:", "an interface"},
        {"frames:abcdefghijklmnop", "an interface"}, /* 16 characters: too long */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        if (op_io_spec_parse(bad[i].text, &sp, why, sizeof why) || strstr(why, bad[i].says) == NULL)
            fail_msg("'%s': %s", bad[i].text, why);
    }
    struct op_io *io = NULL;
    assert_true(op_io_spec_parse("udp:127.0.0.1:0", &sp, why, sizeof why) == false);
    assert_true(op_io_spec_parse("udp:127.0.0.1:47555", &sp, why, sizeof why));
    assert_int_equal(op_io_open_spec(&sp, NULL, &io), OP_OK);
    assert_int_equal(op_io_local_port(io), 47555);
    op_io_close(io);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_serve_refuses_what_it_cannot_serve),
        cmocka_unit_test(test_serve_answers_questions_for_us_only),
        cmocka_unit_test(test_serve_takes_our_udp_and_learns_the_sender),
        cmocka_unit_test(test_serve_holds_until_the_neighbour_answers),
        cmocka_unit_test(test_serve_gives_up_on_silence),
        cmocka_unit_test(test_serve_counts_what_it_cannot_send),
        cmocka_unit_test(test_spec_names),
        cmocka_unit_test(test_capture_of_frames),
        cmocka_unit_test(test_fault_on_frames),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
