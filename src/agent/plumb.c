/* A daemon's plumbing (plumb.h): listeners, admitted clients, and the
 * queue pairs between daemons' ranks, exchanged over daemon links. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plumb.h"

static op_status_t find_self(struct agent_plumb *p)
{
    for (uint32_t j = 0; j < p->net->n_daemons; j++)
        if (p->net->daemon_ip[j] == p->net->ip && p->net->daemon_port[j] == p->net->port) {
            p->self = j;
            return OP_OK;
        }
    OP_ERROR(p->net->log, "this daemon (its address and -t port) is not in the -a list");
    return OP_ERR_INVAL;
}

static void tcp_addr(uint32_t ip, uint16_t port, struct op_chan_addr *a)
{
    memset(a, 0, sizeof(*a));
    a->kind = OP_CHAN_TCP;
    op_format_ipv4(ip, a->host);
    a->port = port;
}

op_status_t agent_plumb_open(struct agent_plumb *p)
{
    struct op_chan_addr a;
    char why[256];
    p->client_fd = p->link_fd = -1;
    op_status_t st = find_self(p);
    if (st != OP_OK)
        return st;
    tcp_addr(p->net->ip, p->net->port, &a);
    st = op_chan_listen(&a, &p->client_fd, why);
    if (st == OP_OK && p->net->n_daemons > 1) {
        tcp_addr(p->net->ip, (uint16_t)(p->net->port + 1), &a);
        st = op_chan_listen(&a, &p->link_fd, why);
    }
    if (st != OP_OK)
        OP_ERROR(p->net->log, "%s", why);
    return st;
}

void agent_plumb_close(struct agent_plumb *p)
{
    if (p->client_fd >= 0)
        close(p->client_fd);
    if (p->link_fd >= 0)
        close(p->link_fd);
    p->client_fd = p->link_fd = -1;
}

/* listener: the socket to accept on, or -1 to connect to ip:port */
static void channel_config(const struct agent_plumb *p, int listener, uint32_t ip, uint16_t port,
                           const uint8_t *peer, struct op_channel_config *cc)
{
    memset(cc, 0, sizeof(*cc));
    tcp_addr(ip, port, &cc->addr);
    cc->listen = cc->use_listener = listener >= 0;
    cc->listener = listener;
    cc->local = p->net->key;
    memcpy(cc->peer_pub, peer, OP_CHAN_KEY_BYTES);
    cc->max_msg = p->max_msg < 4096 ? 4096 : p->max_msg;
    cc->timeout_ns = p->net->timeout_ns;
}

op_status_t agent_plumb_accept(struct agent_plumb *p, agent_greet_fn greet, void *ctx,
                               struct op_channel **out)
{
    struct op_channel_config cc;
    char why[256];
    channel_config(p, p->client_fd, p->net->ip, p->net->port, p->net->clients_pub, &cc);
    for (;;) {
        struct op_channel *ch;
        op_status_t st = op_channel_open(&cc, &ch, why);
        if (st != OP_OK && p->idle && st == OP_ERR_TIMEOUT) {
            OP_DEBUG(p->net->log, "no client yet: %s", why);
            return st;
        }
        if (st != OP_OK) {
            OP_ERROR(p->net->log, "waiting for a client: %s", why);
            return st;
        }
        const uint8_t *msg;
        size_t len, reply_len = 0;
        uint8_t reply[32];
        st = op_channel_recv(ch, &msg, &len);
        if (st == OP_OK)
            st = greet(ctx, msg, len, reply, &reply_len, why, sizeof why);
        else
            snprintf(why, sizeof why, "no handshake (%s)", op_channel_error(ch));
        if (st == OP_OK) {
            *out = ch;
            return op_channel_send(ch, reply, reply_len, 0);
        }
        p->refused++;
        OP_ERROR(p->net->log, "client refused: configuration mismatch: %s", why);
        agent_refuse(ch, why);
    }
}

/* ---- the queue pairs between daemons */

struct link {
    uint32_t per, ranks;
    struct op_a2a *const *local;
    struct op_a2a_endpoint *eps;      /* [ranks] */
    struct op_a2a_qp_info *mine;      /* [per][ranks]: local i's QP to each rank */
    struct op_a2a_qp_info *theirs;    /* [per][ranks]: each rank's QP to local i */
};

/* Sender's local rank i outer, the receiver's local rank k inner: a PAIR
 * each, i's endpoint and its QP to k. */
static op_status_t send_pairs(const struct agent_plumb *p, struct op_channel *ch, uint32_t peer,
                              const struct link *l)
{
    uint8_t buf[OP_AGENT_PAIR_LEN];
    op_status_t st = OP_OK;
    for (uint32_t i = 0; i < l->per && st == OP_OK; i++)
        for (uint32_t k = 0; k < l->per && st == OP_OK; k++) {
            uint32_t me = p->self * l->per + i;
            struct op_agent_pair m = {.index = me, .ep = l->eps[me],
                                      .qp = l->mine[(size_t)i * l->ranks + peer * l->per + k]};
            bool last = i + 1 == l->per && k + 1 == l->per;
            st = op_channel_send(ch, buf, op_agent_pair_encode(&m, buf), last ? 0 : OP_CHAN_MORE);
        }
    return st;
}

/* The other side's PAIRs in send_pairs' order; *peer: the daemon expected,
 * or UINT32_MAX for any (the listener learns it from the first). */
static op_status_t recv_pairs(const struct agent_plumb *p, struct op_channel *ch, uint32_t *peer,
                              struct link *l)
{
    for (uint32_t i = 0; i < l->per; i++)
        for (uint32_t k = 0; k < l->per; k++) {
            const uint8_t *msg;
            size_t len;
            struct op_agent_pair m;
            op_status_t st = op_channel_recv(ch, &msg, &len);
            if (st != OP_OK)
                return st;
            if (op_agent_pair_decode(msg, len, &m) != OP_OK || m.index >= l->ranks)
                return OP_ERR_MALFORMED;
            uint32_t j = m.index / l->per;
            if (*peer == UINT32_MAX && j != p->self)
                *peer = j;
            if (j != *peer || m.index != j * l->per + i)
                return OP_ERR_MALFORMED;
            l->eps[m.index] = m.ep;
            l->theirs[(size_t)k * l->ranks + m.index] = m.qp;
        }
    return OP_OK;
}

/* One daemon pair's exchange: the initiator (the higher index) speaks first. */
static op_status_t pair_with(struct agent_plumb *p, bool listen, uint32_t j, struct link *l)
{
    struct op_channel_config cc;
    struct op_channel *ch;
    char why[256];
    channel_config(p, listen ? p->link_fd : -1, listen ? p->net->ip : p->net->daemon_ip[j],
                   (uint16_t)((listen ? p->net->port : p->net->daemon_port[j]) + 1), p->net->key.pub, &cc);
    cc.max_msg = 4096;
    op_status_t st = op_channel_open(&cc, &ch, why);
    if (st != OP_OK) {
        OP_ERROR(p->net->log, "daemon link: %s", why);
        return st;
    }
    uint32_t peer = listen ? UINT32_MAX : j;
    if (!listen)
        st = send_pairs(p, ch, j, l);
    if (st == OP_OK)
        st = recv_pairs(p, ch, &peer, l);
    if (st == OP_OK && listen)
        st = send_pairs(p, ch, peer, l);
    if (st != OP_OK)
        OP_ERROR(p->net->log, "daemon link: %s", st == OP_ERR_MALFORMED ? "malformed setup message"
                                                                    : op_channel_error(ch));
    op_channel_close(ch);
    return st;
}

/* What the daemon knows of its own ranks without asking: their endpoints,
 * and the QPs between two of them. */
static void own_ranks(const struct agent_plumb *p, struct link *l)
{
    for (uint32_t i = 0; i < l->per; i++) {
        op_a2a_endpoint(l->local[i], &l->eps[p->self * l->per + i]);
        op_a2a_qp_infos(l->local[i], &l->mine[(size_t)i * l->ranks]);
    }
    for (uint32_t i = 0; i < l->per; i++)
        for (uint32_t k = 0; k < l->per; k++)
            l->theirs[(size_t)k * l->ranks + p->self * l->per + i] =
                l->mine[(size_t)i * l->ranks + p->self * l->per + k];
}

op_status_t agent_plumb_link(struct agent_plumb *p, struct op_a2a *const *local, uint32_t per)
{
    struct link l = {.per = per, .ranks = p->net->n_daemons * per, .local = local};
    l.eps = calloc(l.ranks, sizeof(*l.eps));
    l.mine = calloc((size_t)per * l.ranks, sizeof(*l.mine));
    l.theirs = calloc((size_t)per * l.ranks, sizeof(*l.theirs));
    op_status_t st = l.eps && l.mine && l.theirs ? OP_OK : OP_ERR_NOMEM;
    if (st == OP_OK)
        own_ranks(p, &l);
    for (uint32_t j = 0; st == OP_OK && j < p->self; j++)
        st = pair_with(p, false, j, &l);
    for (uint32_t k = p->self + 1; st == OP_OK && k < p->net->n_daemons; k++)
        st = pair_with(p, true, k, &l);
    for (uint32_t i = 0; st == OP_OK && i < per; i++)
        st = op_a2a_connect(local[i], l.eps, &l.theirs[(size_t)i * l.ranks]);
    free(l.eps);
    free(l.mine);
    free(l.theirs);
    return st;
}
