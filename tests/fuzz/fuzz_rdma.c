/* libFuzzer target for the RDMA QP engines' input path.
 *
 * Each input runs on a fresh in-memory link (tests/unit/rdmasim.c) with an
 * RC pair (QPN 0x11 on both devices, PSNs from 0, MTU 256), a UD QP on the
 * second device (0x12) and a spare RC pair the input never addresses (0x12
 * on the first device, 0x13 on the second). The input is a sequence of
 * packets handed to a device as if sent by the peer (or a stranger); what
 * the engines answer travels the link.
 *
 * Record: ctl (1 byte), length (2 bytes, big-endian), that many bytes.
 *   ctl bit 0     target: the first device (requester side) or the second
 *   ctl bits 1-2  destination QP: as in the bytes, the RC QP, the UD QP (on
 *                 the second device whatever bit 0 says), as in the bytes;
 *                 packets to a spare QP are not delivered
 *   ctl bit 3     overwrite the last 4 bytes with the right ICRC
 *   ctl bit 4     sent from a stranger's address instead of the peer's
 *   ctl bit 5     a millisecond passes first (timers run)
 *   ctl bit 6     the requester posts a WRITE, a READ and a SEND first
 *   ctl bit 7     the RETH or AtomicETH (VA and rkey at bytes 12..23) names
 *                 the second device's region (its rkey, an address inside it)
 * Whatever arrives must not crash the engines (ASan, UBSan) or hang them,
 * and the spare pair, which the input never addresses, must still move data
 * exactly afterwards. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/rdmasim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_RECORDS 500
#define REGION 65536
#define STRANGER_IP 0x7f000009u

static void require(bool cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_rdma: %s\n", what);
        abort();
    }
}

struct world {
    struct rsim s;
    struct rsim_ep a, b, spare_a, spare_b;
    struct op_rdma_qp *ud;
    struct op_rdma_cq *ud_cq;
    uint8_t *mem[2];
    struct op_rdma_mr *mr[2];
    uint64_t wr_id;
};

static void world_init(struct world *w)
{
    memset(w, 0, sizeof(*w));
    rsim_init(&w->s, 1);
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .mtu = 256, .depth = 16,
                                   .timeout = 8, .retry_cnt = 3, .rnr_retry = 3,
                                   .access = OP_RDMA_ACCESS_REMOTE_WRITE |
                                             OP_RDMA_ACCESS_REMOTE_READ |
                                             OP_RDMA_ACCESS_REMOTE_ATOMIC};
    rsim_connect(&w->s, &o, &w->a, &w->b);
    require(op_rdma_cq_create(w->s.dev[1], 64, &w->ud_cq) == OP_OK, "ud cq");
    const struct op_rdma_qp_init_attr ia = {.type = OP_RDMA_QPT_UD, .send_cq = w->ud_cq,
                                            .recv_cq = w->ud_cq, .max_send_wr = 4,
                                            .max_recv_wr = 4};
    require(op_rdma_qp_create(w->s.dev[1], &ia, &w->ud) == OP_OK, "ud qp");
    const struct op_rdma_qp_attr ua = {.qkey = 0x11111111u, .path_mtu = 1024};
    require(op_rdma_qp_modify(w->ud, OP_RDMA_QPS_INIT, &ua) == OP_OK &&
                op_rdma_qp_modify(w->ud, OP_RDMA_QPS_RTR, &ua) == OP_OK &&
                op_rdma_qp_modify(w->ud, OP_RDMA_QPS_RTS, &ua) == OP_OK,
            "ud up");
    const struct rsim_qp_opts so = {.type = OP_RDMA_QPT_RC, .mtu = 1024, .retry_cnt = 7};
    rsim_connect(&w->s, &so, &w->spare_a, &w->spare_b);
    const unsigned all = OP_RDMA_ACCESS_LOCAL_WRITE | OP_RDMA_ACCESS_REMOTE_WRITE |
                         OP_RDMA_ACCESS_REMOTE_READ | OP_RDMA_ACCESS_REMOTE_ATOMIC;
    for (int i = 0; i < 2; i++) {
        w->mem[i] = calloc(1, REGION);
        require(w->mem[i] != NULL, "memory");
        require(op_rdma_reg_mr(w->s.dev[i], w->mem[i], REGION, all, &w->mr[i]) == OP_OK, "mr");
    }
    struct op_rdma_sge sg = {(uint64_t)(uintptr_t)w->mem[1], 4096, op_rdma_mr_lkey(w->mr[1])};
    const struct op_rdma_recv_wr rw = {.sg_list = &sg, .num_sge = 1};
    for (int i = 0; i < 4; i++) {
        (void)op_rdma_post_recv(w->b.qp, &rw);
        (void)op_rdma_post_recv(w->ud, &rw);
    }
}

static void world_free(struct world *w)
{
    rsim_free(&w->s); /* frees the QPs, CQs and regions */
    free(w->mem[0]);
    free(w->mem[1]);
}

static void drain(struct op_rdma_cq *cq)
{
    struct op_rdma_wc wc[16];
    while (op_rdma_poll_cq(cq, 16, wc) > 0)
        ;
}

static void post_some(struct world *w)
{
    const enum op_rdma_wr_opcode ops[] = {OP_RDMA_WR_RDMA_WRITE, OP_RDMA_WR_RDMA_READ,
                                          OP_RDMA_WR_SEND, OP_RDMA_WR_ATOMIC_FETCH_AND_ADD};
    for (int i = 0; i < 4; i++) {
        bool atomic = ops[i] == OP_RDMA_WR_ATOMIC_FETCH_AND_ADD;
        struct op_rdma_sge sg = {(uint64_t)(uintptr_t)w->mem[0], atomic ? 8 : 700,
                                 op_rdma_mr_lkey(w->mr[0])};
        struct op_rdma_send_wr wr = {.wr_id = w->wr_id++, .opcode = ops[i], .sg_list = &sg,
                                     .num_sge = 1,
                                     .rdma = {(uint64_t)(uintptr_t)w->mem[1] + 1000,
                                              op_rdma_mr_rkey(w->mr[1])},
                                     .atomic = {.remote_addr = (uint64_t)(uintptr_t)w->mem[1] + 1000,
                                                .compare_add = 1,
                                                .rkey = op_rdma_mr_rkey(w->mr[1])}};
        (void)op_rdma_post_send(w->a.qp, &wr, w->s.now, &w->s.q);
    }
}

static bool never(void *arg)
{
    (void)arg;
    return false;
}

static void put_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

/* One record's packet, adjusted as ctl asks, delivered now. */
static void inject(struct world *w, uint8_t ctl, const uint8_t *bytes, size_t len)
{
    static uint8_t buf[OP_IO_BUF_SIZE];
    unsigned qsel = (ctl >> 1) & 3;
    int to = qsel == 2 ? 1 : ctl & 1; /* the UD QP lives on the second device */
    if (len > sizeof buf)
        return;
    memcpy(buf, bytes, len);
    struct op_pkt p = {.len = (uint32_t)len, .data = buf};
    p.flow = (struct op_flow){.src.v4 = (ctl & 0x10) ? STRANGER_IP : to ? RSIM_IP_A : RSIM_IP_B,
                              .dst.v4 = to ? RSIM_IP_B : RSIM_IP_A,
                              .src_port = OP_ROCE_UDP_PORT, .dst_port = OP_ROCE_UDP_PORT};
    if (len >= OP_BTH_LEN && (qsel == 1 || qsel == 2))
        put_be(buf + 5, qsel == 1 ? op_rdma_qp_num(to ? w->b.qp : w->a.qp) : op_rdma_qp_num(w->ud),
               3);
    uint32_t spare = op_rdma_qp_num(to ? w->spare_b.qp : w->spare_a.qp);
    if (len >= OP_BTH_LEN && ((uint32_t)buf[5] << 16 | (uint32_t)buf[6] << 8 | buf[7]) == spare)
        return; /* the spare pair is the control group */
    if ((ctl & 0x80) && len >= OP_BTH_LEN + OP_RETH_LEN) {
        uint64_t off = ((uint64_t)buf[12] << 8 | buf[13]) % REGION;
        put_be(buf + 12, (uint64_t)(uintptr_t)w->mem[1] + off, 8);
        put_be(buf + 20, op_rdma_mr_rkey(w->mr[1]), 4);
    }
    if ((ctl & 0x08) && len >= OP_BTH_LEN + OP_ICRC_LEN)
        (void)op_icrc_seal(&p.flow, buf, len - OP_ICRC_LEN, sizeof buf);
    rsim_deliver(&w->s, &p);
}

struct spare_wait {
    struct op_rdma_cq *cq;
    int n;
    struct op_rdma_wc wc;
};

static bool spare_done(void *arg)
{
    struct spare_wait *sw = arg;
    sw->n += op_rdma_poll_cq(sw->cq, 1, &sw->wc);
    return sw->n > 0;
}

/* The pair the input never addressed still writes exactly. */
static void check_spare(struct world *w)
{
    static uint8_t src[3000];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (uint8_t)(i * 7 + 1);
    memcpy(w->mem[0] + 30000, src, sizeof src);
    struct op_rdma_sge sg = {(uint64_t)(uintptr_t)w->mem[0] + 30000, sizeof src,
                             op_rdma_mr_lkey(w->mr[0])};
    struct op_rdma_send_wr wr = {.wr_id = 99, .opcode = OP_RDMA_WR_RDMA_WRITE,
                                 .send_flags = OP_RDMA_SEND_SIGNALED, .sg_list = &sg, .num_sge = 1,
                                 .rdma = {(uint64_t)(uintptr_t)w->mem[1] + 40000,
                                          op_rdma_mr_rkey(w->mr[1])}};
    memset(w->s.link, 0, sizeof w->s.link);
    w->s.hook = NULL;
    require(op_rdma_post_send(w->spare_a.qp, &wr, w->s.now, &w->s.q) == OP_OK, "spare post");
    struct spare_wait sw = {.cq = w->spare_a.scq};
    require(rsim_run(&w->s, spare_done, &sw, OP_NS_PER_S), "spare pair hangs");
    require(sw.wc.status == OP_RDMA_WC_SUCCESS && sw.wc.wr_id == 99, "spare pair failed");
    require(memcmp(w->mem[1] + 40000, src, sizeof src) == 0, "spare pair's data differs");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct world w;
    world_init(&w);
    size_t at = 0;
    for (int n = 0; n < MAX_RECORDS && at + 3 <= size; n++) {
        uint8_t ctl = data[at];
        size_t len = (size_t)data[at + 1] << 8 | data[at + 2];
        at += 3;
        if (len > size - at)
            len = size - at;
        if (ctl & 0x40)
            post_some(&w);
        if (ctl & 0x20)
            (void)rsim_run(&w.s, never, NULL, OP_NS_PER_MS);
        inject(&w, ctl, data + at, len);
        at += len;
        drain(w.a.scq);
        drain(w.b.rcq);
        drain(w.ud_cq);
    }
    (void)rsim_run(&w.s, never, NULL, 100 * OP_NS_PER_MS);
    check_spare(&w);
    world_free(&w);
    return 0;
}
