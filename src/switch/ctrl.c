/* Switch engine: the control plane (query, notify, refuse, kill).
 *
 * query:  every leader -> TOR -> every SPINE of that TOR -> master's TOR ->
 *         master. Switches record the member as pending and AND in their
 *         capabilities; a SPINE reports its free group count.
 * notify: master -> TOR -> chosen SPINE (the root). The root assigns the group
 *         id and token, installs the group and sends the notify down; each TOR
 *         installs its part and delivers it to its members.
 * refuse: root -> TORs -> members, with a reason; remembered for a while so a
 *         member that retries hears it again.
 * kill:   member -> TOR -> root; the root frees the group and the kill travels
 *         down freeing it everywhere and reaching every member.
 * Every message can be lost: leaders retransmit, and each step is idempotent
 * (a switch that already has the group answers from it). */
#include <stdlib.h>
#include <string.h>

#include "switch_internal.h"

static uint16_t min16(uint32_t a, uint32_t b) { return (uint16_t)(a < b ? a : b); }

static struct sw_key ctrl_key(const struct op_inc_ctrl *c)
{
    return (struct sw_key){.job_id = c->job_id, .comm_id = c->true_comm_id, .c_id = c->c_id};
}

static void and_caps(const struct op_sw *sw, struct op_inc_ctrl *c)
{
    const struct op_sw_config *cfg = &sw->cfg;
    c->sup_comm_type &= 1;
    c->sup_allreduce_op &= cfg->sup_ops;
    c->sup_data_type &= cfg->sup_types;
    c->sup_max_data_size = min16(c->sup_max_data_size, cfg->max_data);
    c->window = min16(c->window, cfg->window);
    c->max_children = min16(c->max_children, cfg->max_children);
    if (c->lease_ms == 0 || c->lease_ms > cfg->lease_ms)
        c->lease_ms = cfg->lease_ms;
}

static void count_hop(struct op_inc_ctrl *c)
{
    unsigned hops = c->query_notify_hop >> 4;
    if (hops < 15)
        hops++;
    c->query_notify_hop = (uint8_t)((hops << 4) | (c->query_notify_hop & 0x0f));
}

static void set_type(struct op_inc_ctrl *c, unsigned type)
{
    c->query_notify_hop = (uint8_t)((c->query_notify_hop & 0xf0) | type);
}

static void send_ctrl(struct op_sw *sw, struct op_txq *out, uint32_t ip, uint16_t port,
                      const struct op_inc_hdr *h, const struct op_inc_ctrl *c)
{
    uint8_t payload[OP_INC_CTRL_LEN];
    op_inc_ctrl_encode(c, payload);
    sw_emit(sw, out, ip, port, h, payload, sizeof(payload));
}

static bool serves_host(const struct op_sw *sw, uint32_t ip)
{
    return !sw->me->spine && ip >= sw->me->host_lo && ip <= sw->me->host_hi;
}

/* ---- down the tree */

/* A group's notify or kill, as its members were told, to one of them. */
static void tell_member(struct op_sw *sw, uint16_t id, uint64_t token,
                        const struct op_inc_ctrl *notify, uint16_t n_children,
                        const struct sw_member *m, unsigned type, struct op_txq *out)
{
    struct op_inc_hdr h = {.version = OP_INC_VERSION, .kind = OP_INC_KIND_CTRL,
                           .group_id = id, .token = token, .src_rank = m->rank};
    struct op_inc_ctrl c = *notify;
    set_type(&c, type);
    c.dst_ip = m->ip;
    c.dst_rank = m->rank;
    c.local_group_size = n_children;
    send_ctrl(sw, out, m->ip, m->port, &h, &c);
}

static void deliver_to_member(struct op_sw *sw, const struct sw_group *g, int i, unsigned type,
                              struct op_txq *out)
{
    tell_member(sw, g->id, g->token, &g->notify, g->n_children, &g->children[i], type, out);
}

static void send_down_to_tor(struct op_sw *sw, const struct sw_group *g, int i, unsigned type,
                             struct op_txq *out)
{
    const struct sw_member *t = &g->children[i];
    struct op_inc_hdr h = {.version = OP_INC_VERSION, .kind = OP_INC_KIND_CTRL,
                           .group_id = g->id, .token = g->token, .src_rank = (uint32_t)i};
    struct op_inc_ctrl c = g->notify;
    set_type(&c, type);
    c.local_group_size = t->count;
    send_ctrl(sw, out, t->ip, t->port, &h, &c);
}

/* notify or kill to every child of g */
static void send_down_all(struct op_sw *sw, const struct sw_group *g, unsigned type,
                          struct op_txq *out)
{
    for (int i = 0; i < g->n_children; i++) {
        if (sw->me->spine)
            send_down_to_tor(sw, g, i, type, out);
        else
            deliver_to_member(sw, g, i, type, out);
    }
    if (type == OP_INC_CTRL_NOTIFY)
        sw->c[OP_SW_C_notifies]++;
}

static void refuse_pending(struct op_sw *sw, struct sw_pending *p, const struct op_inc_ctrl *q,
                           uint8_t reason, struct op_txq *out)
{
    struct op_inc_ctrl c = *q;
    set_type(&c, OP_INC_CTRL_REFUSE);
    c.fail_cause = reason;
    p->refused = reason;
    sw->c[OP_SW_C_refusals]++;
    OP_INFO(sw->cfg.log, "refusing communicator %u/%u/%u: %s", p->key.job_id, p->key.comm_id,
            p->key.c_id, op_inc_reason_str(reason));
    struct op_inc_hdr h = {.version = OP_INC_VERSION, .kind = OP_INC_KIND_CTRL, .reason = reason};
    /* A SPINE tells each TOR once; a TOR tells each member. */
    uint32_t told[OP_TOPO_MAX_SWITCHES] = {0};
    for (uint16_t i = 0; i < p->n; i++) {
        if (!sw->me->spine) {
            h.src_rank = p->m[i].rank;
            c.dst_ip = p->m[i].ip;
            send_ctrl(sw, out, p->m[i].ip, p->m[i].port, &h, &c);
            continue;
        }
        int t = op_topo_tor_of(&sw->topo, p->m[i].ip);
        if (t < 0 || told[t]++)
            continue;
        send_ctrl(sw, out, sw->topo.sw[t].ip, sw->topo.sw[t].port, &h, &c);
    }
}

/* ---- query */

/* A query passing up: note its sender as a pending member (or repeat an
 * earlier refusal), then fold in this switch's capabilities. Returns false
 * when the query stops here. */
static bool record_member(struct op_sw *sw, const struct sw_key *key, uint32_t ip, uint16_t port,
                          uint32_t rank, struct op_inc_ctrl *c, uint64_t now, struct op_txq *out)
{
    struct sw_pending *p = sw_pending_get(sw, key, now);
    if (p == NULL || sw_pending_add(p, ip, port, rank, !sw->me->spine) < 0) {
        sw->c[OP_SW_C_drop_mismatch]++;
        return false;
    }
    p->master_ip = c->dst_ip;
    if (p->refused) {
        refuse_pending(sw, p, c, p->refused, out);
        return false;
    }
    and_caps(sw, c);
    count_hop(c);
    return true;
}

/* Where the master of a query listens: it queried through this TOR too
 * (every leader does, the master included), so its port is among the
 * pending members; until its query came, the fabric's port. */
static uint16_t master_port(struct op_sw *sw, const struct sw_key *key,
                            const struct op_inc_ctrl *c)
{
    const struct sw_pending *p = sw_pending_find(sw, key);
    for (uint16_t i = 0; p != NULL && i < p->n; i++)
        if (p->m[i].ip == c->dst_ip && p->m[i].rank == c->dst_rank)
            return p->m[i].port;
    return sw->me->port;
}

static void query_from_host(struct op_sw *sw, const struct op_pkt *pkt, struct op_inc_hdr *h,
                            struct op_inc_ctrl *c, uint64_t now, struct op_txq *out)
{
    const struct op_flow *f = &pkt->flow;
    struct sw_key key = ctrl_key(c);
    struct sw_group *g = sw_group_find_key(sw, &key);
    if (g != NULL) { /* the member missed its notify */
        int i = sw_group_child(g, f->src.v4, f->src_port, h->src_rank);
        if (i < 0) {
            sw->c[OP_SW_C_drop_not_member]++;
            return;
        }
        deliver_to_member(sw, g, i, OP_INC_CTRL_NOTIFY, out);
        return;
    }
    if (!record_member(sw, &key, f->src.v4, f->src_port, h->src_rank, c, now, out))
        return;
    c->tor1_ip = sw->me->ip;
    if (sw->me->n_up == 0) { /* this TOR is the root of a one-level tree */
        c->spine_ip = sw->me->ip;
        c->ava_grp_num = sw_free_groups(sw);
        if (!serves_host(sw, c->dst_ip)) {
            sw->c[OP_SW_C_drop_no_route]++;
            return;
        }
        send_ctrl(sw, out, c->dst_ip, master_port(sw, &key, c), h, c);
        return;
    }
    for (int u = 0; u < sw->me->n_up; u++) {
        const struct op_topo_switch *s = &sw->topo.sw[sw->me->up[u]];
        send_ctrl(sw, out, s->ip, s->port, h, c);
    }
}

static void query_at_spine(struct op_sw *sw, const struct op_pkt *pkt, struct op_inc_hdr *h,
                           struct op_inc_ctrl *c, uint64_t now, struct op_txq *out)
{
    struct sw_key key = ctrl_key(c);
    struct sw_group *g = sw_group_find_key(sw, &key);
    if (g != NULL) { /* resend the notify to the TOR that missed it */
        for (int i = 0; i < g->n_children; i++)
            if (g->children[i].ip == pkt->flow.src.v4)
                send_down_to_tor(sw, g, i, OP_INC_CTRL_NOTIFY, out);
        return;
    }
    int master_tor = op_topo_tor_of(&sw->topo, c->dst_ip);
    int member_tor = op_topo_tor_of(&sw->topo, c->src_ip);
    if (master_tor < 0 || member_tor < 0 || sw->topo.sw[member_tor].ip != pkt->flow.src.v4) {
        sw->c[OP_SW_C_drop_no_route]++;
        return;
    }
    if (!record_member(sw, &key, c->src_ip, sw->topo.sw[member_tor].port, h->src_rank, c, now,
                       out))
        return;
    c->spine_ip = sw->me->ip;
    c->ava_grp_num = sw_free_groups(sw);
    send_ctrl(sw, out, sw->topo.sw[master_tor].ip, sw->topo.sw[master_tor].port, h, c);
}

static void query_from_spine(struct op_sw *sw, struct op_inc_hdr *h, struct op_inc_ctrl *c,
                             struct op_txq *out)
{
    if (!serves_host(sw, c->dst_ip)) {
        sw->c[OP_SW_C_drop_no_route]++;
        return;
    }
    and_caps(sw, c);
    count_hop(c);
    c->tor2_ip = sw->me->ip;
    struct sw_key key = ctrl_key(c);
    send_ctrl(sw, out, c->dst_ip, master_port(sw, &key, c), h, c);
}

/* ---- notify */

static int cmp_rank(const void *a, const void *b)
{
    const struct sw_member *x = a, *y = b;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* A SPINE's children are the TORs its members sit under, in topology order. */
static uint16_t tor_children(const struct op_sw *sw, const struct sw_pending *p,
                             struct sw_member *out)
{
    uint16_t per_tor[OP_TOPO_MAX_SWITCHES] = {0};
    for (uint16_t i = 0; i < p->n; i++) {
        int t = op_topo_tor_of(&sw->topo, p->m[i].ip);
        if (t >= 0)
            per_tor[t]++;
    }
    uint16_t n = 0;
    for (int t = 0; t < sw->topo.n; t++) {
        if (per_tor[t] == 0)
            continue;
        out[n] = (struct sw_member){.ip = sw->topo.sw[t].ip, .port = sw->topo.sw[t].port,
                                    .rank = n, .count = per_tor[t]};
        n++;
    }
    return n;
}

static struct sw_member *root_children(const struct op_sw *sw, const struct sw_pending *p,
                                       uint16_t *n)
{
    struct sw_member *ch = calloc(p->n > OP_TOPO_MAX_SWITCHES ? p->n : OP_TOPO_MAX_SWITCHES,
                                  sizeof(*ch));
    if (ch == NULL)
        return NULL;
    if (sw->me->spine) {
        *n = tor_children(sw, p, ch);
    } else {
        memcpy(ch, p->m, p->n * sizeof(*ch));
        qsort(ch, p->n, sizeof(*ch), cmp_rank);
        *n = p->n;
    }
    return ch;
}

static void notify_at_root(struct op_sw *sw, struct op_inc_ctrl *c, uint64_t now,
                           struct op_txq *out)
{
    struct sw_key key = ctrl_key(c);
    struct sw_group *g = sw_group_find_key(sw, &key);
    if (g != NULL) { /* the master retransmitted: some notify got lost below */
        send_down_all(sw, g, OP_INC_CTRL_NOTIFY, out);
        return;
    }
    struct sw_pending *p = sw_pending_find(sw, &key);
    if (p == NULL || c->src_ip != p->master_ip) {
        sw->c[OP_SW_C_drop_stale]++;
        return;
    }
    if (p->refused) {
        refuse_pending(sw, p, c, p->refused, out);
        return;
    }
    if (p->n != c->global_group_size) { /* queries still on their way */
        sw->c[OP_SW_C_drop_mismatch]++;
        return;
    }
    and_caps(sw, c);
    int id = sw_alloc_id(sw);
    if (id < 0) {
        refuse_pending(sw, p, c, OP_INC_R_NO_GROUP, out);
        return;
    }
    uint16_t n = 0;
    struct sw_member *ch = root_children(sw, p, &n);
    uint8_t reason = OP_INC_R_NO_SLOT;
    uint64_t token = op_rng_next(&sw->rng) | 1;
    op_status_t st = ch ? sw_group_create(sw, (uint16_t)id, token, &key, ch, n, c->window,
                                          c->sup_max_data_size, &g, &reason)
                        : OP_ERR_NOMEM;
    free(ch);
    if (st != OP_OK) {
        refuse_pending(sw, p, c, reason, out);
        return;
    }
    g->root = true;
    g->last_ns = now;
    g->notify = *c;
    g->notify.window = g->window;
    g->notify.sup_max_data_size = g->max_data;
    sw_pending_free(p);
    OP_INFO(sw->cfg.log, "group %u installed: %u members, %u children, window %u, %u B/packet",
            g->id, c->global_group_size, g->n_children, g->window, g->max_data);
    send_down_all(sw, g, OP_INC_CTRL_NOTIFY, out);
}

static void notify_from_spine(struct op_sw *sw, const struct op_pkt *pkt, struct op_inc_hdr *h,
                              struct op_inc_ctrl *c, uint64_t now, struct op_txq *out)
{
    struct sw_key key = ctrl_key(c);
    struct sw_group *g = sw->by_id[h->group_id];
    if (g != NULL && sw_key_eq(&g->key, &key) && g->token == h->token) {
        g->last_ns = now;
        send_down_all(sw, g, OP_INC_CTRL_NOTIFY, out);
        return;
    }
    struct sw_pending *p = sw_pending_find(sw, &key);
    if (p == NULL || h->group_id == 0) {
        sw->c[OP_SW_C_drop_stale]++;
        return;
    }
    if (p->n != c->local_group_size) {
        sw->c[OP_SW_C_drop_mismatch]++;
        return;
    }
    qsort(p->m, p->n, sizeof(*p->m), cmp_rank);
    uint8_t reason = 0;
    if (sw_group_create(sw, h->group_id, h->token, &key, p->m, p->n, c->window,
                        c->sup_max_data_size, &g, &reason) != OP_OK) {
        OP_WARN(sw->cfg.log, "cannot install group %u: %s", h->group_id,
                op_inc_reason_str(reason));
        sw->c[OP_SW_C_refusals]++;
        return;
    }
    g->parent_ip = pkt->flow.src.v4;
    g->parent_port = pkt->flow.src_port;
    g->index_at_parent = (uint16_t)h->src_rank;
    g->last_ns = now;
    g->notify = *c;
    sw_pending_free(p);
    send_down_all(sw, g, OP_INC_CTRL_NOTIFY, out);
}

static void notify_from_host(struct op_sw *sw, const struct op_pkt *pkt, struct op_inc_hdr *h,
                             struct op_inc_ctrl *c, uint64_t now, struct op_txq *out)
{
    if (c->src_ip != pkt->flow.src.v4) {
        sw->c[OP_SW_C_drop_not_member]++;
        return;
    }
    if (sw->me->n_up == 0 && c->spine_ip == sw->me->ip) {
        notify_at_root(sw, c, now, out);
        return;
    }
    if (!sw_is_uplink(sw, c->spine_ip)) {
        sw->c[OP_SW_C_drop_no_route]++;
        return;
    }
    count_hop(c);
    send_ctrl(sw, out, c->spine_ip, sw_uplink_port(sw, c->spine_ip), h, c);
}

static void refuse_from_spine(struct op_sw *sw, struct op_inc_ctrl *c, struct op_txq *out)
{
    struct sw_key key = ctrl_key(c);
    struct sw_pending *p = sw_pending_find(sw, &key);
    if (p == NULL) {
        sw->c[OP_SW_C_drop_stale]++;
        return;
    }
    refuse_pending(sw, p, c, c->fail_cause, out);
}

/* ---- kill */

static void kill_group(struct op_sw *sw, struct sw_group *g, struct op_txq *out)
{
    OP_INFO(sw->cfg.log, "group %u killed", g->id);
    send_down_all(sw, g, OP_INC_CTRL_KILL, out);
    sw_tomb_add(sw, g);
    sw_group_free(sw, g);
}

/* A child retransmits into a group killed here: the kill that went down to
 * it was lost (the master kills only once every leader has contributed to
 * the leave's barrier, so such a child is leaving and the kill ends its
 * leave). A TOR that still has the group frees it and tells its members. */
void sw_kill_again(struct op_sw *sw, const struct sw_tomb *t, const struct op_pkt *pkt,
                   const struct op_inc_hdr *h, struct op_txq *out)
{
    const struct sw_member from = {.ip = pkt->flow.src.v4, .port = pkt->flow.src_port,
                                   .rank = h->src_rank};
    sw->c[OP_SW_C_kills_repeated]++;
    tell_member(sw, t->id, t->token, &t->notify, t->n_children, &from, OP_INC_CTRL_KILL, out);
}

static bool member_of(const struct op_sw *sw, const struct sw_group *g, const struct op_pkt *pkt,
                      const struct op_inc_hdr *h)
{
    if (!sw->me->spine)
        return sw_group_child(g, pkt->flow.src.v4, pkt->flow.src_port, h->src_rank) >= 0;
    for (int i = 0; i < g->n_children; i++)
        if (g->children[i].ip == pkt->flow.src.v4 && g->children[i].port == pkt->flow.src_port)
            return true;
    return false;
}

static void kill_from_below(struct op_sw *sw, const struct op_pkt *pkt, struct op_inc_hdr *h,
                            struct op_inc_ctrl *c, struct op_txq *out)
{
    struct sw_group *g = sw->by_id[h->group_id];
    if (g == NULL) { /* already gone: confirm, so a retrying member can stop */
        send_ctrl(sw, out, pkt->flow.src.v4, pkt->flow.src_port, h, c);
        return;
    }
    if (g->token != h->token) {
        sw->c[OP_SW_C_drop_bad_token]++;
        return;
    }
    if (!member_of(sw, g, pkt, h)) {
        sw->c[OP_SW_C_drop_not_member]++;
        return;
    }
    if (g->root) {
        kill_group(sw, g, out);
        return;
    }
    count_hop(c);
    send_ctrl(sw, out, g->parent_ip, g->parent_port, h, c);
}

static void kill_from_spine(struct op_sw *sw, const struct op_pkt *pkt, struct op_inc_hdr *h,
                            struct op_txq *out)
{
    struct sw_group *g = sw->by_id[h->group_id];
    if (g == NULL || g->token != h->token || g->parent_ip != pkt->flow.src.v4) {
        sw->c[g == NULL ? OP_SW_C_drop_unknown_group : OP_SW_C_drop_bad_token]++;
        return;
    }
    kill_group(sw, g, out);
}

/* ---- dispatch */

static void ctrl_below(struct op_sw *sw, const struct op_pkt *pkt, struct op_inc_hdr *h,
                       struct op_inc_ctrl *c, uint64_t now, struct op_txq *out)
{
    switch (c->query_notify_hop & 0x0f) {
    case OP_INC_CTRL_QUERY:
        if (sw->me->spine)
            query_at_spine(sw, pkt, h, c, now, out);
        else if (c->src_ip == pkt->flow.src.v4)
            query_from_host(sw, pkt, h, c, now, out);
        else
            sw->c[OP_SW_C_drop_not_member]++;
        break;
    case OP_INC_CTRL_NOTIFY:
        if (sw->me->spine)
            notify_at_root(sw, c, now, out);
        else
            notify_from_host(sw, pkt, h, c, now, out);
        break;
    case OP_INC_CTRL_KILL:
        kill_from_below(sw, pkt, h, c, out);
        break;
    default:
        sw->c[OP_SW_C_drop_no_route]++;
    }
}

static void ctrl_above(struct op_sw *sw, const struct op_pkt *pkt, struct op_inc_hdr *h,
                       struct op_inc_ctrl *c, uint64_t now, struct op_txq *out)
{
    switch (c->query_notify_hop & 0x0f) {
    case OP_INC_CTRL_QUERY:
        query_from_spine(sw, h, c, out);
        break;
    case OP_INC_CTRL_NOTIFY:
        notify_from_spine(sw, pkt, h, c, now, out);
        break;
    case OP_INC_CTRL_REFUSE:
        refuse_from_spine(sw, c, out);
        break;
    case OP_INC_CTRL_KILL:
        kill_from_spine(sw, pkt, h, out);
        break;
    default:
        sw->c[OP_SW_C_drop_no_route]++;
    }
}

void sw_ctrl_input(struct op_sw *sw, const struct op_pkt *pkt, const struct op_inc_pkt *ip,
                   uint64_t now, struct op_txq *out)
{
    /* copies: the handlers rewrite them into what they send on */
    struct op_inc_ctrl c = ip->ctrl;
    struct op_inc_hdr h = ip->hdr;
    unsigned type = c.query_notify_hop & 0x0f;
    if (type == OP_INC_CTRL_QUERY)
        sw->c[OP_SW_C_queries]++;
    else if (type == OP_INC_CTRL_KILL)
        sw->c[OP_SW_C_kills]++;
    switch (sw_side_of(sw, pkt->flow.src.v4, pkt->flow.src_port)) {
    case SIDE_BELOW:
        ctrl_below(sw, pkt, &h, &c, now, out);
        break;
    case SIDE_ABOVE:
        ctrl_above(sw, pkt, &h, &c, now, out);
        break;
    default:
        sw->c[OP_SW_C_drop_not_member]++;
    }
}
