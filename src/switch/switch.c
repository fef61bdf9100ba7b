/* Switch engine: creation, packet classification and output. */
#include <stdlib.h>
#include <string.h>

#include "switch_internal.h"

static const char *const counter_names[] = {OP_SW_COUNTERS(OP_COUNTER_NAME)};

const char *op_sw_counter_name(unsigned c)
{
    return op_counter_name(counter_names, OP_SW_C_COUNT_, c);
}

const char *const *op_sw_counter_names(void) { return counter_names; }

void op_sw_config_default(struct op_sw_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->max_groups = 1024;
    cfg->window = 32;
    cfg->max_children = 4096;
    cfg->max_data = 1024;
    cfg->lease_ms = 30000;
    cfg->slot_memory = 1ull << 30;
    cfg->sup_ops = (1u << OP_RED_OP_COUNT_) - 1;
    cfg->sup_types = (1u << OP_RED_TYPE_COUNT_) - 1;
    cfg->seed = 1;
}

static void set_id_range(struct op_sw *sw)
{
    /* The root of a tree assigns group ids. Each SPINE owns a disjoint range, so
     * a TOR under several SPINEs never sees one id for two groups. */
    if (sw->me->spine) {
        sw->id_lo = 1 + sw->me->index * SW_SPINE_ID_SPAN;
        sw->id_hi = sw->id_lo + SW_SPINE_ID_SPAN - 1;
    } else {
        sw->id_lo = 1;
        sw->id_hi = SW_MAX_GROUP_IDS - 1;
    }
    sw->next_id = sw->id_lo;
}

static op_status_t check_config(const struct op_sw_config *cfg)
{
    if (cfg->topo == NULL || cfg->self < 0 || cfg->self >= cfg->topo->n)
        return OP_ERR_INVAL;
    if (cfg->window == 0 || cfg->max_children == 0 || cfg->max_groups == 0)
        return OP_ERR_INVAL;
    if (cfg->max_data < 8 || cfg->max_data > OP_INC_MAX_DATA || cfg->max_data % 8 != 0)
        return OP_ERR_INVAL;
    if (cfg->topo->sw[cfg->self].spine && cfg->topo->sw[cfg->self].index >= 32)
        return OP_ERR_INVAL;
    return OP_OK;
}

op_status_t op_sw_create(const struct op_sw_config *cfg, struct op_sw **out)
{
    op_status_t st = check_config(cfg);
    if (st != OP_OK)
        return st;
    struct op_sw *sw = calloc(1, sizeof(*sw));
    if (sw == NULL)
        return OP_ERR_NOMEM;
    sw->by_id = calloc(SW_MAX_GROUP_IDS, sizeof(*sw->by_id));
    sw->live = calloc(SW_MAX_GROUP_IDS, sizeof(*sw->live));
    if (sw->by_id == NULL || sw->live == NULL) {
        free(sw->by_id);
        free(sw->live);
        free(sw);
        return OP_ERR_NOMEM;
    }
    sw->cfg = *cfg;
    sw->topo = *cfg->topo;
    sw->cfg.topo = &sw->topo;
    sw->me = &sw->topo.sw[cfg->self];
    op_rng_seed(&sw->rng, cfg->seed ^ ((uint64_t)sw->me->ip << 16));
    set_id_range(sw);
    *out = sw;
    return OP_OK;
}

void op_sw_destroy(struct op_sw *sw)
{
    if (sw == NULL)
        return;
    while (sw->n_groups > 0)
        sw_group_free(sw, sw->live[0]);
    for (int i = 0; i < SW_MAX_PENDING; i++)
        sw_pending_free(&sw->pending[i]);
    free(sw->by_id);
    free(sw->live);
    free(sw);
}

const uint64_t *op_sw_counters(const struct op_sw *sw) { return sw->c; }

bool sw_is_uplink(const struct op_sw *sw, uint32_t ip)
{
    for (int i = 0; i < sw->me->n_up; i++)
        if (sw->topo.sw[sw->me->up[i]].ip == ip)
            return true;
    return false;
}

uint16_t sw_uplink_port(const struct op_sw *sw, uint32_t ip)
{
    for (int i = 0; i < sw->me->n_up; i++)
        if (sw->topo.sw[sw->me->up[i]].ip == ip)
            return sw->topo.sw[sw->me->up[i]].port;
    return 0;
}

/* Below a TOR are its hosts; below a SPINE, the TORs that list it. */
enum sw_side sw_side_of(const struct op_sw *sw, uint32_t ip, uint16_t port)
{
    const struct op_topo_switch *me = sw->me;
    if (!me->spine) {
        /* a host's leaders from any port: the processes of a node share its
         * address, each leader on a port of its own (a RoCEv2 NIC would
         * tell them apart by queue pair); a member is known by both */
        if (ip >= me->host_lo && ip <= me->host_hi)
            return SIDE_BELOW;
        (void)port;
        return sw_is_uplink(sw, ip) ? SIDE_ABOVE : SIDE_NONE;
    }
    for (int i = 0; i < sw->topo.n; i++) {
        const struct op_topo_switch *t = &sw->topo.sw[i];
        if (t->spine || t->ip != ip || t->port != port)
            continue;
        for (int u = 0; u < t->n_up; u++)
            if (&sw->topo.sw[t->up[u]] == me)
                return SIDE_BELOW;
    }
    return SIDE_NONE;
}

void sw_emit(struct op_sw *sw, struct op_txq *out, uint32_t ip, uint16_t port,
             const struct op_inc_hdr *h, const void *payload, size_t len)
{
    struct op_pkt *p = op_txq_next(out);
    size_t n = op_inc_encode(h, 0, payload, len, p->data, OP_IO_BUF_SIZE);
    p->flow = (struct op_flow){.src.v4 = sw->me->ip,
                               .src_port = sw->me->port,
                               .dst.v4 = ip,
                               .dst_port = port};
    n = n ? op_icrc_seal(&p->flow, p->data, n, OP_IO_BUF_SIZE) : 0;
    if (n == 0)
        return; /* cannot happen with OP_IO_BUF_SIZE buffers; never send garbage */
    p->len = (uint32_t)n;
    op_txq_commit(out);
    sw->c[OP_SW_C_tx_pkts]++;
}

void op_sw_input(struct op_sw *sw, const struct op_pkt *pkt, uint64_t now, struct op_txq *out)
{
    struct op_inc_pkt ip;
    sw->c[OP_SW_C_rx_pkts]++;
    if (!op_inc_is_inc(pkt->data, pkt->len)) {
        sw->c[OP_SW_C_drop_foreign]++;
        return;
    }
    if (op_inc_decode(pkt->data, pkt->len, &ip) != OP_OK) {
        sw->c[OP_SW_C_drop_malformed]++;
        return;
    }
    if (!op_icrc_check(&pkt->flow, pkt->data, pkt->len)) {
        sw->c[OP_SW_C_drop_icrc]++;
        return;
    }
    sw->c[OP_SW_C_rx_inc]++;
    /* every marked arrival, control, duplicate or a stranger's too: the
     * marks the ports saw (ecn_seen) and these balance */
    sw->c[OP_SW_C_congestion_seen] += sw_marked(&ip);
    if (ip.hdr.kind == OP_INC_KIND_CTRL) {
        sw->c[OP_SW_C_rx_ctrl]++;
        sw_ctrl_input(sw, pkt, &ip, now, out);
    } else {
        sw_data_input(sw, pkt, &ip, now, out);
    }
}

static uint64_t sweep_interval_ns(const struct op_sw *sw)
{
    uint64_t lease = (uint64_t)sw->cfg.lease_ms * OP_NS_PER_MS;
    uint64_t iv = lease / 4;
    if (iv > 250 * OP_NS_PER_MS)
        iv = 250 * OP_NS_PER_MS;
    return iv ? iv : OP_NS_PER_MS;
}

void op_sw_timer(struct op_sw *sw, uint64_t now, struct op_txq *out)
{
    (void)out;
    if (now < sw->next_sweep_ns)
        return;
    sw_sweep(sw, now);
    sw->next_sweep_ns = now + sweep_interval_ns(sw);
}

uint64_t op_sw_next_timer(const struct op_sw *sw) { return sw->next_sweep_ns; }

struct op_counter_set op_sw_counter_set(const struct op_sw *sw, const uint64_t *port,
                                        uint64_t vals[OP_SW_C_COUNT_])
{
    memset(vals, 0, OP_SW_C_COUNT_ * sizeof *vals);
    memcpy(vals, sw->c, sizeof sw->c);
    if (port != NULL)
        memcpy(vals + OP_SW_C_ENGINE_COUNT_, port, OP_SW_PORT_C_COUNT_ * sizeof *port);
    return (struct op_counter_set){.names = counter_names, .vals = vals, .n = OP_SW_C_COUNT_};
}

void sw_print_report_open(const struct op_sw *sw, const uint64_t *port, FILE *out, bool json)
{
    uint64_t v[OP_SW_C_COUNT_];
    const char *role = sw->me->spine ? "spine" : "tor";
    const struct op_counter_set set = op_sw_counter_set(sw, port, v);
    if (json) {
        fprintf(out, "{\"switch\": \"%s\", \"role\": \"%s\", ", sw->me->name, role);
        op_counter_set_print(out, &set, OP_COUNTERS_JSON);
        return;
    }
    fprintf(out, "switch %s (%s) counters:\n", sw->me->name, role);
    op_counter_set_print(out, &set, OP_COUNTERS_TABLE);
}

void op_sw_print_report(const struct op_sw *sw, const uint64_t *port, FILE *out, bool json)
{
    sw_print_report_open(sw, port, out, json);
    if (json)
        fprintf(out, "}\n");
}

void op_sw_print_stats(const struct op_sw *sw, FILE *out, bool json)
{
    op_sw_print_report(sw, NULL, out, json);
}
