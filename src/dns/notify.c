/* NOTIFY's I/O (RFC 1996): after a reload, each zone whose SOA serial
 * changed is announced to every --notify secondary over UDP, so it
 * transfers the new zone now instead of at its next SOA refresh. The
 * messages are op_dns_notify_build's; a secondary acknowledges with a
 * NOERROR response of the same id. An engine on the one driver: every
 * secondary is told at once, each notice with its own retry timer, 3 tries
 * 500 ms apart; a secondary that does not answer costs 1.5 s, not 1.5 s
 * each. */
#include <stdlib.h>
#include <string.h>

#include "dns_internal.h"
#include "offpath/io.h"
#include "offpath/loop.h"

#define TRIES 3
#define WAIT_NS (500 * OP_NS_PER_MS)

/* One zone to one secondary. */
struct notice {
    const struct op_endpoint *to;
    size_t zone;
    const uint8_t *msg;
    size_t len;
    uint16_t id;
    int tries;
    uint64_t next_ns; /* the next try, or the give-up after the last */
    bool done, acked;
};

/* The engine: the notices of one address family, on one socket of the
 * loop's (every secondary at once, each with its own retry timer). */
struct notifier {
    struct op_dns_server *s;
    struct notice *n;
    size_t count;
};

static bool from_target(const struct op_pkt *p, const struct op_endpoint *to)
{
    return p->flow.src_port == to->port && op_addr_eq(&p->flow.src, &to->addr);
}

/* An answer: the acknowledgement of the notice it names, from its target
 * only (anything else is not taken for one). */
static void notifier_input(void *eng, const struct op_pkt *pkt, uint64_t now, struct op_txq *out)
{
    struct notifier *e = eng;
    (void)now, (void)out;
    for (size_t i = 0; i < e->count; i++) {
        struct notice *n = &e->n[i];
        if (!n->done && from_target(pkt, n->to) &&
            op_dns_notify_acked(pkt->data, pkt->len, n->id))
            n->done = n->acked = true;
    }
}

/* Due notices: tried again, or given up after the last try's wait. */
static void notifier_timer(void *eng, uint64_t now, struct op_txq *out)
{
    struct notifier *e = eng;
    for (size_t i = 0; i < e->count; i++) {
        struct notice *n = &e->n[i];
        if (n->done || n->next_ns > now)
            continue;
        if (n->tries == TRIES) {
            n->done = true;
            continue;
        }
        struct op_pkt *p = op_txq_next(out);
        memcpy(p->data, n->msg, n->len);
        p->len = (uint32_t)n->len;
        p->flow = (struct op_flow){.dst = n->to->addr, .dst_port = n->to->port};
        op_txq_commit(out);
        op_dns_server_count(e->s, OP_DNS_C_notify_sent);
        n->tries++;
        n->next_ns = now + WAIT_NS;
    }
}

static uint64_t notifier_deadline(const void *eng)
{
    const struct notifier *e = eng;
    uint64_t t = UINT64_MAX;
    for (size_t i = 0; i < e->count; i++)
        if (!e->n[i].done && e->n[i].next_ns < t)
            t = e->n[i].next_ns;
    return t;
}

static const struct op_engine_ops notifier_ops = {.name = "notify",
                                                  .input = notifier_input,
                                                  .timer = notifier_timer,
                                                  .next_deadline = notifier_deadline};

/* A name in wire form as dotted text, for the log. */
static void name_text(const uint8_t *name, char out[OP_DNS_NAME_MAX * 4 + 2])
{
    size_t o = 0;
    for (; *name != 0; name += 1 + *name) {
        for (uint8_t i = 1; i <= *name; i++) {
            uint8_t ch = name[i];
            o += (size_t)(ch > ' ' && ch < 127 && ch != '.' && ch != '\\'
                              ? snprintf(out + o, 2, "%c", ch)
                              : snprintf(out + o, 5, "\\%03u", ch));
        }
        out[o++] = '.';
    }
    if (o == 0)
        out[o++] = '.';
    out[o] = 0;
}

/* The notices of one family, on a socket of that family, as a loop. */
static op_status_t family_loop(struct notifier *e, unsigned family, struct op_io **io,
                               struct op_loop **loop)
{
    static const uint8_t any6[16];
    struct op_addr any = family == OP_AF_IPV6 ? op_addr_ipv6(any6) : op_addr_ipv4(0);
    struct op_loop_config c = {.burst = 16};
    op_status_t st = op_io_udp_open_addr(&any, 0, io);
    if (st != OP_OK)
        return st;
    op_io_udp_batching(*io, false);
    c.io = *io;
    if ((st = op_loop_create(&c, loop)) == OP_OK)
        st = op_loop_add(*loop, &notifier_ops, e);
    return st;
}

static bool all_done(const struct notice *n, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (!n[i].done)
            return false;
    return true;
}

/* Every notice of the batch at once: one loop per family, run until each
 * is acknowledged or given up (bounded by the tries' waits). */
static void run_notices(struct op_dns_server *s, struct notice *n, size_t count)
{
    struct notifier e[2] = {{.s = s}, {.s = s}};
    struct op_io *io[2] = {NULL, NULL};
    struct op_loop *loops[2];
    int k = 0;
    for (unsigned fam = OP_AF_IPV4; fam <= OP_AF_IPV6; fam++) {
        size_t first = 0, last; /* notices come family by family */
        while (first < count && n[first].to->addr.family != fam)
            first++;
        for (last = first; last < count && n[last].to->addr.family == fam; last++)
            ;
        if (first == last)
            continue;
        e[fam] = (struct notifier){.s = s, .n = n + first, .count = last - first};
        loops[k] = NULL;
        if (family_loop(&e[fam], fam, &io[fam], &loops[k]) != OP_OK) {
            for (size_t i = first; i < last; i++)
                n[i].done = true; /* no socket: not acknowledged */
            op_loop_destroy(loops[k]);
            continue;
        }
        k++;
    }
    uint64_t end = op_now_ns() + (TRIES + 1) * WAIT_NS;
    while (k > 0 && !all_done(n, count) && op_now_ns() < end)
        if (op_loop_run_many(loops, k, end) < 0)
            break;
    for (int i = 0; i < k; i++)
        op_loop_destroy(loops[i]);
    op_io_close(io[0]);
    op_io_close(io[1]);
}

static void log_notice(struct op_dns_server *s, const struct op_dns_zones *now,
                       const struct notice *n)
{
    char zone[OP_DNS_NAME_MAX * 4 + 2], to[OP_ENDPOINT_STRLEN];
    name_text(now->z[n->zone].origin, zone);
    op_endpoint_format(n->to, to, sizeof(to));
    op_dns_server_count(s, n->acked ? OP_DNS_C_notify_acked : OP_DNS_C_notify_failed);
    if (n->acked)
        OP_INFO(s->cfg.log, "NOTIFY %s to %s: acknowledged", zone, to);
    else
        OP_WARN(s->cfg.log, "NOTIFY %s to %s: no acknowledgement after %d tries", zone, to,
                TRIES);
}

unsigned op_dns_server_notify(struct op_dns_server *s, const struct op_dns_zones *old,
                              const struct op_dns_zones *now)
{
    size_t per = s->cfg.n_notify, max = now->n * per, count = 0;
    if (max == 0)
        return 0;
    uint8_t(*msg)[OP_DNS_UDP_MIN] = calloc(now->n, sizeof *msg);
    struct notice *n = calloc(max, sizeof *n);
    uint16_t base = (uint16_t)(op_now_ns() >> 10);
    for (unsigned fam = OP_AF_IPV4; fam <= OP_AF_IPV6 && msg != NULL && n != NULL; fam++)
        for (size_t z = 0; z < now->n; z++) {
            /* ids apart per zone: one secondary may be told of several */
            uint16_t id = (uint16_t)(base + z);
            size_t len = op_dns_zone_changed(old, now, z)
                             ? op_dns_notify_build(now, z, id, msg[z], sizeof msg[z]) : 0;
            for (size_t t = 0; t < per && len > 0; t++)
                if (s->cfg.notify[t].addr.family == fam)
                    n[count++] = (struct notice){.to = &s->cfg.notify[t], .zone = z,
                                                 .msg = msg[z], .len = len, .id = id};
        }
    run_notices(s, n, count);
    unsigned acked = 0;
    for (size_t i = 0; i < count; i++) {
        log_notice(s, now, &n[i]);
        acked += n[i].acked;
    }
    free(msg);
    free(n);
    return acked;
}
