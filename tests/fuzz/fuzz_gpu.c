/* libFuzzer target for src/gpu's engine: work-queue entries come from
 * device memory and are untrusted. The input is what device code left in
 * the queue; the engine runs over an in-memory RC pair.
 *
 * Layout: doorbell (4 bytes, little-endian), then records of 32 bytes, one
 * per slot of a 16-entry queue (at most 16):
 *   seq (4)  stored as is: the entry is read only when it equals ticket + 1
 *   opcode (4), length (4), flags (4)
 *   local_offset (8)
 *   remote (4)  bit 31: the server region's rkey (else bits 0-30 as a key);
 *               the address is the region's base + (remote & 0xffff)
 *   imm (4)
 * Whatever the queue holds must not crash the engine (ASan, UBSan) or make
 * it read past the doorbell or the queue; every entry it takes completes
 * exactly once, and nothing lands outside the server's region. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offpath/gpu.h"
#include "../../src/gpu/wq_layout.h"
#include "../unit/rdmasim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define DEPTH 16
#define REC 32
#define DATA_LEN 8192
#define REGION 65536
#define GUARD 4096

static void require(bool cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_gpu: %s\n", what);
        abort();
    }
}

static uint32_t le32(const uint8_t *p)
{
    return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t le64(const uint8_t *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }

struct world {
    struct rsim s;
    struct rsim_ep a, b;
    void *wq;
    uint8_t *src, *dst; /* dst: GUARD bytes, the region, GUARD bytes */
    struct op_rdma_mr *src_mr, *dst_mr;
    struct op_gpu_engine *eng;
    uint64_t foreign;
};

static void fill_queue(struct world *w, const uint8_t *data, size_t size)
{
    struct opg_ctrl *c = w->wq;
    struct opg_wqe *q = (struct opg_wqe *)(c + 1);
    atomic_store(&c->doorbell, size >= 4 ? le32(data) : 0);
    for (size_t k = 0; k < DEPTH && 4 + (k + 1) * REC <= size; k++) {
        const uint8_t *r = data + 4 + k * REC;
        uint32_t remote = le32(r + 24);
        q[k].opcode = le32(r + 4);
        q[k].length = le32(r + 8);
        q[k].flags = le32(r + 12);
        q[k].local_offset = le64(r + 16);
        q[k].rkey = remote >> 31 ? op_rdma_mr_rkey(w->dst_mr) : remote;
        q[k].remote_addr = (uintptr_t)w->dst + GUARD + (remote & 0xffff);
        q[k].imm = le32(r + 28);
        atomic_store(&q[k].seq, le32(r));
    }
}

static bool drive(void *arg)
{
    struct world *w = arg;
    op_gpu_engine_poll(w->eng, 64, w->s.now, &w->s.q);
    w->s.q.flush(w->s.q.ctx, &w->s.q);
    struct op_rdma_wc wc[16];
    int n;
    while ((n = op_rdma_poll_cq(w->a.scq, 16, wc)) > 0)
        for (int i = 0; i < n; i++)
            w->foreign += !op_gpu_engine_complete(w->eng, &wc[i]);
    return op_gpu_engine_idle(w->eng);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct world w;
    memset(&w, 0, sizeof w);
    rsim_init(&w.s, 3);
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .depth = 8, .retry_cnt = 2,
                                   .timeout = 8};
    rsim_connect(&w.s, &o, &w.a, &w.b);
    size_t wq_len = op_gpu_wq_bytes(DEPTH);
    w.wq = aligned_alloc(64, wq_len);
    w.src = malloc(DATA_LEN);
    w.dst = calloc(1, REGION + 2 * GUARD);
    require(w.wq && w.src && w.dst, "memory");
    memset(w.src, 0xab, DATA_LEN);
    require(op_gpu_wq_format(w.wq, wq_len, DEPTH) == OP_OK, "format");
    require(op_rdma_reg_mr(w.s.dev[0], w.src, DATA_LEN, OP_RDMA_ACCESS_LOCAL_WRITE, &w.src_mr) ==
                OP_OK, "src mr");
    require(op_rdma_reg_mr(w.s.dev[1], w.dst + GUARD, REGION,
                           OP_RDMA_ACCESS_LOCAL_WRITE | OP_RDMA_ACCESS_REMOTE_WRITE,
                           &w.dst_mr) == OP_OK, "dst mr");
    const struct op_gpu_engine_config ec = {.wq = w.wq, .qp = w.a.qp, .mr = w.src_mr,
                                            .data = w.src, .data_len = DATA_LEN};
    require(op_gpu_engine_create(&ec, &w.eng) == OP_OK, "engine");
    fill_queue(&w, data, size);
    rsim_run(&w.s, drive, &w, 2 * OP_NS_PER_S);
    const uint64_t *c = op_gpu_engine_counters(w.eng);
    require(c[OP_GPU_C_taken] <= DEPTH, "took more than the queue held");
    require(c[OP_GPU_C_taken] == c[OP_GPU_C_posted] + c[OP_GPU_C_reject_opcode] +
                                     c[OP_GPU_C_reject_range] + c[OP_GPU_C_reject_post],
            "every entry taken is posted or rejected");
    require(c[OP_GPU_C_completed] <= c[OP_GPU_C_taken], "a completion for nothing");
    require(w.foreign == 0, "a completion the engine did not own");
    for (size_t i = 0; i < GUARD; i++)
        require(w.dst[i] == 0 && w.dst[GUARD + REGION + i] == 0, "bytes outside the region");
    op_gpu_engine_destroy(w.eng);
    rsim_free(&w.s);
    free(w.wq);
    free(w.src);
    free(w.dst);
    return 0;
}
