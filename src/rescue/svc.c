/* The rescue service of one process: a thread that answers the other
 * leaders from the entries (one per group this process leads; an engine on
 * the one driver over the udp backend), and the asking side, which the
 * caller's thread runs on a socket of its own so the two never read each
 * other's datagrams. The entries' state is what the MPI
 * library sets at each call; the lock is taken once per call, uncontended
 * unless a peer is asking. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "offpath/io.h"
#include "offpath/loop.h"
#include "offpath/rescue.h"

#define SVC_MAX_ENTRIES 256
#define SVC_RETIRED 16                        /* closed entries still answering */
#define SVC_POLL_MS 100                       /* how often the thread looks at stop */
#define ASK_RESEND_NS (20 * OP_NS_PER_MS)

struct op_rsc_entry {
    uint32_t job, comm;
    uint8_t state;
    uint64_t seq, completed;
    uint64_t began_ns; /* of call seq */
    uint8_t *result; /* of call `completed` */
    size_t bytes, cap;
    atomic_bool cancel;
};

struct op_rsc_svc {
    int fd;      /* the thread's: requests in, answers out */
    uint32_t ip; /* askers bind here, so peers see the leader's address */
    pthread_t thread;
    bool started;
    atomic_bool stop;
    pthread_mutex_t mu;
    struct op_rsc_entry *live[SVC_MAX_ENTRIES];
    int n_live;
    struct op_rsc_entry *retired[SVC_RETIRED];
    unsigned next_retired;
    uint32_t nonce;
    _Atomic uint64_t c[OP_RSC_C_COUNT_];
};

static int bind_udp(uint32_t ip, uint16_t port)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                            .sin_addr.s_addr = htonl(ip)};
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        int err = errno;
        close(fd);
        return -err;
    }
    return fd;
}

static void send_to(int fd, uint32_t ip, uint16_t port, const struct op_rsc_msg *m)
{
    uint8_t buf[OP_RSC_MAX_MSG];
    size_t n = op_rsc_encode(m, buf, sizeof(buf));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                            .sin_addr.s_addr = htonl(ip)};
    if (n > 0) /* lost like any datagram if it fails: the asker asks again */
        (void)sendto(fd, buf, n, MSG_DONTWAIT, (struct sockaddr *)&a, sizeof(a));
}

static struct op_rsc_entry *find(struct op_rsc_svc *s, uint32_t job, uint32_t comm)
{
    for (int i = 0; i < s->n_live; i++)
        if (s->live[i]->job == job && s->live[i]->comm == comm)
            return s->live[i];
    for (int i = 0; i < SVC_RETIRED; i++)
        if (s->retired[i] != NULL && s->retired[i]->job == job && s->retired[i]->comm == comm)
            return s->retired[i];
    return NULL;
}

/* A status's offset field: how long the leader has been in its call, in
 * ms (docs/wire.md section 12). */
static uint32_t in_call_ms(const struct op_rsc_entry *e)
{
    if (e == NULL || (e->state != OP_RSC_IN_CALL && e->state != OP_RSC_GAVE_UP))
        return 0;
    uint64_t ms = (op_now_ns() - e->began_ns) / OP_NS_PER_MS;
    return ms < UINT32_MAX ? (uint32_t)ms : UINT32_MAX;
}

static void fill_status(const struct op_rsc_entry *e, struct op_rsc_msg *m)
{
    m->state = e != NULL ? e->state : OP_RSC_UNKNOWN;
    m->seq = e != NULL ? e->seq : 0;
    m->completed = e != NULL ? e->completed : 0;
    m->total = e != NULL ? (uint32_t)e->bytes : 0;
    m->offset = in_call_ms(e);
}

/* An asker that gave up the call this group is in: the switch will not
 * finish it (the asker stopped sending), so this leader gives it up too, at
 * once and whatever its own thread is doing (it may be settling another
 * group, waiting for this one's answer: the agreement never waits on a
 * leader's thread). Its wait stops; a switch result it gets after this is
 * not taken (op_rsc_call_done). */
static void note_asker(struct op_rsc_svc *s, struct op_rsc_entry *e, const struct op_rsc_msg *q)
{
    if (e == NULL || q->state != OP_RSC_GAVE_UP || e->state != OP_RSC_IN_CALL || e->seq != q->seq)
        return;
    e->state = OP_RSC_GAVE_UP;
    atomic_store(&e->cancel, true);
    s->c[OP_RSC_C_cancels]++;
}

static void answer(struct op_rsc_svc *s, const struct op_rsc_msg *q, struct op_rsc_msg *a)
{
    *a = (struct op_rsc_msg){.job = q->job, .comm = q->comm, .nonce = q->nonce};
    struct op_rsc_entry *e = find(s, q->job, q->comm);
    if (q->type == OP_RSC_STATUS_REQ) {
        note_asker(s, e, q);
        a->type = OP_RSC_STATUS;
        fill_status(e, a);
    } else {
        a->type = OP_RSC_DATA;
        fill_status(e, a);
        a->seq = q->seq;
        bool held = e != NULL && e->completed == q->seq && q->offset <= e->bytes;
        a->offset = held ? q->offset : 0;
        a->len = 0;
        if (held) {
            size_t left = e->bytes - q->offset;
            a->len = (uint32_t)(left < OP_RSC_MAX_DATA ? left : OP_RSC_MAX_DATA);
            a->data = e->result + q->offset;
        } else {
            a->total = 0;
        }
    }
    s->c[OP_RSC_C_requests]++;
}

/* A request in, its answer queued: the service is an engine of the one
 * driver, a stateless handler on the udp backend. */
static void serve_one(void *eng, const struct op_pkt *pkt, uint64_t now, struct op_txq *out)
{
    struct op_rsc_svc *s = eng;
    struct op_rsc_msg q, a;
    (void)now;
    if (op_rsc_decode(pkt->data, pkt->len, &q) != OP_OK ||
        (q.type != OP_RSC_STATUS_REQ && q.type != OP_RSC_FETCH_REQ)) {
        s->c[OP_RSC_C_malformed]++;
        return;
    }
    /* answered and encoded under the lock: a.data points at a result that
     * the next completed call overwrites */
    struct op_pkt *p = op_txq_next(out);
    pthread_mutex_lock(&s->mu);
    answer(s, &q, &a);
    p->len = (uint32_t)op_rsc_encode(&a, p->data, OP_IO_BUF_SIZE);
    pthread_mutex_unlock(&s->mu);
    p->flow = op_flow_reverse(&pkt->flow);
    if (p->len > 0) /* lost like any datagram if it fails: the asker asks again */
        op_txq_commit(out);
}

static const struct op_engine_ops service_ops = {.name = "rescue", .input = serve_one};

static void *serve(void *arg)
{
    struct op_rsc_svc *s = arg;
    struct op_io *io = NULL;
    struct op_loop *loop = NULL;
    struct op_loop_config c = {.burst = 16};
    op_status_t st = op_io_udp_adopt(s->fd, &io);
    c.io = io;
    if (st == OP_OK && (st = op_loop_create(&c, &loop)) == OP_OK)
        st = op_loop_add(loop, &service_ops, s);
    while (st == OP_OK && !atomic_load(&s->stop))
        (void)op_loop_run_once(loop, op_now_ns() + SVC_POLL_MS * OP_NS_PER_MS);
    op_loop_destroy(loop);
    op_io_close(io);
    return NULL;
}

op_status_t op_rsc_svc_open(uint32_t ip, uint16_t port, struct op_rsc_svc **out)
{
    struct op_rsc_svc *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return OP_ERR_NOMEM;
    pthread_mutex_init(&s->mu, NULL);
    s->nonce = (uint32_t)op_now_ns();
    s->ip = ip;
    s->fd = bind_udp(ip, port);
    int err = s->fd < 0 ? -s->fd : pthread_create(&s->thread, NULL, serve, s);
    if (err != 0) {
        op_rsc_svc_close(s);
        return op_status_from_errno(err);
    }
    s->started = true;
    *out = s;
    return OP_OK;
}

static void entry_free(struct op_rsc_entry *e)
{
    if (e != NULL)
        free(e->result);
    free(e);
}

void op_rsc_svc_close(struct op_rsc_svc *s)
{
    if (s == NULL)
        return;
    atomic_store(&s->stop, true);
    if (s->started)
        pthread_join(s->thread, NULL);
    if (s->fd >= 0)
        close(s->fd);
    for (int i = 0; i < s->n_live; i++)
        entry_free(s->live[i]);
    for (int i = 0; i < SVC_RETIRED; i++)
        entry_free(s->retired[i]);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void op_rsc_svc_counters(struct op_rsc_svc *s, uint64_t out[OP_RSC_C_COUNT_])
{
    for (int i = 0; i < OP_RSC_C_COUNT_; i++)
        out[i] = s != NULL ? s->c[i] : 0;
}

struct op_rsc_entry *op_rsc_entry_open(struct op_rsc_svc *s, uint32_t job, uint32_t comm)
{
    struct op_rsc_entry *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return NULL;
    e->job = job;
    e->comm = comm;
    pthread_mutex_lock(&s->mu);
    bool room = s->n_live < SVC_MAX_ENTRIES;
    if (room)
        s->live[s->n_live++] = e;
    pthread_mutex_unlock(&s->mu);
    if (!room) {
        free(e);
        return NULL;
    }
    return e;
}

void op_rsc_entry_close(struct op_rsc_svc *s, struct op_rsc_entry *e)
{
    if (e == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n_live; i++)
        if (s->live[i] == e)
            s->live[i] = s->live[--s->n_live];
    e->state = OP_RSC_IDLE;
    struct op_rsc_entry **slot = &s->retired[s->next_retired++ % SVC_RETIRED];
    entry_free(*slot);
    *slot = e;
    pthread_mutex_unlock(&s->mu);
}

static void set_state(struct op_rsc_svc *s, struct op_rsc_entry *e, uint8_t state, uint64_t seq)
{
    pthread_mutex_lock(&s->mu);
    e->state = state;
    e->seq = seq;
    pthread_mutex_unlock(&s->mu);
}

void op_rsc_call_begin(struct op_rsc_svc *s, struct op_rsc_entry *e, uint64_t seq)
{
    atomic_store(&e->cancel, false);
    pthread_mutex_lock(&s->mu);
    e->began_ns = op_now_ns();
    pthread_mutex_unlock(&s->mu);
    set_state(s, e, OP_RSC_IN_CALL, seq);
}

void op_rsc_give_up(struct op_rsc_svc *s, struct op_rsc_entry *e)
{
    set_state(s, e, OP_RSC_GAVE_UP, e->seq);
}

bool op_rsc_gave_up(struct op_rsc_svc *s, struct op_rsc_entry *e)
{
    pthread_mutex_lock(&s->mu);
    bool gave = e->state == OP_RSC_GAVE_UP;
    pthread_mutex_unlock(&s->mu);
    return gave;
}

op_status_t op_rsc_call_done(struct op_rsc_svc *s, struct op_rsc_entry *e, uint64_t seq,
                             const void *result, size_t bytes, bool settled)
{
    op_status_t st = OP_OK;
    pthread_mutex_lock(&s->mu);
    if (!settled && e->state == OP_RSC_GAVE_UP && e->seq == seq) {
        pthread_mutex_unlock(&s->mu);
        return OP_ERR_STATE; /* told the others it gave the call up */
    }
    if (bytes > e->cap) {
        uint8_t *p = realloc(e->result, bytes);
        if (p != NULL) {
            e->result = p;
            e->cap = bytes;
        }
    }
    if (bytes <= e->cap) {
        memcpy(e->result, result, bytes);
        e->bytes = bytes;
    } else {
        e->bytes = 0; /* no copy to hand out: a peer that needs it must redo */
        st = OP_ERR_NOMEM;
    }
    e->completed = seq;
    e->state = OP_RSC_IDLE;
    pthread_mutex_unlock(&s->mu);
    return st;
}

atomic_bool *op_rsc_cancel_flag(struct op_rsc_entry *e) { return &e->cancel; }

/* ---- the asking side: steps that never block, so a nonblocking call can
 * settle from inside MPI_Test; each asker has its own socket, so several
 * groups settling at once never read each other's answers */

op_status_t op_rsc_asker_open(struct op_rsc_svc *s, struct op_rsc_asker *a)
{
    *a = (struct op_rsc_asker){.fd = bind_udp(s->ip, 0)};
    return a->fd >= 0 ? OP_OK : op_status_from_errno(-a->fd);
}

void op_rsc_asker_close(struct op_rsc_asker *a)
{
    if (a->fd >= 0)
        close(a->fd);
    a->fd = -1;
}

/* One datagram answering the current nonce, if one is there. */
static bool answer_in(struct op_rsc_svc *s, struct op_rsc_asker *a, struct op_rsc_msg *m,
                      uint32_t *from, uint16_t *from_port)
{
    struct sockaddr_in sa;
    socklen_t al = sizeof(sa);
    for (;;) {
        ssize_t n = recvfrom(a->fd, a->rx, sizeof(a->rx), MSG_DONTWAIT, (struct sockaddr *)&sa, &al);
        if (n < 0)
            return false;
        if (op_rsc_decode(a->rx, (size_t)n, m) != OP_OK) {
            s->c[OP_RSC_C_malformed]++;
            continue;
        }
        if (m->nonce == a->nonce) { /* else an answer to an earlier question */
            *from = ntohl(sa.sin_addr.s_addr);
            *from_port = ntohs(sa.sin_port);
            return true;
        }
    }
}

static uint16_t peer_port(const struct op_rsc_ask *q, int i)
{
    return q->ports != NULL ? q->ports[i] : q->port;
}

static void send_status_reqs(struct op_rsc_svc *s, struct op_rsc_asker *a,
                             const struct op_rsc_ask *q, const struct op_rsc_peer *out)
{
    for (int i = 0; i < q->n; i++)
        if (!out[i].answered)
            send_to(a->fd, q->ips[i], peer_port(q, i), &a->q);
    a->sent_ns = op_now_ns();
    s->c[OP_RSC_C_resends] += a->rounds++ > 0;
}

void op_rsc_ask_start(struct op_rsc_svc *s, struct op_rsc_asker *a, struct op_rsc_entry *e,
                      const struct op_rsc_ask *q, struct op_rsc_peer *out)
{
    pthread_mutex_lock(&s->mu);
    a->q = (struct op_rsc_msg){.type = OP_RSC_STATUS_REQ, .job = e->job, .comm = e->comm};
    fill_status(e, &a->q);
    a->q.total = 0;
    pthread_mutex_unlock(&s->mu);
    a->q.nonce = a->nonce = ++s->nonce;
    a->rounds = 0;
    a->missing = q->n;
    a->end_ns = op_now_ns() + q->wait_ns;
    memset(out, 0, sizeof(*out) * (size_t)q->n);
    send_status_reqs(s, a, q, out);
}

bool op_rsc_ask_step(struct op_rsc_svc *s, struct op_rsc_asker *a, const struct op_rsc_ask *q,
                     struct op_rsc_peer *out)
{
    struct op_rsc_msg m;
    uint32_t from;
    uint16_t from_port;
    while (a->missing > 0 && answer_in(s, a, &m, &from, &from_port))
        for (int i = 0; i < q->n; i++)
            if (q->ips[i] == from && peer_port(q, i) == from_port && !out[i].answered &&
                m.type == OP_RSC_STATUS) {
                out[i] = (struct op_rsc_peer){.answered = true, .state = m.state, .seq = m.seq,
                                              .completed = m.completed, .total = m.total,
                                              .in_call_ms = m.offset};
                a->missing--;
            }
    uint64_t now = op_now_ns();
    if (a->missing == 0 || now >= a->end_ns)
        return true;
    if (now - a->sent_ns >= ASK_RESEND_NS)
        send_status_reqs(s, a, q, out);
    return false;
}

static void send_fetch_req(struct op_rsc_svc *s, struct op_rsc_asker *a)
{
    a->q.offset = (uint32_t)a->got;
    a->q.nonce = a->nonce = ++s->nonce;
    send_to(a->fd, a->ip, a->port, &a->q);
    a->sent_ns = op_now_ns();
}

void op_rsc_fetch_start(struct op_rsc_svc *s, struct op_rsc_asker *a, struct op_rsc_entry *e,
                        uint32_t ip, uint16_t port, uint64_t seq, void *buf, size_t bytes,
                        uint64_t deadline_ns)
{
    a->q = (struct op_rsc_msg){.type = OP_RSC_FETCH_REQ, .job = e->job, .comm = e->comm,
                               .seq = seq};
    a->ip = ip;
    a->port = port;
    a->buf = buf;
    a->bytes = bytes;
    a->got = 0;
    a->end_ns = deadline_ns;
    send_fetch_req(s, a);
}

op_status_t op_rsc_fetch_step(struct op_rsc_svc *s, struct op_rsc_asker *a)
{
    struct op_rsc_msg m;
    uint32_t from;
    uint16_t from_port;
    while (a->got < a->bytes && answer_in(s, a, &m, &from, &from_port)) {
        if (from != a->ip || from_port != a->port || m.type != OP_RSC_DATA)
            continue;
        /* not held, or a result of another size than this call's */
        if (m.total != a->bytes || m.offset != a->got || m.len == 0)
            return OP_ERR_STATE;
        memcpy(a->buf + a->got, m.data, m.len);
        a->got += m.len;
        s->c[OP_RSC_C_fetch_chunks]++;
        if (a->got < a->bytes)
            send_fetch_req(s, a);
    }
    if (a->got == a->bytes)
        return OP_OK;
    uint64_t now = op_now_ns();
    if (now >= a->end_ns)
        return OP_ERR_TIMEOUT;
    if (now - a->sent_ns >= ASK_RESEND_NS) {
        s->c[OP_RSC_C_resends]++;
        send_fetch_req(s, a);
    }
    return OP_INPROGRESS;
}

/* Until the asker's socket has something or ms pass. */
static void idle(const struct op_rsc_asker *a, int ms)
{
    (void)op_io_wait_fd(a->fd, OP_IO_IN, op_io_deadline_in_ms(ms));
}

void op_rsc_poll(struct op_rsc_svc *s, struct op_rsc_entry *e, const uint32_t *peer_ips, int n,
                 uint16_t port, uint64_t wait_ns, struct op_rsc_peer *out)
{
    struct op_rsc_asker a;
    const struct op_rsc_ask q = {.ips = peer_ips, .n = n, .port = port, .wait_ns = wait_ns};
    memset(out, 0, sizeof(*out) * (size_t)n);
    if (op_rsc_asker_open(s, &a) != OP_OK)
        return; /* nobody answered, as far as the caller can tell */
    op_rsc_ask_start(s, &a, e, &q, out);
    while (!op_rsc_ask_step(s, &a, &q, out))
        idle(&a, 5);
    op_rsc_asker_close(&a);
}

op_status_t op_rsc_fetch(struct op_rsc_svc *s, struct op_rsc_entry *e, uint32_t ip, uint16_t port,
                         uint64_t seq, void *buf, size_t bytes, uint64_t deadline_ns)
{
    struct op_rsc_asker a;
    op_status_t opened = op_rsc_asker_open(s, &a);
    if (opened != OP_OK)
        return opened;
    op_rsc_fetch_start(s, &a, e, ip, port, seq, buf, bytes, deadline_ns);
    op_status_t st;
    while ((st = op_rsc_fetch_step(s, &a)) == OP_INPROGRESS)
        idle(&a, 5);
    op_rsc_asker_close(&a);
    return st;
}
