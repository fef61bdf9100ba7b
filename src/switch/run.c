/* `offpath switch`: the engine over a UDP socket, driven by the one loop
 * (offpath/loop.h) in one thread (as a DPDK lcore): bursts in, timers, the
 * wake's results out grouped by destination; signals through a signalfd the
 * loop watches. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "offpath/loop.h"
#include "switch_internal.h"

/* Results wait for the rest of a wake's bursts, up to this many, so that
 * each destination's share leaves in few datagrams (see group_by_dest). */
#define SW_TX_QUEUE (8 * OP_IO_BURST)
/* Destinations grouped per flush: the scan costs this much per packet at
 * most; packets to further destinations keep their place. */
#define SW_GROUP_DESTS 64

struct sw_driver {
    const struct op_sw_run_config *rc;
    struct op_sw *sw;
    struct op_io *io;     /* a UDP socket's: NULL on the path */
    struct op_loop *loop; /* the socket's, or the path's first port's */
    struct op_sw_path *path;
    struct op_pkt sorted[SW_TX_QUEUE];
    bool placed[SW_TX_QUEUE];
    int sigfd;
    bool stop; /* SIGINT or SIGTERM came */
};

static bool same_dest(const struct op_pkt *a, const struct op_pkt *b)
{
    return a->flow.dst.v4 == b->flow.dst.v4 && a->flow.dst_port == b->flow.dst_port;
}

/* A completed chunk goes to each child in turn, so the queue interleaves
 * destinations, and a batching io joins runs to one destination only within
 * OP_IO_BURST packets: with 8 children, 8 packets a datagram. Each
 * destination's packets are put together here, in their order (the only
 * order that matters), so the io sees long runs. */
static void group_by_dest(struct sw_driver *d, struct op_pkt *p, int n)
{
    int k = 0, dests = 0;
    memset(d->placed, 0, (size_t)n);
    for (int i = 0; i < n; i++) {
        if (d->placed[i])
            continue;
        int end = ++dests <= SW_GROUP_DESTS ? n : i + 1;
        for (int j = i; j < end; j++) {
            if (!d->placed[j] && same_dest(&p[j], &p[i])) {
                d->sorted[k++] = p[j];
                d->placed[j] = true;
            }
        }
    }
    memcpy(p, d->sorted, (size_t)n * sizeof *p);
}

static void flush(void *ctx, struct op_io *io, struct op_txq *q)
{
    if (q->n > OP_IO_BURST)
        group_by_dest(ctx, q->pkts, q->n);
    op_io_send(io, q->pkts, q->n);
}

/* On the path the ports' sums (each port's own: op_sw_path_print): what
 * the injectors did, on the way in and out, and what left or was lost. */
static void path_totals(const struct sw_driver *d, uint64_t port[OP_SW_PORT_C_COUNT_])
{
    memset(port, 0, OP_SW_PORT_C_COUNT_ * sizeof *port);
    for (int i = 0; d->path != NULL && i < op_sw_path_ports(d->path); i++) {
        uint64_t v[OP_SW_PATH_C_COUNT_];
        op_sw_path_counters(d->path, i, v);
        port[OP_SW_C_injected_drops - OP_SW_C_ENGINE_COUNT_] +=
            v[OP_SW_PATH_C_injected_drops] + v[OP_SW_PATH_C_drop_injected];
        port[OP_SW_C_injected_dups - OP_SW_C_ENGINE_COUNT_] += v[OP_SW_PATH_C_injected_dups];
        port[OP_SW_C_tx_io_datagrams - OP_SW_C_ENGINE_COUNT_] += v[OP_SW_PATH_C_tx_frames];
        port[OP_SW_C_tx_io_drops - OP_SW_C_ENGINE_COUNT_] +=
            v[OP_SW_PATH_C_tx_drops] + v[OP_SW_PATH_C_queue_drops];
    }
}

/* The port's counts (fault layer, io, capture) go beside the engine's in
 * every report: they are the driver's, taken when a report is due. */
static void port_counters(const struct sw_driver *d, uint64_t port[OP_SW_PORT_C_COUNT_])
{
    uint64_t fs[OP_FAULT_C_COUNT_], io[OP_IO_C_COUNT_];
    if (d->io == NULL) {
        path_totals(d, port);
        return;
    }
    op_io_fault_counters(d->io, fs);
    op_io_counters(d->io, io);
    port[OP_SW_C_injected_drops - OP_SW_C_ENGINE_COUNT_] = fs[OP_FAULT_C_dropped];
    port[OP_SW_C_injected_dups - OP_SW_C_ENGINE_COUNT_] = fs[OP_FAULT_C_duplicated];
    port[OP_SW_C_tx_io_datagrams - OP_SW_C_ENGINE_COUNT_] = io[OP_IO_C_tx_datagrams];
    port[OP_SW_C_tx_io_drops - OP_SW_C_ENGINE_COUNT_] = io[OP_IO_C_tx_drops];
    port[OP_SW_C_captured - OP_SW_C_ENGINE_COUNT_] =
        d->rc->pcap != NULL ? op_pcap_count(d->rc->pcap) : 0;
}

static void print_report(const struct sw_driver *d, FILE *out, bool json)
{
    uint64_t port[OP_SW_PORT_C_COUNT_];
    port_counters(d, port);
    if (d->path == NULL) {
        op_sw_print_report(d->sw, port, out, json);
        return;
    }
    sw_print_report_open(d->sw, port, out, json);
    fputs(json ? ", \"ports\": " : "", out);
    op_sw_path_print(d->path, out, json);
    fputs(json ? "}\n" : "", out);
}

static void write_stats_json(const struct sw_driver *d)
{
    if (d->rc->stats_json == NULL)
        return;
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", d->rc->stats_json);
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return;
    print_report(d, f, true);
    /* rename: a reader never sees a half-written file */
    if (fclose(f) == 0)
        rename(tmp, d->rc->stats_json);
}

static void send_counters(const struct sw_driver *d)
{
    if (d->rc->counters_fd < 0)
        return;
    uint64_t port[OP_SW_PORT_C_COUNT_], vals[OP_SW_C_COUNT_];
    port_counters(d, port);
    const struct op_counter_set set = op_sw_counter_set(d->sw, port, vals);
    (void)op_counter_set_write(d->rc->counters_fd, &set); /* the launcher counts it missing */
    close(d->rc->counters_fd);
}

static void on_signals(void *ctx, int fd)
{
    struct sw_driver *d = ctx;
    struct signalfd_siginfo si;
    while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGUSR1) {
            print_report(d, stderr, false);
            write_stats_json(d);
        } else {
            d->stop = true;
        }
    }
}

/* After SIGINT/SIGTERM the switch keeps forwarding for this long, so
 * messages already on their way (a kill travelling down the tree) are not
 * cut off by an orderly stop; SIGKILL is the way to emulate a crash. */
#define SW_DRAIN_NS (50 * OP_NS_PER_MS)

static void serve(struct sw_driver *d)
{
    uint64_t stop_at = UINT64_MAX;
    while (op_now_ns() < stop_at) {
        int n = d->path != NULL ? op_sw_path_run_once(d->path, stop_at)
                                : op_loop_run_once(d->loop, stop_at);
        if (n < 0 && n != -EINTR) {
            OP_ERROR(d->rc->sw.log, "switch: stopping: %s", strerror(-n));
            return;
        }
        if (d->stop && stop_at == UINT64_MAX)
            stop_at = op_now_ns() + SW_DRAIN_NS;
    }
}

/* ---- the switch as the loop's engine */

static void sw_input(void *eng, const struct op_pkt *pkt, uint64_t now, struct op_txq *out)
{
    op_sw_input(eng, pkt, now, out);
}

static void sw_timer(void *eng, uint64_t now, struct op_txq *out) { op_sw_timer(eng, now, out); }

static uint64_t sw_deadline(const void *eng) { return op_sw_next_timer(eng); }

static const struct op_engine_ops sw_ops = {
    .name = "switch",
    .input = sw_input,
    .timer = sw_timer,
    .next_deadline = sw_deadline,
};

/* Bursts of a wake wait for each other (up to 16), so the grouped flush
 * sees them all; busy polling when asked (--busy-poll). */
static op_status_t open_loop(struct sw_driver *d)
{
    struct op_loop_config lc = {.io = d->io, .tx_queue = SW_TX_QUEUE, .bursts_per_round = 16,
                                .flush_per_round = true, .busy_poll = d->rc->busy_poll,
                                .flush = flush, .flush_ctx = d};
    op_status_t st = op_loop_create(&lc, &d->loop);
    if (st == OP_OK)
        st = op_loop_add(d->loop, &sw_ops, d->sw);
    if (st == OP_OK)
        st = op_loop_watch(d->loop, d->sigfd, on_signals, d);
    return st;
}

/* The capture sits under the fault layer: it holds what crossed the wire
 * (no injected drops, both copies of a duplicate, at the delayed time). */
static op_status_t open_io(struct sw_driver *d)
{
    const struct op_sw_run_config *rc = d->rc;
    const struct op_topo_switch *me = &rc->sw.topo->sw[rc->sw.self];
    struct op_io *wrapped;
    op_status_t st = op_io_udp_open(me->ip, me->port, &d->io);
    if (st == OP_OK)
        op_io_udp_batching(d->io, rc->udp_batching);
    if (st == OP_OK && rc->pcap != NULL) {
        st = op_io_pcap_wrap(d->io, rc->pcap, &wrapped);
        if (st == OP_OK)
            d->io = wrapped;
    }
    if (st != OP_OK ||
        (rc->drop_rate <= 0 && rc->dup_rate <= 0 && rc->delay_us == 0 && rc->link_down_ip == 0))
        return st;
    uint64_t down = op_now_ns() + (uint64_t)rc->link_down_after_ms * OP_NS_PER_MS;
    struct op_fault_cfg fc = {.drop = rc->drop_rate, .dup = rc->dup_rate,
                              .delay_us = rc->delay_us, .seed = rc->sw.seed ^ me->ip,
                              .down_ip = rc->link_down_ip, .down_from_ns = down,
                              .down_until_ns = down + (uint64_t)rc->link_down_for_ms * OP_NS_PER_MS};
    st = op_io_fault_wrap(d->io, &fc, &wrapped);
    if (st == OP_OK)
        d->io = wrapped;
    return st;
}

/* On the path: the ports' loops are the path's; signals are watched on
 * the first. */
static op_status_t open_path(struct sw_driver *d)
{
    char err[256] = "";
    op_status_t st = op_sw_path_create(d->rc->path, d->sw, d->rc->sw.log, &d->path, err,
                                       sizeof(err));
    if (st != OP_OK) {
        OP_ERROR(d->rc->sw.log, "switch: %s", err);
        return st;
    }
    return op_loop_watch(op_sw_path_loop(d->path), d->sigfd, on_signals, d);
}

static void driver_close(struct sw_driver *d)
{
    if (d->path != NULL)
        op_sw_path_destroy(d->path);
    else
        op_loop_destroy(d->loop);
    op_io_close(d->io);
    op_sw_destroy(d->sw);
    if (d->sigfd >= 0)
        close(d->sigfd);
}

op_status_t op_sw_run(const struct op_sw_run_config *rc)
{
    struct sw_driver d = {.rc = rc, .sigfd = -1};
    op_status_t st = op_sw_create(&rc->sw, &d.sw);
    if (st == OP_OK && rc->path == NULL)
        st = open_io(&d);
    if (st == OP_OK && (d.sigfd = op_io_signalfd_open()) < 0)
        st = op_status_from_errno(errno);
    if (st == OP_OK)
        st = rc->path != NULL ? open_path(&d) : open_loop(&d);
    if (st != OP_OK) {
        driver_close(&d);
        return st;
    }
    const struct op_topo_switch *me = d.sw->me;
    char ip[16];
    op_format_ipv4(me->ip, ip);
    OP_INFO(rc->sw.log, "switch %s (%s) listening on %s:%u%s", me->name,
            me->spine ? "spine" : "tor", ip, me->port, d.path != NULL ? ", on the path" : "");
    if (rc->ready_fd >= 0) {
        (void)!write(rc->ready_fd, "ready\n", 6);
        close(rc->ready_fd);
    }
    serve(&d);
    print_report(&d, stdout, rc->json_exit);
    write_stats_json(&d);
    send_counters(&d);
    driver_close(&d);
    return OP_OK;
}
