/* The xdp model: run to completion on an AF_XDP socket of offpath's own
 * (src/io's af_xdp backend), no DPDK. Its point is the buffer: DPDK
 * 22.11's AF_XDP PMD gives the kernel 2048 frames, fixed, so a reader away
 * for 4-5 ms at 450k qps (or a load generator catching up after a stall of
 * its own) loses frames; here the UMEM has --xdp-frames for RX (16384 by
 * default: 36 ms at 450k qps), all of them on the fill ring.
 *
 * One worker thread on the interface's queue 0 (a one-queue device, or
 * steer the DNS traffic there): the UDP answer engine (udp.c) the socket
 * model runs too, on the one driver, served without a wait. The backend's XDP
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
};

/* The answer engine's loop, served without waiting: the worker polls as
 * poll.c says (its sleeps, a real-time worker's yields). */
static void *xdp_main(void *arg)
{
    struct dns_worker *w = arg;
    struct xdp_state *s = w->s->priv;
    /* the largest IP packet the link takes, less the IP and UDP headers */
    uint32_t mtu = op_io_link_mtu(s->io), hdrs = w->s->cfg.ipv6 ? 48 : 28;
    struct dns_udp u = {.w = w, .udp_max = w->s->cfg.udp_max};
    if (mtu > hdrs && mtu - hdrs < u.udp_max)
        u.udp_max = (uint16_t)(mtu - hdrs);
    struct op_loop *loop = NULL;
    op_status_t st = dns_udp_loop(&u, s->io, &loop);
    if (st != OP_OK)
        OP_ERROR(w->s->cfg.log, "dns: xdp worker: %s", op_status_str(st));
    struct dns_poll p;
    dns_poll_init(&p, &s->xc.poll, false, w->c);
    while (st == OP_OK && !dns_server_stopping(w->s))
        if (!dns_polled(&p, op_loop_serve(loop) > 0))
            op_io_poll(s->io, 0); /* frames still on the TX ring: kick */
    op_loop_destroy(loop);
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
    if (srv == NULL || s == NULL) {
        free(s);
        if (srv != NULL)
            op_dns_server_stop(srv, NULL);
        return OP_ERR_NOMEM;
    }
    s->xc = *xc;
    srv->priv = s;
    srv->halt = xdp_halt;
    struct op_io_xdp_config c = {
        .ifname = xc->ifname, .port = cfg->port, .rx_frames = xc->rx_frames, .log = cfg->log,
        .addr = cfg->ipv6 ? op_addr_ipv6(cfg->addr6) : op_addr_ipv4(cfg->addr)};
    op_status_t st = op_io_xdp_open_cfg(&c, &s->io);
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
