/* A client of the all-to-all daemon (offpath/agent.h): its send buffer is
 * the request message itself, so a submit is one channel send. */
#include <stdlib.h>
#include <string.h>

#include "agent_proto.h"

struct op_a2a_client {
    struct op_a2a_client_config cfg;
    struct op_channel *ch;
    size_t bytes;    /* ranks * chunk */
    uint8_t *req;    /* OP_AGENT_ID_HDR + bytes: the send buffer after the header */
    uint8_t *result; /* bytes */
    uint64_t calls;
    bool broken;     /* the last call failed: no goodbye */
};

static op_status_t greet(struct op_a2a_client *c)
{
    const struct op_a2a_client_config *g = &c->cfg;
    struct op_agent_a2a_hello h = {.rank = g->rank, .ranks = g->ranks, .workers = g->workers,
                                .chunk = g->chunk};
    struct op_agent_welcome w;
    uint8_t msg[OP_AGENT_A2A_HELLO_LEN];
    const uint8_t *reply;
    size_t len;
    op_status_t st = op_channel_send(c->ch, msg, op_agent_a2a_hello_encode(&h, msg), 0);
    if (st == OP_OK)
        st = op_channel_recv(c->ch, &reply, &len);
    if (st != OP_OK) {
        OP_ERROR(g->log, "rank %u: no answer from the daemon: %s", g->rank,
                 op_channel_error(c->ch));
        return st;
    }
    if (len >= 1 && reply[0] == OP_AGENT_MSG_REFUSED) {
        OP_ERROR(g->log, "rank %u: the daemon refused this client: %.*s", g->rank,
                 (int)(len - 1), reply + 1);
        return OP_ERR_REFUSED;
    }
    if (op_agent_welcome_decode(reply, len, &w) != OP_OK || w.rank != g->rank ||
        w.clients != g->ranks) {
        OP_ERROR(g->log, "rank %u: malformed welcome from the daemon", g->rank);
        return OP_ERR_MALFORMED;
    }
    return OP_OK;
}

op_status_t op_a2a_client_open(const struct op_a2a_client_config *cfg, struct op_a2a_client **out)
{
    if (cfg->ranks == 0 || cfg->rank >= cfg->ranks || cfg->chunk == 0 ||
        cfg->chunk > (OP_CHAN_LIMIT_MAX_MSG - OP_AGENT_ID_HDR) / cfg->ranks)
        return OP_ERR_INVAL;
    struct op_a2a_client *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return OP_ERR_NOMEM;
    c->cfg = *cfg;
    c->bytes = (size_t)cfg->ranks * cfg->chunk;
    c->req = calloc(1, OP_AGENT_ID_HDR + c->bytes);
    c->result = calloc(1, c->bytes);
    /* room for a refusal's reason too, whatever the size of the buffers */
    size_t max = OP_AGENT_ID_HDR + c->bytes < 4096 ? 4096 : OP_AGENT_ID_HDR + c->bytes;
    struct op_channel_config cc = {.addr = cfg->daemon, .local = cfg->key,
                                   .timeout_ns = cfg->timeout_ns, .max_msg = (uint32_t)max};
    memcpy(cc.peer_pub, cfg->peer_pub, OP_CHAN_KEY_BYTES);
    char why[256];
    op_status_t st = c->req && c->result ? op_channel_open(&cc, &c->ch, why) : OP_ERR_NOMEM;
    if (st != OP_OK && c->ch == NULL && st != OP_ERR_NOMEM)
        OP_ERROR(cfg->log, "rank %u: cannot reach the daemon: %s", cfg->rank, why);
    if (st == OP_OK)
        st = greet(c);
    if (st != OP_OK) {
        c->broken = true;
        op_a2a_client_close(c);
        return st;
    }
    *out = c;
    return OP_OK;
}

void *op_a2a_client_sendbuf(struct op_a2a_client *c) { return c->req + OP_AGENT_ID_HDR; }
const void *op_a2a_client_recvbuf(const struct op_a2a_client *c) { return c->result; }

op_status_t op_a2a_client_start(struct op_a2a_client *c)
{
    op_agent_id_encode(OP_AGENT_MSG_VECTOR, ++c->calls, c->req);
    op_status_t st = op_channel_send(c->ch, c->req, OP_AGENT_ID_HDR + c->bytes, 0);
    if (st != OP_OK) {
        c->broken = true;
        OP_ERROR(c->cfg.log, "rank %u: submitting to the daemon: %s", c->cfg.rank,
                 op_channel_error(c->ch));
    }
    return st;
}

op_status_t op_a2a_client_wait(struct op_a2a_client *c)
{
    const uint8_t *msg, *data;
    size_t len;
    uint64_t id;
    op_status_t st = c->broken ? OP_ERR_STATE : op_channel_recv(c->ch, &msg, &len);
    if (st == OP_OK && len >= 1 && msg[0] == OP_AGENT_MSG_REFUSED) {
        OP_ERROR(c->cfg.log, "rank %u: the daemon: %.*s", c->cfg.rank, (int)(len - 1), msg + 1);
        st = OP_ERR_REFUSED;
    } else if (st == OP_OK &&
               (op_agent_id_decode(msg, len, OP_AGENT_MSG_RESULT, c->bytes, &id, &data) != OP_OK ||
                id != c->calls)) {
        OP_ERROR(c->cfg.log, "rank %u: malformed result from the daemon", c->cfg.rank);
        st = OP_ERR_MALFORMED;
    } else if (st == OP_OK) {
        memcpy(c->result, data, c->bytes);
    } else if (!c->broken) {
        OP_ERROR(c->cfg.log, "rank %u: waiting for the daemon: %s", c->cfg.rank,
                 op_channel_error(c->ch));
    }
    c->broken = st != OP_OK;
    return st;
}

void op_a2a_client_close(struct op_a2a_client *c)
{
    if (c == NULL)
        return;
    uint8_t bye = OP_AGENT_MSG_BYE;
    if (!c->broken)
        (void)op_channel_send(c->ch, &bye, 1, 0);
    op_channel_close(c->ch);
    free(c->req);
    free(c->result);
    free(c);
}
