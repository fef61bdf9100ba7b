/* perftest's defaults and its rules for which flags go together. */
#include <string.h>

#include "perf_int.h"

void op_perf_config_defaults(struct op_perf_config *cfg, enum op_perf_verb verb,
                             enum op_perf_test test)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->verb = verb;
    cfg->test = test;
    cfg->tcp_port = OP_PERF_DEFAULT_PORT;
    cfg->size = verb == OP_PERF_ATOMIC ? OP_PERF_ATOMIC_SIZE : test == OP_PERF_BW ? 65536 : 2;
    cfg->iters = test == OP_PERF_BW && verb == OP_PERF_WRITE ? 5000 : 1000;
    cfg->qps = 1;
    cfg->tx_depth = test == OP_PERF_BW ? 128 : 1;
    cfg->rx_depth = 512;
    cfg->cq_mod = 100;
    cfg->type = OP_RDMA_QPT_RC;
    cfg->qp_timeout = 14;
    cfg->retry_cnt = 7;
    cfg->gid_index = -1;
    cfg->tclass = -1;
    cfg->json_file = "perftest_out.json";
    cfg->output = OP_PERF_OUT_FULL;
    cfg->loss_seed = 1;
    cfg->progress = true;
    cfg->udp_batching = true;
    cfg->log_level = OP_LOG_ERROR;
}

static bool mtu_valid(uint32_t mtu)
{
    return mtu == 0 || mtu == 256 || mtu == 512 || mtu == 1024 || mtu == 2048 || mtu == 4096;
}

/* gpunetio_write_bw: one RC QP that device code feeds, a count of writes
 * the queue's 32-bit tickets hold, work-groups of up to 256. */
static op_status_t check_gpu(const struct op_perf_config *c, char *why, size_t len)
{
    if (c->verb != OP_PERF_WRITE || c->test != OP_PERF_BW)
        return perf_refuse(why, len, "--threads: device-posted writes are gpunetio_write_bw's");
    if (c->qps != 1 || c->bidirectional || c->duration_s || c->type != OP_RDMA_QPT_RC)
        return perf_refuse(why, len, "gpunetio_write_bw: one RC QP, one direction, -n "
                                     "iterations (no -q, -b, -D or -c)");
    if (c->gpu.threads > 256 && c->gpu.threads % 256 != 0)
        return perf_refuse(why, len, "--threads %u: above 256, a multiple of 256 (the "
                                     "work-group size)", c->gpu.threads);
    if (c->gpu.fault != OP_PERF_FAULT_NONE && c->gpu.cpu_writes)
        return perf_refuse(why, len, "--inject_fault with --cpu_writes: the fault flushes "
                                     "the host's writes too");
    if (c->gpu.fault != OP_PERF_FAULT_NONE && c->all)
        return perf_refuse(why, len, "--inject_fault with -a: the first size leaves the QP in "
                                     "the error state");
    if (c->gpu.slots > c->gpu.threads)
        return perf_refuse(why, len, "--slots %u: at most one per work-item (--threads %u)",
                           c->gpu.slots, c->gpu.threads);
    if (c->iters * c->gpu.threads > UINT32_MAX)
        return perf_refuse(why, len, "-n x --threads: at most 2^32 - 1 writes in a run");
    if (c->size > (1u << 30) || (c->all && OP_PERF_ALL_MAX_LOG2 > 30))
        return perf_refuse(why, len, "-s: at most 1 GiB per device-posted write");
    return OP_OK;
}

/* ib_atomic_*: 8-byte RC atomics, one size, no data to inline; each WR's
 * result gets its own slot (-t bounded by them); at most
 * OP_RDMA_ATOMIC_DEPTH in flight (the responder's result cache). */
static op_status_t check_atomic(const struct op_perf_config *c, char *why, size_t len)
{
    if (c->size != OP_PERF_ATOMIC_SIZE || c->all)
        return perf_refuse(why, len, "-s (--size), -a (--all): message size cannot be changed "
                                     "for atomic tests (always %d bytes)", OP_PERF_ATOMIC_SIZE);
    if (c->type != OP_RDMA_QPT_RC)
        return perf_refuse(why, len, "-c (--connection): atomics need RC");
    if (c->inline_size != 0)
        return perf_refuse(why, len, "-I (--inline_size): an atomic carries no data to inline");
    if (c->tx_depth > OP_PERF_ATOMIC_SLOTS)
        return perf_refuse(why, len, "-t (--tx-depth) %u: atomic tests keep at most %d in flight "
                                     "(each result has its own slot)", c->tx_depth,
                           OP_PERF_ATOMIC_SLOTS);
    if (c->out_reads > OP_RDMA_ATOMIC_DEPTH)
        return perf_refuse(why, len, "-o (--outs) %u: at most %d atomics in flight per QP (the "
                                     "results a responder keeps)", c->out_reads,
                           OP_RDMA_ATOMIC_DEPTH);
    return OP_OK;
}

static op_status_t check_combinations(const struct op_perf_config *c, char *why, size_t len)
{
    bool lat = c->test == OP_PERF_LAT;
    if (c->all && c->duration_s)
        return perf_refuse(why, len, "-a (--all) and -D (--duration) cannot be used together");
    if (lat && c->qps > 1)
        return perf_refuse(why, len, "-q (--qp) is for bandwidth tests only");
    if (lat && c->bidirectional)
        return perf_refuse(why, len, "-b (--bidirectional) is for bandwidth tests only");
    if (c->type == OP_RDMA_QPT_UD && c->verb != OP_PERF_SEND)
        return perf_refuse(why, len, "-c UD carries only SEND (RDMA needs RC or UC)");
    if (c->type == OP_RDMA_QPT_UC && c->verb == OP_PERF_READ)
        return perf_refuse(why, len, "-c UC cannot do RDMA READ (RC only)");
    if (!mtu_valid(c->mtu))
        return perf_refuse(why, len, "-m (--mtu) %u: must be 256, 512, 1024, 2048 or 4096", c->mtu);
    if (c->duration_s && c->margin_s * 2 >= c->duration_s)
        return perf_refuse(why, len, "-f (--margin) %u: twice the margin must be less than -D %u",
                      c->margin_s, c->duration_s);
    if (lat && (c->output == OP_PERF_OUT_BW || c->output == OP_PERF_OUT_MSGRATE))
        return perf_refuse(why, len, "--output=bandwidth|message_rate is for bandwidth tests");
    if (!lat && c->output == OP_PERF_OUT_LAT)
        return perf_refuse(why, len, "--output=latency is for latency tests");
    if (c->size == 0)
        return perf_refuse(why, len, "-s (--size) must be at least 1 byte");
    if (c->out_reads != 0 && c->verb != OP_PERF_READ && c->verb != OP_PERF_ATOMIC)
        return perf_refuse(why, len, "-o (--outs) is for RDMA READ and atomic tests");
    if (c->clients > 1 && c->server != NULL)
        return perf_refuse(why, len, "--clients is the server's (each client names the server)");
    if (c->clients > 1 && (c->pcap || c->xdp || c->gpu.threads || c->gpu.use_gpu))
        return perf_refuse(why, len, "--clients with --pcap, --xdp or a GPU: one "
                                     "client at a time");
    if (c->use_srq && c->verb != OP_PERF_SEND)
        return perf_refuse(why, len, "--use_srq is for send tests (ib_send_bw, ib_send_lat)");
    if (c->cmp_swap && c->verb != OP_PERF_ATOMIC)
        return perf_refuse(why, len, "-A (--atomic_type) is for ib_atomic_bw and ib_atomic_lat");
    if (c->verb == OP_PERF_ATOMIC) {
        op_status_t st = check_atomic(c, why, len);
        if (st != OP_OK)
            return st;
    }
    if (c->use_event && c->verb == OP_PERF_WRITE)
        return perf_refuse(why, len, "-e (--events): not for RDMA WRITE tests (as perftest)");
    if (c->xdp && c->device == NULL)
        return perf_refuse(why, len, "--xdp needs -d (--ib-dev): the interface to drive");
    if (c->xdp && c->tclass >= 0)
        return perf_refuse(why, len, "--tclass with --xdp: not supported yet (UDP sockets only)");
    if (c->gpu.touch != OP_PERF_TOUCH_NONE && !c->gpu.use_gpu)
        return perf_refuse(why, len,
                           "--gpu_touch needs --use_opencl or --use_vulkan (the buffers it reads)");
    if (c->gpu.mem != OP_GPU_MEM_AUTO && !c->gpu.use_gpu && !c->gpu.threads)
        return perf_refuse(why, len, "--gpu_memory needs --use_vulkan (the buffers it places)");
    if (c->gpu.threads) {
        op_status_t st = check_gpu(c, why, len);
        if (st != OP_OK)
            return st;
    }
    if (c->inline_size > OP_RDMA_MAX_INLINE)
        return perf_refuse(why, len, "-I (--inline_size) %u: at most %d bytes", c->inline_size,
                           OP_RDMA_MAX_INLINE);
    return OP_OK;
}

/* --run_infinitely: -D is the row interval; a BW test one way, no -a, no
 * margin (every interval counts). */
static op_status_t check_infinite(struct op_perf_config *c, char *why, size_t len)
{
    if (c->test != OP_PERF_BW || c->bidirectional || c->all || c->gpu.threads)
        return perf_refuse(why, len, "--run_infinitely: for one-way bandwidth tests (not with "
                                     "latency tests, -b or -a)");
    if (c->margin_s != 0)
        return perf_refuse(why, len, "-f (--margin) with --run_infinitely: every interval counts");
    if (c->duration_s == 0)
        c->duration_s = OP_PERF_INFINITE_ROW_S;
    return OP_OK;
}

op_status_t op_perf_config_check(struct op_perf_config *c, char *why, size_t len)
{
    op_status_t st = c->run_infinitely ? check_infinite(c, why, len) : OP_OK;
    if (st == OP_OK)
        st = check_combinations(c, why, len);
    if (st != OP_OK)
        return st;
    if (c->duration_s && c->margin_s == 0 && !c->run_infinitely)
        c->margin_s = c->duration_s / 4;
    if (!c->duration_s) { /* perftest's adjustments */
        if (c->tx_depth > c->iters * (c->gpu.threads ? c->gpu.threads : 1))
            c->tx_depth = (uint32_t)c->iters;
        if (c->verb == OP_PERF_SEND && c->test == OP_PERF_BW && c->rx_depth > c->iters)
            c->rx_depth = (uint32_t)c->iters;
    }
    if (c->verb == OP_PERF_READ || c->verb == OP_PERF_ATOMIC) {
        c->inline_size = 0; /* a READ request carries no data (perftest does the same) */
        if (c->out_reads == 0)
            c->out_reads = 16; /* what perftest shows for a ConnectX NIC */
    }
    if (c->cq_mod > c->tx_depth)
        c->cq_mod = c->tx_depth;
    if (c->cq_mod == 0)
        c->cq_mod = 1;
    return OP_OK;
}
