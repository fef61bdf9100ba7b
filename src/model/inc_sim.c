/* The in-network Allreduce as implemented (src/inc, src/switch), as S4U
 * actors: one per leader, one per switch, one-shot timers per leader under
 * loss. Chunks of max_data bytes, a window of slots (chunk seq in slot seq %
 * window, sent only after seq - window's result), exactly-once aggregation
 * per slot with a contributor bitmap, a TOR's partial up to the SPINE, the
 * root's result multicast down, the previous round's result kept for
 * retransmissions; leaders re-send a chunk at once when a later-sent
 * chunk's result came first (RACK), and the oldest outstanding one on a
 * timeout with backoff (src/inc/reduce.c). */
#include <simgrid/actor.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/mailbox.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

enum { COLLECTING, WAIT_PARENT, DONE };

struct slot {
    uint32_t seq, count;
    uint8_t state;
    double last_up;
    uint8_t *seen; /* one byte per child */
};

struct inc;

struct sw {
    struct inc *m;
    unsigned n_children, up_index; /* its child number at the parent */
    sg_mailbox_t mb, parent; /* parent NULL: the root */
    sg_mailbox_t *children;
    struct slot *slots;
    uint64_t rng;
    struct mdl_outq out;
    uint32_t down_first, down_n, up_first, up_n; /* batching: this wake's runs */
    bool awake;
    char name[48];
};

#define RTT_SAMPLES 16 /* src/inc's ENG_RTT_SAMPLES */
#define RTO_MAX_S 0.2 /* src/inc's rto_max_ns */
/* src/inc counts in nanoseconds: a tick within one of its time is on time
 * (a double's rounding must not make a tick early and re-arm it forever) */
#define TICK_EPS_S 1e-9

struct leader {
    struct inc *m;
    unsigned id, child_index;
    sg_mailbox_t mb, tor;
    uint64_t rng;
    double *sent_at, rto;
    double retx_at;   /* the timer's next check (src/inc's retx_at_ns) */
    double tick_at;   /* the earliest tick pending (< 0: none known) */
    double rack_sent; /* the latest first sending delivered (< 0: none yet) */
    double progress;  /* the latest result */
    double rtt[RTT_SAMPLES]; /* the latest round trips */
    unsigned n_rtt;
    uint8_t *got, *resent;
    uint32_t lo, next, n_got; /* lo: the oldest chunk without its result */
    bool timers;
    struct mdl_outq out;
    char name[48];
};

struct inc {
    struct mdl_run *r;
    unsigned window, train; /* in trains of `train` chunks */
    bool batch;           /* GRO/GSO: a wake's packets to one place leave as one datagram */
    uint32_t chunks;      /* trains simulated per leader */
    uint32_t cap;         /* and at most (chunks grows while the leaders poll) */
    double spin_until;    /* the leaders poll until then (shared cores; else < t0) */
    long pkt_bytes;
    double chunk_bytes;   /* data bytes a chunk */
    double check_f;       /* share of a leader's between-call checks inside others' calls */
    double sw_cost, loss, late, t0; /* loss: a frame's on a link; late: a wake's */
    double *done_at;      /* per chunk: the last leader's arrival */
    uint8_t *retx_round;  /* per chunk: a leader retransmitted it (the switch flags its result) */
    uint64_t retransmissions, fast_retransmits; /* all, and those RACK's */
    unsigned n_leaders, n_tors;
    struct leader *leaders;
    struct sw *tors, spine;
};

static void send_pkt(struct mdl_outq *q, sg_mailbox_t to, void *msg, long bytes, double loss,
                     uint64_t *rng)
{
    if (loss > 0 && mdl_rand(rng) < loss)
        return;
    mdl_send(q, to, msg, bytes);
}

/* A packet that finds its receiver blocked wakes it: wake_s of CPU, and
 * when the cores are all taken by runnable leaders and switches (on this
 * machine 17 processes share 2 cores) it first waits on a run queue, runq_s
 * for each process in excess of the cores over the cores, then displaces a
 * running process (ctx_s more CPU). A leader that still polls (until
 * spin_until: src/inc's run() yields the core between polls, so it leaves
 * the run queue to others) takes the packet without a wake-up and without
 * displacing anyone (it takes it at its turn, after a yield: charged
 * ctx_s, 4 leaders' small calls came out +36..+65 % where 8 and 16 were
 * within 15 %); it still waits its turn on crowded cores. The time it
 * polled is CPU, counted apart (spin_cpu: it delays no one). */
static void *wake_to(struct mdl_run *r, const char *name, sg_mailbox_t mb, bool *awake,
                     bool is_switch, double spin_until, bool *woken)
{
    const struct op_model_platform *p = r->p;
    /* the call's first packet finds a switch asleep since the last call;
     * a cluster's NICs poll: nothing to charge, no listen to pay for */
    bool costs = p->shared_cores > 0 || p->wake_s > 0 || p->sw_wake_s > 0;
    bool waiting = costs && (!*awake || !sg_mailbox_listen(name));
    double from = simgrid_get_clock();
    *awake = true;
    bool polls = waiting && spin_until > from;
    if (waiting && !polls)
        r->runnable--;
    void *msg = sg_mailbox_get(mb);
    double now = simgrid_get_clock();
    if (polls)
        r->spin_cpu += fmin(now, spin_until) - from;
    bool polled = waiting && now <= spin_until;
    if (waiting) {
        r->runnable += !polls;
        bool crowded = p->shared_cores > 0 && r->runnable > p->shared_cores;
        /* behind the processes in excess of the cores, shared by the cores */
        if (crowded && p->runq_s > 0)
            sg_actor_sleep_for(p->runq_s * (r->runnable - p->shared_cores) / p->shared_cores);
        double cpu = polled ? 0 : (is_switch ? p->sw_wake_s : p->wake_s) + (crowded ? p->ctx_s : 0);
        mdl_cpu(r, cpu);
        r->switch_cpu += is_switch ? cpu : 0;
    }
    waiting = waiting && !polled; /* a polled packet woke no one */
    *woken = waiting;
    return msg;
}

/* A frame that wakes its receiver comes too late for the leaders' timers
 * with probability `late` (a namespace topology's: late_loss): taken as
 * lost, a timeout recovers it, as the late result's retransmission does. */
static void *receive(struct inc *m, const char *name, sg_mailbox_t mb, bool *awake,
                     bool is_switch, double spin_until, uint64_t *rng)
{
    for (;;) {
        bool woken;
        void *msg = wake_to(m->r, name, mb, awake, is_switch, spin_until, &woken);
        if (!woken || m->late <= 0 || mdl_kind(msg) == MDL_TICK || mdl_rand(rng) >= m->late)
            return msg;
    }
}

/* A packet's CPU, more while the cores are crowded. */
static void pkt_cpu(struct mdl_run *r, double seconds)
{
    const struct op_model_platform *p = r->p;
    bool crowded = p->shared_cores > 0 && r->runnable > p->shared_cores;
    mdl_cpu(r, seconds * (crowded ? 1 + p->crowd_f : 1));
}

/* ---- switches */

static void multicast_run(struct sw *s, uint32_t first, unsigned n)
{
    for (unsigned i = 0; i < s->n_children; i++)
        send_pkt(&s->out, s->children[i], mdl_msg_run(MDL_RESULT, 0, first, n),
                 n * s->m->pkt_bytes, s->m->loss, &s->rng);
}

static void up_run(struct sw *s, uint32_t first, unsigned n)
{
    send_pkt(&s->out, s->parent, mdl_msg_run(MDL_CONTRIB, s->up_index, first, n),
             n * s->m->pkt_bytes, s->m->loss, &s->rng);
}

/* The runs this wake finished leave at its end (src/switch/run.c groups a
 * wake's results by destination, the io sends each group as one GSO
 * datagram); a gap in the sequence closes a run early. */
static void flush(struct sw *s)
{
    if (s->down_n > 0)
        multicast_run(s, s->down_first, s->down_n);
    if (s->up_n > 0)
        up_run(s, s->up_first, s->up_n);
    s->down_n = s->up_n = 0;
}

static void add_run(struct sw *s, uint32_t *first, uint32_t *n, uint32_t seq)
{
    if (*n > 0 && (seq != *first + *n || *n == MDL_RUN_MAX))
        flush(s);
    if (*n == 0)
        *first = seq;
    (*n)++;
}

static void multicast(struct sw *s, uint32_t seq)
{
    if (s->m->batch)
        add_run(s, &s->down_first, &s->down_n, seq);
    else
        multicast_run(s, seq, 1);
}

static void complete(struct sw *s, struct slot *sl)
{
    if (s->parent != NULL) {
        sl->state = WAIT_PARENT;
        sl->last_up = simgrid_get_clock();
        if (s->m->batch)
            add_run(s, &s->up_first, &s->up_n, sl->seq);
        else
            up_run(s, sl->seq, 1);
    } else {
        sl->state = DONE;
        multicast(s, sl->seq);
    }
}

static void answer_duplicate(struct sw *s, struct slot *sl, unsigned child)
{
    double now = simgrid_get_clock();
    if (sl->state == DONE) {
        send_pkt(&s->out, s->children[child], mdl_msg(MDL_RESULT, 0, sl->seq), s->m->pkt_bytes, s->m->loss,
                 &s->rng);
    } else if (sl->state == WAIT_PARENT && now - sl->last_up >= 1e-3) {
        sl->last_up = now; /* at most once a millisecond, however many ask */
        send_pkt(&s->out, s->parent, mdl_msg(MDL_CONTRIB, s->up_index, sl->seq), s->m->pkt_bytes,
                 s->m->loss, &s->rng);
    }
}

static void contribution(struct sw *s, unsigned child, uint32_t seq)
{
    struct inc *m = s->m;
    struct slot *sl = &s->slots[seq % m->window];
    if (seq + m->window == sl->seq) { /* the kept previous round */
        send_pkt(&s->out, s->children[child], mdl_msg(MDL_RESULT, 0, seq), m->pkt_bytes, m->loss, &s->rng);
        return;
    }
    if (seq == sl->seq + m->window && sl->state == DONE) {
        sl->seq = seq;
        sl->count = 0;
        sl->state = COLLECTING;
        memset(sl->seen, 0, s->n_children);
    }
    if (seq != sl->seq)
        return; /* stale */
    if (sl->seen[child]) {
        answer_duplicate(s, sl, child);
        return;
    }
    if (m->sw_cost > 0) {
        double before = m->r->cpu;
        pkt_cpu(m->r, m->sw_cost);
        m->r->switch_cpu += m->r->cpu - before;
    }
    sl->seen[child] = 1;
    if (++sl->count == s->n_children)
        complete(s, sl);
}

static void switch_packet(struct sw *s, unsigned kind, unsigned from, uint32_t seq)
{
    if (kind == MDL_CONTRIB) {
        contribution(s, from, seq);
    } else if (kind == MDL_RESULT) {
        struct slot *sl = &s->slots[seq % s->m->window];
        if (sl->seq == seq && sl->state == WAIT_PARENT) {
            sl->state = DONE;
            multicast(s, sl->seq);
        }
    }
}

/* A switch on a namespace topology's path takes every frame from its
 * ports (AF_XDP) and spends fwd_frame_s of CPU on each, whatever it holds:
 * the measured average over the frames it forwards, aggregates and sends. */
static void frame_cpu(struct sw *s, unsigned frames)
{
    struct mdl_run *r = s->m->r;
    if (r->p->fwd_frame_s <= 0)
        return;
    double before = r->cpu;
    pkt_cpu(r, frames * r->p->fwd_frame_s);
    r->switch_cpu += r->cpu - before;
}

static void switch_datagram(struct sw *s, void *msg)
{
    frame_cpu(s, mdl_count(msg) * s->m->train);
    for (unsigned i = 0; i < mdl_count(msg); i++)
        switch_packet(s, mdl_kind(msg), mdl_from(msg), mdl_seq(msg) + i);
}

/* Bursts a wake takes at most (the switch's loop: up to 16 bursts a wake). */
#define WAKE_DATAGRAMS 16

static void switch_main(int argc, char **argv)
{
    (void)argc, (void)argv;
    struct sw *s = sg_actor_self_get_data();
    sg_mailbox_set_receiver(s->name);
    for (;;) {
        switch_datagram(s, receive(s->m, s->name, s->mb, &s->awake, true, -1, &s->rng));
        for (unsigned k = 1; s->m->batch && k < WAKE_DATAGRAMS && sg_mailbox_listen(s->name); k++)
            switch_datagram(s, sg_mailbox_get(s->mb));
        flush(s);
    }
}

/* ---- leaders */

/* A tick at `at` from a one-shot daemon (it reads its time as it starts, in
 * the same instant: a later arm can only move it earlier, which is safe,
 * the leader checks its own time on every tick). One actor a tick: a
 * sleeping actor cannot be woken earlier, and a result may bring the
 * timer's check forward (src/inc: retx_at = min(retx_at, now + rto)). */
static void tick_main(int argc, char **argv)
{
    (void)argc, (void)argv;
    struct leader *l = sg_actor_self_get_data();
    sg_actor_sleep_until(l->tick_at);
    sg_comm_detach(sg_mailbox_put_init(l->mb, mdl_msg(MDL_TICK, 0, 0), 0), NULL);
}

static void arm(struct leader *l, double at)
{
    double now = simgrid_get_clock();
    if (!l->timers || (l->tick_at >= now && l->tick_at <= at))
        return; /* a pending tick comes in time */
    l->tick_at = at > now ? at : now;
    sg_actor_t a = sg_actor_init(l->name, sg_host_self());
    sg_actor_set_data(a, l);
    sg_actor_start_(a, tick_main, 0, NULL);
    sg_actor_daemonize(a);
}

static void send_run(struct leader *l, uint32_t first, unsigned n)
{
    send_pkt(&l->out, l->tor, mdl_msg_run(MDL_CONTRIB, l->child_index, first, n),
             n * l->m->pkt_bytes, l->m->loss, &l->rng);
}

/* A chunk's CPU and send time; the packet itself goes with its run. */
static void prepare_chunk(struct leader *l, uint32_t seq)
{
    struct inc *m = l->m;
    pkt_cpu(m->r, m->train * m->r->p->leader_pkt_s);
    l->sent_at[seq] = simgrid_get_clock();
}

/* A chunk sent again (src/inc's OP_INC_F_RETX): its result gives no round
 * trip, nor does anyone's in its round (the switch flags it). */
static void resend(struct leader *l, uint32_t seq)
{
    l->resent[seq] = 1;
    l->m->retx_round[seq] = 1;
    l->m->retransmissions++;
    prepare_chunk(l, seq);
    send_run(l, seq, 1);
}

/* A call simulated in part is extrapolated from its last window's rate
 * (mdl_inc_simulate), which must be the rate of leaders that sleep, as
 * they do for the rest of the call: while the last window would start
 * before the leaders stop polling, the simulated part grows by a window.
 * The first leader to reach that window grows it, before any leader can
 * have finished (its last result needs every leader's last chunk). */
static void grow_past_polling(struct inc *m, uint32_t seq)
{
    if (seq + m->window == m->chunks && simgrid_get_clock() < m->spin_until &&
        m->chunks + m->window <= m->cap)
        m->chunks += m->window;
}

/* Every chunk the window allows; batching, as one datagram (GSO). */
static void fill_window(struct leader *l)
{
    uint32_t first = l->next, n = 0;
    while (l->next < l->m->chunks && l->next - l->lo < l->m->window) {
        grow_past_polling(l->m, l->next);
        prepare_chunk(l, l->next++);
        if (!l->m->batch) {
            send_run(l, l->next - 1, 1);
        } else if (++n == MDL_RUN_MAX) {
            send_run(l, first, n);
            first = l->next;
            n = 0;
        }
    }
    if (n > 0)
        send_run(l, first, n);
}

static double min_rtt(const struct leader *l)
{
    double low = 0;
    for (unsigned i = 0; i < l->n_rtt && i < RTT_SAMPLES; i++)
        low = i == 0 || l->rtt[i] < low ? l->rtt[i] : low;
    return low;
}

/* 3 x the smallest of the latest round trips, within [rto_min, rto_max]
 * (src/inc's eng_base_rto); the floor until one is measured (a warm
 * leader's: its first calls measured the path). */
static double base_rto(const struct leader *l)
{
    double floor = l->m->r->p->rto_min_s, rto = 3 * min_rtt(l);
    rto = rto > floor ? rto : floor;
    return rto < RTO_MAX_S ? rto : RTO_MAX_S;
}

/* src/inc's eng_data_timer: the oldest outstanding chunk goes again a
 * timeout after it was sent and after the latest result (results still
 * coming: the path drains a queue), and only it; the timeout doubles. */
static void on_timer(struct leader *l)
{
    double now = simgrid_get_clock();
    if (now >= l->tick_at - TICK_EPS_S)
        l->tick_at = -1;
    if (now < l->retx_at - TICK_EPS_S || l->lo >= l->next) {
        if (l->lo < l->next)
            arm(l, l->retx_at);
        return;
    }
    double due = fmax(l->sent_at[l->lo], l->progress) + l->rto;
    if (now < due - TICK_EPS_S) {
        l->retx_at = due;
    } else {
        resend(l, l->lo);
        l->rto = l->rto * 2 < RTO_MAX_S ? l->rto * 2 : RTO_MAX_S;
        l->retx_at = now + l->rto;
    }
    arm(l, l->retx_at);
}

/* src/inc's resend_lost (RACK): chunks sent a quarter of the least round
 * trip before the latest delivered first sending, still without a result,
 * were lost (theirs or another member's): again now. The scan stops at the
 * first first-sending not yet due. */
static void resend_lost(struct leader *l)
{
    if (l->rack_sent < 0)
        return;
    double due = l->rack_sent - min_rtt(l) / 4;
    for (uint32_t s = l->lo; s < l->next; s++) {
        if (l->got[s])
            continue;
        if (l->sent_at[s] >= due) {
            if (!l->resent[s])
                return;
            continue;
        }
        resend(l, s);
        l->m->fast_retransmits++;
    }
}

static void on_result(struct leader *l, uint32_t seq)
{
    struct inc *m = l->m;
    if (seq >= l->next || l->got[seq])
        return;
    const struct op_model_platform *p = m->r->p;
    pkt_cpu(m->r, m->train * (p->leader_pkt_s +
                              m->chunk_bytes * (p->leader_byte_s + m->check_f * p->check_byte_s)));
    double now = simgrid_get_clock();
    l->got[seq] = 1;
    l->n_got++;
    if (now - m->t0 > m->done_at[seq])
        m->done_at[seq] = now - m->t0;
    l->progress = now;
    if (!l->resent[seq] && l->sent_at[seq] > l->rack_sent)
        l->rack_sent = l->sent_at[seq];
    /* Karn's rule for the group: no sample from a round anyone retransmitted in */
    if (!l->resent[seq] && !m->retx_round[seq])
        l->rtt[l->n_rtt++ % RTT_SAMPLES] = now - l->sent_at[seq];
    l->rto = base_rto(l); /* progress: the backoff ends */
    if (l->retx_at > now + l->rto)
        l->retx_at = now + l->rto;
    while (l->lo < l->next && l->got[l->lo])
        l->lo++;
    if (l->n_got < m->chunks) {
        resend_lost(l);
        arm(l, l->retx_at);
    }
}

static void leader_datagram(struct leader *l, void *msg)
{
    if (mdl_kind(msg) == MDL_TICK) {
        on_timer(l);
    } else if (mdl_kind(msg) == MDL_RESULT) {
        for (unsigned i = 0; i < mdl_count(msg); i++)
            on_result(l, mdl_seq(msg) + i);
    }
}

static void leader_main(int argc, char **argv)
{
    (void)argc, (void)argv;
    struct leader *l = sg_actor_self_get_data();
    bool awake = true; /* it starts the call: awake */
    double spin_until = l->m->spin_until;
    sg_mailbox_set_receiver(l->name);
    l->retx_at = simgrid_get_clock() + l->rto;
    fill_window(l);
    arm(l, l->retx_at);
    while (l->n_got < l->m->chunks) {
        leader_datagram(l, receive(l->m, l->name, l->mb, &awake, false, spin_until, &l->rng));
        for (unsigned k = 1; l->m->batch && k < WAKE_DATAGRAMS && sg_mailbox_listen(l->name); k++)
            leader_datagram(l, sg_mailbox_get(l->mb));
        fill_window(l);
    }
    l->m->r->runnable--; /* its process has left the cores */
    mdl_outq_drain(&l->out);
}

/* ---- one run */

static void sw_init(struct inc *m, struct sw *s, const char *name, unsigned n_children,
                    sg_mailbox_t parent, unsigned up_index)
{
    snprintf(s->name, sizeof(s->name), "r%u.%s", m->r->run_id, name);
    s->m = m;
    s->mb = sg_mailbox_by_name(s->name);
    s->parent = parent;
    s->up_index = up_index;
    s->n_children = n_children;
    s->children = calloc(n_children, sizeof(*s->children));
    s->slots = calloc(m->window, sizeof(*s->slots));
    s->rng = m->r->sc->seed * 7919 + up_index + (parent == NULL ? 0x9e3779b97f4a7c15ull : 1);
    for (unsigned i = 0; i < m->window; i++) {
        s->slots[i].seq = i;
        s->slots[i].seen = calloc(n_children, 1);
    }
}

static void sw_free(struct inc *m, struct sw *s)
{
    for (unsigned i = 0; i < m->window && s->slots != NULL; i++)
        free(s->slots[i].seen);
    free(s->slots);
    free(s->children);
}

static void start(void *data, const char *name, const char *host, void (*code)(int, char **),
                  bool daemon)
{
    sg_actor_t a = sg_actor_init(name, sg_host_by_name(host));
    sg_actor_set_data(a, data);
    sg_actor_start_(a, code, 0, NULL);
    if (daemon)
        sg_actor_daemonize(a);
}

static void leader_init(struct inc *m, struct leader *l, unsigned id, unsigned per_node)
{
    const struct op_model_platform *p = m->r->p;
    unsigned node = id / per_node, tor = node / p->rack_nodes;
    l->m = m;
    l->id = id;
    l->child_index = id - tor * p->rack_nodes * per_node;
    snprintf(l->name, sizeof(l->name), "r%u.L%u", m->r->run_id, id);
    l->mb = sg_mailbox_by_name(l->name);
    l->tor = m->tors[tor].mb;
    l->timers = m->loss > 0 || m->late > 0;
    l->tick_at = l->rack_sent = -1;
    l->rng = m->r->sc->seed * 104729 + id + 1;
    l->rto = p->rto_min_s;
    l->sent_at = calloc(m->cap, sizeof(double));
    l->got = calloc(m->cap, 1);
    l->resent = calloc(m->cap, 1);
    m->tors[tor].children[l->child_index] = l->mb;
}

static void build(struct inc *m, unsigned per_node)
{
    const struct op_model_platform *p = m->r->p;
    unsigned nodes = m->r->nodes;
    m->n_tors = mdl_racks(p, nodes);
    m->n_leaders = nodes * per_node;
    m->tors = calloc(m->n_tors, sizeof(*m->tors));
    m->leaders = calloc(m->n_leaders, sizeof(*m->leaders));
    if (m->n_tors > 1)
        sw_init(m, &m->spine, "S", m->n_tors, NULL, 0);
    for (unsigned t = 0; t < m->n_tors; t++) {
        char name[16];
        unsigned in_rack = nodes - t * p->rack_nodes < p->rack_nodes ? nodes - t * p->rack_nodes
                                                                      : p->rack_nodes;
        snprintf(name, sizeof(name), "T%u", t);
        sw_init(m, &m->tors[t], name, in_rack * per_node, m->n_tors > 1 ? m->spine.mb : NULL, t);
        if (m->n_tors > 1)
            m->spine.children[t] = m->tors[t].mb;
    }
    for (unsigned i = 0; i < m->n_leaders; i++)
        leader_init(m, &m->leaders[i], i, per_node);
}

static void launch(struct inc *m, unsigned per_node)
{
    char host[24];
    if (m->n_tors > 1)
        start(&m->spine, m->spine.name, mdl_host_of(m->r->p, 's', -1, host, sizeof(host)),
              switch_main, true);
    for (unsigned t = 0; t < m->n_tors; t++) {
        start(&m->tors[t], m->tors[t].name, mdl_host_of(m->r->p, 't', (int)t, host, sizeof(host)),
              switch_main, true);
    }
    for (unsigned i = 0; i < m->n_leaders; i++) {
        mdl_host_of(m->r->p, 'n', (int)(i / per_node), host, sizeof(host));
        start(&m->leaders[i], m->leaders[i].name, host, leader_main, false);
    }
}

static void teardown(struct inc *m)
{
    for (unsigned i = 0; i < m->n_leaders; i++) {
        free(m->leaders[i].sent_at);
        free(m->leaders[i].got);
        free(m->leaders[i].resent);
    }
    for (unsigned t = 0; t < m->n_tors; t++)
        sw_free(m, &m->tors[t]);
    if (m->n_tors > 1)
        sw_free(m, &m->spine);
    free(m->tors);
    free(m->leaders);
    free(m->done_at);
    free(m->retx_round);
}

/* Leader-chunks one run simulates at most: beyond, chunks travel in trains. */
#define SIM_BUDGET 8192u

/* Steady state repeats each window: past two windows the remaining chunks
 * are extrapolated from the second window's rate (exact when no loss).
 * Where even two windows of every leader are too many events, g chunks
 * travel as one train (g times the bytes and the per-chunk costs, the same
 * window in bytes): the rate is unchanged, the pipeline fills in coarser
 * steps. */
/* inc_test's leaders check each result between timed calls. With no more
 * leaders than cores they do it together while the switch idles; with more,
 * the calls drift apart and a leader's call shares the cores with the
 * others' checks: the share 1 - cores/leaders of that work is charged inside
 * the call (per byte of each result), the rest only to the CPU a call. */
static double check_share(const struct op_model_platform *p, uint64_t leaders)
{
    if (p->shared_cores == 0 || p->check_byte_s <= 0 || leaders <= p->shared_cores)
        return 0;
    return 1 - (double)p->shared_cores / (double)leaders;
}

/* The leaders' polling CPU over the whole call: the simulated part's, and
 * where the call goes on past it while they still poll, the same share of
 * the extrapolated time up to spin_s. */
static double spin_cpu(const struct op_model_platform *p, double polled, double simulated,
                       double call)
{
    double sim_in = fmin(simulated, p->spin_s), call_in = fmin(call, p->spin_s);
    return sim_in > 0 ? polled * call_in / sim_in : 0;
}

void mdl_inc_simulate(struct mdl_run *r)
{
    const struct op_model_platform *p = r->p;
    const struct op_model_scenario *sc = r->sc;
    bool by_socket = sc->mode == OP_MODEL_SOCKET && p->sockets > 1 && r->ppn >= p->sockets &&
                     (p->socket_max_bytes == 0 || sc->bytes <= p->socket_max_bytes);
    unsigned per_node = by_socket ? p->sockets : 1;
    uint64_t total = mdl_chunks(p, sc->bytes);
    uint64_t leaders = (uint64_t)r->nodes * per_node;
    unsigned train = 1, window = p->window;
    uint64_t trains = total, sim = total < 2ull * window ? total : 2ull * window;
    uint64_t budget = sc->budget ? sc->budget : SIM_BUDGET;
    bool timers = sc->loss > 0 || p->late_loss > 0;
    /* at least two trains in flight, or the window would stop and wait */
    while (leaders * sim > budget && window > 2 && trains > 2) {
        train *= 2;
        window = (p->window + train - 1) / train;
        trains = (total + train - 1) / train;
        sim = trains < 2ull * window ? trains : 2ull * window;
    }
    /* under loss the windows differ: the whole call where the budget allows */
    if (timers && leaders * trains <= budget)
        sim = trains;
    double chunk = (double)mdl_chunk_bytes(p, sc->bytes);
    struct inc m = {
        .r = r, .window = window, .chunks = (uint32_t)sim, .loss = sc->loss, .train = train,
        .late = p->late_loss,
        /* on this machine's loopback a datagram's bytes are copied by the CPUs
         * at its two ends, which the per-packet costs charge (fitted on the
         * CPU the processes spent): no wire time on top (2 GB/s of it made
         * 2 leaders from 16 KiB 30-55 % slow); a topology's links pace them */
        .pkt_bytes = mdl_on_links(p) ? (long)(train * (chunk + MDL_HDR_BYTES)) : 0,
        .chunk_bytes = chunk,
        .sw_cost = train * (p->sw_chunk_s + chunk * p->sw_byte_s),
        /* a lost packet is one packet: under loss every packet travels alone; on
         * a namespace topology's links a datagram is frames a switch takes
         * one by one */
        .batch = p->shared_cores > 0 && !timers && p->fwd_frame_s <= 0,
    };
    m.check_f = check_share(p, leaders);
    /* room to simulate past the leaders' polling (grow_past_polling) */
    uint64_t cap = p->spin_s > 0 && p->shared_cores > 0 && trains > sim ? budget / leaders : sim;
    m.cap = (uint32_t)(cap < sim ? sim : cap < trains ? cap : trains);
    m.done_at = calloc(m.cap, sizeof(double));
    m.retx_round = calloc(m.cap, 1);
    build(&m, per_node);
    m.t0 = simgrid_get_clock();
    m.spin_until = p->shared_cores > 0 && p->spin_s > 0 ? m.t0 + p->spin_s : -1;
    r->runnable = m.n_leaders + m.n_tors + (m.n_tors > 1);
    launch(&m, per_node);
    simgrid_run();
    sim = m.chunks;
    /* under loss a chunk may finish after later ones: the call ends with
     * the last of all, and a window's rate is between such ends */
    double net = 0, first_window = 0;
    for (uint64_t i = 0; i < sim; i++) {
        net = m.done_at[i] > net ? m.done_at[i] : net;
        if (i + 1 == sim - window || (sim <= window && i == 0))
            first_window = net;
    }
    double simulated = net;
    if (trains > sim)
        net += (double)(trains - sim) * (net - first_window) / window;
    r->res->intra_s = op_model_intra(p, r->ppn / per_node, !by_socket && p->sockets > 1 &&
                                                               r->ppn >= p->sockets, sc->bytes);
    r->res->latency_s = net + r->res->intra_s;
    r->res->cpu_s = r->cpu * (double)trains / (double)sim +
                    (1 - m.check_f) * (double)leaders * (double)sc->bytes * p->check_byte_s;
    r->res->cpu_s += spin_cpu(p, r->spin_cpu, simulated, net);
    r->res->switch_cpu_s = r->switch_cpu * (double)trains / (double)sim;
    r->res->chunks = total;
    r->res->sim_steps = sim * train;
    r->res->retransmissions = m.retransmissions;
    r->res->fast_retransmits = m.fast_retransmits;
    r->res->slots = op_model_slots(p, sc->bytes);
    r->res->slot_bytes = 2ull * r->res->slots * mdl_chunk_bytes(p, sc->bytes);
    teardown(&m);
}
