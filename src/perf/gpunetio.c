/* gpunetio_write_bw's client: device code (src/gpu's posting kernel on an
 * OpenCL or Vulkan device) posts the writes into a work queue in memory it
 * shares with the host; this thread
 * plays the NIC: it takes the entries (op_gpu_engine), runs the RoCEv2
 * device and hands completions back. The server is ib_write_bw's. */
#include <inttypes.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "perf_int.h"

#define STALL_NS (30ull * OP_NS_PER_S) /* no entry taken nor completed for this long: fail */
#define ENGINE_BUDGET 256
#define PEER_CHECK_EVERY 1024
#define DRAIN_NS (5ull * OP_NS_PER_S)

struct perf_gpu {
    struct op_gpu_dev *dev;
    uint8_t *data; /* shared memory: the source slots, a copy of the pattern */
    struct op_rdma_mr *mr;
    void *wq;
    uint32_t depth;
};

uint32_t perf_gpu_slots(const struct op_perf_config *c, uint64_t bufsize, uint64_t size)
{
    uint64_t fit = size ? bufsize / size : 1;
    uint32_t want = c->gpu.slots ? c->gpu.slots : c->gpu.threads;
    uint64_t n = want < fit ? want : fit;
    return n ? (uint32_t)n : 1;
}

/* A queue of at least 8192 entries and two iterations' worth: a launch
 * posts until the queue is full and the next waits for half of it free
 * (dev.c), so the depth sets how many writes a launch carries. With 1024,
 * 512 work-items x 1000 iterations of 64 B took about 900 launches (a
 * launch every 512 writes, each a submit and a fence on lavapipe), with
 * 8192 about 120. The queue costs 80 bytes an entry of shared memory. */
static uint32_t queue_depth(uint32_t threads)
{
    uint32_t d = 8192;
    while (d < 2 * threads && d < OP_GPU_MAX_DEPTH)
        d *= 2;
    return d;
}

/* --api given: that API's device; else the first API whose device opens
 * (OpenCL, then Vulkan), and if none does, why each did not. */
static op_status_t open_device(const struct op_perf_config *c, struct op_gpu_dev **dev,
                               char *why, size_t len)
{
    char cause[OP_GPU_API_COUNT][256];
    for (unsigned a = 0; a < OP_GPU_API_COUNT; a++) {
        enum op_gpu_api api = c->gpu.api_given ? c->gpu.api : (enum op_gpu_api)a;
        unsigned platform = api == OP_GPU_API_OPENCL ? c->gpu.platform : 0;
        if (op_gpu_open(api, platform, c->gpu.device, c->gpu.mem, dev, cause[a],
                        sizeof cause[a]) == OP_OK)
            return OP_OK;
        if (c->gpu.api_given)
            return perf_refuse(why, len, "--api %s --device %u: %s", op_gpu_api_str(api),
                               c->gpu.device, cause[a]);
    }
    return perf_refuse(why, len, "no GPU API runs the work queue: OpenCL: %s; Vulkan: %s",
                       cause[0], cause[1]);
}

op_status_t perf_gpu_open(struct perf_run *r)
{
    const struct op_perf_config *c = r->cfg;
    struct perf_gpu *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return OP_ERR_NOMEM;
    r->gpu = g;
    op_status_t st = open_device(c, &g->dev, r->why, sizeof r->why);
    if (st != OP_OK)
        return st;
    g->depth = queue_depth(c->gpu.threads);
    g->data = op_gpu_alloc(g->dev, r->ep.bufsize);
    g->wq = op_gpu_alloc(g->dev, op_gpu_wq_bytes(g->depth));
    if (g->data == NULL || g->wq == NULL)
        return perf_refuse(r->why, sizeof r->why, "cannot allocate %zu bytes of %s shared memory",
                           r->ep.bufsize, op_gpu_api_title(op_gpu_dev_api(g->dev)));
    memcpy(g->data, r->ep.pattern, r->ep.bufsize);
    if (op_rdma_reg_mr(r->ep.dev, g->data, r->ep.bufsize, OP_RDMA_ACCESS_LOCAL_WRITE, &g->mr) !=
        OP_OK)
        return perf_refuse(r->why, sizeof r->why, "cannot register the shared buffer");
    if (c->output == OP_PERF_OUT_FULL)
        fprintf(r->out, " %s device: %s (%s), %u work-items, %s mode, queue of %u\n",
                op_gpu_api_title(op_gpu_dev_api(g->dev)), op_gpu_device_name(g->dev),
                op_gpu_driver_name(g->dev), c->gpu.threads,
                op_gpu_mode_str(c->gpu.mode), g->depth);
    return OP_OK;
}

void perf_gpu_close(struct perf_run *r)
{
    struct perf_gpu *g = r->gpu;
    if (g == NULL)
        return;
    if (g->mr != NULL)
        op_rdma_dereg_mr(g->mr);
    if (g->dev != NULL) {
        op_gpu_free(g->dev, g->data);
        op_gpu_free(g->dev, g->wq);
        op_gpu_close(g->dev);
    }
    free(g);
    r->gpu = NULL;
}

struct gpu_run {
    struct perf_run *r;
    struct op_gpu_engine *eng;
    struct op_gpu_poster *po;
    uint64_t last_move_ns, done_ns;
    uint64_t moved; /* entries taken + completions: progress for the stall watch */
    bool fault_seen;  /* --inject_fault: the expected error came */
    uint64_t size;
    uint64_t cpu_posted, cpu_completed; /* --cpu_writes: the host's own, same QP */
};

static op_status_t start(struct gpu_run *s, uint64_t size)
{
    struct perf_run *r = s->r;
    const struct op_perf_config *c = r->cfg;
    struct perf_gpu *g = r->gpu;
    struct perf_qp *q = &r->ep.qps[0];
    if (op_gpu_wq_format(g->wq, op_gpu_wq_bytes(g->depth), g->depth) != OP_OK)
        return perf_refuse(r->why, sizeof r->why, "cannot format the work queue");
    const struct op_gpu_engine_config ec = {.wq = g->wq, .qp = q->qp, .mr = g->mr,
                                            .data = g->data, .data_len = r->ep.bufsize};
    if (op_gpu_engine_create(&ec, &s->eng) != OP_OK)
        return perf_refuse(r->why, sizeof r->why, "cannot create the work-queue engine");
    struct op_gpu_post_params p = {
        .threads = c->gpu.threads, .mode = c->gpu.mode, .iters = (uint32_t)c->iters,
        .size = (uint32_t)size, .slots = perf_gpu_slots(c, r->ep.bufsize, size),
        .remote_addr = q->peer.vaddr + r->ep.bufsize,
        .rkey = q->peer.rkey};
    if (c->gpu.fault == OP_PERF_FAULT_RKEY)
        p.rkey ^= 0x10000u; /* another key of the same slot: never the peer's */
    else if (c->gpu.fault == OP_PERF_FAULT_RANGE)
        p.remote_addr = q->peer.vaddr + 2 * r->ep.bufsize; /* just past the peer's region */
    char why[200];
    if (op_gpu_poster_create(g->dev, g->wq, &p, &s->po, why, sizeof why) != OP_OK)
        return perf_refuse(r->why, sizeof r->why, "posting kernel: %s", why);
    return OP_OK;
}

static void stop(struct gpu_run *s)
{
    op_gpu_poster_destroy(s->po);
    op_gpu_engine_destroy(s->eng);
}

static op_status_t take_completions(struct gpu_run *s)
{
    struct op_rdma_wc wc[32];
    int n;
    while ((n = op_rdma_poll_cq(s->r->ep.scq, 32, wc)) > 0)
        for (int i = 0; i < n; i++) {
            if (!op_gpu_engine_complete(s->eng, &wc[i])) { /* one of the host's writes */
                if (wc[i].status != OP_RDMA_WC_SUCCESS)
                    return perf_wc_error(s->r, &wc[i]);
                s->cpu_completed++;
            }
            s->moved++;
        }
    return OP_OK;
}

static op_status_t device_error(struct gpu_run *s)
{
    const char *cause = NULL;
    unsigned st = op_gpu_engine_first_error(s->eng, &cause);
    struct op_gpu_poster_stats ps;
    op_gpu_poster_stats(s->po, &ps);
    return perf_refuse(s->r->why, sizeof s->r->why,
                       "device-posted write completed with status %u (%s): %s; the device "
                       "code saw %u error completion(s)",
                       st, op_rdma_wc_status_str(st), cause ? cause : "", ps.dev_errors);
}

/* --inject_fault: the writes must fail with the remote access error; the
 * note says what they completed with (the server checks nothing landed). */
static bool expected_fault(struct gpu_run *s)
{
    struct perf_run *r = s->r;
    const char *cause = NULL;
    unsigned st = op_gpu_engine_first_error(s->eng, &cause);
    if (r->cfg->gpu.fault == OP_PERF_FAULT_NONE || st != OP_RDMA_WC_REM_ACCESS_ERR ||
        !op_gpu_engine_idle(s->eng))
        return false;
    struct op_gpu_poster_stats ps;
    op_gpu_poster_stats(s->po, &ps);
    /* a batch kernel posts and returns: only the thread-mode one polls
     * completions, so only it can see them */
    char seen[48] = " (batch: the device code polls none)";
    if (r->cfg->gpu.mode != OP_GPU_MODE_BATCH)
        snprintf(seen, sizeof seen, ", %u seen by the device code", ps.dev_errors);
    snprintf(r->gpu_note, sizeof r->gpu_note,
             "injected fault (%s): device-posted writes completed with %s, %" PRIu64
             " error completions%s",
             r->cfg->gpu.fault == OP_PERF_FAULT_RKEY ? "bad rkey" : "address past the region",
             op_rdma_wc_status_str(st), op_gpu_engine_counters(s->eng)[OP_GPU_C_errors], seen);
    s->fault_seen = true;
    return true;
}

/* --cpu_writes: one host-posted write per turn, between the engine's, of
 * the same slots (so the server's check covers them too); a full send
 * queue leaves it for a later turn. */
static op_status_t post_cpu_write(struct gpu_run *s, uint64_t now)
{
    struct perf_run *r = s->r;
    if (s->cpu_posted >= r->cfg->gpu.cpu_writes)
        return OP_OK;
    struct perf_qp *q = &r->ep.qps[0];
    uint64_t off = (s->cpu_posted % perf_gpu_slots(r->cfg, r->ep.bufsize, s->size)) * s->size;
    struct op_rdma_sge sge = {(uintptr_t)r->gpu->data + off, (uint32_t)s->size,
                              op_rdma_mr_lkey(r->gpu->mr)};
    struct op_rdma_send_wr wr = {.wr_id = s->cpu_posted, .opcode = OP_RDMA_WR_RDMA_WRITE,
                                 .send_flags = OP_RDMA_SEND_SIGNALED, .sg_list = &sge,
                                 .num_sge = 1,
                                 .rdma = {q->peer.vaddr + r->ep.bufsize + off, q->peer.rkey}};
    op_status_t st = op_rdma_post_send(q->qp, &wr, now, perf_ep_txq(&r->ep));
    if (st == OP_ERR_NOSPACE)
        return OP_OK;
    if (st != OP_OK)
        return perf_refuse(r->why, sizeof r->why, "post_send: %s", op_rdma_qp_error(q->qp));
    s->cpu_posted++;
    return OP_OK;
}

/* One turn: kernel launches, entries to WRs, packets, completions back. */
static op_status_t turn(struct gpu_run *s, int *kernel_done, uint64_t now)
{
    struct perf_ep *ep = &s->r->ep;
    if (!*kernel_done) {
        int k = op_gpu_poster_step(s->po);
        if (k < 0)
            return perf_refuse(s->r->why, sizeof s->r->why, "posting kernel launch failed");
        *kernel_done = k;
    }
    uint64_t before = s->moved;
    s->moved += (uint64_t)op_gpu_engine_poll(s->eng, ENGINE_BUDGET, now, perf_ep_txq(ep));
    op_status_t st = post_cpu_write(s, now);
    int got = perf_ep_progress(ep);
    if (st == OP_OK)
        st = take_completions(s);
    if (s->moved != before)
        s->last_move_ns = now;
    else if (got == 0)
        sched_yield(); /* the kernel's threads run on these cores too */
    return st;
}

static op_status_t drive(struct gpu_run *s)
{
    struct perf_run *r = s->r;
    int kernel_done = 0;
    s->last_move_ns = op_now_ns();
    for (uint64_t n = 0;; n++) {
        uint64_t now = op_now_ns();
        op_status_t st = turn(s, &kernel_done, now);
        if (st == OP_OK && op_gpu_engine_first_error(s->eng, NULL) != 0) {
            op_gpu_poster_stop(s->po); /* then let what is out complete */
            for (uint64_t end = now + DRAIN_NS; !op_gpu_engine_idle(s->eng) && op_now_ns() < end;)
                st = turn(s, &kernel_done, op_now_ns());
            return expected_fault(s) ? OP_OK : device_error(s);
        }
        if (st == OP_OK && n % PEER_CHECK_EVERY == 0) {
            bool got = false;
            char rest[PERF_LINE_MAX];
            st = perf_poll_tag(r, "DONE", &got, rest, sizeof rest); /* a FAIL ends the run */
        }
        if (st != OP_OK)
            return st;
        if (kernel_done && op_gpu_engine_idle(s->eng) &&
            s->cpu_completed == r->cfg->gpu.cpu_writes) {
            s->done_ns = now;
            if (r->cfg->gpu.fault != OP_PERF_FAULT_NONE)
                return perf_refuse(r->why, sizeof r->why,
                                   "--inject_fault: every device-posted write succeeded");
            return OP_OK;
        }
        if (now > s->last_move_ns + STALL_NS)
            return perf_refuse(r->why, sizeof r->why,
                               "no progress for %llu s: the device committed entries it did "
                               "not write, or the QP stalled",
                               (unsigned long long)(STALL_NS / OP_NS_PER_S));
    }
}

/* The figures of a finished run: all threads x iters writes over [first
 * launch, last completion]; with an injected fault, zeros (nothing moved). */
static void result(const struct gpu_run *s, uint64_t size, struct op_perf_bw_result *res)
{
    struct perf_run *r = s->r;
    const struct op_perf_config *c = r->cfg;
    struct op_gpu_poster_stats ps;
    op_gpu_poster_stats(s->po, &ps);
    r->gpu_post_us = (double)ps.device_ns / 1e3 / (double)c->iters;
    r->gpu_launches = ps.launches;
    if (c->gpu.cpu_writes)
        snprintf(r->gpu_note, sizeof r->gpu_note,
                 "%" PRIu64 " CPU-posted and %" PRIu64 " device-posted writes completed on the "
                 "same QP", s->cpu_completed, (uint64_t)c->gpu.threads * c->iters);
    *res = (struct op_perf_bw_result){.size = size};
    if (!s->fault_seen) {
        uint64_t writes = (uint64_t)c->gpu.threads * c->iters + s->cpu_completed;
        uint64_t span = s->done_ns > ps.first_launch_ns ? s->done_ns - ps.first_launch_ns : 1;
        op_perf_bw_rate(size, writes, span, c->report_gbits, res);
    }
    res->iters = c->iters;
}

op_status_t perf_run_gpunetio(struct perf_run *r, uint64_t size, struct op_perf_bw_result *res)
{
    struct gpu_run s = {.r = r, .size = size};
    r->gpu_note[0] = '\0';
    op_status_t st = start(&s, size);
    if (st == OP_OK)
        st = perf_barrier(r, "GO");
    if (st == OP_OK)
        st = drive(&s);
    if (st == OP_OK) {
        result(&s, size, res);
        char text[PERF_LINE_MAX];
        perf_format_bw_done(res, text, sizeof text);
        if (perf_oob_send(&r->oob, "DONE %s", text) != OP_OK)
            st = perf_refuse(r->why, sizeof r->why, "the peer closed the side channel");
    }
    r->check[0] = '\0'; /* the bytes land at the server: its verdict comes back */
    stop(&s);
    return st;
}
