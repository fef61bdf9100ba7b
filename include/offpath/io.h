/* offpath packet I/O: one burst interface, several backends.
 * A packet here is a RoCEv2 UDP payload plus its flow (addresses, ports).
 * Backends: "udp" (recvmmsg/sendmmsg on an unconnected socket with DF set, so
 * the kernel sends IPv4 Identification 0 and the ICRC we compute validates on
 * the wire), and a fault injector that wraps any backend. */
#ifndef OFFPATH_IO_H
#define OFFPATH_IO_H

#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"
#include "offpath/wire.h"

#define OP_IO_BURST 64
#define OP_IO_BUF_SIZE 9216 /* room for a jumbo frame's UDP payload */

struct op_pkt {
    struct op_flow flow; /* as received: src is the sender; as sent: dst is the target */
    uint32_t len;
    uint8_t *data; /* OP_IO_BUF_SIZE bytes, owned by whoever allocated the pkt */
    /* Sending only, into a queue that takes them (op_txq.ext_ok): ext_len
     * bytes at ext go out spliced in at data + ext_at, so the packet is
     * data[0..ext_at) ext[0..ext_len) data[ext_at..len), and the payload
     * (an RDMA MR's bytes) is gathered by the kernel without a copy of
     * ours; they must stay as they are until sent. NULL: data alone.
     * Received packets have NULL, but for op_io_recv_placed's: there ext
     * is where the read put the payload, inside the caller's place. */
    const uint8_t *ext;
    uint32_t ext_len, ext_at;
};

/* The bytes a packet puts on the wire. */
static inline uint32_t op_pkt_wire_len(const struct op_pkt *p)
{
    return p->ext != NULL ? p->len + p->ext_len : p->len;
}
/* p's bytes in one piece into out (cap bytes): its wire length, or 0 when
 * they do not fit. For a layer that needs them flat (a delay queue, a
 * capture, a backend that copies into frames). */
OP_API uint32_t op_pkt_flatten(const struct op_pkt *p, uint8_t *out, size_t cap);

/* An endpoint of some backend; opaque: only src/io writes it. */
struct op_io;

/* I/O counters: one list gives the enum and the names (text and JSON). */
#define OP_IO_COUNTERS(X)                                                                          \
    X(rx_pkts)                                                                                     \
    X(tx_pkts)                                                                                     \
    X(tx_drops)                                                                                    \
    X(tx_datagrams) /* system-level sends: fewer than tx_pkts when batched */

enum op_io_counter {
#define OP_IO_ENUM_(n) OP_IO_C_##n,
    OP_IO_COUNTERS(OP_IO_ENUM_)
#undef OP_IO_ENUM_
        OP_IO_C_COUNT_
};
OP_API const char *op_io_counter_name(unsigned c); /* NULL past the list */
/* The counters of io (for a wrapper: its own, what it took and passed on). */
OP_API void op_io_counters(const struct op_io *io, uint64_t out[OP_IO_C_COUNT_]);
OP_API uint32_t op_io_local_ip(const struct op_io *io); /* host order; 0 for IPv6 */
OP_API struct op_addr op_io_local_addr(const struct op_io *io);
OP_API uint16_t op_io_local_port(const struct op_io *io);
/* Largest IPv4 packet the link takes; 0: no limit known. */
OP_API uint32_t op_io_link_mtu(const struct op_io *io);

/* Open a UDP endpoint bound to ip:port (host order); a failed socket or
 * bind returns its errno (op_status_errno: EADDRINUSE...). Batching is on; callers
 * turn it off with op_io_udp_batching from their configuration (the tools'
 * and liboffpath_mpi's OFFPATH_UDP_BATCHING=0). */
OP_API op_status_t op_io_udp_open(uint32_t ip, uint16_t port, struct op_io **out);
/* The same for an address of either family (an IPv6 socket takes IPv6
 * only); packets to a flow of the other family are dropped (tx_drops). */
OP_API op_status_t op_io_udp_open_addr(const struct op_addr *addr, uint16_t port,
                                       struct op_io **out);
/* An endpoint on a UDP socket of either family that the caller opened and
 * bound with options of its own (SO_REUSEPORT, a dual-stack [::]): io
 * keeps a duplicate of fd and changes none of its options; no batching,
 * flows' destination the bound address. */
OP_API op_status_t op_io_udp_adopt(int fd, struct op_io **out);
/* Makes mh (a struct msghdr for sendmsg/sendmmsg) one UDP GSO datagram
 * of seg-byte segments, the last possibly shorter: the control message
 * goes into ctrl, OP_IO_GSO_CTRL bytes aligned as a struct cmsghdr. */
#define OP_IO_GSO_CTRL 24
struct msghdr;
OP_API void op_io_udp_gso(struct msghdr *mh, void *ctrl, uint16_t seg);
/* Batching: runs of three or more packets to one destination leave as one
 * UDP GSO datagram (two go as two messages of one sendmmsg, which is cheaper)
 * and such datagrams are read whole (UDP_GRO) and cut back into packets; the
 * packets and their bytes stay the same. Off: one system-call slot per packet.
 * No effect on other backends. */
OP_API void op_io_udp_batching(struct op_io *io, bool on);
/* Datagrams are taken as sent by `sender` without reading who sent them
 * (NULL: read it again; a sender of the other family is NULL). Only for a
 * socket that one peer talks to, and whose packets carry a check over the
 * sender's address and port (RoCEv2's ICRC covers the IP source and the
 * UDP header): a datagram from anyone else then fails that check as a
 * corrupted one would. No effect on other backends. */
OP_API void op_io_udp_assume_sender(struct op_io *io, const struct op_endpoint *sender);

/* AF_XDP on queue 0 of interface ifname (root, or CAP_NET_ADMIN + CAP_BPF):
 * frames for UDP ip:port (host order) come straight to this process through
 * a shared ring, steered by an XDP program that passes everything else to
 * the kernel and goes away with the process. Copy mode (any driver). A UDP
 * socket on ip:port is the slow path: packets to peers whose MAC is not yet
 * known leave through it, and what reaches it (another queue) is read too.
 * The peers must be on-link: their MACs come from the frames they send and
 * from the kernel's neighbour table. A failure logs the step and the
 * kernel's reason to log (NULL: nowhere); its errno is in the status. */
OP_API op_status_t op_io_xdp_open(const char *ifname, uint32_t ip, uint16_t port,
                                  const struct op_log *log, struct op_io **out);
/* The same with rx_frames UMEM frames for RX (a power of 2, 64..2^20; the
 * fill and RX rings are as long): frames the kernel can hand over while
 * the reader is away, 2048 for op_io_xdp_open. 4 KiB each. */
OP_API op_status_t op_io_xdp_open_sized(const char *ifname, uint32_t ip, uint16_t port,
                                        uint32_t rx_frames, const struct op_log *log,
                                        struct op_io **out);
/* The general form, for either family and several queues. */
struct op_io_xdp_config {
    const char *ifname;
    struct op_addr addr; /* payloads: the UDP address steered to us; frames: unused */
    uint16_t port;
    uint32_t first_queue, queues; /* 0: one (frames: every RX queue); at most 64 in all */
    uint32_t rx_frames;           /* per queue, as op_io_xdp_open_sized; 0: 2048 */
    bool zero_copy;               /* ask the driver (copy mode where it has none) */
    const struct op_log *log;
};
/* Payloads, as op_io_xdp_open, on c's queues and address of either
 * family; peers whose MAC is not known yet are sent to through the UDP
 * socket (the kernel asks), IPv6 ones until a frame of theirs arrives. */
OP_API op_status_t op_io_xdp_open_cfg(const struct op_io_xdp_config *c, struct op_io **out);
/* Whole frames: every frame that reaches c's queues comes to this process
 * (the kernel's stack sees none of them: nothing answers ARP unless the
 * engine does, as op_io_frames_serve does). */
OP_API op_status_t op_io_xdp_open_frames(const struct op_io_xdp_config *c, struct op_io **out);
/* How an af_xdp endpoint runs: queues, whether every one took zero-copy,
 * whether the driver's XDP hook runs the program. false for other backends. */
struct op_io_xdp_info {
    uint32_t queues;
    bool zero_copy, native;
};
OP_API bool op_io_xdp_info(const struct op_io *io, struct op_io_xdp_info *out);
/* What the AF_XDP path did besides the ring. rx_refused: frames the ring
 * brought that were not ours or not valid (op_frame_verdict), and jumbo
 * frames whose pieces did not fit a frame buffer; rx_ring_full
 * and rx_kernel_dropped are the kernel's (lost because our ring was full,
 * other drops on the way to it); tx_no_room: no free frame or TX ring slot,
 * or a packet too big; the via_kernel ones went through the UDP socket
 * (tx: the peer's MAC was not known yet). native: 1 when the driver's XDP
 * hook runs the program (not the generic one). The names print with "xdp_"
 * in front. */
#define OP_IO_XDP_COUNTERS(X)                                                                      \
    X(native)                                                                                      \
    X(rx_ring_full)                                                                                \
    X(rx_refused)                                                                                  \
    X(rx_via_kernel)                                                                               \
    X(tx_via_kernel)                                                                               \
    X(tx_no_room)                                                                                  \
    X(rx_kernel_dropped)

enum op_io_xdp_counter {
#define OP_IO_XDP_ENUM_(n) OP_IO_XDP_C_##n,
    OP_IO_XDP_COUNTERS(OP_IO_XDP_ENUM_)
#undef OP_IO_XDP_ENUM_
        OP_IO_XDP_C_COUNT_
};
OP_API const char *op_io_xdp_counter_name(unsigned c); /* "xdp_native"...; NULL past the list */
/* Zero for other backends. */
OP_API void op_io_xdp_counters(const struct op_io *io, uint64_t out[OP_IO_XDP_C_COUNT_]);
/* The interface's MAC; OP_ERR_INVAL for other backends. */
OP_API op_status_t op_io_xdp_local_mac(const struct op_io *io, uint8_t mac[6]);
/* A neighbour's MAC as a user gives it (perftest's -E): frames to ip use it
 * from now on, the kernel is not asked. OP_ERR_INVAL for other backends. */
OP_API op_status_t op_io_xdp_set_neighbour(struct op_io *io, uint32_t ip, const uint8_t mac[6]);
/* Payloads sent from now on leave through the q-th of the endpoint's
 * queues (0 at open; a NIC, or a veth, delivers each queue's frames to the
 * peer's queue of that index). OP_ERR_INVAL past them or for other backends. */
OP_API op_status_t op_io_xdp_tx_queue(struct op_io *io, uint32_t q);
/* Frames the q-th queue's rings took in and put out since open (mod 2^32). */
OP_API op_status_t op_io_xdp_queue_frames(const struct op_io *io, uint32_t q, uint32_t *rx,
                                          uint32_t *tx);
/* The MAC of ip (host order) on ifname in the text of /proc/net/arp, if the
 * entry is complete. Pure: tests feed it any text. */
OP_API bool op_arp_table_lookup(const char *table, uint32_t ip, const char *ifname,
                                uint8_t mac[6]);

/* The name of the interface that has ip (host order; any 127/8 address is
 * the loopback interface's) into name; false if none has it. */
OP_API bool op_io_ifname_of(uint32_t ip, char *name, size_t cap);

/* Wrap inner (taking ownership): each sent packet is dropped with probability
 * drop (or while its destination's link is down), sent twice with
 * probability dup, and held for delay_us microseconds. */
struct op_fault_cfg {
    double drop, dup;
    uint32_t delay_us;
    uint64_t seed;
    /* a link down for a while: every packet to down_ip is dropped from
     * down_from_ns until down_until_ns (op_now_ns clock); 0: none */
    uint32_t down_ip;
    uint64_t down_from_ns, down_until_ns;
};
OP_API op_status_t op_io_fault_wrap(struct op_io *inner, const struct op_fault_cfg *cfg,
                                    struct op_io **out);
/* Counters of the fault layer (zero for other backends). */
#define OP_FAULT_COUNTERS(X)                                                                       \
    X(dropped)                                                                                     \
    X(duplicated)                                                                                  \
    X(delayed)

enum op_fault_counter {
#define OP_FAULT_ENUM_(n) OP_FAULT_C_##n,
    OP_FAULT_COUNTERS(OP_FAULT_ENUM_)
#undef OP_FAULT_ENUM_
        OP_FAULT_C_COUNT_
};
OP_API const char *op_fault_counter_name(unsigned c); /* NULL past the list */
/* What the fault layer injected; zeros for a backend that is not one. */
OP_API void op_io_fault_counters(const struct op_io *io, uint64_t out[OP_FAULT_C_COUNT_]);

/* A capture file (format: wire.h, op_pcap_*): each packet written becomes
 * one Ethernet/IPv4/UDP frame, so a capture shows RoCEv2 packets one by one
 * even where the kernel moved several in one UDP GSO/GRO datagram. Writes go
 * through a large stdio buffer. The first failure sticks: later writes do
 * nothing and op_pcap_close returns it (its errno in the status), so a tool
 * reports it once, at the end. */
struct op_pcap;
/* Create (truncate) path and write the file header; a failure's errno is in
 * the status (op_status_errno). */
OP_API op_status_t op_pcap_open(const char *path, struct op_pcap **out);
OP_API void op_pcap_write(struct op_pcap *w, uint64_t ts_ns, const struct op_flow *flow,
                          const uint8_t *data, size_t len);
/* A whole frame as it is (a frame backend's). */
OP_API void op_pcap_write_frame(struct op_pcap *w, uint64_t ts_ns, const uint8_t *frame,
                                size_t len);
/* Packets written so far. */
OP_API uint64_t op_pcap_count(const struct op_pcap *w);
/* Append the packets of the captures at paths (files op_pcap_open wrote,
 * each in time order) merged in time order. A file that cannot be read or is
 * not such a capture is the writer's failure (ENOENT, EBADMSG...). */
OP_API op_status_t op_pcap_merge(struct op_pcap *w, const char *const *paths, int n);
/* Flush and close; the first failure's errno (in the status) when any
 * write failed. */
OP_API op_status_t op_pcap_close(struct op_pcap *w);
/* Wrap inner (taking ownership; w stays the caller's and must outlive the
 * io): every packet inner receives, and every one it takes to send, is
 * written to w (a frame backend's frames as they are), stamped with CLOCK_REALTIME once per burst. Sent packets get
 * inner's address as their source, as the kernel gives them. Put a fault
 * layer outside this one: the capture then holds what crossed the wire. */
OP_API op_status_t op_io_pcap_wrap(struct op_io *inner, struct op_pcap *w, struct op_io **out);

#include "offpath/io/frames.h" /* whole frames, lent buffers, the serving layer */
#include "offpath/io/placed.h" /* receives that put payloads where they belong */

/* ---- Backends by name, as a flag or a topology file gives them:
 *   udp:EP              the udp backend on EP (ADDR:PORT or [ADDR6]:PORT)
 *   xdp:IF[@N]:EP       af_xdp steering EP's datagrams on N queues (payloads)
 *   xdpall:IF[@N]:EP    af_xdp on the whole port, op_io_frames_serve for EP
 *   frames:IF[@N]       af_xdp on the whole port, frames (a switch port)
 * N: queues from 0 (default: one; frames and xdpall: every one). DPDK's
 * ports need the EAL first (offpath/io/dpdk.h). */
enum op_io_spec_kind {
    OP_IO_SPEC_UDP,
    OP_IO_SPEC_XDP,
    OP_IO_SPEC_XDP_SERVED,
    OP_IO_SPEC_XDP_FRAMES,
};
struct op_io_spec {
    enum op_io_spec_kind kind;
    char ifname[16];
    uint32_t queues;
    struct op_endpoint ep;
};
/* false and why (the text and what is wrong with it) for anything else. */
OP_API bool op_io_spec_parse(const char *text, struct op_io_spec *out, char *why, size_t len);
OP_API op_status_t op_io_open_spec(const struct op_io_spec *s, const struct op_log *log,
                                   struct op_io **out);

/* Non-blocking: packets read (0 none), or -errno. */
OP_API int op_io_recv(struct op_io *io, struct op_pkt *pkts, int max);
/* The same where the backend can lend its buffer (udp with batching: the
 * packets of a GRO datagram are handed out where they lie, not copied):
 * a packet's data may then point into the backend's memory, valid and
 * writable (len bytes) until the next receive on io; the others are read
 * into the caller's data as op_io_recv does. The caller keeps its own
 * buffers' addresses and puts them back before the next call. */
OP_API int op_io_recv_lent(struct op_io *io, struct op_pkt *pkts, int max);
/* Packets sent (a short count means the rest were dropped). Packets with
 * ext go out gathered where the backend can (op_io_takes_ext), flattened
 * into a buffer of io's first elsewhere. */
OP_API int op_io_send(struct op_io *io, const struct op_pkt *pkts, int n);
/* Whether io takes packets with ext as they are: udp (gathered by
 * sendmsg), and the fault and capture layers (flat copies where they hold
 * or write one, the packets passed on to their inner backend's
 * op_io_send). */
OP_API bool op_io_takes_ext(const struct op_io *io);
/* Pollable descriptor for readability. */
OP_API int op_io_fd(const struct op_io *io);
/* Next time the backend wants op_io_poll called; UINT64_MAX none. */
OP_API uint64_t op_io_deadline(const struct op_io *io);
/* Run timers (delayed packets). */
OP_API void op_io_poll(struct op_io *io, uint64_t now);
OP_API void op_io_close(struct op_io *io);

/* A set of packet buffers (one allocation). */
struct op_pktbuf {
    struct op_pkt *pkts;
    uint8_t *mem;
    int n;
};
OP_API op_status_t op_pktbuf_init(struct op_pktbuf *b, int n);
OP_API void op_pktbuf_free(struct op_pktbuf *b);

/* Where protocol engines put the packets they want sent. The engine asks for
 * the next free packet, fills it and commits it; when the queue is full it is
 * handed to flush (the driver's: send it, or in tests, put it on a simulated
 * link), which must empty it. So an engine multicasting to 1000 children
 * needs no queue of 1000 and never touches a socket. */
struct op_txq {
    struct op_pkt *pkts;
    int n, cap;
    void (*flush)(void *ctx, struct op_txq *q);
    void *ctx;
    /* The consumer takes packets with ext (the loop's queue over an io
     * that gathers them); false (a test's simulated link): every packet's
     * bytes are in its data. */
    bool ext_ok;
};

static inline struct op_pkt *op_txq_next(struct op_txq *q)
{
    if (q->n == q->cap)
        q->flush(q->ctx, q);
    q->pkts[q->n].ext = NULL;
    return &q->pkts[q->n];
}
static inline void op_txq_commit(struct op_txq *q) { q->n++; }

/* SIGINT, SIGTERM and SIGUSR1 blocked and readable from the returned
 * descriptor (non-blocking; -1 on failure): a driver's stop and report. */
OP_API int op_io_signalfd_open(void);

/* Wait until io is readable or the deadline (absolute, op_now_ns clock) passes.
 * Returns 1 readable, 0 deadline, -errno on error (a signal does not end
 * the wait: drivers take theirs through op_io_signalfd_open). */
OP_API int op_io_wait(const struct op_io *io, uint64_t deadline_ns);

/* An endpoint as the socket address of its family (a sockaddr_in or a
 * sockaddr_in6 in out); returns its length. */
struct sockaddr;
struct sockaddr_storage;
OP_API unsigned op_io_sockaddr(const struct op_endpoint *e, struct sockaddr_storage *out);
/* The reverse, for AF_INET and AF_INET6 (an IPv4-mapped IPv6 address stays
 * IPv6); false for any other family. */
OP_API bool op_io_endpoint_of(const struct sockaddr *sa, struct op_endpoint *out);

/* Bounded waits on plain descriptors (a control socket, a pipe, a timerfd,
 * a side channel), for code that runs no packet loop: until one of n (at
 * most OP_IO_WAIT_MAX_FDS) descriptors is ready for events, an OR of
 * OP_IO_IN and OP_IO_OUT, or the deadline (op_now_ns clock; UINT64_MAX:
 * none) passes. A signal does not end the wait early. Returns how many are
 * ready (a descriptor with an error or hang-up counts: the next call on it
 * reports), 0 at the deadline, or -errno. */
#define OP_IO_IN 1u
#define OP_IO_OUT 2u
#define OP_IO_WAIT_MAX_FDS 8
OP_API int op_io_wait_fds(const int *fds, int n, unsigned events, uint64_t deadline_ns);
OP_API int op_io_wait_fd(int fd, unsigned events, uint64_t deadline_ns);
/* A set of descriptors each waited on for events of its own (a server's
 * connections, read or written as each needs): cap slots, each a
 * descriptor (< 0: unused) and its events; after a wait, each slot's ready
 * events, OP_IO_ERR for an error or a hang-up (the next call on it says
 * which). */
#define OP_IO_ERR 4u
struct op_io_waitset;
OP_API op_status_t op_io_waitset_new(unsigned cap, struct op_io_waitset **out);
OP_API void op_io_waitset_free(struct op_io_waitset *w);
OP_API void op_io_waitset_set(struct op_io_waitset *w, unsigned i, int fd, unsigned events);
/* Until a slot is ready or the deadline: how many are (0 at the deadline),
 * or -errno; a signal does not end it early. */
OP_API int op_io_waitset_wait(struct op_io_waitset *w, uint64_t deadline_ns);
OP_API unsigned op_io_waitset_ready(const struct op_io_waitset *w, unsigned i);
/* The deadline ms milliseconds from now (ms < 0: none, UINT64_MAX). */
OP_API uint64_t op_io_deadline_in_ms(int ms);

/* DPDK's EAL, ports and queues (offpath/io/dpdk.h). */
#include "offpath/io/dpdk.h"

#endif
