/* Internal to src/io: what both af_xdp backends own on an interface: its
 * MAC and MTU, the XDP program and map, and an AF_XDP socket on each of
 * its queues (one readable descriptor for all of them). */
#ifndef OFFPATH_IO_XDP_PORT_H
#define OFFPATH_IO_XDP_PORT_H

#include <net/if.h>

#include "xdp_internal.h"
#include "xsk.h"

struct xdp_port {
    char ifname[IF_NAMESIZE];
    int ifindex;
    uint8_t mac[6];
    uint32_t mtu; /* the link's, up to XSK_SG_MAX's frame */
    bool sg;      /* the MTU is over one UMEM frame: frames of several descriptors */
    const struct op_log *log; /* where setup failures go (not owned) */
    struct xdp_bpf bpf;
    struct xsk xsk[XDP_MAX_QUEUES];
    uint32_t n_xsk;   /* opened (the last may have failed part way) */
    int epfd;         /* several queues: readable when one of them is; else -1 */
    uint32_t next_rx; /* the queue read first next time */
};

/* The port of c on ifname: steer NULL takes every frame, else the UDP
 * datagrams to steer:port. A failure logs the step and the kernel's
 * reason; xdp_port_close undoes what was done either way. */
op_status_t xdp_port_open(struct xdp_port *p, const struct op_io_xdp_config *c,
                          const struct op_addr *steer, uint16_t port);
void xdp_port_close(struct xdp_port *p);
int xdp_port_fd(const struct xdp_port *p);
/* Up to max frames from the queues in turn, each to take. */
uint32_t xdp_port_rx(struct xdp_port *p, uint32_t max, xsk_take_fn take, void *ctx);
struct xsk *xdp_port_queue(struct xdp_port *p, uint32_t i); /* i modulo the queues */
bool xdp_port_tx_pending(const struct xdp_port *p);
void xdp_port_kick(struct xdp_port *p);
void xdp_port_stats(const struct xdp_port *p, uint64_t *rx_ring_full, uint64_t *rx_dropped);
bool xdp_port_zero_copy(const struct xdp_port *p); /* every queue took it */

#endif
