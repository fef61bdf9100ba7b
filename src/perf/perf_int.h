/* perf's internals: the side channel, the endpoint (a device, its QPs and
 * buffers on one UDP socket) and the test loops. */
#ifndef OFFPATH_PERF_INT_H
#define OFFPATH_PERF_INT_H

#include "offpath/io.h"
#include "offpath/loop.h"
#include "offpath/perf.h"
#include "offpath/rdma.h"

#define PERF_LINE_MAX 512
#define PERF_QKEY 0x11111111u /* UD: the Q_Key both sides use */
#define PERF_QP_SHIFT 40 /* wr_id: QP index above, message index below */
#define PERF_IDX_MASK ((1ull << PERF_QP_SHIFT) - 1)
#define PERF_LAT_SIGNAL_EVERY 8 /* latency WRITEs and SENDs signaled (lat.c) */

struct perf_run;

op_status_t perf_refuse(char *why, size_t len, const char *fmt, ...) OP_PRINTF(3, 4);

/* ---- side channel: text lines over TCP, or (-R) over a control QP */
struct perf_comm;
struct perf_oob {
    int fd;
    struct perf_comm *comm; /* -R: the lines are SENDs on it (comm.c); fd is -1 */
    size_t len;
    char buf[4096];
};
op_status_t perf_oob_accept(uint16_t port, struct perf_oob *o, char *why, size_t len);
/* The two halves of perf_oob_accept, for a server of several clients. */
op_status_t perf_oob_listen(uint16_t port, int backlog, int *lfd, char *why, size_t len);
op_status_t perf_oob_accept_on(int lfd, struct perf_oob *o, char *why, size_t len);
op_status_t perf_oob_connect(const char *host, uint16_t port, struct perf_oob *o, char *why,
                             size_t len);
void perf_oob_close(struct perf_oob *o);
/* Connected either way. */
static inline bool perf_oob_up(const struct perf_oob *o) { return o->fd >= 0 || o->comm; }
uint32_t perf_oob_local_ip(const struct perf_oob *o);
uint32_t perf_oob_peer_ip(const struct perf_oob *o);
/* The peer sent FAIL or closed (nothing read: the next line stays for its reader). */
bool perf_oob_peer_failed(const struct perf_oob *o);
op_status_t perf_oob_send(struct perf_oob *o, const char *fmt, ...) OP_PRINTF(2, 3);
/* 1 and a line in line, 0 nothing yet, -errno when the peer is gone. */
int perf_oob_poll_line(struct perf_oob *o, char *line, size_t cap);
int perf_oob_wait_readable(const struct perf_oob *o, int timeout_ms);

/* ---- endpoint */
struct perf_peer {
    uint32_t qpn, psn, rkey;
    uint64_t vaddr; /* the peer's buffer: source half then target half */
    uint32_t ip;
    uint16_t port;
};

struct perf_qp {
    struct op_rdma_qp *qp;
    struct op_rdma_mr *mr;
    uint8_t *buf; /* source [0, bufsize), target [bufsize, 2 * bufsize) */
    uint32_t psn;
    struct perf_peer peer;
    uint64_t posted, completed, received; /* in the current size */
    uint32_t recvs_out;                   /* receives posted and not yet completed */
};

struct perf_ep {
    const struct op_perf_config *cfg;
    struct op_io *io;      /* what the driver uses (--loss wraps base_io) */
    struct op_io *base_io;
    struct op_rdma_dev *dev;
    struct op_rdma_cq *scq, *rcq;
    struct op_rdma_srq *srq; /* --use_srq: every QP's receives, into QP 0's target half */
    struct perf_qp *qps;
    uint32_t nqp;
    size_t bufsize; /* the largest message of the run (+ a GRH for UD) */
    uint32_t mtu;      /* the QPs' path MTU */
    uint32_t link_mtu; /* the io backend's (0: no limit known) */
    uint32_t ip;
    uint16_t port;
    struct op_loop *loop; /* drives dev over io */
    struct op_log log;
    uint8_t *pattern; /* what every source buffer holds */
    struct op_gpu_dev *gdev; /* --use_opencl / --use_vulkan: QP buffers are its memory */
    struct op_gpu_toucher **touch; /* --gpu_touch=infinite: one per QP buffer */
    uint64_t touch_passes;
};

/* xdp_ifname: drive that interface through AF_XDP; NULL: a UDP socket. */
op_status_t perf_ep_open(struct perf_ep *ep, const struct op_perf_config *cfg, uint32_t ip,
                         const char *xdp_ifname,
                         size_t max_size, char *why, size_t len);
void perf_ep_close(struct perf_ep *ep);
op_status_t perf_ep_connect(struct perf_ep *ep, char *why, size_t len);
/* One pass: received packets into the engine, due timers, queued sends out.
 * Returns the packets taken in. */
int perf_ep_progress(struct perf_ep *ep);
/* --gpu_touch=infinite: start the next device pass over each QP buffer
 * where the last one finished (perf_ep_progress does it each call). */
void perf_ep_touch(struct perf_ep *ep);
void perf_ep_touch_finish(struct perf_ep *ep);
void perf_ep_flush(struct perf_ep *ep);
/* Where posts queue their packets (the loop's), and how often it went out. */
struct op_txq *perf_ep_txq(struct perf_ep *ep);
uint64_t perf_ep_flushes(const struct perf_ep *ep);
/* perf_ep_progress without the sends: a caller about to post its answer
 * flushes the ACKs this queued together with it (one system call). */
int perf_ep_poll(struct perf_ep *ep);
/* perf_ep_poll of at most max packets; the rest wait in the socket layer */
int perf_ep_poll_some(struct perf_ep *ep, int max);
/* perf_ep_poll_some for a latency waiter: several reads back to back
 * before the clock, the timers and the caller's checks (op_loop_spin) */
int perf_ep_spin(struct perf_ep *ep, int max);
/* the clock as the last poll read it, before its receive */
uint64_t perf_ep_poll_time(const struct perf_ep *ep);
/* -e: sleep until a packet comes, a timer of the engine or the I/O layer is
 * due, or PERF_EVENT_WAIT_NS pass (the caller then looks at the side
 * channel). Call only after a poll found nothing: nothing is held then. */
void perf_ep_wait(struct perf_ep *ep, uint64_t now);
/* Move the first acks queued packets (ACKs) behind the rest (an answer):
 * the peer waits for the answer, not the ACK, and an answer followed by a
 * shorter ACK to the same peer leaves as one UDP GSO datagram. */
void perf_ep_answer_first(struct perf_ep *ep, int acks);
/* A latency test of size-byte messages: UDP GRO (batching) stays on only
 * for messages of several packets; one peer's datagrams are read without
 * their sender's address. */
void perf_ep_lat_batching(struct perf_ep *ep, uint64_t size);
/* Keep depth receives posted on QP qi, each taking a whole target half
 * (--use_srq: depth on the SRQ, all into QP 0's target half). */
op_status_t perf_ep_post_receives(struct perf_ep *ep, uint32_t qi, uint32_t depth);
/* The QP a receive completion belongs to (its index). */
uint32_t perf_ep_recv_qp(const struct perf_ep *ep, const struct op_rdma_wc *wc);
/* The message WR of the test's verb from q's buffers to its peer's. */
void perf_ep_send_wr(const struct perf_ep *ep, const struct perf_qp *q, uint64_t size,
                     struct op_rdma_sge *sge, struct op_rdma_send_wr *wr);
op_status_t perf_wc_error(struct perf_run *r, const struct op_rdma_wc *wc);
/* Every QP's counters added up, plus the fault layer's drops. */
void perf_ep_counters(const struct perf_ep *ep, uint64_t sums[OP_RDMA_QP_C_COUNT_],
                      uint64_t *loss_drops);
/* A message's bytes: the source half of qp's buffer. */
static inline uint64_t perf_src(const struct perf_qp *q) { return (uintptr_t)q->buf; }
static inline uint64_t perf_dst(const struct perf_ep *ep, const struct perf_qp *q)
{
    return (uintptr_t)q->buf + ep->bufsize;
}

/* --run_infinitely (bw.c): SIGINT is blocked while a side runs and taken
 * here (no handler, no global flag); the run then ends as a -D run does.
 * Unblocking drops one that came at the very end. */
bool perf_sigint_taken(void);
void perf_block_sigint(bool block);

/* ---- the side channel's lines (proto.c): checked, whole-line parsers */
struct perf_params { /* what both sides must agree on */
    int verb, test, type, all, bidir, rdma_cm;
    uint64_t size, iters;
    unsigned duration_s, qps, mtu;
    unsigned gpu_threads, gpu_mode, gpu_fault, gpu_slots; /* gpunetio_write_bw; 0s for ib_* */
};
void perf_params_of(const struct op_perf_config *c, struct perf_params *p);
int perf_format_params(const struct perf_params *p, char *buf, size_t cap);
op_status_t perf_parse_params(const char *text, struct perf_params *p);
const char *perf_params_mismatch(const struct perf_params *a, const struct perf_params *b);
op_status_t perf_parse_qp(const char *text, uint32_t *idx, struct perf_peer *p);
op_status_t perf_parse_bw_done(const char *text, void *bw_result);
int perf_format_bw_done(const struct op_perf_bw_result *r, char *buf, size_t cap);
op_status_t perf_parse_lat_done(const char *text, void *lat_result);
int perf_format_lat_done(const struct op_perf_lat_result *r, char *buf, size_t cap);

/* A REQ the -R listener of a server of several clients took for one
 * (cm_clients.c); flow.dst is the address it was sent to. */
struct perf_cm_req {
    struct op_flow flow;
    uint32_t len;
    uint8_t data[OP_CM_PKT_LEN];
};

/* ---- the run: one side of a test */
struct perf_run {
    const struct op_perf_config *cfg;
    struct perf_ep ep;
    struct perf_oob oob;
    struct op_rdma_cm *cm; /* -R: the endpoint's connection manager */
    /* -R --clients: the control REQ that made this client (its endpoint
     * opens on another port than 4791, which the listener holds); NULL:
     * the server listens itself */
    const struct perf_cm_req *req;
    bool is_server;
    FILE *out;
    char why[256];     /* the first error, with its cause */
    char check[160];   /* data check verdict of the last size */
    bool check_failed;
    uint64_t *posted, *completed; /* time stamps of the current size */
    uint64_t stamps_cap;
    uint64_t started_ns, last_progress_ns;
    struct perf_gpu *gpu; /* gpunetio_write_bw's client: the device and its buffers */
    double gpu_post_us;   /* its device time per iteration (a batch of --threads writes) */
    uint64_t gpu_launches;
    char gpu_note[240]; /* --inject_fault: what the device's writes completed with */
    struct op_perf_bw_result last_bw; /* the last size's (--clients adds them up) */
    FILE *json_out; /* --out_json goes here when set (--clients: one per client) */
    bool have_result;
    struct {            /* ib_atomic_*: results checked, and the first wrong one */
        uint64_t checked, bad, bad_k, bad_val;
        uint32_t bad_qp;
    } atomic;
};

/* -R (cm.c): meet: the endpoint opened and r->oob up over a control QP
 * the CM connected (the server waits for a client's REQ); connect_qps:
 * every test QP's peer filled in as exchange_qps would, by CM (or an error
 * naming the CM's cause). */
op_status_t perf_cm_meet(struct perf_run *r, size_t max_size);
op_status_t perf_cm_connect_qps(struct perf_run *r);
/* -R --clients (cm_clients.c): the CM listener on UDP 4791 of -d's
 * address (or every address) that hands each new client's REQ to it;
 * poll waits up to timeout_ms for one packet and returns 1 with a new
 * client's REQ in req (its index, in the order they came, in client),
 * 0 for anything else (refused or dropped there). */
struct perf_cm_clients {
    int fd;
    uint32_t ip; /* 0: every address */
    struct op_rdma_cm_listener *l;
};
op_status_t perf_cm_clients_open(const struct op_perf_config *c, struct perf_cm_clients *d,
                                 char *why, size_t len);
int perf_cm_clients_poll(struct perf_cm_clients *d, int timeout_ms, struct perf_cm_req *req,
                         uint32_t *client);
void perf_cm_clients_close(struct perf_cm_clients *d);
/* -R's TCP port (-p) listened on only to tell a client without -R why it
 * is refused (non-blocking; -1 if taken); refuse: each one waiting. */
int perf_cm_tcp_refuser(uint16_t port);
void perf_cm_refuse_tcp(int lfd);
/* A UDP socket on ip's (0: every address's) port 4791; -1 if it is taken. */
int perf_cm_socket(uint32_t ip);
/* -d: an IPv4 address, or an interface that has one */
op_status_t perf_ip_of_device(const char *dev, uint32_t *ip);

/* -R's control QP on ep (comm.c): the lines as SENDs; it moves only while
 * ep is driven. send/poll_line return as perf_oob's (-errno: gone). */
op_status_t perf_comm_open(struct perf_ep *ep, struct perf_comm **out);
void perf_comm_side(const struct perf_comm *c, struct op_rdma_cm_side *s);
op_status_t perf_comm_connect(struct perf_comm *c, const struct op_rdma_cm_side *peer,
                              uint32_t ip, uint16_t port);
int perf_comm_send(struct perf_comm *c, const char *line, size_t n);
int perf_comm_poll_line(struct perf_comm *c, char *line, size_t cap);
bool perf_comm_peer_failed(struct perf_comm *c);
bool perf_comm_pending(const struct perf_comm *c);
/* What was sent is acknowledged first (at most a few seconds). */
void perf_comm_close(struct perf_comm *c);

/* One side's whole run (r->oob already connected, or not yet: -1); the exit
 * status. A server of several clients runs one per client, each in its
 * own thread with its own device and socket (multi.c). */
int perf_run_side(struct perf_run *r);
int perf_run_clients(const struct op_perf_config *cfg);
void perf_print_waiting(FILE *out);

/* Wait for the peer's line starting with tag while keeping the engine
 * moving; the rest of the line goes to rest. */
op_status_t perf_wait_line(struct perf_run *r, const char *tag, char *rest, size_t cap);
op_status_t perf_barrier(struct perf_run *r, const char *tag);
/* One look at the side channel: got tells whether a line with tag came. */
op_status_t perf_poll_tag(struct perf_run *r, const char *tag, bool *got, char *rest, size_t cap);
/* The peer's DONE, if it came (got): its figures parsed into out. */
typedef op_status_t (*perf_done_parse_fn)(const char *text, void *out);
op_status_t perf_poll_done(struct perf_run *r, bool *got, perf_done_parse_fn parse, void *out);
void perf_progress_note(struct perf_run *r, uint64_t size, uint64_t done, uint64_t total);

op_status_t perf_run_bw(struct perf_run *r, uint64_t size, struct op_perf_bw_result *res);
op_status_t perf_run_lat(struct perf_run *r, uint64_t size, struct op_perf_lat_result *res);
/* gpunetio_write_bw (gpunetio.c): distinct slots of size bytes a run
 * writes in a buffer half of bufsize; the client's device and its run. */
uint32_t perf_gpu_slots(const struct op_perf_config *c, uint64_t bufsize, uint64_t size);
op_status_t perf_gpu_open(struct perf_run *r);
void perf_gpu_close(struct perf_run *r);
op_status_t perf_run_gpunetio(struct perf_run *r, uint64_t size, struct op_perf_bw_result *res);
/* ib_atomic_* (atomic.c): the k-th atomic of q; zero counters and results
 * before a run; check results [from, to) of q; the verdict into r->check. */
void perf_atomic_wr(const struct perf_ep *ep, const struct perf_qp *q, uint64_t k,
                    struct op_rdma_sge *sge, struct op_rdma_send_wr *wr);
void perf_atomic_reset(struct perf_run *r);
void perf_atomic_check(struct perf_run *r, const struct perf_qp *q, uint64_t from, uint64_t to);
void perf_atomic_verdict(struct perf_run *r, bool sent, bool served, uint64_t expect);
static inline bool perf_client_only(const struct op_perf_config *c)
{
    return c->verb == OP_PERF_READ || c->verb == OP_PERF_ATOMIC; /* the server only serves */
}
/* The receiving side's verdict on the bytes that arrived (see run.c). */
void perf_check_data(struct perf_run *r, uint64_t size, uint64_t messages);

#endif
