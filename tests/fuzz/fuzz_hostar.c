/* libFuzzer target for hostar (offpath's host allreduce over UDP): the input
 * is a packet that reaches leader 0 from leader 1's address in the middle of
 * an allreduce, once as it is and once with a valid ICRC sealed on (so the
 * fuzzer gets past the check into the engine). Properties: the decoder keeps
 * its payload inside the packet; nothing crashes; the call still ends within
 * its deadline; and when the engine could not have taken the packet (its
 * ICRC is wrong) the result is exact. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "offpath/hostar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define N_LEADERS 2
#define COUNT 300 /* int32: more than one packet of 1 KiB */
#define QCAP 64
#define STEP_NS (100 * OP_NS_PER_US)

static void require(int cond)
{
    if (!cond)
        abort();
}

struct net {
    struct op_har_eng *eng[N_LEADERS];
    struct op_har_peer peers[N_LEADERS];
    struct op_pktbuf q[N_LEADERS]; /* each leader's outgoing packets */
    struct op_txq txq[N_LEADERS];
    /* two wires: packets sent while one is delivered go on the other */
    struct op_pkt inflight[2][256];
    uint8_t mem[2][256][OP_HAR_MAX_PKT];
    int n_inflight[2];
    int cur;
};

/* A leader's queue is full or done: its packets go on the wire. */
static void to_wire(void *ctx, struct op_txq *q)
{
    struct net *net = ctx;
    int w = net->cur;
    for (int i = 0; i < q->n && net->n_inflight[w] < 256; i++) {
        struct op_pkt *p = &net->inflight[w][net->n_inflight[w]];
        p->data = net->mem[w][net->n_inflight[w]++];
        p->len = q->pkts[i].len <= OP_HAR_MAX_PKT ? q->pkts[i].len : OP_HAR_MAX_PKT;
        memcpy(p->data, q->pkts[i].data, p->len);
        p->flow = q->pkts[i].flow;
    }
    q->n = 0;
}

static int leader_at(const struct net *net, uint32_t ip)
{
    for (int i = 0; i < N_LEADERS; i++)
        if (net->peers[i].ip == ip)
            return i;
    return -1;
}

/* Delivers what is in flight, then runs the timers; one step of time. */
static void step(struct net *net, uint64_t now)
{
    int w = net->cur, n = net->n_inflight[w];
    net->cur = !w;
    net->n_inflight[net->cur] = 0;
    for (int i = 0; i < n; i++) {
        const struct op_pkt *pkt = &net->inflight[w][i];
        int to = leader_at(net, pkt->flow.dst.v4);
        if (to >= 0)
            op_har_eng_input(net->eng[to], pkt, now, &net->txq[to]);
    }
    for (int l = 0; l < N_LEADERS; l++) {
        if (op_har_eng_next_timer(net->eng[l]) <= now)
            op_har_eng_timer(net->eng[l], now, &net->txq[l]);
        to_wire(net, &net->txq[l]);
    }
}

static void setup(struct net *net)
{
    for (int l = 0; l < N_LEADERS; l++)
        net->peers[l] = (struct op_har_peer){.ip = 0x7f000101u + (uint32_t)l, .port = 4792};
    for (int l = 0; l < N_LEADERS; l++) {
        struct op_har_config cfg;
        op_har_config_default(&cfg);
        cfg.rank = (uint32_t)l;
        cfg.n = N_LEADERS;
        cfg.peers = net->peers;
        cfg.session = 0x5e55;
        cfg.max_data = 1024;
        cfg.deadline_ns = 50 * OP_NS_PER_MS;
        require(op_har_eng_create(&cfg, &net->eng[l]) == OP_OK);
        require(op_pktbuf_init(&net->q[l], QCAP) == OP_OK);
        net->txq[l] = (struct op_txq){.pkts = net->q[l].pkts, .cap = QCAP, .flush = to_wire,
                                      .ctx = net};
    }
}

static void teardown(struct net *net)
{
    for (int l = 0; l < N_LEADERS; l++) {
        op_har_eng_destroy(net->eng[l]);
        op_pktbuf_free(&net->q[l]);
    }
}

static void check_decoder(const uint8_t *data, size_t size)
{
    struct op_har_pkt pkt;
    if (op_har_decode(data, size, &pkt) == OP_OK)
        require(pkt.payload >= data && pkt.payload + pkt.payload_len <= data + size);
}

/* One allreduce between the two leaders with the packet thrown in. */
static void run_with(const uint8_t *data, size_t size, bool seal)
{
    static struct net net; /* the wires' buffers need no clearing: counts say what is valid */
    net.n_inflight[0] = net.n_inflight[1] = 0;
    net.cur = 0;
    setup(&net);
    int32_t in[N_LEADERS][COUNT], out[N_LEADERS][COUNT];
    for (int l = 0; l < N_LEADERS; l++)
        for (int i = 0; i < COUNT; i++)
            in[l][i] = (int32_t)(i * 7 + l * 1000 - 500);
    uint64_t now = 1;
    for (int l = 0; l < N_LEADERS; l++) {
        require(op_har_eng_allreduce(net.eng[l], in[l], out[l], COUNT, OP_RED_INT32, OP_RED_SUM,
                                     now, &net.txq[l]) == OP_OK);
        to_wire(&net, &net.txq[l]);
    }
    uint8_t buf[OP_HAR_MAX_PKT + OP_ICRC_LEN];
    size_t len = size < OP_HAR_MAX_PKT ? size : OP_HAR_MAX_PKT;
    memcpy(buf, data, len);
    struct op_pkt forged = {
        .flow = {.src.v4 = net.peers[1].ip, .src_port = net.peers[1].port,
                 .dst.v4 = net.peers[0].ip, .dst_port = net.peers[0].port},
        .data = buf};
    if (seal && len >= OP_ICRC_LEN)
        len = op_icrc_seal(&forged.flow, buf, len - OP_ICRC_LEN, sizeof(buf));
    forged.len = (uint32_t)len;
    bool could_take = op_icrc_check(&forged.flow, buf, len);
    op_har_eng_input(net.eng[0], &forged, now, &net.txq[0]);
    to_wire(&net, &net.txq[0]);
    for (int t = 0; t < 2000; t++) {
        now += STEP_NS;
        step(&net, now);
        if (op_har_eng_status(net.eng[0]) != OP_INPROGRESS &&
            op_har_eng_status(net.eng[1]) != OP_INPROGRESS)
            break;
    }
    /* 2000 steps of 100 us = 200 ms, four times the deadline */
    for (int l = 0; l < N_LEADERS; l++)
        require(op_har_eng_status(net.eng[l]) != OP_INPROGRESS);
    if (!could_take) {
        for (int l = 0; l < N_LEADERS; l++) {
            require(op_har_eng_status(net.eng[l]) == OP_OK);
            for (int i = 0; i < COUNT; i++)
                require(out[l][i] == in[0][i] + in[1][i]);
        }
    }
    teardown(&net);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_decoder(data, size);
    run_with(data, size, false);
    run_with(data, size, true);
    return 0;
}
