/* The rescue service of one process: a thread that answers the other
 * leaders from the entries (one per group this process leads), and the
 * asking side, which the caller's thread runs on a socket of its own so the
 * two never read each other's datagrams. The entries' state is what the MPI
 * library sets at each call; the lock is taken once per call, uncontended
 * unless a peer is asking. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "offpath/rescue.h"

#define SVC_MAX_ENTRIES 256
#define SVC_RETIRED 16                        /* closed entries still answering */
#define SVC_POLL_MS 100                       /* how often the thread looks at stop */
#define ASK_RESEND_NS (20 * OP_NS_PER_MS)

struct op_rsc_entry {
    uint32_t job, comm;
    uint8_t state;
    uint64_t seq, completed;
    uint8_t *result; /* of call `completed` */
    size_t bytes, cap;
    atomic_bool abort;
};

struct op_rsc_svc {
    int fd;  /* the thread's: requests in, answers out */
    int ask; /* the caller's: its requests out, answers in */
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

static void fill_status(const struct op_rsc_entry *e, struct op_rsc_msg *m)
{
    m->state = e != NULL ? e->state : OP_RSC_UNKNOWN;
    m->seq = e != NULL ? e->seq : 0;
    m->completed = e != NULL ? e->completed : 0;
    m->total = e != NULL ? (uint32_t)e->bytes : 0;
}

/* An asker that gave up the call this group waits in: the switch will not
 * finish it (the asker stopped sending), so stop waiting now. */
static void note_asker(struct op_rsc_svc *s, struct op_rsc_entry *e, const struct op_rsc_msg *q)
{
    if (e != NULL && q->state == OP_RSC_GAVE_UP && e->state == OP_RSC_IN_CALL && e->seq == q->seq &&
        !atomic_exchange(&e->abort, true))
        s->c[OP_RSC_C_aborts]++;
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

static void serve_one(struct op_rsc_svc *s)
{
    uint8_t buf[OP_RSC_MAX_MSG + 1];
    struct sockaddr_in from;
    socklen_t fl = sizeof(from);
    ssize_t n = recvfrom(s->fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
    if (n < 0)
        return;
    struct op_rsc_msg q, a;
    if (op_rsc_decode(buf, (size_t)n, &q) != OP_OK ||
        (q.type != OP_RSC_STATUS_REQ && q.type != OP_RSC_FETCH_REQ)) {
        s->c[OP_RSC_C_malformed]++;
        return;
    }
    /* answered and sent under the lock: a.data points at a result that the
     * next completed call overwrites */
    pthread_mutex_lock(&s->mu);
    answer(s, &q, &a);
    send_to(s->fd, ntohl(from.sin_addr.s_addr), ntohs(from.sin_port), &a);
    pthread_mutex_unlock(&s->mu);
}

static void *serve(void *arg)
{
    struct op_rsc_svc *s = arg;
    struct pollfd p = {.fd = s->fd, .events = POLLIN};
    while (!atomic_load(&s->stop))
        if (poll(&p, 1, SVC_POLL_MS) > 0)
            serve_one(s);
    return NULL;
}

op_status_t op_rsc_svc_open(uint32_t ip, uint16_t port, struct op_rsc_svc **out)
{
    struct op_rsc_svc *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return OP_ERR_NOMEM;
    pthread_mutex_init(&s->mu, NULL);
    s->nonce = (uint32_t)op_now_ns();
    s->fd = bind_udp(ip, port);
    s->ask = s->fd >= 0 ? bind_udp(ip, 0) : -1;
    if (s->fd < 0 || s->ask < 0 || pthread_create(&s->thread, NULL, serve, s) != 0) {
        op_rsc_svc_close(s);
        return OP_ERR_IO;
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
    if (s->ask >= 0)
        close(s->ask);
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
    atomic_store(&e->abort, false);
    set_state(s, e, OP_RSC_IN_CALL, seq);
}

void op_rsc_give_up(struct op_rsc_svc *s, struct op_rsc_entry *e)
{
    set_state(s, e, OP_RSC_GAVE_UP, e->seq);
}

op_status_t op_rsc_call_done(struct op_rsc_svc *s, struct op_rsc_entry *e, uint64_t seq,
                             const void *result, size_t bytes)
{
    op_status_t st = OP_OK;
    pthread_mutex_lock(&s->mu);
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

atomic_bool *op_rsc_abort_flag(struct op_rsc_entry *e) { return &e->abort; }

/* ---- the asking side */

static void my_status(struct op_rsc_svc *s, struct op_rsc_entry *e, struct op_rsc_msg *m)
{
    pthread_mutex_lock(&s->mu);
    *m = (struct op_rsc_msg){.type = OP_RSC_STATUS_REQ, .job = e->job, .comm = e->comm};
    fill_status(e, m);
    m->total = 0;
    pthread_mutex_unlock(&s->mu);
}

/* One answer to our nonce from ip, or false when the deadline passed. */
static bool await(struct op_rsc_svc *s, uint32_t nonce, uint64_t until, struct op_rsc_msg *m,
                  uint32_t *from, uint8_t *buf)
{
    for (;;) {
        uint64_t now = op_now_ns();
        if (now >= until)
            return false;
        struct pollfd p = {.fd = s->ask, .events = POLLIN};
        int ms = (int)((until - now + OP_NS_PER_MS - 1) / OP_NS_PER_MS);
        if (poll(&p, 1, ms) <= 0)
            continue;
        struct sockaddr_in a;
        socklen_t al = sizeof(a);
        ssize_t n = recvfrom(s->ask, buf, OP_RSC_MAX_MSG + 1, MSG_DONTWAIT, (struct sockaddr *)&a,
                             &al);
        if (n < 0)
            continue;
        if (op_rsc_decode(buf, (size_t)n, m) != OP_OK) {
            s->c[OP_RSC_C_malformed]++;
            continue;
        }
        if (m->nonce == nonce) {
            *from = ntohl(a.sin_addr.s_addr);
            return true;
        }
    }
}

void op_rsc_poll(struct op_rsc_svc *s, struct op_rsc_entry *e, const uint32_t *peer_ips, int n,
                 uint16_t port, uint64_t wait_ns, struct op_rsc_peer *out)
{
    struct op_rsc_msg q, a;
    uint8_t buf[OP_RSC_MAX_MSG + 1];
    my_status(s, e, &q);
    q.nonce = ++s->nonce;
    memset(out, 0, sizeof(*out) * (size_t)n);
    int missing = n;
    uint64_t end = op_now_ns() + wait_ns;
    for (bool first = true; missing > 0 && op_now_ns() < end; first = false) {
        for (int i = 0; i < n; i++)
            if (!out[i].answered) {
                send_to(s->ask, peer_ips[i], port, &q);
                s->c[OP_RSC_C_resends] += !first;
            }
        uint64_t round = op_now_ns() + ASK_RESEND_NS;
        uint32_t from;
        while (missing > 0 && await(s, q.nonce, round < end ? round : end, &a, &from, buf))
            for (int i = 0; i < n; i++)
                if (peer_ips[i] == from && !out[i].answered && a.type == OP_RSC_STATUS) {
                    out[i] = (struct op_rsc_peer){.answered = true, .state = a.state, .seq = a.seq,
                                                  .completed = a.completed, .total = a.total};
                    missing--;
                }
    }
}

op_status_t op_rsc_fetch(struct op_rsc_svc *s, struct op_rsc_entry *e, uint32_t ip, uint16_t port,
                         uint64_t seq, void *buf, size_t bytes, uint64_t deadline_ns)
{
    uint8_t rx[OP_RSC_MAX_MSG + 1];
    struct op_rsc_msg q = {.type = OP_RSC_FETCH_REQ, .job = e->job, .comm = e->comm, .seq = seq};
    size_t got = 0;
    while (got < bytes) {
        q.offset = (uint32_t)got;
        q.nonce = ++s->nonce;
        struct op_rsc_msg a;
        uint32_t from = 0;
        bool ok = false;
        while (!ok) {
            if (op_now_ns() >= deadline_ns)
                return OP_ERR_TIMEOUT;
            send_to(s->ask, ip, port, &q);
            ok = await(s, q.nonce, op_now_ns() + ASK_RESEND_NS, &a, &from, rx) && from == ip &&
                 a.type == OP_RSC_DATA;
            s->c[OP_RSC_C_resends] += !ok;
        }
        /* not held, or a result of another size than this call's */
        if (a.total != bytes || a.offset != got || (a.len == 0 && bytes > 0))
            return OP_ERR_STATE;
        memcpy((uint8_t *)buf + got, a.data, a.len);
        got += a.len;
        s->c[OP_RSC_C_fetch_chunks]++;
    }
    return OP_OK;
}
