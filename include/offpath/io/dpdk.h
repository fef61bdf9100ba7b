/* offpath io: DPDK's EAL, a port and its pool, and a queue as a frame
 * backend (src/io/dpdk.c, dpdk_queue.c: built where libdpdk is found,
 * linked into the `offpath` binary only). offpath/io.h includes this. */
#ifndef OFFPATH_IO_DPDK_H
#define OFFPATH_IO_DPDK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"

struct op_io;

struct op_io_dpdk_config {
    const char *name; /* the EAL's program name */
    int n_eal_args;   /* EAL arguments, without a program name */
    char *const *eal_args;
    const char *xdp_prog; /* an AF_XDP vdev without xdp_prog= gets it; NULL: none */
    unsigned queues;      /* RX/TX queue pairs, RSS over IP and UDP across them */
    unsigned mbufs, mbuf_cache, rx_desc, tx_desc;
    unsigned port; /* which of the EAL's ports, in the order it found them: 0 the first */
};
struct op_io_dpdk; /* a port, started, and its mbuf pool */
struct rte_mempool;
struct op_io_dpdk_drops {
    uint64_t imissed, rx_nombuf, oerrors;
};
/* The EAL from the arguments; err says why not. */
OP_API op_status_t op_io_dpdk_eal_init(const struct op_io_dpdk_config *c, char *err,
                                       size_t errlen);
OP_API void op_io_dpdk_eal_cleanup(void);
OP_API unsigned op_io_dpdk_ports(void); /* ports the EAL found */
/* Does another worker lcore run on one of lcore's CPUs? */
OP_API bool op_io_dpdk_lcore_shares_cpu(unsigned lcore);
/* Port c->port with c->queues queues on a pool of its own of c->mbufs
 * (packed for the AF_XDP PMD, which loses mbufs past a gap); *out is set
 * even on a failure, for op_io_dpdk_close. An mbuf of one port's pool may
 * be sent on another port: the copying PMDs (af_packet, af_xdp) copy it. */
OP_API op_status_t op_io_dpdk_port_open(const struct op_io_dpdk_config *c, struct op_io_dpdk **out,
                                        char *err, size_t errlen);
OP_API uint16_t op_io_dpdk_port_id(const struct op_io_dpdk *p);
/* The device's own name (its vdev's: net_af_xdp0) and the interface its
 * arguments name (iface=IF; "" if none), each up to cap bytes. */
OP_API void op_io_dpdk_port_names(const struct op_io_dpdk *p, char *dev, char *iface, size_t cap);
OP_API void op_io_dpdk_mac(const struct op_io_dpdk *p, uint8_t mac[6]);
OP_API struct rte_mempool *op_io_dpdk_pool(const struct op_io_dpdk *p);
/* A burst of frames from queue q (at most n mbufs), and one to it (how
 * many the device took): the lcores' receive and send, here like every
 * other backend's. */
struct rte_mbuf;
OP_API unsigned op_io_dpdk_rx(const struct op_io_dpdk *p, uint16_t q, struct rte_mbuf **m,
                              unsigned n);
OP_API unsigned op_io_dpdk_tx(const struct op_io_dpdk *p, uint16_t q, struct rte_mbuf **m,
                              unsigned n);
/* What the device dropped (zeros before the port started). */
OP_API void op_io_dpdk_stats(const struct op_io_dpdk *p, struct op_io_dpdk_drops *out);
/* Queue q of the port as an op_io frame backend (op_io_frames_serve on
 * it: a payload endpoint). Polled: op_io_fd is -1, op_io_wait returns at
 * once. The port must outlive it. OP_ERR_INVAL: no such queue. */
OP_API op_status_t op_io_dpdk_queue_open(const struct op_io_dpdk *p, uint16_t q,
                                         struct op_io **out);
/* The same over a pair of rings (a pipeline: the workers' side, or the
 * port lcore's side of the return ring): frames from in, lent; sent ones
 * onto out; released ones freed, or with give_back (a worker's) onto out
 * emptied (length 0), for the lcore that allocated them to free. Both
 * rings must outlive it. */
struct rte_ring;
OP_API op_status_t op_io_dpdk_ring_open(const struct op_io_dpdk *p, struct rte_ring *in,
                                        struct rte_ring *out, bool give_back, struct op_io **io);
/* Stops and closes the port (an af_xdp vdev detaches its program), frees
 * the pool. */
OP_API void op_io_dpdk_close(struct op_io_dpdk *p);

#endif
