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
#include <math.h>
#include <stdlib.h>

#include "model_internal.h"

/* What one rank does in one step: messages to `to_n` ranks (to, to +
 * stride, ...), one from each of from[0..from_n) (a pipelined reduce tree's
 * node takes several children's segments in one step). */
#define FROM_MAX 32
struct rank_step {
    int to, from[FROM_MAX];
    unsigned to_n, stride, from_n;
    bool reduce;
    uint64_t msg;
};

struct sched {
    unsigned P, pof2, rem, lg, clg, klev, bdepth, ppn, steps;
    struct mdl_plan plan;
    unsigned first[MDL_PHASES_MAX]; /* each phase's first step */
    uint64_t segs[MDL_PHASES_MAX];  /* each phase's segments (1: not pipelined) */
};

static void add_from(struct rank_step *o, unsigned r)
{
    if (o->from_n < FROM_MAX)
        o->from[o->from_n++] = (int)r;
}

#define KNOMIAL_K 4u /* SMPI's mvapich2 intra-node k-nomial broadcast */

/* A tree of S segments: a pipelined broadcast takes its depth's steps plus
 * one a segment after the first; the reduce its depth's a segment. */
static unsigned phase_steps(const struct sched *s, unsigned i)
{
    unsigned kind = s->plan.ph[i].kind, extra = (unsigned)(s->segs[i] - 1);
    switch (kind) {
    case MDL_PH_RD:
        return 2 + s->lg; /* fold in, the doubling, fold out */
    case MDL_PH_RAB:
        return 2 + 2 * s->lg;
    case MDL_PH_RING:
        return 2 * (s->P - 1);
    case MDL_PH_REDUCE_BINOMIAL:
        return s->clg * (extra + 1);
    case MDL_PH_BCAST_BINOMIAL:
        return s->clg;
    case MDL_PH_BCAST_KNOMIAL:
        return s->klev;
    case MDL_PH_BCAST_BINARY:
        return s->bdepth + extra;
    default: /* MDL_PH_BCAST_CHAIN */
        return s->P - 1 + extra;
    }
}

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

static void send_to(struct rank_step *o, unsigned to, unsigned n, unsigned stride)
{
    o->to = (int)to;
    o->to_n = n;
    o->stride = stride;
}

/* Steps 0 and last: the non-power-of-two ranks fold in and get the result. */
static void fold(const struct sched *s, unsigned r, bool in, uint64_t bytes, struct rank_step *o)
{
    if (r >= 2 * s->rem)
        return;
    bool odd = r % 2;
    o->msg = bytes;
    if (in == !odd)
        send_to(o, odd ? r - 1 : r + 1, 1, 1);
    else
        add_from(o, odd ? r - 1 : r + 1);
    o->reduce = in;
}

/* Recursive doubling, or Rabenseifner (reduce-scatter by recursive halving,
 * allgather by recursive doubling), between the power of two. */
static void doubling(const struct sched *s, unsigned ph, uint64_t bytes, unsigned r, unsigned j,
                     struct rank_step *o)
{
    unsigned kind = s->plan.ph[ph].kind, last = phase_steps(s, ph) - 1, mask;
    if (j == 0 || j == last) {
        fold(s, r, j == 0, bytes, o);
        return;
    }
    int nr = newrank(s, r);
    if (nr < 0)
        return;
    unsigned i = j - 1;
    if (kind == MDL_PH_RD) {
        mask = 1u << i;
        o->msg = bytes;
        o->reduce = true;
    } else if (i < s->lg) {
        mask = 1u << i;
        o->msg = bytes >> (i + 1);
        o->reduce = true;
    } else {
        i -= s->lg;
        mask = s->pof2 >> (i + 1);
        o->msg = bytes >> (s->lg - i);
    }
    send_to(o, (unsigned)realrank(s, (unsigned)nr ^ mask), 1, 1);
    add_from(o, (unsigned)o->to);
}

/* Whether segment t - level of S is one a node at that level handles in
 * step t of a pipelined tree. */
static bool in_pipe(unsigned t, unsigned level, uint64_t S)
{
    return t >= level && t - level < S;
}

static unsigned floor_log2(unsigned x)
{
    unsigned l = 0;
    while (x >>= 1)
        l++;
    return l;
}

/* A binomial reduce to rank 0 (SMPI's ompi_binomial, in S segments). A
 * rank of height l (its lowest set bit; rank 0: every level) takes each
 * segment from its children in turn, r + 1, r + 2, r + 4 ..., then passes
 * it up: SMPI starts a transfer when the receiver posts it and its generic
 * reduce posts a child's segment after the last one arrived, so a node's
 * receives do not overlap. Step s x levels + i is segment s's from child i
 * (height i), which sends it then; S = 1 is the unpipelined tree, one level
 * a step. */
static void reduce_binomial(const struct sched *s, unsigned r, unsigned t, struct rank_step *o)
{
    unsigned l = 0, i = t % s->clg;
    while (l < s->clg && !(r & (1u << l)))
        l++;
    if (r != 0 && i == l)
        send_to(o, r - (1u << l), 1, 1);
    if (i < l && r + (1u << i) < s->P)
        add_from(o, r + (1u << i));
    o->reduce = o->from_n > 0;
}

/* Pipelined broadcasts from rank 0 whose node at depth d sends segment
 * t - d to its children in step t: SMPI's binary tree (NTSB: children 2r+1,
 * 2r+2) and its "linear" one (NTSL: a chain r -> r+1), 8 KiB segments. */
static void bcast_pipe(const struct sched *s, unsigned kind, uint64_t S, unsigned r, unsigned t,
                       struct rank_step *o)
{
    bool binary = kind == MDL_PH_BCAST_BINARY;
    unsigned d = binary ? floor_log2(r + 1) : r;
    unsigned child = binary ? 2 * r + 1 : r + 1;
    if (child < s->P && in_pipe(t, d, S))
        send_to(o, child, binary && child + 1 < s->P ? 2 : 1, 1);
    if (r != 0 && in_pipe(t + 1, d, S))
        add_from(o, binary ? (r - 1) / 2 : r - 1);
}

/* Trees rooted at rank 0: a binomial reduce gathers up the lowest set bit;
 * the broadcasts hand down from the highest level. */
static void tree(const struct sched *s, unsigned ph, unsigned r, unsigned j, struct rank_step *o)
{
    unsigned P = s->P, mask, kind = s->plan.ph[ph].kind;
    switch (kind) {
    case MDL_PH_REDUCE_BINOMIAL:
        reduce_binomial(s, r, j, o);
        return;
    case MDL_PH_BCAST_BINOMIAL:
        mask = 1u << (s->clg - 1 - j);
        if (r % (2 * mask) == 0 && r + mask < P)
            send_to(o, r + mask, 1, 1);
        else if (r % (2 * mask) == mask)
            add_from(o, r - mask);
        return;
    case MDL_PH_BCAST_KNOMIAL:
        mask = 1;
        for (unsigned l = j + 1; l < s->klev; l++)
            mask *= KNOMIAL_K;
        if (r % (KNOMIAL_K * mask) == 0) {
            unsigned n = 0;
            while (n + 1 < KNOMIAL_K && r + (n + 1) * mask < P)
                n++;
            if (n > 0)
                send_to(o, r + mask, n, mask);
        } else if (r % mask == 0) {
            add_from(o, r - r % (KNOMIAL_K * mask));
        }
        return;
    default: /* MDL_PH_BCAST_BINARY, MDL_PH_BCAST_CHAIN */
        bcast_pipe(s, kind, s->segs[ph], r, j, o);
    }
}

static unsigned phase_of(const struct sched *s, unsigned k)
{
    unsigned i = 0;
    while (i + 1 < s->plan.n && k >= s->first[i + 1])
        i++;
    return i;
}

static void step_of(const struct sched *s, unsigned r, unsigned k, struct rank_step *o)
{
    o->to = -1;
    o->to_n = o->stride = o->from_n = 0;
    o->reduce = false;
    o->msg = 0;
    unsigned i = phase_of(s, k);
    const struct mdl_phase *ph = &s->plan.ph[i];
    unsigned j = k - s->first[i];
    if (ph->kind == MDL_PH_RING) {
        send_to(o, (r + 1) % s->P, 1, 1);
        add_from(o, (r + s->P - 1) % s->P);
        o->msg = (ph->bytes + s->P - 1) / s->P;
        o->reduce = j < s->P - 1;
    } else if (ph->kind == MDL_PH_RD || ph->kind == MDL_PH_RAB) {
        doubling(s, i, ph->bytes, r, j, o);
    } else {
        tree(s, i, r, j, o);
        o->msg = ph->seg > 0 && ph->seg < ph->bytes ? ph->seg : ph->bytes;
    }
    if (o->msg == 0)
        o->msg = 4;
}

static void sched_init(struct sched *s, unsigned alg, unsigned P, unsigned ppn, uint64_t bytes)
{
    *s = (struct sched){.P = P, .ppn = ppn, .pof2 = 1, .klev = 0};
    while (s->pof2 * 2 <= P) {
        s->pof2 *= 2;
        s->lg++;
    }
    while ((1u << s->clg) < P)
        s->clg++;
    for (unsigned span = 1; span < P; span *= KNOMIAL_K)
        s->klev++;
    s->rem = P - s->pof2;
    s->bdepth = floor_log2(P);
    mdl_host_plan(alg, P, bytes, &s->plan);
    for (unsigned i = 0; i < s->plan.n; i++) {
        const struct mdl_phase *ph = &s->plan.ph[i];
        s->segs[i] = ph->seg > 0 && ph->seg < ph->bytes ? (ph->bytes + ph->seg - 1) / ph->seg : 1;
        s->first[i] = s->steps;
        s->steps += phase_steps(s, i);
    }
}

struct hostrun;
struct hnode {
    struct hostrun *h;
    unsigned node;
    sg_mailbox_t mb;
    sg_host_t host;
    double gate[2]; /* when its last two gated receives ended (gated()) */
    unsigned *stash; /* bundles received per simulated step */
    struct mdl_outq out;
    char name[40];
};

/* A long ring is simulated for its first 8 steps only: simulated step k is
 * plan step k, or k + skip_n from skip_from on. */
struct hostrun {
    struct mdl_run *r;
    struct sched s;
    unsigned steps, skip_from, skip_n, ring; /* simulated; the skipped ring's phase */
    double t0, *step_end;
    struct hnode *nodes;
    sg_mailbox_t *mbs;
};

static unsigned add_unique(unsigned *set, unsigned *n, unsigned v)
{
    if (*n > 0 && set[*n - 1] == v) /* a tree's or a linear step's ranks come in order */
        return *n - 1;
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
 * bytes (src/hostar) that src/io sends as GSO datagrams of up to 65000
 * bytes and takes in as GRO ones: a system call's CPU (leader_pkt_s) a
 * datagram at either end; and every byte is sealed (ICRC, byte order) and
 * checked again, reduced or copied: host_byte_s at either end. Charged a
 * 4 KiB packet each, the model was 27-57 % slow at 4 nodes x 16 KiB (4
 * packets, one datagram) and, with the per-byte cost on the reducing half
 * only, 15-30 % fast at 1 MiB (the ring's allgather half reduces nothing,
 * yet seals and checks every byte). A cluster's NIC moves them without the
 * host, whose per-byte cost is the reduction's. On a namespace topology
 * the MPI's TCP: segmented by GSO too, its per-byte work host_byte_s. */
#define HOST_PKT_DATA 4096u
#define HOST_GSO_PKTS 15u /* 65000 / (4096 + headers) */
static double host_dgrams(const struct op_model_platform *p, uint64_t msg)
{
    if (p->shared_cores == 0)
        return 0;
    uint64_t pkts = p->fwd_frame_s > 0 ? 1 : (msg + HOST_PKT_DATA - 1) / HOST_PKT_DATA;
    return (double)((pkts + HOST_GSO_PKTS - 1) / HOST_GSO_PKTS);
}

/* A byte's cost in a call of `bytes`: less while the call's buffers stay in
 * the caches (28 Nov, the host path of then at 2 nodes: 0.3 ns a byte from
 * 1 to 16 KiB by recursive doubling and from 32 to 64 KiB by the ring,
 * 1.1-1.4 ns from 128 KiB to 1 MiB; the same bytes move and the same steps
 * run either side; the host path of 29 Nov keeps 256 KiB hot: platform.c). */
static double host_byte(const struct op_model_platform *p, uint64_t bytes)
{
    bool hot = p->host_hot_bytes > 0 && (double)bytes <= p->host_hot_bytes;
    return p->host_byte_s * (hot ? fmin(p->host_hot_f, 1) : 1);
}

/* One message's CPU at one end on shared cores: its datagrams and bytes. */
static double host_xfer_s(const struct op_model_platform *p, uint64_t msg, uint64_t bytes)
{
    return host_dgrams(p, msg) * p->leader_pkt_s + (double)msg * host_byte(p, bytes);
}

/* ---- a namespace topology: the MPI's TCP through switch processes */

#define TCP_FRAME_HDR 66u /* Ethernet, IPv4, TCP with timestamps */

static uint64_t mss(const struct op_model_platform *p)
{
    return p->frame_data ? p->frame_data : 1448;
}

static uint64_t tcp_frames(const struct op_model_platform *p, uint64_t bytes)
{
    return (bytes + mss(p) - 1) / mss(p);
}

/* A bundle's bytes on the links: its data in TCP frames. On this
 * machine's loopback none: the bytes are the CPUs' copies at either end
 * (host_byte_s, on the cores the ranks share), as INC's datagrams' are
 * (inc_sim.c). Charged as 2 GB/s of a link each node has to itself, 8
 * ranks' rings came out 20-59 % fast at 1 MiB in every record: the cores
 * copy every rank's bytes, so a step of 8 ranks took 4 times the copies'
 * time at 2 ranks (0.4-0.5 ns a byte and rank, over 2 cores, at 2, 4 and
 * 8 nodes alike: 29 Nov 04:24). */
static long wire_bytes(const struct op_model_platform *p, unsigned cnt, uint64_t msg)
{
    if (!mdl_on_links(p))
        return 0;
    if (p->fwd_frame_s <= 0)
        return (long)(cnt * (msg + MDL_HDR_BYTES));
    return (long)(cnt * (msg + tcp_frames(p, msg) * TCP_FRAME_HDR));
}

/* Every frame of a bundle and its ACKs (one every second segment) crosses
 * the switches on the path (the TOR, or TOR, SPINE, TOR between racks),
 * each spending fwd_frame_s on it on the shared cores. The switches forward
 * frame by frame while the link paces them, so the bundle arrives after the
 * longer of the two: the forwarding's CPU is run first, and only what the
 * link would not have carried meanwhile (at least the last frame) is sent
 * after it. */
static long forward(struct hnode *n, unsigned dest, long bytes, uint64_t msg, unsigned cnt)
{
    struct mdl_run *r = n->h->r;
    const struct op_model_platform *p = r->p;
    if (p->fwd_frame_s <= 0)
        return bytes;
    uint64_t data = cnt * tcp_frames(p, msg);
    unsigned hops = n->node / p->rack_nodes == dest / p->rack_nodes ? 1 : 3;
    double t0 = simgrid_get_clock();
    mdl_cpu(r, (double)(data + (data + 1) / 2) * hops * p->fwd_frame_s);
    double bw = sg_host_get_route_bandwidth(n->host, n->h->nodes[dest].host);
    double carried = (simgrid_get_clock() - t0) * bw;
    /* the last frame leaves after the switches' work on it */
    long last = (long)(msg < mss(p) ? msg : mss(p)) + TCP_FRAME_HDR;
    long left = carried >= (double)bytes ? 0 : bytes - lround(carried);
    return left > last ? left : (last < bytes ? last : bytes);
}

/* One node's part of a step: what its ranks send to other nodes (a bundle
 * a destination node), what they exchange inside it, what they wait for. */
struct node_io {
    unsigned *dest, *cnt, *src;
    unsigned ndest, nsrc, sends, reduced; /* reduced: messages one rank reduces */
    uint64_t msg;
    double intra;
};

static void rank_io(const struct hostrun *h, unsigned node, unsigned r, const struct rank_step *o,
                    struct node_io *io)
{
    unsigned ppn = h->s.ppn;
    for (unsigned d = 0; o->to >= 0 && d < o->to_n; d++) {
        unsigned to = (unsigned)o->to + d * o->stride;
        if (to / ppn != node) {
            io->cnt[add_unique(io->dest, &io->ndest, to / ppn)]++;
            io->sends++;
            io->msg = o->msg;
        } else {
            double c = shm_cost(h->r->p, &h->s, r, to, o->msg);
            io->intra = c > io->intra ? c : io->intra;
        }
    }
    unsigned remote = 0;
    for (unsigned f = 0; f < o->from_n; f++) {
        if ((unsigned)o->from[f] / ppn == node)
            continue;
        add_unique(io->src, &io->nsrc, (unsigned)o->from[f] / ppn);
        remote++;
        io->msg = o->msg;
    }
    /* the node's ranks reduce side by side; one rank its children in turn */
    if (o->reduce && remote > io->reduced)
        io->reduced = remote;
}

/* On shared cores a rank that blocks for its messages is woken by them: it
 * runs host_wake_s after they arrive (the scheduler's wake-up; its CPU is
 * what the rank's messages cost, shared by the cores: 8 ranks on 2 cores
 * queue for them). */
static void wait_bundles(struct hnode *n, unsigned k, unsigned nsrc)
{
    if (n->stash[k] >= nsrc)
        return;
    while (n->stash[k] < nsrc) {
        void *m = sg_mailbox_get(n->mb);
        n->stash[mdl_seq(m)]++;
    }
    const struct op_model_platform *p = n->h->r->p;
    if (p->shared_cores > 0 && p->host_wake_s > 0)
        sg_actor_sleep_for(p->host_wake_s);
}

/* More ranks than cores evict each other's caches: per-packet and per-byte
 * work costs crowd_f more, as the INC processes' does (inc_sim.c). */
static double crowding(const struct mdl_run *r)
{
    const struct op_model_platform *p = r->p;
    return p->shared_cores > 0 && r->nodes * r->ppn > p->shared_cores ? 1 + p->host_crowd_f : 1;
}

/* SMPI starts a transfer when its receive is posted (smpi/async-small-thresh
 * 0, its default: no message is pushed ahead), which the eager actors here
 * do not: where that orders a node's receives one after another (the
 * segmented binomial reduce: each child's segment in turn; Open MPI's
 * generic reduce posts the next receive, then waits for the one before, so
 * a receive is posted when the one two back ended), a receive takes the
 * route's latency and the message's time from its post. Everywhere else
 * both ends reach the step together or the data depends on the previous
 * receive anyway. */
static bool gated(const struct sched *s, unsigned k)
{
    unsigned i = phase_of(s, k);
    return s->plan.ph[i].kind == MDL_PH_REDUCE_BINOMIAL && s->segs[i] > 1;
}

static void transfer_from_post(struct hnode *n, unsigned src, uint64_t msg)
{
    sg_host_t from = n->h->nodes[src].host;
    double bw = sg_host_get_route_bandwidth(from, n->host);
    double done = n->gate[1] + sg_host_get_route_latency(from, n->host) +
                  (bw > 0 ? (double)(msg + MDL_HDR_BYTES) / bw : 0);
    if (done > simgrid_get_clock())
        sg_actor_sleep_until(done);
    n->gate[1] = n->gate[0];
    n->gate[0] = simgrid_get_clock();
}

static void node_step(struct hnode *n, unsigned k, struct node_io *io)
{
    struct hostrun *h = n->h;
    const struct op_model_platform *p = h->r->p;
    unsigned plan_k = k < h->skip_from ? k : k + h->skip_n;
    double t0 = simgrid_get_clock(), crowd = crowding(h->r);
    uint64_t call = h->r->sc->bytes;
    for (unsigned r = n->node * h->s.ppn; r < (n->node + 1) * h->s.ppn; r++) {
        struct rank_step o;
        step_of(&h->s, r, plan_k, &o);
        rank_io(h, n->node, r, &o, io);
    }
    bool shared = p->shared_cores > 0;
    if (io->sends > 0) {
        mdl_cpu(h->r, p->host_msg_s + io->sends * p->nic_msg_s +
                          (shared ? crowd * io->sends * host_xfer_s(p, io->msg, call) : 0));
        for (unsigned i = 0; i < io->ndest; i++) {
            long bytes = wire_bytes(p, io->cnt[i], io->msg);
            bytes = forward(n, io->dest[i], bytes, io->msg, io->cnt[i]);
            mdl_send(&n->out, h->mbs[io->dest[i]], mdl_msg(MDL_BUNDLE, n->node, k), bytes);
        }
    }
    wait_bundles(n, k, io->nsrc);
    if (io->nsrc == 1 && gated(&h->s, plan_k))
        transfer_from_post(n, io->src[0], io->msg);
    if (io->nsrc > 0)
        mdl_cpu(h->r, shared ? crowd * io->nsrc * host_xfer_s(p, io->msg, call)
                             : io->reduced * (double)io->msg * p->host_byte_s);
    double spent = simgrid_get_clock() - t0;
    if (io->intra > spent)
        sg_actor_sleep_for(io->intra - spent);
    double end = simgrid_get_clock() - h->t0;
    if (end > h->step_end[k])
        h->step_end[k] = end;
}

static void node_main(int argc, char **argv)
{
    (void)argc, (void)argv;
    struct hnode *n = sg_actor_self_get_data();
    unsigned ppn = n->h->s.ppn, maxd = (KNOMIAL_K - 1) * ppn + n->h->r->nodes;
    unsigned *buf = calloc(2 * (size_t)maxd + n->h->r->nodes, sizeof(unsigned));
    sg_mailbox_set_receiver(n->name);
    for (unsigned k = 0; k < n->h->steps; k++) {
        struct node_io io = {.dest = buf, .cnt = buf + maxd, .src = buf + 2 * maxd};
        node_step(n, k, &io);
        for (unsigned i = 0; i < io.ndest; i++)
            io.cnt[i] = 0;
    }
    free(buf);
    mdl_outq_drain(&n->out);
}

static void add_phase(struct mdl_plan *pl, unsigned kind, uint64_t bytes)
{
    if (pl->n < MDL_PHASES_MAX && bytes > 0)
        pl->ph[pl->n++] = (struct mdl_phase){.kind = kind, .bytes = bytes};
}

/* SimGrid 3.32's `ompi` selector (Open MPI 4.1's decision rules for a
 * commutative op): per communicator size, the sizes from which each
 * algorithm takes over. 1, 2: reduce + broadcast; 3: recursive doubling;
 * 4, 5: ring (segmented only from size x 1 MiB, the same schedule here);
 * 6: Rabenseifner. */
struct ompi_rule {
    unsigned below_ranks;
    uint32_t from_bytes[7]; /* ascending; 0 ends */
    unsigned char alg[8];
};
static const struct ompi_rule ompi_rules[] = {
    {4, {8, 4096, 8192, 16384, 65536, 262144, 0}, {4, 3, 4, 3, 4, 5, 6}},
    {8, {16, 8192, 0}, {4, 3, 6}},
    {16, {8192, 0}, {3, 6}},
    {32, {64, 4096, 0}, {5, 3, 6}},
    {64, {128, 0}, {5, 6}},
    {128, {262144, 0}, {3, 6}},
    {256, {131072, 262144, 0}, {2, 3, 6}},
    {512, {4096, 0}, {2, 6}},
    {2048, {2048, 16384, 0}, {2, 3, 6}},
    {4096, {2048, 4096, 16384, 0}, {2, 5, 3, 6}},
    {~0u, {2048, 16384, 32768, 0}, {2, 5, 3, 6}},
};

static unsigned ompi_alg(unsigned P, uint64_t b)
{
    const struct ompi_rule *r = ompi_rules;
    while (P >= r->below_ranks)
        r++;
    unsigned i = 0;
    while (r->from_bytes[i] != 0 && b >= r->from_bytes[i])
        i++;
    return r->alg[i];
}

/* The broadcast half of reduce + broadcast (SMPI's ompi bcast rules where
 * allreduce takes that path, 128 ranks up): at 128-255 ranks a binomial
 * tree below 2 B, SMPI's binary tree (NTSB) below 16 KiB and at 32-64 KiB,
 * its "basic linear" (NTSL: a pipelined chain) at 16-32 KiB, k-nomial
 * above; k-nomial from 256 ranks. */
static unsigned ompi_bcast(unsigned P, uint64_t b)
{
    if (P >= 256 || b >= 65536)
        return MDL_PH_BCAST_KNOMIAL;
    if (b < 2)
        return MDL_PH_BCAST_BINOMIAL;
    return b >= 16384 && b < 32768 ? MDL_PH_BCAST_CHAIN : MDL_PH_BCAST_BINARY;
}

#define NTS_SEG 8192u /* SimGrid's NTSB and NTSL broadcasts' segment */

/* SMPI's ompi_binomial reduce pipelines 1 KiB segments from 2 KiB up where
 * the communicator is large for the message (Open MPI's fitted line:
 * ranks > 0.6016 x KiB + 1.3496), and not on fewer than 8 ranks below
 * 20 KiB. */
static uint64_t binomial_seg(unsigned P, uint64_t b)
{
    if ((P < 8 && b < 20480) || b < 2048 || b / 4 <= 1)
        return 0;
    return (double)P > 0.6016 * (double)b / 1024.0 + 1.3496 ? 1024 : 0;
}

static void ompi_plan(unsigned P, uint64_t b, struct mdl_plan *pl)
{
    unsigned alg = P < 2 ? 3 : ompi_alg(P, b);
    uint64_t count = b / 4, whole = count / P * P * 4;
    if (alg == 3) {
        add_phase(pl, MDL_PH_RD, b);
    } else if (alg == 6) {
        add_phase(pl, MDL_PH_RAB, b);
    } else if (alg <= 2) {
        unsigned bc = ompi_bcast(P, b);
        add_phase(pl, MDL_PH_REDUCE_BINOMIAL, b); /* (in-order binary trees too) */
        pl->ph[pl->n - 1].seg = binomial_seg(P, b);
        add_phase(pl, bc, b);
        pl->ph[pl->n - 1].seg = bc == MDL_PH_BCAST_BINARY || bc == MDL_PH_BCAST_CHAIN ? NTS_SEG : 0;
    } else if (count < P) {
        /* fewer elements than ranks: Open MPI's ring falls back to recursive
         * doubling; SimGrid's `lr` to its naive default (a linear reduce to
         * rank 0 and a broadcast: one root taking 32767 messages at 4096
         * nodes x 8), which SimGrid says not to trust for performance */
        add_phase(pl, MDL_PH_RD, b);
    } else { /* the ring on whole elements a rank, the rest by the selector */
        add_phase(pl, MDL_PH_RING, whole);
        if (b > whole)
            ompi_plan(P, b - whole, pl);
    }
}

void mdl_host_plan(unsigned alg, unsigned P, uint64_t b, struct mdl_plan *pl)
{
    *pl = (struct mdl_plan){0};
    switch (alg) {
    case OP_MODEL_ALG_OMPI:
        ompi_plan(P, b, pl);
        return;
    case OP_MODEL_ALG_OMPI_CLASSIC: /* Open MPI <= 4.0's fixed rule */
    case OP_MODEL_ALG_HIER:
        add_phase(pl, b < 10000 || b / 4 <= P ? MDL_PH_RD : MDL_PH_RING, b);
        return;
    case OP_MODEL_ALG_OFFPATH: /* src/hostar: har_use_ring */
        add_phase(pl, b < 32768 || b / 4 < P ? MDL_PH_RD : MDL_PH_RING, b);
        return;
    case OP_MODEL_ALG_MPICH:
        /* SMPI's `mpich` selector on a commutative op: MVAPICH2's two-level
         * allreduce (mdl_host_simulate: node, leaders, node), whose leaders
         * exchange by recursive doubling at every size */
        add_phase(pl, MDL_PH_RD, b);
        return;
    case OP_MODEL_ALG_RING:
        add_phase(pl, MDL_PH_RING, b);
        return;
    case OP_MODEL_ALG_RABENSEIFNER:
        add_phase(pl, MDL_PH_RAB, b);
        return;
    default:
        add_phase(pl, MDL_PH_RD, b);
    }
}

/* A ring's steps are all alike: past its 8th the rest follow the rate of
 * steps 4-8, less the reduction the allgather half does not do (on shared
 * cores none: each end seals, checks and copies every byte either way). */
static double extrapolate(const struct hostrun *h)
{
    double t = h->step_end[h->steps - 1];
    if (h->skip_n == 0)
        return t;
    unsigned f = h->s.first[h->ring], P = h->s.P;
    double rate = (h->step_end[f + 7] - h->step_end[f + 3]) / 4;
    if (h->r->p->shared_cores > 0)
        return t + h->skip_n * rate;
    uint64_t msg = (h->s.plan.ph[h->ring].bytes + P - 1) / P;
    unsigned no_reduce = P - 1 < h->skip_n ? P - 1 : h->skip_n;
    return t + h->skip_n * rate - no_reduce * (double)msg * host_byte(h->r->p, h->r->sc->bytes);
}

static void plan_skip(struct hostrun *h)
{
    for (unsigned i = 0; i < h->s.plan.n; i++) {
        unsigned n = phase_steps(&h->s, i);
        if (h->s.plan.ph[i].kind == MDL_PH_RING && n > 8) {
            h->ring = i;
            h->skip_from = h->s.first[i] + 8;
            h->skip_n = n - 8;
            break;
        }
    }
    h->steps = h->s.steps - h->skip_n;
}

void mdl_host_simulate(struct mdl_run *r)
{
    const struct op_model_platform *p = r->p;
    bool hier = r->sc->alg == OP_MODEL_ALG_HIER || r->sc->alg == OP_MODEL_ALG_MPICH;
    unsigned ppn = hier ? 1 : r->ppn, P = r->nodes * ppn;
    struct hostrun h = {.r = r, .skip_from = ~0u};
    sched_init(&h.s, r->sc->alg, P, ppn, r->sc->bytes);
    plan_skip(&h);
    h.step_end = calloc(h.steps ? h.steps : 1, sizeof(double));
    h.nodes = calloc(r->nodes, sizeof(*h.nodes));
    h.mbs = calloc(r->nodes, sizeof(*h.mbs));
    for (unsigned i = 0; i < r->nodes; i++) {
        struct hnode *n = &h.nodes[i];
        n->h = &h;
        n->node = i;
        n->stash = calloc(h.steps ? h.steps : 1, sizeof(unsigned));
        snprintf(n->name, sizeof(n->name), "r%u.N%u", r->run_id, i);
        n->mb = h.mbs[i] = sg_mailbox_by_name(n->name);
    }
    h.t0 = simgrid_get_clock();
    for (unsigned i = 0; i < r->nodes; i++) {
        h.nodes[i].gate[0] = h.nodes[i].gate[1] = h.t0;
        char host[24];
        h.nodes[i].host = sg_host_by_name(mdl_host_of(p, 'n', (int)i, host, sizeof(host)));
        sg_actor_t a = sg_actor_init(h.nodes[i].name, h.nodes[i].host);
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
    r->res->latency_s = (h.steps ? extrapolate(&h) : 0) + r->res->intra_s;
    r->res->sim_steps = h.steps;
    r->res->cpu_s = h.steps ? r->cpu * (double)h.s.steps / (double)h.steps : 0;
    for (unsigned i = 0; i < r->nodes; i++)
        free(h.nodes[i].stash);
    free(h.nodes);
    free(h.mbs);
    free(h.step_end);
}
