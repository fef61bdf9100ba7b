/* src/gpu: the device work queue and its engine. The engine tests write
 * entries as device code does (same layout, same release order) and run
 * the QP pair over the in-memory link; the device tests run the real
 * posting kernels, each test body once per API: on the first OpenCL
 * device (PoCL here) and the first Vulkan device (lavapipe here), and skip
 * only when that API has no device at all. Every byte that lands is
 * checked. */
#include <dlfcn.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <sched.h>

#include "offpath/gpu.h"
#include "../../src/gpu/wq_layout.h"
#include "rdmasim.h"

#define LIMIT_NS (5ull * OP_NS_PER_S)
#define WALL_LIMIT_NS (60ull * OP_NS_PER_S)
#define BUF_LEN (256 * 1024)

struct gfx {
    struct rsim s;
    struct rsim_ep a, b;
    uint8_t *src, *dst; /* src: a's data buffer (plain or SVM), dst: b's target */
    size_t len;
    struct op_rdma_mr *src_mr, *dst_mr;
    void *wq;
    struct op_gpu_engine *eng;
    struct op_gpu_dev *dev; /* device tests: src and wq are its shared memory */
    uint32_t cpu_done;    /* CPU-posted completions seen on the same QP */
    bool want_idle;
};

static void fill(uint8_t *p, size_t n, uint64_t seed)
{
    struct op_rng r;
    op_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)op_rng_next(&r);
}

static void *aligned_zero(size_t n)
{
    void *p = aligned_alloc(64, (n + 63) / 64 * 64);
    assert_non_null(p);
    memset(p, 0, n);
    return p;
}

static void gfx_init_len(struct gfx *f, uint32_t depth, uint32_t qp_depth,
                         struct op_gpu_dev *dev, size_t len)
{
    memset(f, 0, sizeof(*f));
    f->dev = dev;
    f->len = len;
    rsim_init(&f->s, 16);
    const struct rsim_qp_opts o = {.type = OP_RDMA_QPT_RC, .depth = qp_depth, .retry_cnt = 7};
    rsim_connect(&f->s, &o, &f->a, &f->b);
    size_t wq_len = op_gpu_wq_bytes(depth);
    f->src = dev ? op_gpu_alloc(dev, f->len) : aligned_zero(f->len);
    f->wq = dev ? op_gpu_alloc(dev, wq_len) : aligned_zero(wq_len);
    f->dst = aligned_zero(f->len);
    assert_non_null(f->src);
    assert_non_null(f->wq);
    fill(f->src, f->len, 99);
    assert_int_equal(op_gpu_wq_format(f->wq, wq_len, depth), OP_OK);
    assert_int_equal(op_rdma_reg_mr(f->s.dev[0], f->src, f->len, OP_RDMA_ACCESS_LOCAL_WRITE,
                                    &f->src_mr), OP_OK);
    assert_int_equal(op_rdma_reg_mr(f->s.dev[1], f->dst, f->len,
                                    OP_RDMA_ACCESS_LOCAL_WRITE | OP_RDMA_ACCESS_REMOTE_WRITE,
                                    &f->dst_mr), OP_OK);
    const struct op_gpu_engine_config ec = {.wq = f->wq, .qp = f->a.qp, .mr = f->src_mr,
                                            .data = f->src, .data_len = f->len};
    assert_int_equal(op_gpu_engine_create(&ec, &f->eng), OP_OK);
}

static void gfx_init(struct gfx *f, uint32_t depth, uint32_t qp_depth, struct op_gpu_dev *dev)
{
    gfx_init_len(f, depth, qp_depth, dev, BUF_LEN);
}

static void gfx_free(struct gfx *f)
{
    op_gpu_engine_destroy(f->eng);
    rsim_free(&f->s);
    if (f->dev) {
        op_gpu_free(f->dev, f->src);
        op_gpu_free(f->dev, f->wq);
    } else {
        free(f->src);
        free(f->wq);
    }
    free(f->dst);
}

static struct opg_ctrl *ctrl_of(void *wq) { return wq; }
static struct opg_wqe *wqe_of(void *wq) { return (struct opg_wqe *)(ctrl_of(wq) + 1); }
static struct opg_cqe *cqe_of(void *wq)
{
    return (struct opg_cqe *)(wqe_of(wq) + ctrl_of(wq)->depth);
}

/* What a work-item does: fill, publish seq (release), ring the doorbell. */
static void dev_write(void *wq, uint32_t ticket, uint32_t opcode, uint64_t off, uint32_t len,
                      uint64_t raddr, uint32_t rkey, bool ring)
{
    struct opg_wqe *w = &wqe_of(wq)[ticket & (ctrl_of(wq)->depth - 1)];
    w->opcode = opcode;
    w->length = len;
    w->rkey = rkey;
    w->local_offset = off;
    w->remote_addr = raddr;
    w->imm = ticket;
    w->flags = 0;
    atomic_store_explicit(&w->seq, ticket + 1, memory_order_release);
    if (ring)
        atomic_fetch_add_explicit(&ctrl_of(wq)->doorbell, 1, memory_order_release);
}

static void post_slot(struct gfx *f, uint32_t ticket, uint32_t slot, uint32_t len)
{
    dev_write(f->wq, ticket, OPG_WQE_RDMA_WRITE, (uint64_t)slot * len, len,
              (uintptr_t)f->dst + (uint64_t)slot * len, op_rdma_mr_rkey(f->dst_mr), true);
}

/* The NIC's work: take entries, put their packets on the wire, route
 * completions (the engine's to the queue, the rest counted as CPU ones). */
static bool engine_turn(void *arg)
{
    struct gfx *f = arg;
    op_gpu_engine_poll(f->eng, 64, f->s.now, &f->s.q);
    f->s.q.flush(f->s.q.ctx, &f->s.q);
    struct op_rdma_wc wc[16];
    int n;
    while ((n = op_rdma_poll_cq(f->a.scq, 16, wc)) > 0)
        for (int i = 0; i < n; i++)
            if (!op_gpu_engine_complete(f->eng, &wc[i])) {
                assert_int_equal(wc[i].status, OP_RDMA_WC_SUCCESS);
                f->cpu_done++;
            }
    return f->want_idle && op_gpu_engine_idle(f->eng);
}

static void run_until_idle(struct gfx *f)
{
    f->want_idle = true;
    assert_true(rsim_run(&f->s, engine_turn, f, LIMIT_NS));
}

static uint64_t ec(const struct gfx *f, enum op_gpu_engine_counter c)
{
    return op_gpu_engine_counters(f->eng)[c];
}

static void expect_cqe(const struct gfx *f, uint32_t ticket, unsigned status)
{
    const struct opg_cqe *c = &cqe_of(f->wq)[ticket & (ctrl_of(f->wq)->depth - 1)];
    if (atomic_load(&c->seq) != ticket + 1 || c->status != status)
        fail_msg("ticket %u: CQE seq %u status %u, expected status %u", ticket,
                 (unsigned)atomic_load(&c->seq), c->status, status);
}

static void expect_landed(const struct gfx *f, uint32_t slots, uint32_t len)
{
    for (size_t i = 0; i < (size_t)slots * len; i++)
        if (f->dst[i] != f->src[i])
            fail_msg("byte %zu: 0x%02x, sent 0x%02x", i, f->dst[i], f->src[i]);
    for (size_t i = (size_t)slots * len; i < f->len; i++)
        if (f->dst[i] != 0)
            fail_msg("byte %zu beyond the written slots is 0x%02x", i, f->dst[i]);
}

static void test_wq_format(void **state)
{
    (void)state;
    size_t n = op_gpu_wq_bytes(8);
    assert_int_equal(n, 192 + 8 * 64 + 8 * 16);
    uint8_t *m = aligned_zero(n + 64);
    assert_int_equal(op_gpu_wq_format(m, n, 6), OP_ERR_INVAL);     /* not a power of two */
    assert_int_equal(op_gpu_wq_format(m, n, 1), OP_ERR_INVAL);
    assert_int_equal(op_gpu_wq_format(m, n - 1, 8), OP_ERR_INVAL); /* too short */
    assert_int_equal(op_gpu_wq_format(m + 8, n, 8), OP_ERR_INVAL); /* misaligned */
    memset(m, 0xee, n);
    assert_int_equal(op_gpu_wq_format(m, n, 8), OP_OK);
    assert_int_equal(ctrl_of(m)->depth, 8);
    assert_int_equal(atomic_load(&ctrl_of(m)->doorbell), 0);
    assert_int_equal(atomic_load(&wqe_of(m)[7].seq), 0);
    free(m);
}

/* 300 writes through a 64-entry queue: slots are reused, in ticket order. */
static void test_engine_writes_every_byte(void **state)
{
    (void)state;
    struct gfx f;
    gfx_init(&f, 64, 64, NULL);
    const uint32_t len = 700, slots = 50;
    uint32_t ticket = 0;
    for (int round = 0; round < 6; round++) {
        for (uint32_t k = 0; k < 50; k++, ticket++)
            post_slot(&f, ticket, ticket % slots, len);
        run_until_idle(&f);
    }
    expect_landed(&f, slots, len);
    for (uint32_t t = ticket - 64; t < ticket; t++)
        expect_cqe(&f, t, OP_RDMA_WC_SUCCESS);
    assert_int_equal(atomic_load(&ctrl_of(f.wq)->released), 300);
    assert_int_equal(atomic_load(&ctrl_of(f.wq)->completed), 300);
    assert_int_equal(ec(&f, OP_GPU_C_posted), 300);
    assert_int_equal(ec(&f, OP_GPU_C_errors), 0);
    gfx_free(&f);
}

/* Entries are untrusted: a bad opcode or a range outside the data buffer
 * completes with an error, sends nothing, and the queue goes on. */
static void test_engine_rejects_bad_entries(void **state)
{
    (void)state;
    struct gfx f;
    gfx_init(&f, 16, 64, NULL);
    uint32_t rkey = op_rdma_mr_rkey(f.dst_mr);
    uint64_t d = (uintptr_t)f.dst;
    dev_write(f.wq, 0, 7, 0, 64, d, rkey, true);                    /* opcode */
    dev_write(f.wq, 1, OPG_WQE_RDMA_WRITE, f.len - 10, 64, d, rkey, true); /* runs past the end */
    dev_write(f.wq, 2, OPG_WQE_RDMA_WRITE, UINT64_MAX - 5, 64, d, rkey, true); /* wraps */
    post_slot(&f, 3, 0, 128);
    run_until_idle(&f);
    expect_cqe(&f, 0, OP_RDMA_WC_LOC_QP_OP_ERR);
    expect_cqe(&f, 1, OP_RDMA_WC_LOC_PROT_ERR);
    expect_cqe(&f, 2, OP_RDMA_WC_LOC_PROT_ERR);
    expect_cqe(&f, 3, OP_RDMA_WC_SUCCESS);
    assert_int_equal(ec(&f, OP_GPU_C_reject_opcode), 1);
    assert_int_equal(ec(&f, OP_GPU_C_reject_range), 2);
    assert_int_equal(ec(&f, OP_GPU_C_posted), 1);
    expect_landed(&f, 1, 128);
    const char *cause = NULL;
    assert_int_equal(op_gpu_engine_first_error(f.eng, &cause), OP_RDMA_WC_LOC_QP_OP_ERR);
    assert_non_null(strstr(cause, "opcode"));
    assert_int_equal(op_rdma_qp_state(f.a.qp), OP_RDMA_QPS_RTS);
    gfx_free(&f);
}

/* A bad rkey: the responder refuses, the write completes with the remote
 * access error, nothing lands, and what followed is flushed. */
static void test_engine_bad_rkey(void **state)
{
    (void)state;
    struct gfx f;
    gfx_init(&f, 16, 64, NULL);
    uint32_t bad = op_rdma_mr_rkey(f.dst_mr) ^ 0x10000u;
    for (uint32_t t = 0; t < 4; t++)
        dev_write(f.wq, t, OPG_WQE_RDMA_WRITE, t * 256, 256, (uintptr_t)f.dst + t * 256, bad, true);
    run_until_idle(&f);
    expect_cqe(&f, 0, OP_RDMA_WC_REM_ACCESS_ERR);
    for (uint32_t t = 1; t < 4; t++)
        expect_cqe(&f, t, OP_RDMA_WC_WR_FLUSH_ERR);
    expect_landed(&f, 0, 0);
    assert_int_equal(ec(&f, OP_GPU_C_errors), 4);
    assert_int_equal(atomic_load(&ctrl_of(f.wq)->released), 4);
    gfx_free(&f);
}

/* The doorbell may run ahead of a WQE being written (another work-item's
 * count): the engine waits for its seq. A doorbell beyond the queue is
 * counted and clamped. */
static void test_engine_waits_for_seq(void **state)
{
    (void)state;
    struct gfx f;
    gfx_init(&f, 8, 64, NULL);
    atomic_fetch_add(&ctrl_of(f.wq)->doorbell, 2); /* two committed, only one written */
    dev_write(f.wq, 0, OPG_WQE_RDMA_WRITE, 0, 32, (uintptr_t)f.dst, op_rdma_mr_rkey(f.dst_mr),
              false);
    f.want_idle = false;
    rsim_run(&f.s, engine_turn, &f, OP_NS_PER_MS);
    assert_int_equal(ec(&f, OP_GPU_C_taken), 1);
    assert_true(ec(&f, OP_GPU_C_not_ready) >= 1);
    assert_false(op_gpu_engine_idle(f.eng));
    dev_write(f.wq, 1, OPG_WQE_RDMA_WRITE, 32, 32, (uintptr_t)f.dst + 32,
              op_rdma_mr_rkey(f.dst_mr), false);
    run_until_idle(&f);
    expect_landed(&f, 2, 32);
    atomic_fetch_add(&ctrl_of(f.wq)->doorbell, 1000);
    op_gpu_engine_poll(f.eng, 64, f.s.now, &f.s.q);
    assert_int_equal(ec(&f, OP_GPU_C_bad_doorbell), 1);
    assert_int_equal(ec(&f, OP_GPU_C_taken), 2); /* nothing unwritten was read */
    gfx_free(&f);
}

/* A QP send queue of 4 under 40 committed entries: the engine stops at
 * each full queue and resumes; every byte lands, in order. */
static void test_engine_backpressure(void **state)
{
    (void)state;
    struct gfx f;
    gfx_init(&f, 64, 4, NULL);
    for (uint32_t t = 0; t < 40; t++)
        post_slot(&f, t, t, 2048);
    run_until_idle(&f);
    assert_true(ec(&f, OP_GPU_C_backpressure) > 0);
    assert_int_equal(ec(&f, OP_GPU_C_posted), 40);
    expect_landed(&f, 40, 2048);
    gfx_free(&f);
}

/* CPU-posted writes on the same QP between device-posted ones: each side
 * gets its own completions. */
static void test_engine_mixed_with_cpu_posts(void **state)
{
    (void)state;
    struct gfx f;
    gfx_init(&f, 32, 64, NULL);
    uint32_t rkey = op_rdma_mr_rkey(f.dst_mr);
    for (uint32_t t = 0; t < 20; t++) {
        post_slot(&f, t, 2 * t, 1000);
        op_gpu_engine_poll(f.eng, 64, f.s.now, &f.s.q);
        uint64_t off = (2 * t + 1) * 1000ull;
        struct op_rdma_sge sge = {(uintptr_t)f.src + off, 1000, op_rdma_mr_lkey(f.src_mr)};
        struct op_rdma_send_wr wr = {.wr_id = t, .opcode = OP_RDMA_WR_RDMA_WRITE,
                                     .send_flags = OP_RDMA_SEND_SIGNALED, .sg_list = &sge,
                                     .num_sge = 1, .rdma = {(uintptr_t)f.dst + off, rkey}};
        assert_int_equal(op_rdma_post_send(f.a.qp, &wr, f.s.now, &f.s.q), OP_OK);
    }
    run_until_idle(&f);
    f.want_idle = false;
    rsim_run(&f.s, engine_turn, &f, OP_NS_PER_MS);
    assert_int_equal(f.cpu_done, 20);
    assert_int_equal(ec(&f, OP_GPU_C_completed), 20);
    expect_landed(&f, 40, 1000);
    gfx_free(&f);
}

/* ---- the real kernels on a device: each test body runs once per API
 * (the cmocka state is the API) */

static enum op_gpu_api api_opencl = OP_GPU_API_OPENCL, api_vulkan = OP_GPU_API_VULKAN;

static struct op_gpu_dev *open_dev(void **state)
{
    enum op_gpu_api api = *(enum op_gpu_api *)*state;
    char why[256];
    struct op_gpu_dev *dev = NULL;
    op_status_t st = op_gpu_open(api, 0, 0, OP_GPU_MEM_AUTO, &dev, why, sizeof why);
    if (st == OP_ERR_UNSUPPORTED &&
        (strstr(why, "no OpenCL platform") != NULL || strstr(why, "no Vulkan device") != NULL))
        return NULL;
    if (st != OP_OK)
        fail_msg("%s: %s", op_gpu_api_title(api), why);
    assert_int_equal(op_gpu_dev_api(dev), api);
    return dev;
}

#define OPEN_OR_SKIP(dev)                                                                          \
    struct op_gpu_dev *dev = open_dev(state);                                                      \
    if (dev == NULL)                                                                               \
    skip()

/* Drive kernel and engine together until the kernel is done and the queue
 * idle, or stop_after entries were committed (then stop the kernel). The
 * host's own writes (cpu_writes, slot after slot from cpu_slot0) go out on
 * the same QP meanwhile, one per turn. */
static void run_kernel_mixed(struct gfx *f, struct op_gpu_poster *po, uint32_t stop_after,
                             uint32_t cpu_writes, uint32_t cpu_slot0, uint32_t size)
{
    uint64_t end = op_now_ns() + WALL_LIMIT_NS;
    f->want_idle = false;
    int done = 0;
    uint32_t cpu_posted = 0;
    while (op_now_ns() < end) {
        if (!done)
            done = op_gpu_poster_step(po);
        assert_true(done >= 0);
        if (cpu_posted < cpu_writes) {
            uint64_t off = (uint64_t)(cpu_slot0 + cpu_posted) * size;
            struct op_rdma_sge sge = {(uintptr_t)f->src + off, size, op_rdma_mr_lkey(f->src_mr)};
            struct op_rdma_send_wr wr = {.wr_id = cpu_posted, .opcode = OP_RDMA_WR_RDMA_WRITE,
                                         .send_flags = OP_RDMA_SEND_SIGNALED, .sg_list = &sge,
                                         .num_sge = 1,
                                         .rdma = {(uintptr_t)f->dst + off,
                                                  op_rdma_mr_rkey(f->dst_mr)}};
            op_status_t st = op_rdma_post_send(f->a.qp, &wr, f->s.now, &f->s.q);
            assert_true(st == OP_OK || st == OP_ERR_NOSPACE);
            cpu_posted += st == OP_OK;
        }
        rsim_run(&f->s, engine_turn, f, 100 * OP_NS_PER_US);
        if (!done && stop_after && atomic_load(&ctrl_of(f->wq)->doorbell) >= stop_after) {
            op_gpu_poster_stop(po);
            done = 1;
        }
        if (done && op_gpu_engine_idle(f->eng) && f->cpu_done == cpu_writes)
            return;
        sched_yield(); /* the kernel's threads share these cores */
    }
    struct op_gpu_poster_stats st;
    op_gpu_poster_stats(po, &st);
    fail_msg("kernel and engine not done in time: doorbell %u released %u, %u of %u CPU writes, "
             "%llu taken, %llu not ready, %llu launches, kernel done %d",
             (unsigned)atomic_load(&ctrl_of(f->wq)->doorbell),
             (unsigned)atomic_load(&ctrl_of(f->wq)->released), f->cpu_done, cpu_writes,
             (unsigned long long)ec(f, OP_GPU_C_taken), (unsigned long long)ec(f, OP_GPU_C_not_ready),
             (unsigned long long)st.launches, done);
}

static void run_kernel(struct gfx *f, struct op_gpu_poster *po, uint32_t stop_after)
{
    run_kernel_mixed(f, po, stop_after, 0, 0, 0);
}

static struct op_gpu_poster *make_poster(struct gfx *f, const struct op_gpu_post_params *p)
{
    char why[256];
    struct op_gpu_poster *po = NULL;
    if (op_gpu_poster_create(f->dev, f->wq, p, &po, why, sizeof why) != OP_OK)
        fail_msg("poster: %s", why);
    return po;
}

/* threads x iters writes of size bytes, one slot per work-item where the
 * buffer holds them; cpu_writes host writes into the slots after those. */
static void kernel_case(struct op_gpu_dev *dev, uint32_t threads, enum op_gpu_mode mode,
                        uint32_t iters, uint32_t size, uint32_t depth, uint32_t cpu_writes)
{
    size_t need = ((size_t)threads + cpu_writes) * size;
    size_t len = need < BUF_LEN ? BUF_LEN : (need < (4u << 20) ? need : (4u << 20));
    struct gfx f;
    gfx_init_len(&f, depth, 64, dev, len);
    uint32_t room = (uint32_t)(f.len / size) - (cpu_writes ? cpu_writes : 0);
    uint32_t slots = threads <= room ? threads : room;
    const struct op_gpu_post_params p = {.threads = threads, .mode = mode, .iters = iters,
                                         .size = size, .slots = slots,
                                         .remote_addr = (uintptr_t)f.dst,
                                         .rkey = op_rdma_mr_rkey(f.dst_mr)};
    struct op_gpu_poster *po = make_poster(&f, &p);
    run_kernel_mixed(&f, po, 0, cpu_writes, slots, size);
    assert_int_equal(ec(&f, OP_GPU_C_posted), (uint64_t)threads * iters);
    assert_int_equal(ec(&f, OP_GPU_C_errors), 0);
    assert_int_equal(atomic_load(&ctrl_of(f.wq)->released), threads * iters);
    assert_int_equal(f.cpu_done, cpu_writes);
    expect_landed(&f, slots + cpu_writes, size);
    struct op_gpu_poster_stats st;
    op_gpu_poster_stats(po, &st);
    assert_true(st.launches >= 1);
    assert_int_equal(st.dev_errors, 0);
    op_gpu_poster_destroy(po);
    gfx_free(&f);
}

static void test_kernel_posts(void **state)
{
    OPEN_OR_SKIP(dev);
    kernel_case(dev, 1, OP_GPU_MODE_THREAD, 50, 4096, 64, 0);
    kernel_case(dev, 1, OP_GPU_MODE_BATCH, 50, 2, 64, 0);
    kernel_case(dev, 64, OP_GPU_MODE_THREAD, 8, 1000, 128, 0);
    kernel_case(dev, 64, OP_GPU_MODE_BATCH, 8, 1000, 64, 0); /* the queue holds one group */
    kernel_case(dev, 1024, OP_GPU_MODE_THREAD, 3, 2, 1024, 0);
    kernel_case(dev, 1024, OP_GPU_MODE_BATCH, 3, 512, 1024, 0);
    op_gpu_close(dev);
}

/* 1 MiB writes: four slots, every byte compared. */
static void test_kernel_posts_1mib(void **state)
{
    OPEN_OR_SKIP(dev);
    kernel_case(dev, 4, OP_GPU_MODE_THREAD, 2, 1u << 20, 64, 0);
    kernel_case(dev, 4, OP_GPU_MODE_BATCH, 2, 1u << 20, 64, 0);
    op_gpu_close(dev);
}

/* The host posts its own writes on the QP the engine feeds while the
 * kernel runs: each side gets its own completions, every byte lands. */
static void test_kernel_mixed_with_cpu_posts(void **state)
{
    OPEN_OR_SKIP(dev);
    kernel_case(dev, 64, OP_GPU_MODE_THREAD, 20, 700, 128, 40);
    kernel_case(dev, 64, OP_GPU_MODE_BATCH, 20, 700, 128, 40);
    op_gpu_close(dev);
}

/* A kernel stopped mid-run: what it committed completes, the queue is
 * idle, the QP still in RTS and a CPU write after it succeeds. */
static void stopped_case(struct op_gpu_dev *dev, enum op_gpu_mode mode)
{
    struct gfx f;
    gfx_init(&f, 64, 64, dev);
    const struct op_gpu_post_params p = {.threads = 32, .mode = mode, .iters = 100000,
                                         .size = 64, .slots = 32,
                                         .remote_addr = (uintptr_t)f.dst,
                                         .rkey = op_rdma_mr_rkey(f.dst_mr)};
    struct op_gpu_poster *po = make_poster(&f, &p);
    run_kernel(&f, po, 500);
    uint32_t bell = atomic_load(&ctrl_of(f.wq)->doorbell);
    assert_true(bell >= 500 && bell < 100000u * 32);
    struct op_gpu_poster_stats st;
    op_gpu_poster_stats(po, &st);
    if (mode == OP_GPU_MODE_BATCH)
        assert_int_equal(bell % st.group, 0); /* whole groups only */
    assert_int_equal(atomic_load(&ctrl_of(f.wq)->released), bell);
    assert_true(op_gpu_engine_idle(f.eng));
    assert_int_equal(ec(&f, OP_GPU_C_taken), bell);
    assert_int_equal(ec(&f, OP_GPU_C_errors), 0);
    assert_int_equal(op_rdma_qp_state(f.a.qp), OP_RDMA_QPS_RTS);
    expect_landed(&f, 32, 64);
    struct op_rdma_sge sge = {(uintptr_t)f.src + 4096, 100, op_rdma_mr_lkey(f.src_mr)};
    struct op_rdma_send_wr wr = {.wr_id = 1, .opcode = OP_RDMA_WR_RDMA_WRITE,
                                 .send_flags = OP_RDMA_SEND_SIGNALED, .sg_list = &sge,
                                 .num_sge = 1,
                                 .rdma = {(uintptr_t)f.dst + 4096, op_rdma_mr_rkey(f.dst_mr)}};
    assert_int_equal(op_rdma_post_send(f.a.qp, &wr, f.s.now, &f.s.q), OP_OK);
    rsim_run(&f.s, engine_turn, &f, OP_NS_PER_MS);
    assert_int_equal(f.cpu_done, 1);
    assert_memory_equal(f.dst + 4096, f.src + 4096, 100);
    op_gpu_poster_destroy(po);
    gfx_free(&f);
}

static void test_kernel_stopped_mid_run(void **state)
{
    OPEN_OR_SKIP(dev);
    stopped_case(dev, OP_GPU_MODE_BATCH);
    stopped_case(dev, OP_GPU_MODE_THREAD);
    op_gpu_close(dev);
}

/* A bad rkey, or an address past the target region, from the device: the
 * write completes with the remote access error, the kernel sees it and
 * stops posting; nothing lands. */
static void fault_case(struct op_gpu_dev *dev, enum op_gpu_mode mode, bool bad_key)
{
    struct gfx f;
    gfx_init(&f, 64, 64, dev);
    const struct op_gpu_post_params p = {
        .threads = 4, .mode = mode, .iters = 100000, .size = 256, .slots = 4,
        .remote_addr = (uintptr_t)f.dst + (bad_key ? 0 : f.len),
        .rkey = op_rdma_mr_rkey(f.dst_mr) ^ (bad_key ? 0x10000u : 0)};
    struct op_gpu_poster *po = make_poster(&f, &p);
    run_kernel(&f, po, 0);
    expect_cqe(&f, 0, OP_RDMA_WC_REM_ACCESS_ERR);
    struct op_gpu_poster_stats st;
    op_gpu_poster_stats(po, &st);
    assert_true(st.dev_errors >= 1);
    assert_true(st.first_error == OP_RDMA_WC_REM_ACCESS_ERR ||
                st.first_error == OP_RDMA_WC_WR_FLUSH_ERR);
    assert_true(atomic_load(&ctrl_of(f.wq)->doorbell) < 100000u * 4);
    assert_true(op_gpu_engine_idle(f.eng));
    expect_landed(&f, 0, 0);
    op_gpu_poster_destroy(po);
    gfx_free(&f);
}

static void test_kernel_protection_errors(void **state)
{
    OPEN_OR_SKIP(dev);
    fault_case(dev, OP_GPU_MODE_THREAD, true);
    fault_case(dev, OP_GPU_MODE_BATCH, true);
    fault_case(dev, OP_GPU_MODE_THREAD, false);
    fault_case(dev, OP_GPU_MODE_BATCH, false);
    op_gpu_close(dev);
}

/* --gpu_touch's kernel: passes over a shared buffer start and finish while
 * the host goes on; finish counts the one running, destroy waits for it. */
static void test_toucher_passes(void **state)
{
    OPEN_OR_SKIP(dev);
    size_t len = 1 << 20;
    uint8_t *buf = op_gpu_alloc(dev, len);
    assert_non_null(buf);
    fill(buf, len, 5);
    struct op_gpu_toucher *t = NULL;
    assert_int_equal(op_gpu_toucher_create(dev, buf, len, &t), OP_OK);
    uint64_t end = op_now_ns() + WALL_LIMIT_NS, passes = 0;
    while (passes < 3 && op_now_ns() < end) {
        passes = op_gpu_toucher_step(t);
        sched_yield();
    }
    assert_true(passes >= 3);
    /* finish: the pass just started is waited for and counted, once */
    passes = op_gpu_toucher_step(t);
    assert_int_equal(op_gpu_toucher_finish(t), passes + 1);
    assert_int_equal(op_gpu_toucher_finish(t), passes + 1);
    op_gpu_toucher_destroy(t);
    uint8_t *expect = malloc(len);
    assert_non_null(expect);
    fill(expect, len, 5);
    assert_memory_equal(buf, expect, len); /* read, never written */
    free(expect);
    op_gpu_free(dev, buf);
    op_gpu_close(dev);
}

/* Refusals name the bad parameter; the list has every device it can open. */
static void test_open_refuses_and_lists(void **state)
{
    OPEN_OR_SKIP(dev);
    enum op_gpu_api api = op_gpu_dev_api(dev);
    char why[256];
    struct op_gpu_dev *other = NULL;
    assert_int_equal(op_gpu_open(api, 0, 15, OP_GPU_MEM_AUTO, &other, why, sizeof why), OP_ERR_INVAL);
    assert_null(other);
    assert_non_null(strstr(why, "device 15: out of range"));
    if (api == OP_GPU_API_VULKAN) { /* OpenCL takes any pointer as an SVM argument */
        void *not_ours = aligned_zero(4096);
        struct op_gpu_toucher *t = NULL;
        assert_int_not_equal(op_gpu_toucher_create(dev, not_ours, 4096, &t), OP_OK);
        free(not_ours);
    }
    struct op_gpu_info info[16];
    int n = op_gpu_list(info, 16);
    bool found = false;
    for (int i = 0; i < n && i < 16; i++)
        if (info[i].api == api && info[i].device == 0 && info[i].platform == 0) {
            found = true;
            assert_true(info[i].can_run);
            assert_string_equal(info[i].name, op_gpu_device_name(dev));
            assert_true(info[i].memory[0] != '\0');
        }
    assert_true(found);
    op_gpu_close(dev);
}

/* --gpu_memory: OpenCL refuses any placement but its own; a Vulkan
 * placement opens exactly when `gpu list` names a type for it, and memory
 * from it holds what the host writes. */
static void test_memory_placement(void **state)
{
    OPEN_OR_SKIP(dev);
    enum op_gpu_api api = op_gpu_dev_api(dev);
    op_gpu_close(dev);
    struct op_gpu_info info[16];
    int n = op_gpu_list(info, 16);
    const char *memory = NULL;
    for (int i = 0; i < n && i < 16; i++)
        if (info[i].api == api && info[i].device == 0 && info[i].platform == 0)
            memory = info[i].memory;
    assert_non_null(memory);
    for (int m = OP_GPU_MEM_DEVICE; m <= OP_GPU_MEM_HOST; m++) {
        char why[256], refused[32];
        struct op_gpu_dev *d = NULL;
        op_status_t st = op_gpu_open(api, 0, 0, (enum op_gpu_mem)m, &d, why, sizeof why);
        snprintf(refused, sizeof refused, "%s: -", op_gpu_mem_str((enum op_gpu_mem)m));
        if (api == OP_GPU_API_OPENCL) {
            assert_int_equal(st, OP_ERR_INVAL);
            assert_non_null(strstr(why, "is Vulkan's"));
            continue;
        }
        if (strstr(memory, refused) != NULL) {
            assert_int_equal(st, OP_ERR_UNSUPPORTED);
            char placement[48];
            snprintf(placement, sizeof placement, "memory placement '%s'",
                     op_gpu_mem_str((enum op_gpu_mem)m));
            assert_non_null(strstr(why, placement));
            assert_null(d);
            continue;
        }
        assert_int_equal(st, OP_OK);
        uint8_t *p = op_gpu_alloc(d, 4096);
        assert_non_null(p);
        memset(p, 0x5a, 4096);
        for (int i = 0; i < 4096; i++)
            assert_int_equal(p[i], 0x5a);
        op_gpu_free(d, p);
        op_gpu_close(d);
    }
}

/* The Vulkan loader unloads the driver at vkDestroyInstance; what lavapipe
 * keeps reachable only from its own globals then reads as leaked to
 * LeakSanitizer (an unloaded module's data is gone). Pinning the drivers the
 * loader opened keeps those roots visible, so a leak reported is ours. */
static int pin_driver(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    if (strstr(info->dlpi_name, "libvulkan_") != NULL)
        (void)dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    return 0;
}

static int pin_vulkan_driver(void **state)
{
    (void)state;
    char why[256];
    struct op_gpu_dev *dev = NULL;
    if (op_gpu_open(OP_GPU_API_VULKAN, 0, 0, OP_GPU_MEM_AUTO, &dev, why, sizeof why) != OP_OK)
        return 0; /* no Vulkan device: its tests skip */
    dl_iterate_phdr(pin_driver, NULL);
    op_gpu_close(dev);
    return 0;
}

#define PER_API(t) cmocka_unit_test_prestate(t, &api_opencl), cmocka_unit_test_prestate(t, &api_vulkan)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wq_format),
        cmocka_unit_test(test_engine_writes_every_byte),
        cmocka_unit_test(test_engine_rejects_bad_entries),
        cmocka_unit_test(test_engine_bad_rkey),
        cmocka_unit_test(test_engine_waits_for_seq),
        cmocka_unit_test(test_engine_backpressure),
        cmocka_unit_test(test_engine_mixed_with_cpu_posts),
        PER_API(test_open_refuses_and_lists),
        PER_API(test_memory_placement),
        PER_API(test_kernel_posts),
        PER_API(test_kernel_posts_1mib),
        PER_API(test_kernel_mixed_with_cpu_posts),
        PER_API(test_kernel_stopped_mid_run),
        PER_API(test_kernel_protection_errors),
        PER_API(test_toucher_passes),
    };
    return cmocka_run_group_tests(tests, pin_vulkan_driver, NULL);
}
