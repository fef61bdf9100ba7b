/* The UDP answer engine every packet-level model shares (the socket
 * model's workers over the udp backend, the xdp model's over af_xdp): a
 * stateless burst handler on the one driver (src/loop), which receives a
 * burst, hands it here whole and sends the answers back with dns_udp_flush.
 * The DPDK models answer mbufs in place instead (dpdk.c). */
#include "dns_internal.h"

/* A burst's answers, under one look at the zone set. */
static void answer_burst(void *eng, const struct op_pkt *pkts, int n, uint64_t now,
                         struct op_txq *out)
{
    (void)now;
    struct dns_udp *u = eng;
    struct dns_worker *w = u->w;
    struct op_dns_query_info qi = dns_query_info(&w->s->cfg, false, u->udp_max);
    const struct op_dns_zones *z = dns_zones_enter(w);
    w->c[OP_DNS_C_udp_rx] += (unsigned)n;
    for (int i = 0; i < n; i++) {
        struct op_pkt *a = op_txq_next(out);
        size_t len = op_dns_respond(z, &qi, pkts[i].data, pkts[i].len, a->data, u->udp_max, w->c);
        if (len == 0 || !dns_rrl_pass(w, &pkts[i].flow.src, a->data, &len))
            continue;
        a->len = (uint32_t)len;
        a->flow = op_flow_reverse(&pkts[i].flow);
        op_txq_commit(out);
    }
    dns_zones_leave(w);
}

const struct op_engine_ops dns_udp_ops = {.name = "dns udp", .input_burst = answer_burst};

void dns_udp_flush(void *ctx, struct op_io *io, struct op_txq *q)
{
    struct dns_udp *u = ctx;
    int sent = op_io_send(io, q->pkts, q->n);
    u->w->c[OP_DNS_C_udp_tx] += (unsigned)sent;
    u->w->c[OP_DNS_C_drop_tx] += (unsigned)(q->n - sent);
    dns_publish(u->w);
}

op_status_t dns_udp_loop(struct dns_udp *u, struct op_io *io, struct op_loop **out)
{
    const struct op_loop_config lc = {.io = io, .burst = (int)u->w->s->cfg.burst,
                                      .flush = dns_udp_flush, .flush_ctx = u};
    op_status_t st = op_loop_create(&lc, out);
    if (st == OP_OK && (st = op_loop_add(*out, &dns_udp_ops, u)) != OP_OK) {
        op_loop_destroy(*out);
        *out = NULL;
    }
    return st;
}
