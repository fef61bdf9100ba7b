/* The xdp model: run to completion on an AF_XDP socket of offpath's own
 * (src/io's af_xdp backend), no DPDK. Its point is the buffer: DPDK
 * 22.11's AF_XDP PMD gives the kernel 2048 frames, fixed, so a reader away
 * for 4-5 ms at 450k qps (or a load generator catching up after a stall of
 * its own) loses frames; here the UMEM has --xdp-frames for RX (16384 by
 * default: 36 ms at 450k qps), all of them on the fill ring.
 *
 * One worker thread on the interface's queue 0 (a one-queue device, or
 * steer the DNS traffic there): it receives a burst, answers each query
 * and sends the burst back through the same socket. The backend's XDP
 * program takes only UDP to --listen's address and port; ARP, ICMP, TCP
 * and the rest go to the kernel, which must have the address (it answers
 * ARP and ping, and TCP goes to the socket model's TCP thread as for the
 * DPDK models). The worker polls as poll.c says. */
#include <linux/if_xdp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "dns_internal.h"
#include "offpath/io.h"

#ifndef SOL_XDP
#define SOL_XDP 283
#endif
#define XDP_MAX_BURST 1024

struct xdp_state {
    struct op_dns_xdp_config xc;
    struct op_io *io;
    struct op_pkt in[XDP_MAX_BURST], out[XDP_MAX_BURST];
    uint8_t *bufs;
};

/* Answer n queries into s->out; returns how many answers there are. */
static int answer(struct dns_worker *w, struct xdp_state *s, int n, uint16_t udp_max)
{
    struct op_dns_query_info qi = dns_query_info(&w->s->cfg, false, udp_max);
    int k = 0;
    const struct op_dns_zones *z = dns_zones_enter(w);
    for (int i = 0; i < n; i++) {
        const struct op_pkt *q = &s->in[i];
        size_t len = op_dns_respond(z, &qi, q->data, q->len, s->out[k].data, udp_max, w->c);
        uint8_t client[4] = {(uint8_t)(q->flow.src.v4 >> 24), (uint8_t)(q->flow.src.v4 >> 16),
                             (uint8_t)(q->flow.src.v4 >> 8), (uint8_t)q->flow.src.v4};
        if (len == 0 || !dns_rrl_pass(w, client, false, s->out[k].data, &len))
            continue;
        s->out[k].len = (uint32_t)len;
        s->out[k].flow = (struct op_flow){.src.v4 = q->flow.dst.v4, .dst.v4 = q->flow.src.v4,
                                          .src_port = q->flow.dst_port,
                                          .dst_port = q->flow.src_port};
        k++;
    }
    dns_zones_leave(w);
    return k;
}

static void *xdp_main(void *arg)
{
    struct dns_worker *w = arg;
    struct xdp_state *s = w->s->priv;
    int burst = (int)w->s->cfg.burst;
    uint32_t mtu = op_io_link_mtu(s->io); /* the largest IPv4 packet: 28 bytes of headers */
    uint16_t udp_max = w->s->cfg.udp_max;
    if (mtu > 28 && mtu - 28 < udp_max)
        udp_max = (uint16_t)(mtu - 28);
    struct dns_poll p;
    dns_poll_init(&p, &s->xc.poll, false, w->c);
    while (!dns_server_stopping(w->s)) {
        int n = op_io_recv(s->io, s->in, burst);
        if (!dns_polled(&p, n > 0)) {
            op_io_poll(s->io, 0); /* frames still on the TX ring: kick */
            continue;
        }
        w->c[OP_DNS_C_udp_rx] += (unsigned)n;
        int k = answer(w, s, n, udp_max);
        int sent = k > 0 ? op_io_send(s->io, s->out, k) : 0;
        w->c[OP_DNS_C_udp_tx] += (unsigned)sent;
        w->c[OP_DNS_C_drop_tx] += (unsigned)(k - sent);
        dns_publish(w);
    }
    dns_publish(w);
    return NULL;
}

/* The kernel's drops on the way to the socket (XDP_STATISTICS), read by
 * the stats thread through the socket: the worker's counters stay its own. */
static void xdp_port_stats(const struct op_dns_server *srv, uint64_t *c)
{
    const struct xdp_state *s = srv->priv;
    struct xdp_statistics ks;
    socklen_t len = sizeof ks;
    if (s == NULL || s->io == NULL ||
        getsockopt(op_io_fd(s->io), SOL_XDP, XDP_STATISTICS, &ks, &len) != 0)
        return;
    c[OP_DNS_C_port_imissed] += ks.rx_dropped + ks.rx_ring_full;
}

static void xdp_halt(struct op_dns_server *srv, uint64_t *final)
{
    struct xdp_state *s = srv->priv;
    if (s == NULL)
        return;
    for (unsigned i = 0; i < srv->nw; i++)
        dns_thread_stop(&srv->w[i]);
    if (final != NULL)
        xdp_port_stats(srv, final);
    if (s->io != NULL)
        op_io_close(s->io); /* detaches the XDP program */
    free(s->bufs);
    free(s);
    srv->priv = NULL;
}

void op_dns_xdp_config_default(struct op_dns_xdp_config *xc)
{
    *xc = (struct op_dns_xdp_config){.ifname = NULL, .rx_frames = 16384,
                                     .poll = OP_DNS_POLL_DEFAULT};
}

op_status_t op_dns_xdp_start(const struct op_dns_server_config *cfg,
                             const struct op_dns_xdp_config *xc, struct op_dns_zones *zones,
                             struct op_dns_server **out)
{
    if (cfg->burst < 1 || cfg->burst > XDP_MAX_BURST || xc->ifname == NULL)
        return OP_ERR_INVAL;
    struct op_dns_server *srv = dns_server_alloc(cfg, zones, 2); /* the worker, TCP */
    struct xdp_state *s = calloc(1, sizeof(*s));
    uint8_t *bufs = malloc((size_t)2 * cfg->burst * OP_IO_BUF_SIZE);
    if (srv == NULL || s == NULL || bufs == NULL) {
        free(s);
        free(bufs);
        if (srv != NULL)
            op_dns_server_stop(srv, NULL);
        return OP_ERR_NOMEM;
    }
    s->xc = *xc;
    s->bufs = bufs;
    for (unsigned i = 0; i < cfg->burst; i++) {
        s->in[i].data = bufs + (size_t)i * OP_IO_BUF_SIZE;
        s->out[i].data = bufs + (size_t)(cfg->burst + i) * OP_IO_BUF_SIZE;
    }
    srv->priv = s;
    srv->halt = xdp_halt;
    op_status_t st = op_io_xdp_open_sized(xc->ifname, cfg->addr, cfg->port, xc->rx_frames,
                                          cfg->log, &s->io);
    if (st == OP_OK) {
        srv->port_stats = xdp_port_stats;
        if (pthread_create(&srv->w[0].th, NULL, xdp_main, &srv->w[0]) != 0)
            st = OP_ERR_NOMEM;
        else
            srv->w[0].started = true;
    }
    if (st == OP_OK && (st = dns_tcp_start(&srv->w[1])) != OP_OK)
        OP_WARN(cfg->log, "dns: TCP not served (%s)", op_status_str(st));
    if (srv->w[0].started)
        st = OP_OK; /* UDP is served; TCP is a warning */
    if (st != OP_OK) {
        op_dns_server_stop(srv, NULL);
        return st;
    }
    *out = srv;
    return OP_OK;
}
