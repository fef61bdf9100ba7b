/* The NIC's side of a device work queue: take committed entries, check
 * them, post them as RDMA WRITEs on an RC QP, write completions back and
 * free slots in ticket order. Pure: plain memory in, WRs out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offpath/gpu.h"
#include "wq_layout.h"

#define CAUSE_MAX 160

struct op_gpu_engine {
    struct opg_ctrl *ctrl;
    struct opg_wqe *wqe;
    struct opg_cqe *cqe;
    uint32_t depth;
    struct op_rdma_qp *qp;
    uint32_t lkey;
    uint64_t data_addr;
    size_t data_len;
    uint32_t taken;    /* next ticket to read */
    uint32_t released; /* tickets below are completed */
    uint8_t *done;     /* per slot: its CQE is written, not yet released */
    unsigned first_error;
    char cause[CAUSE_MAX];
    uint64_t counters[OP_GPU_C_COUNT_];
};

static const char *const counter_names[] = {OP_GPU_ENGINE_COUNTERS(OP_COUNTER_NAME)};

const char *op_gpu_engine_counter_name(unsigned c)
{
    return c < OP_GPU_C_COUNT_ ? counter_names[c] : "?";
}

const uint64_t *op_gpu_engine_counters(const struct op_gpu_engine *eng) { return eng->counters; }

const char *op_gpu_mode_str(enum op_gpu_mode m)
{
    return m == OP_GPU_MODE_BATCH ? "batch" : "thread";
}

static bool depth_ok(uint32_t depth)
{
    return depth >= 2 && depth <= OP_GPU_MAX_DEPTH && (depth & (depth - 1)) == 0;
}

size_t op_gpu_wq_bytes(uint32_t depth)
{
    return sizeof(struct opg_ctrl) +
           (size_t)depth * (sizeof(struct opg_wqe) + sizeof(struct opg_cqe));
}

op_status_t op_gpu_wq_format(void *mem, size_t len, uint32_t depth)
{
    if (mem == NULL || (uintptr_t)mem % 64 != 0 || !depth_ok(depth) || len < op_gpu_wq_bytes(depth))
        return OP_ERR_INVAL;
    memset(mem, 0, op_gpu_wq_bytes(depth));
    ((struct opg_ctrl *)mem)->depth = depth;
    return OP_OK;
}

op_status_t op_gpu_engine_create(const struct op_gpu_engine_config *cfg,
                                 struct op_gpu_engine **out)
{
    struct opg_ctrl *ctrl = cfg->wq;
    if (ctrl == NULL || cfg->qp == NULL || cfg->mr == NULL || !depth_ok(ctrl->depth))
        return OP_ERR_INVAL;
    struct op_gpu_engine *e = calloc(1, sizeof(*e));
    uint8_t *done = calloc(ctrl->depth, 1);
    if (e == NULL || done == NULL) {
        free(e);
        free(done);
        return OP_ERR_NOMEM;
    }
    e->ctrl = ctrl;
    e->depth = ctrl->depth; /* read once: the device cannot change it under us */
    e->wqe = (struct opg_wqe *)(ctrl + 1);
    e->cqe = (struct opg_cqe *)(e->wqe + e->depth);
    e->qp = cfg->qp;
    e->lkey = op_rdma_mr_lkey(cfg->mr);
    e->data_addr = (uintptr_t)cfg->data;
    e->data_len = cfg->data_len;
    e->done = done;
    e->taken = atomic_load_explicit(&ctrl->released, memory_order_acquire);
    e->released = e->taken;
    *out = e;
    return OP_OK;
}

void op_gpu_engine_destroy(struct op_gpu_engine *eng)
{
    if (eng == NULL)
        return;
    free(eng->done);
    free(eng);
}

/* Frees slots in ticket order: a slot whose CQE is written but has an older
 * ticket still out stays taken (RC completes in order, rejected entries at
 * once, so the two interleave). */
static void release_in_order(struct op_gpu_engine *e)
{
    uint32_t before = e->released;
    while (e->released != e->taken && e->done[e->released & (e->depth - 1)]) {
        e->done[e->released & (e->depth - 1)] = 0;
        e->released++;
    }
    if (e->released != before)
        atomic_store_explicit(&e->ctrl->released, e->released, memory_order_release);
}

static void write_cqe(struct op_gpu_engine *e, uint32_t ticket, unsigned status, uint32_t len,
                      const char *cause)
{
    struct opg_cqe *c = &e->cqe[ticket & (e->depth - 1)];
    c->status = status;
    c->byte_len = len;
    c->opcode = OP_RDMA_WC_RDMA_WRITE;
    atomic_store_explicit(&c->seq, ticket + 1, memory_order_release);
    e->counters[OP_GPU_C_completed]++;
    atomic_store_explicit(&e->ctrl->completed, (uint32_t)e->counters[OP_GPU_C_completed],
                          memory_order_release);
    if (status != OP_RDMA_WC_SUCCESS) {
        e->counters[OP_GPU_C_errors]++;
        if (e->first_error == 0) {
            e->first_error = status;
            snprintf(e->cause, sizeof e->cause, "ticket %u: %s", ticket,
                     cause != NULL ? cause : "no cause given");
        }
    }
    e->done[ticket & (e->depth - 1)] = 1;
    release_in_order(e);
}

/* The entry as copied out of device memory; checked before any use. */
static const char *check_entry(const struct op_gpu_engine *e, const struct opg_wqe *w,
                               unsigned *status, enum op_gpu_engine_counter *counter)
{
    if ((w->opcode != OPG_WQE_RDMA_WRITE && w->opcode != OPG_WQE_RDMA_WRITE_IMM) || w->flags) {
        *status = OP_RDMA_WC_LOC_QP_OP_ERR;
        *counter = OP_GPU_C_reject_opcode;
        return "opcode is not RDMA_WRITE or RDMA_WRITE_WITH_IMM, or reserved flags set";
    }
    if (w->local_offset > e->data_len || w->length > e->data_len - w->local_offset) {
        *status = OP_RDMA_WC_LOC_PROT_ERR;
        *counter = OP_GPU_C_reject_range;
        return "local offset + length outside the registered data buffer";
    }
    return NULL;
}

/* 1: posted or rejected (taken), 0: the QP is full (try again later). */
static int take_one(struct op_gpu_engine *e, uint32_t ticket, uint64_t now, struct op_txq *out)
{
    struct opg_wqe w;
    memcpy((char *)&w + sizeof w.seq, (const char *)&e->wqe[ticket & (e->depth - 1)] + sizeof w.seq,
           sizeof w - sizeof w.seq);
    unsigned status = 0;
    enum op_gpu_engine_counter counter = OP_GPU_C_taken;
    const char *why = check_entry(e, &w, &status, &counter);
    if (why != NULL) {
        e->counters[counter]++;
        write_cqe(e, ticket, status, 0, why);
        return 1;
    }
    struct op_rdma_sge sge = {e->data_addr + w.local_offset, w.length, e->lkey};
    struct op_rdma_send_wr wr = {
        .wr_id = OP_GPU_WRID_TAG | ticket,
        .opcode = w.opcode == OPG_WQE_RDMA_WRITE_IMM ? OP_RDMA_WR_RDMA_WRITE_WITH_IMM
                                                     : OP_RDMA_WR_RDMA_WRITE,
        .send_flags = OP_RDMA_SEND_SIGNALED,
        .sg_list = &sge,
        .num_sge = 1,
        .imm_data = w.imm,
        .rdma = {w.remote_addr, w.rkey},
    };
    op_status_t st = op_rdma_post_send(e->qp, &wr, now, out);
    if (st == OP_ERR_NOSPACE) {
        e->counters[OP_GPU_C_backpressure]++;
        return 0;
    }
    if (st != OP_OK) {
        e->counters[OP_GPU_C_reject_post]++;
        write_cqe(e, ticket, OP_RDMA_WC_LOC_QP_OP_ERR, 0, op_rdma_qp_error(e->qp));
        return 1;
    }
    e->counters[OP_GPU_C_posted]++;
    return 1;
}

int op_gpu_engine_poll(struct op_gpu_engine *e, int budget, uint64_t now, struct op_txq *out)
{
    uint32_t bell = atomic_load_explicit(&e->ctrl->doorbell, memory_order_acquire);
    uint32_t ahead = bell - e->taken;
    if (ahead > e->depth) { /* the device cannot have written more than the queue holds */
        e->counters[OP_GPU_C_bad_doorbell]++;
        ahead = e->released + e->depth - e->taken;
    }
    int n = 0;
    for (; n < budget && (uint32_t)n < ahead; n++) {
        uint32_t ticket = e->taken;
        if (ticket - e->released >= e->depth)
            break; /* its slot still holds an older ticket */
        struct opg_wqe *w = &e->wqe[ticket & (e->depth - 1)];
        if (atomic_load_explicit(&w->seq, memory_order_acquire) != ticket + 1) {
            e->counters[OP_GPU_C_not_ready]++;
            break;
        }
        e->taken++; /* before take_one: a rejected entry's CQE releases it */
        if (!take_one(e, ticket, now, out)) {
            e->taken--;
            break;
        }
        e->counters[OP_GPU_C_taken]++;
    }
    return n;
}

bool op_gpu_engine_complete(struct op_gpu_engine *e, const struct op_rdma_wc *wc)
{
    if (!(wc->wr_id & OP_GPU_WRID_TAG))
        return false;
    uint32_t ticket = (uint32_t)wc->wr_id;
    uint32_t len = wc->status == OP_RDMA_WC_SUCCESS ? wc->byte_len : 0;
    write_cqe(e, ticket, wc->status, len, wc->cause);
    return true;
}

bool op_gpu_engine_idle(const struct op_gpu_engine *e)
{
    return atomic_load_explicit(&e->ctrl->doorbell, memory_order_acquire) == e->taken &&
           e->released == e->taken;
}

unsigned op_gpu_engine_first_error(const struct op_gpu_engine *e, const char **cause)
{
    if (cause != NULL)
        *cause = e->first_error ? e->cause : NULL;
    return e->first_error;
}
