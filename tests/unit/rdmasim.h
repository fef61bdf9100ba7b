/* In-memory link for RDMA engine tests: two devices exchange packets through
 * a priority queue in virtual time, with loss, duplication, delay jitter
 * (reordering) per direction and a hook that can drop or record any packet.
 * No sockets, no sleeping. */
#ifndef OFFPATH_TEST_RDMASIM_H
#define OFFPATH_TEST_RDMASIM_H

#include "offpath/rdma.h"

#define RSIM_IP_A 0x7f000001u /* 127.0.0.1 */
#define RSIM_IP_B 0x7f000002u

struct rsim_event {
    uint64_t at, order;
    struct op_pkt pkt;
};

/* Faults on the packets one side sends. */
struct rsim_link {
    double drop, dup;
    double reorder;     /* this share of packets is delayed by an extra 0..jitter */
    uint64_t jitter_ns;
    bool dead;          /* everything vanishes */
};

struct rsim;
/* Return true to drop the packet (it was sent by side `from`). */
typedef bool (*rsim_hook_fn)(struct rsim *s, int from, const struct op_pkt *p);

struct rsim {
    struct op_rdma_dev *dev[2];
    struct rsim_link link[2];
    rsim_hook_fn hook;
    void *hook_ctx;
    struct rsim_event *ev; /* sorted by (at, order); [first, n) pending */
    size_t first, n, cap;
    uint64_t now, order;
    struct op_rng rng;
    struct op_pktbuf txbuf;
    struct op_txq q;
    /* Packets arrive as op_io_recv_placed hands them out, each read alone:
     * where the receiving device foresees a payload (op_rdma_dev_rx_place)
     * the packet's bytes after its first `hdr` go into the room as the
     * kernel's read would scatter them, and one that falls as foreseen
     * comes with its payload there (ext), the others whole. */
    bool placed;
    uint64_t sent[2], dropped[2], delivered;
};

/* One side's queue pair and its CQs. */
struct rsim_ep {
    struct op_rdma_qp *qp;
    struct op_rdma_cq *scq, *rcq;
};

struct rsim_qp_opts {
    enum op_rdma_qp_type type;
    uint32_t mtu;           /* 0: 1024 */
    uint32_t depth;         /* send and receive queue depth; 0: 64 */
    uint8_t timeout;        /* 0: 14 */
    uint8_t retry_cnt;      /* as given (7 = forever) */
    uint8_t rnr_retry;
    uint8_t min_rnr_timer;  /* 0: 1 (10 us) */
    uint32_t window;
    uint32_t ack_every;     /* responder ACK coalescing; 0: on AckReq only */
    unsigned access;        /* 0: REMOTE_WRITE | REMOTE_READ */
    uint32_t psn_a, psn_b;  /* initial PSNs */
    uint32_t max_inline;    /* max_inline_data of both QPs */
    uint8_t max_rd_atomic;  /* READs in flight at most; 0: no limit */
    struct op_rdma_srq *srq_b; /* side b's QP takes its receives from it; NULL: its own */
};

void rsim_init(struct rsim *s, uint64_t seed);
void rsim_free(struct rsim *s);
/* A QP on each side, connected to each other (UD: only brought to RTS). */
void rsim_connect(struct rsim *s, const struct rsim_qp_opts *o, struct rsim_ep *a,
                  struct rsim_ep *b);
typedef bool (*rsim_done_fn)(void *arg);
/* Advance virtual time until done(arg) holds (true) or nothing is left to
 * happen or limit_ns of virtual time passed (false). */
bool rsim_run(struct rsim *s, rsim_done_fn done, void *arg, uint64_t limit_ns);
/* Hand a packet to the device at its destination now, as if it had arrived. */
void rsim_deliver(struct rsim *s, const struct op_pkt *p);
/* n (<= RSIM_DATAGRAM) packets to one device as one datagram read by a
 * placed receive: the k-th one's payload where the device foresees it, as
 * long as each falls as foreseen (see struct rsim's placed). */
#define RSIM_DATAGRAM 16
void rsim_deliver_placed(struct rsim *s, const struct op_pkt *p, int n);
int rsim_side(uint32_t ip);

#endif
