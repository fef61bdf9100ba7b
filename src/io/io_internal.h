/* Internal to src/io (and to tests that write a mock backend): the endpoint
 * structure every backend embeds first, and helpers the backends share. */
#ifndef OFFPATH_IO_INTERNAL_H
#define OFFPATH_IO_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "offpath/io.h"

/* Backend operations (one typedef per slot, as UCX's uct_iface_ops). */
typedef int (*op_io_recv_fn)(struct op_io *io, struct op_pkt *pkts, int max);
typedef int (*op_io_send_fn)(struct op_io *io, const struct op_pkt *pkts, int n);
typedef int (*op_io_fd_fn)(const struct op_io *io);
typedef uint64_t (*op_io_deadline_fn)(const struct op_io *io);
typedef void (*op_io_poll_fn)(struct op_io *io, uint64_t now_ns);
typedef void (*op_io_close_fn)(struct op_io *io);
typedef int (*op_io_recv_frames_fn)(struct op_io *io, struct op_frame *f, int max);
typedef int (*op_io_send_frames_fn)(struct op_io *io, const struct op_frame *f, int n);
typedef void (*op_io_release_frames_fn)(struct op_io *io, struct op_frame *f, int n);
typedef int (*op_io_recv_placed_fn)(struct op_io *io, struct op_pkt *pkts, int max,
                                    const struct op_io_place *place);

struct op_io_ops {
    const char *name;
    op_io_recv_fn recv;   /* non-blocking: returns packets read (0 none), or -errno */
    op_io_send_fn send;   /* returns packets sent (a short count means the rest were dropped) */
    op_io_fd_fn fd;       /* pollable descriptor for readability */
    op_io_deadline_fn deadline; /* next time the backend wants poll() called; UINT64_MAX none */
    op_io_poll_fn poll;   /* run timers (delayed packets) */
    op_io_close_fn close;
    /* backends that see whole frames; NULL for the others */
    op_io_recv_frames_fn recv_frames;
    op_io_send_frames_fn send_frames; /* takes back the lent frames among f, sent or not */
    /* backends that lend their buffers; NULL for the others */
    op_io_recv_frames_fn recv_frames_lent;
    op_io_release_frames_fn release_frames;
    op_io_send_frames_fn send_frames_some; /* a prefix sent, the rest left untouched */
    /* op_io_recv_lent: packets that may point into the backend's memory;
     * NULL: recv */
    op_io_recv_fn recv_lent;
    /* op_io_recv_placed; NULL: recv_lent */
    op_io_recv_placed_fn recv_placed;
    bool takes_ext; /* send gathers packets' ext; false: io.c flattens them first */
};

struct op_io {
    const struct op_io_ops *ops;
    struct op_addr local; /* the address bound (0.0.0.0 or ::: each datagram's own) */
    uint16_t local_port;
    uint32_t link_mtu; /* largest IPv4 packet the link takes; 0: no limit known */
    bool has_mac;      /* frame backends: the port's MAC is mac */
    bool unparsed;     /* frame backends: no op_frame_parse on receive */
    uint8_t mac[6];
    uint64_t c[OP_IO_C_COUNT_]; /* enum op_io_counter; written by the backend only */
    struct op_pktbuf flat; /* where io.c flattens packets with ext for a backend
                              that does not take them (allocated on first need) */
};

/* The interface that has a (any 127/8 or ::1: the loopback one). */
bool io_ifname_of_addr(const struct op_addr *a, char *name, size_t cap);
/* The MTU of interface ifname (an ioctl on any socket fd); 0 if unknown. */
uint32_t io_link_mtu(int fd, const char *ifname);
/* A frame backend's recv and send of payloads: refused (every packet a
 * counted drop); op_io_frames_serve makes it a payload endpoint. */
int io_payload_unsupported_recv(struct op_io *io, struct op_pkt *pkts, int max);
int io_payload_unsupported_send(struct op_io *io, const struct op_pkt *pkts, int n);

/* op_pcap_write of a packet's wire bytes, its ext included. */
void io_pcap_write_pkt(struct op_pcap *w, uint64_t ts_ns, const struct op_flow *flow,
                       const struct op_pkt *p);

#endif
