/* An interface's queues under AF_XDP (xdp_port.h): the link's facts, the
 * program, one socket per queue; an epoll set makes them one descriptor
 * for a driver's wait. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "xdp_port.h"

static op_status_t fail_with(const struct xdp_port *p, const char *what, int e)
{
    OP_ERROR(p->log, "AF_XDP on %s: %s: %s", p->ifname, what, strerror(e));
    return op_status_from_errno(e);
}

static op_status_t read_link(struct xdp_port *p)
{
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", p->ifname);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return fail_with(p, "a socket to ask the interface with", errno);
    int e = ioctl(fd, SIOCGIFHWADDR, &ifr) == 0 ? 0 : errno;
    memcpy(p->mac, ifr.ifr_hwaddr.sa_data, 6);
    p->mtu = e == 0 ? io_link_mtu(fd, p->ifname) : 0;
    close(fd);
    if (e != 0)
        return fail_with(p, "reading the interface's MAC", e);
    if (p->mtu == 0)
        return fail_with(p, "reading the interface's MTU", EINVAL);
    if (p->mtu > XSK_SG_MAX - OP_ETH_HDR_LEN)
        p->mtu = XSK_SG_MAX - OP_ETH_HDR_LEN; /* what a frame buffer holds */
    /* a jumbo MTU (a RoCE fabric's 9000) spans UMEM frames: the program and
     * the sockets must take frames of several buffers */
    p->sg = p->mtu > XSK_FRAME_ROOM - OP_ETH_HDR_LEN;
    return OP_OK;
}

/* The interface's RX queues as sysfs lists them (rx-0, rx-1...); 1 when
 * it cannot be read. */
static uint32_t rx_queue_count(const char *ifname)
{
    char path[96];
    uint32_t n = 0;
    for (; n < XDP_MAX_QUEUES; n++) {
        snprintf(path, sizeof path, "/sys/class/net/%s/queues/rx-%u", ifname, n);
        if (access(path, F_OK) != 0)
            break;
    }
    return n > 0 ? n : 1;
}

static op_status_t open_queue(struct xdp_port *p, const struct op_io_xdp_config *c, uint32_t q,
                              uint32_t rx_frames)
{
    const char *what = "";
    struct xsk *s = &p->xsk[p->n_xsk++];
    op_status_t st = xsk_open(s, p->ifindex, q, rx_frames, c->zero_copy, p->sg, &what);
    if (st != OP_OK) {
        char step[96];
        snprintf(step, sizeof step, "queue %u: %s", q, what);
        return fail_with(p, step, op_status_errno(st) != 0 ? op_status_errno(st) : EINVAL);
    }
    if ((st = xdp_bpf_bind_socket(&p->bpf, q, s->fd, p->log)) != OP_OK)
        return st;
    if (p->epfd >= 0) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = q};
        if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, s->fd, &ev) != 0)
            return fail_with(p, "adding a queue's socket to the epoll set", errno);
    }
    return OP_OK;
}

op_status_t xdp_port_open(struct xdp_port *p, const struct op_io_xdp_config *c,
                          const struct op_addr *steer, uint16_t port)
{
    memset(p, 0, sizeof *p);
    p->bpf.map_fd = p->bpf.prog_fd = p->bpf.link_fd = -1;
    p->epfd = -1;
    p->log = c->log;
    snprintf(p->ifname, sizeof p->ifname, "%s", c->ifname);
    /* a whole port is every queue unless told: a frame on a queue without
     * a socket would go to the kernel, which is not to see it */
    uint32_t nq = c->queues != 0 ? c->queues : steer == NULL ? rx_queue_count(c->ifname) : 1;
    if (nq > XDP_MAX_QUEUES - c->first_queue)
        nq = XDP_MAX_QUEUES - c->first_queue;
    uint32_t rx_frames = c->rx_frames != 0 ? c->rx_frames : XSK_DEFAULT_RX_FRAMES;
    if ((p->ifindex = (int)if_nametoindex(p->ifname)) == 0)
        return fail_with(p, "no such interface", errno);
    op_status_t st = read_link(p);
    if (st != OP_OK || (st = xdp_bpf_setup(&p->bpf, p->ifindex, steer, port, p->sg, p->log)) != OP_OK)
        return st;
    if (nq > 1 && (p->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0)
        return fail_with(p, "epoll set", errno);
    for (uint32_t q = 0; q < nq; q++)
        if ((st = open_queue(p, c, c->first_queue + q, rx_frames)) != OP_OK)
            return st;
    return OP_OK;
}

void xdp_port_close(struct xdp_port *p)
{
    xdp_bpf_teardown(&p->bpf);
    for (uint32_t i = 0; i < p->n_xsk; i++)
        xsk_close(&p->xsk[i]);
    p->n_xsk = 0;
    if (p->epfd >= 0)
        close(p->epfd);
    p->epfd = -1;
}

int xdp_port_fd(const struct xdp_port *p) { return p->epfd >= 0 ? p->epfd : p->xsk[0].fd; }

uint32_t xdp_port_rx(struct xdp_port *p, uint32_t max, xsk_take_fn take, void *ctx)
{
    uint32_t got = 0;
    for (uint32_t k = 0; k < p->n_xsk && got < max; k++)
        got += xsk_rx(&p->xsk[(p->next_rx + k) % p->n_xsk], max - got, take, ctx);
    p->next_rx = (p->next_rx + 1) % p->n_xsk; /* no queue always served first */
    return got;
}

struct xsk *xdp_port_queue(struct xdp_port *p, uint32_t i) { return &p->xsk[i % p->n_xsk]; }

bool xdp_port_tx_pending(const struct xdp_port *p)
{
    for (uint32_t i = 0; i < p->n_xsk; i++)
        if (xsk_tx_pending(&p->xsk[i]))
            return true;
    return false;
}

void xdp_port_kick(struct xdp_port *p)
{
    for (uint32_t i = 0; i < p->n_xsk; i++)
        xsk_tx_kick(&p->xsk[i]);
}

void xdp_port_stats(const struct xdp_port *p, uint64_t *rx_ring_full, uint64_t *rx_dropped)
{
    *rx_ring_full = *rx_dropped = 0;
    for (uint32_t i = 0; i < p->n_xsk; i++) {
        uint64_t full, dropped;
        xsk_stats(&p->xsk[i], &full, &dropped);
        *rx_ring_full += full;
        *rx_dropped += dropped;
    }
}

bool xdp_port_zero_copy(const struct xdp_port *p)
{
    for (uint32_t i = 0; i < p->n_xsk; i++)
        if (!p->xsk[i].zero_copy)
            return false;
    return p->n_xsk > 0;
}
