/* The non-offloaded allreduce clients (offpath/agent.h): a full mesh of
 * secure channels; each vector goes to every other client, a thread a peer
 * takes theirs, and the wait reduces them on the host in rank order. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_internal.h"
#include "offpath/reduce.h"

bool mesh_all_in(const struct client *cl, uint64_t count)
{
    for (uint32_t r = 0; r < cl->w.clients; r++)
        if (r != cl->w.rank && cl->peers[r].got < count)
            return false;
    return true;
}

/* The mesh's reduction of operations first .. first + n - 1 on the host,
 * every rank's vector in rank order, into the result slots. */
void mesh_reduce(struct client *cl, uint64_t first, uint64_t n)
{
    const struct op_agent_job *job = &cl->cfg->job;
    unsigned type = op_agent_red_type(job->type);
    for (uint64_t k = 0; k < n; k++) {
        uint64_t id = first + k, slot = id % job->batch;
        uint8_t *acc = cl->in + slot * cl->bytes;
        for (uint32_t r = 0; r < cl->w.clients; r++) {
            const uint8_t *v = r == cl->w.rank
                                   ? cl->out + k * (OP_AGENT_ID_HDR + cl->bytes) + OP_AGENT_ID_HDR
                                   : cl->peers[r].in + id % (2 * job->batch) * cl->bytes;
            if (r == 0)
                memcpy(acc, v, cl->bytes);
            else
                op_reduce(job->op, type, acc, v, job->size);
        }
        cl->in_id[slot] = id;
    }
    cl->results += n;
}

/* Mesh: a peer's vectors into its slots (two batches' worth: a peer can be
 * one batch ahead, as it needs this client's vectors to finish one). */
static void *receive_peer(void *arg)
{
    struct peer_link *p = arg;
    struct client *cl = p->cl;
    uint64_t slots = 2 * cl->cfg->job.batch;
    for (uint64_t got = 0; got < cl->expected; got++) {
        const uint8_t *msg, *data;
        size_t len;
        uint64_t id;
        op_status_t st = op_channel_recv(p->ch, &msg, &len);
        if (st == OP_OK &&
            op_agent_id_decode(msg, len, OP_AGENT_MSG_VECTOR, cl->bytes, &id, &data) != OP_OK)
            st = OP_ERR_MALFORMED;
        if (st == OP_OK)
            memcpy(p->in + id % slots * cl->bytes, data, cl->bytes);
        else
            OP_ERROR(cl->cfg->log, "client %u: %s", p->rank,
                     st == OP_ERR_MALFORMED ? "malformed vector" : op_channel_error(p->ch));
        pthread_mutex_lock(&cl->mu);
        if (st == OP_OK)
            p->got = got + 1;
        else
            cl->rx_st = st;
        pthread_cond_signal(&cl->got);
        pthread_mutex_unlock(&cl->mu);
        if (st != OP_OK)
            return NULL;
    }
    return NULL;
}

op_status_t mesh_submit(struct client *cl, uint64_t n)
{
    op_status_t st = OP_OK;
    for (uint32_t r = 0; r < cl->w.clients && st == OP_OK; r++)
        if (r != cl->w.rank)
            st = client_send_batch(cl, cl->peers[r].ch, n);
    return st;
}

/* ---- the mesh's setup: every pair of clients meets once (the higher rank
 * connects), checks DOCA's handshake and its rank */

static void mesh_channel(const struct client *cl, uint32_t r, struct op_channel_config *cc)
{
    const struct op_agent_client_config *c = cl->cfg;
    memset(cc, 0, sizeof(*cc));
    cc->addr.kind = OP_CHAN_TCP;
    op_format_ipv4(r < c->n_clients ? c->client_ip[r] : c->ip, cc->addr.host);
    cc->addr.port = r < c->n_clients ? c->client_port[r] : c->port;
    cc->listen = cc->use_listener = r >= c->n_clients;
    cc->listener = cl->listener;
    cc->local = c->key;
    memcpy(cc->peer_pub, c->peer_pub, OP_CHAN_KEY_BYTES);
    cc->max_msg = (uint32_t)(OP_AGENT_ID_HDR + cl->bytes < 4096 ? 4096 : OP_AGENT_ID_HDR + cl->bytes);
    cc->timeout_ns = c->timeout_ns;
}

/* A lower rank's side: connect, say who this is, hear it accepted. */
static op_status_t mesh_connect(struct client *cl, uint32_t r)
{
    struct op_channel_config cc;
    char why[256], text[OP_AR_HANDSHAKE_MAX];
    uint8_t msg[OP_AGENT_MESH_MAX];
    const uint8_t *reply;
    size_t len;
    struct op_agent_welcome w;
    mesh_channel(cl, r, &cc);
    op_status_t st = op_channel_open(&cc, &cl->peers[r].ch, why);
    if (st != OP_OK) {
        OP_ERROR(cl->cfg->log, "client %u: %s", r, why);
        return st;
    }
    agent_handshake_text(&cl->cfg->job, text);
    size_t n = op_agent_mesh_encode(cl->w.rank, text, msg, sizeof(msg));
    st = op_channel_send(cl->peers[r].ch, msg, n, 0);
    if (st == OP_OK)
        st = op_channel_recv(cl->peers[r].ch, &reply, &len);
    if (st == OP_OK && len >= 1 && reply[0] == OP_AGENT_MSG_REFUSED) {
        OP_ERROR(cl->cfg->log, "client %u refused this client: %.*s", r, (int)(len - 1),
                 reply + 1);
        return OP_ERR_REFUSED;
    }
    if (st == OP_OK && (op_agent_welcome_decode(reply, len, &w) != OP_OK || w.rank != r))
        st = OP_ERR_MALFORMED;
    if (st != OP_OK)
        OP_ERROR(cl->cfg->log, "client %u: no valid answer (%s)", r, op_status_str(st));
    return st;
}

/* A higher rank comes in: its rank and job checked, refused with the reason
 * (and the next one awaited) if either is wrong. */
static op_status_t mesh_accept(struct client *cl)
{
    char why[256], mine[OP_AR_HANDSHAKE_MAX], theirs[OP_AR_HANDSHAKE_MAX];
    agent_handshake_text(&cl->cfg->job, mine);
    for (;;) {
        struct op_channel_config cc;
        struct op_channel *ch;
        const uint8_t *msg;
        size_t len;
        uint32_t r = 0;
        mesh_channel(cl, UINT32_MAX, &cc);
        op_status_t st = op_channel_open(&cc, &ch, why);
        if (st != OP_OK) {
            OP_ERROR(cl->cfg->log, "waiting for the other clients: %s", why);
            return st;
        }
        st = op_channel_recv(ch, &msg, &len);
        if (st != OP_OK || op_agent_mesh_decode(msg, len, &r, theirs) != OP_OK)
            snprintf(why, sizeof why, "no valid greeting");
        else if (r <= cl->w.rank || r >= cl->w.clients || cl->peers[r].ch != NULL)
            snprintf(why, sizeof why, "rank %u is not one this client waits for", r);
        else if (op_ar_handshake_check(mine, theirs, why, sizeof why) == OP_OK) {
            uint8_t reply[32];
            struct op_agent_welcome w = {cl->w.rank, cl->w.clients, 1, cl->w.clients};
            cl->peers[r].ch = ch;
            return op_channel_send(ch, reply, op_agent_welcome_encode(&w, reply), 0);
        }
        OP_ERROR(cl->cfg->log, "a client refused: %s", why);
        agent_refuse(ch, why);
    }
}

op_status_t mesh_open(struct client *cl)
{
    const struct op_agent_client_config *c = cl->cfg;
    uint32_t me = c->n_clients;
    for (uint32_t r = 0; r < c->n_clients; r++)
        if (c->client_ip[r] == c->ip && c->client_port[r] == c->port)
            me = r;
    if (me == c->n_clients) {
        OP_ERROR(c->log, "this client (its address and -t port) is not in the -a list");
        return OP_ERR_INVAL;
    }
    cl->w = (struct op_agent_welcome){me, c->n_clients, 1, c->n_clients};
    struct op_chan_addr a = {.kind = OP_CHAN_TCP, .port = c->port};
    char why[256];
    op_format_ipv4(c->ip, a.host);
    op_status_t st = op_chan_listen(&a, &cl->listener, why);
    if (st != OP_OK)
        OP_ERROR(c->log, "%s", why);
    for (uint32_t r = 0; r < me && st == OP_OK; r++)
        st = mesh_connect(cl, r);
    for (uint32_t k = me + 1; k < c->n_clients && st == OP_OK; k++)
        st = mesh_accept(cl);
    for (uint32_t r = 0; r < c->n_clients && st == OP_OK; r++) {
        struct peer_link *p = &cl->peers[r];
        if (r == me)
            continue;
        *p = (struct peer_link){.cl = cl, .rank = r, .ch = p->ch,
                                .in = malloc(2 * c->job.batch * cl->bytes)};
        if (p->in == NULL || pthread_create(&p->thread, NULL, receive_peer, p) != 0)
            st = OP_ERR_NOMEM;
        p->started = st == OP_OK;
    }
    return st;
}

void mesh_close(struct client *cl, bool join)
{
    for (uint32_t r = 0; r < OP_AGENT_MAX_CLIENTS; r++) {
        struct peer_link *p = &cl->peers[r];
        if (p->started && join)
            pthread_join(p->thread, NULL);
        else if (p->started)
            pthread_detach(p->thread); /* blocked on a dead link until its timeout */
        if (join || !p->started) {
            op_channel_close(p->ch);
            free(p->in);
        }
    }
    if (cl->listener >= 0)
        close(cl->listener);
}
