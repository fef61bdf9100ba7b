/* Internal to src/io: the af_xdp backend's BPF objects. */
#ifndef OFFPATH_IO_XDP_INTERNAL_H
#define OFFPATH_IO_XDP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io_internal.h"

#define XDP_MAX_QUEUES 64

struct xdp_bpf {
    int map_fd, prog_fd, link_fd;
    bool native; /* the driver's hook, not the generic one */
};

/* Map, program (steering UDP to addr:port, either family; addr NULL:
 * every frame; frags: it takes frames of several buffers, a jumbo MTU's)
 * and link on ifindex; a failure logs the step and the kernel's reason
 * (log may be NULL). */
op_status_t xdp_bpf_setup(struct xdp_bpf *b, int ifindex, const struct op_addr *addr,
                          uint16_t port, bool frags, const struct op_log *log);
op_status_t xdp_bpf_bind_socket(struct xdp_bpf *b, uint32_t queue, int xsk_fd,
                                const struct op_log *log);
void xdp_bpf_teardown(struct xdp_bpf *b);

#endif
