/* The host's Allreduce as the MPIs run it: the schedule of every rank
 * (recursive doubling, ring, Rabenseifner, with the non-power-of-two steps),
 * simulated with one actor per node: in each step a node sends one bundle
 * per destination node carrying all its ranks' messages to it (their
 * per-message costs serialised on its NIC), and its ranks' exchanges inside
 * the node cost the shared-memory closed form. */
#include <simgrid/actor.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/mailbox.h>
#include <stdlib.h>

#include "model_internal.h"

struct sched {
    unsigned alg, P, pof2, rem, lg, ppn, steps;
    uint64_t bytes;
};

struct rank_step {
    int to, from;
    uint64_t msg;
    bool reduce;
};

static int newrank(const struct sched *s, unsigned r)
{
    if (r < 2 * s->rem)
        return r % 2 ? (int)(r / 2) : -1;
    return (int)(r - s->rem);
}

static int realrank(const struct sched *s, unsigned nr)
{
    return nr < s->rem ? (int)(nr * 2 + 1) : (int)(nr + s->rem);
}

/* Steps 0 and last: the non-power-of-two ranks fold in and get the result. */
static void fold(const struct sched *s, unsigned r, bool in, struct rank_step *o)
{
    if (r >= 2 * s->rem)
        return;
    bool odd = r % 2;
    o->msg = s->bytes;
    if (in == !odd)
        o->to = odd ? (int)r - 1 : (int)r + 1;
    else
        o->from = odd ? (int)r - 1 : (int)r + 1;
    o->reduce = in;
}

static void step_of(const struct sched *s, unsigned r, unsigned k, struct rank_step *o)
{
    *o = (struct rank_step){.to = -1, .from = -1};
    if (s->alg == OP_MODEL_ALG_RING) {
        o->to = (int)((r + 1) % s->P);
        o->from = (int)((r + s->P - 1) % s->P);
        o->msg = (s->bytes + s->P - 1) / s->P;
        o->reduce = k < s->P - 1;
        return;
    }
    if (k == 0 || k == s->steps - 1) {
        fold(s, r, k == 0, o);
        return;
    }
    int nr = newrank(s, r);
    if (nr < 0)
        return;
    unsigned i = k - 1, mask;
    if (s->alg == OP_MODEL_ALG_RD) {
        mask = 1u << i;
        o->msg = s->bytes;
        o->reduce = true;
    } else if (i < s->lg) { /* Rabenseifner: reduce-scatter by recursive halving */
        mask = 1u << i;
        o->msg = s->bytes >> (i + 1);
        o->reduce = true;
    } else { /* then allgather by recursive doubling */
        i -= s->lg;
        mask = s->pof2 >> (i + 1);
        o->msg = s->bytes >> (s->lg - i);
    }
    o->to = o->from = realrank(s, (unsigned)nr ^ mask);
    if (o->msg == 0)
        o->msg = 4;
}

static void sched_init(struct sched *s, unsigned alg, unsigned P, unsigned ppn, uint64_t bytes)
{
    *s = (struct sched){.alg = alg, .P = P, .ppn = ppn, .bytes = bytes, .pof2 = 1};
    while (s->pof2 * 2 <= P) {
        s->pof2 *= 2;
        s->lg++;
    }
    s->rem = P - s->pof2;
    if (alg == OP_MODEL_ALG_RING)
        s->steps = 2 * (P - 1);
    else
        s->steps = 2 + s->lg * (alg == OP_MODEL_ALG_RABENSEIFNER ? 2 : 1);
}

struct hostrun;
struct hnode {
    struct hostrun *h;
    unsigned node;
    sg_mailbox_t mb;
    unsigned *stash; /* bundles received per step */
    struct mdl_outq out;
    char name[40];
};

struct hostrun {
    struct mdl_run *r;
    struct sched s;
    unsigned steps; /* simulated */
    double t0, *step_end;
    struct hnode *nodes;
    sg_mailbox_t *mbs;
};

static unsigned add_unique(unsigned *set, unsigned *n, unsigned v)
{
    for (unsigned i = 0; i < *n; i++)
        if (set[i] == v)
            return i;
    set[*n] = v;
    return (*n)++;
}

static double shm_cost(const struct op_model_platform *p, const struct sched *s, unsigned a,
                       unsigned b, uint64_t msg)
{
    unsigned per_socket = s->ppn / p->sockets ? s->ppn / p->sockets : 1;
    bool cross = (a % s->ppn) / per_socket != (b % s->ppn) / per_socket;
    return (cross ? p->shm_xsock_s : p->shm_level_s) + (double)msg * p->shm_byte_s;
}

/* On this machine's emulation a host message is UDP packets of 4096 data
 * bytes (src/hostar), each a system call's CPU at either end; a cluster's
 * NIC moves them without the host. */
#define HOST_PKT_DATA 4096u
static double host_pkts(const struct op_model_platform *p, uint64_t msg)
{
    return p->shared_cores > 0 ? (double)((msg + HOST_PKT_DATA - 1) / HOST_PKT_DATA) : 0;
}

static void node_step(struct hnode *n, unsigned k, unsigned *dest, unsigned *cnt, unsigned *src)
{
    struct hostrun *h = n->h;
    const struct op_model_platform *p = h->r->p;
    unsigned ndest = 0, nsrc = 0, sends = 0;
    uint64_t msg = 0;
    bool reduce = false;
    double intra = 0, t0 = simgrid_get_clock();
    for (unsigned r = n->node * h->s.ppn; r < (n->node + 1) * h->s.ppn; r++) {
        struct rank_step o;
        step_of(&h->s, r, k, &o);
        if (o.to >= 0 && (unsigned)o.to / h->s.ppn != n->node) {
            unsigned i = add_unique(dest, &ndest, (unsigned)o.to / h->s.ppn);
            cnt[i]++;
            sends++;
            msg = o.msg;
        } else if (o.to >= 0) {
            double c = shm_cost(p, &h->s, r, (unsigned)o.to, o.msg);
            intra = c > intra ? c : intra;
        }
        if (o.from >= 0 && (unsigned)o.from / h->s.ppn != n->node) {
            add_unique(src, &nsrc, (unsigned)o.from / h->s.ppn);
            reduce |= o.reduce;
            msg = o.msg;
        }
    }
    if (sends > 0) {
        mdl_cpu(h->r, p->host_msg_s + sends * p->nic_msg_s + host_pkts(p, msg) * p->leader_pkt_s);
        for (unsigned i = 0; i < ndest; i++)
            mdl_send(&n->out, h->mbs[dest[i]], mdl_msg(MDL_BUNDLE, n->node, k),
                     (long)(cnt[i] * (msg + MDL_HDR_BYTES)));
    }
    while (n->stash[k] < nsrc) {
        void *m = sg_mailbox_get(n->mb);
        n->stash[mdl_seq(m)]++;
    }
    if (nsrc > 0)
        mdl_cpu(h->r, nsrc * host_pkts(p, msg) * p->leader_pkt_s +
                       (reduce ? (double)msg * p->host_byte_s : 0));
    double spent = simgrid_get_clock() - t0;
    if (intra > spent)
        sg_actor_sleep_for(intra - spent);
    double end = simgrid_get_clock() - h->t0;
    if (end > h->step_end[k])
        h->step_end[k] = end;
}

static void node_main(int argc, char **argv)
{
    (void)argc, (void)argv;
    struct hnode *n = sg_actor_self_get_data();
    unsigned ppn = n->h->s.ppn;
    unsigned *buf = calloc(4 * (size_t)ppn, sizeof(unsigned));
    sg_mailbox_set_receiver(n->name);
    for (unsigned k = 0; k < n->h->steps; k++) {
        for (unsigned i = 0; i < ppn; i++)
            buf[ppn + i] = 0;
        node_step(n, k, buf, buf + ppn, buf + 2 * ppn);
    }
    free(buf);
    mdl_outq_drain(&n->out);
}

static unsigned pick(const struct mdl_run *r, unsigned ranks)
{
    unsigned alg = r->sc->alg;
    uint64_t b = r->sc->bytes;
    if (alg == OP_MODEL_ALG_OMPI || alg == OP_MODEL_ALG_HIER)
        return b < 10000 || b / 4 <= ranks ? OP_MODEL_ALG_RD : OP_MODEL_ALG_RING;
    if (alg == OP_MODEL_ALG_OFFPATH) /* src/hostar: har_use_ring */
        return b < 32768 || b / 4 < ranks ? OP_MODEL_ALG_RD : OP_MODEL_ALG_RING;
    if (alg == OP_MODEL_ALG_MPICH) {
        unsigned pof2 = 1;
        while (pof2 * 2 <= ranks)
            pof2 *= 2;
        return b < 2048 || b / 4 < pof2 ? OP_MODEL_ALG_RD : OP_MODEL_ALG_RABENSEIFNER;
    }
    return alg;
}

/* A ring's steps are all alike: past 8 the rest follow the rate of steps
 * 4-8, less the reduction the allgather half does not do. */
static double extrapolate(const struct hostrun *h)
{
    double t = h->step_end[h->steps - 1];
    if (h->steps == h->s.steps)
        return t;
    unsigned half = h->steps / 2, rest = h->s.steps - h->steps;
    double rate = (h->step_end[h->steps - 1] - h->step_end[half - 1]) / (h->steps - half);
    uint64_t msg = (h->s.bytes + h->s.P - 1) / h->s.P;
    unsigned no_reduce = h->s.P - 1 < rest ? h->s.P - 1 : rest;
    return t + rest * rate - no_reduce * (double)msg * h->r->p->host_byte_s;
}

void mdl_host_simulate(struct mdl_run *r)
{
    const struct op_model_platform *p = r->p;
    bool hier = r->sc->alg == OP_MODEL_ALG_HIER;
    unsigned ppn = hier ? 1 : r->ppn, P = r->nodes * ppn;
    struct hostrun h = {.r = r};
    sched_init(&h.s, pick(r, P), P, ppn, r->sc->bytes);
    h.steps = h.s.alg == OP_MODEL_ALG_RING && h.s.steps > 8 ? 8 : h.s.steps;
    h.step_end = calloc(h.steps, sizeof(double));
    h.nodes = calloc(r->nodes, sizeof(*h.nodes));
    h.mbs = calloc(r->nodes, sizeof(*h.mbs));
    for (unsigned i = 0; i < r->nodes; i++) {
        struct hnode *n = &h.nodes[i];
        n->h = &h;
        n->node = i;
        n->stash = calloc(h.steps, sizeof(unsigned));
        snprintf(n->name, sizeof(n->name), "r%u.N%u", r->run_id, i);
        n->mb = h.mbs[i] = sg_mailbox_by_name(n->name);
    }
    h.t0 = simgrid_get_clock();
    for (unsigned i = 0; i < r->nodes; i++) {
        char host[24];
        sg_actor_t a = sg_actor_init(h.nodes[i].name,
                                     sg_host_by_name(mdl_host_of(p, 'n', (int)i, host, sizeof(host))));
        sg_actor_set_data(a, &h.nodes[i]);
        sg_actor_start_(a, node_main, 0, NULL);
    }
    simgrid_run();
    if (r->sc->trace)
        for (unsigned k = 0; k < h.steps; k++)
            fprintf(stderr, "host step %u ends %.6g us\n", k, h.step_end[k] * 1e6);
    r->res->intra_s = hier ? op_model_intra(p, r->ppn, p->sockets > 1 && r->ppn >= p->sockets,
                                            r->sc->bytes)
                           : 0;
    r->res->latency_s = extrapolate(&h) + r->res->intra_s;
    r->res->sim_steps = h.steps;
    r->res->cpu_s = r->cpu * (double)h.s.steps / (double)h.steps;
    for (unsigned i = 0; i < r->nodes; i++)
        free(h.nodes[i].stash);
    free(h.nodes);
    free(h.mbs);
    free(h.step_end);
}
