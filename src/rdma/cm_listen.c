/* A CM listener in front of several CMs (offpath/rdma/cm.h): it decides
 * what one packet to the shared UDP 4791 is (a new client, a client's REQ
 * again, or something to refuse or drop) and builds the refusal; the
 * clients' own CMs do the rest from ports of their own. */
#include <stdlib.h>
#include <string.h>

#include "offpath/rdma.h"
#include "offpath/wire/cm.h"

#define REJ_NO_QP 1          /* IBTA's REJ reasons, as the CM's */
#define REJ_BAD_SERVICE_ID 8

struct who {
    uint32_t ip, comm_id;
    uint16_t port;
};

struct op_rdma_cm_listener {
    uint16_t service_port;
    uint32_t clients, taken;
    struct who *who; /* the REQ that took each client */
    uint32_t psn;
    uint64_t c[OP_RDMA_CM_C_COUNT_];
    uint64_t drops[OP_CM_E_COUNT_];
};

op_status_t op_rdma_cm_listener_create(uint16_t service_port, uint32_t clients,
                                       struct op_rdma_cm_listener **out)
{
    if (clients == 0)
        return OP_ERR_INVAL;
    struct op_rdma_cm_listener *l = calloc(1, sizeof(*l));
    if (l == NULL || (l->who = calloc(clients, sizeof(*l->who))) == NULL) {
        free(l);
        return OP_ERR_NOMEM;
    }
    l->service_port = service_port;
    l->clients = clients;
    *out = l;
    return OP_OK;
}

void op_rdma_cm_listener_destroy(struct op_rdma_cm_listener *l)
{
    if (l != NULL)
        free(l->who);
    free(l);
}

const uint64_t *op_rdma_cm_listener_counters(const struct op_rdma_cm_listener *l) { return l->c; }
const uint64_t *op_rdma_cm_listener_drops(const struct op_rdma_cm_listener *l) { return l->drops; }

/* A socket on every address does not say where a REQ went: its primary
 * path does (remote GID ::ffff:IPv4). 0 if it names no IPv4 address. */
static uint32_t asked_ip(const struct op_pkt *pkt)
{
    static const uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    struct op_cm_msg m;
    enum op_cm_err why;
    if (pkt->len != OP_CM_PKT_LEN ||
        op_cm_mad_decode(pkt->data + OP_BTH_LEN + OP_DETH_LEN, OP_CM_MAD_LEN, &m, &why) != OP_OK ||
        m.attr != OP_CM_REQ || memcmp(m.remote_gid, v4_mapped, sizeof v4_mapped) != 0)
        return 0;
    const uint8_t *g = m.remote_gid + 12;
    return (uint32_t)g[0] << 24 | (uint32_t)g[1] << 16 | (uint32_t)g[2] << 8 | g[3];
}

static void refuse(struct op_rdma_cm_listener *l, const struct op_pkt *pkt,
                   const struct op_cm_msg *m, uint16_t reason, uint8_t sidr_status,
                   struct op_pkt *reply)
{
    struct op_cm_msg r = {.attr = m->attr == OP_CM_SIDR_REQ ? OP_CM_SIDR_REP : OP_CM_REJ,
                          .tid = m->tid, .reason = reason, .status = sidr_status};
    if (r.attr == OP_CM_REJ)
        r.remote_comm_id = m->local_comm_id;
    else {
        r.local_comm_id = m->local_comm_id; /* the request ID */
        r.service_id = m->service_id;
    }
    reply->flow = (struct op_flow){.src = pkt->flow.dst, .src_port = pkt->flow.dst_port,
                                   .dst = pkt->flow.src, .dst_port = pkt->flow.src_port};
    reply->len = (uint32_t)op_cm_packet_encode(&reply->flow, l->psn++ & 0xffffffu, &r,
                                               reply->data, OP_IO_BUF_SIZE);
    l->c[OP_RDMA_CM_C_cm_rej_sent]++;
    l->c[OP_RDMA_CM_C_cm_pkts_out]++;
}

static bool same(const struct who *w, const struct op_pkt *pkt, uint32_t comm_id)
{
    return w->ip == pkt->flow.src.v4 && w->port == pkt->flow.src_port && w->comm_id == comm_id;
}

enum op_rdma_cm_verdict op_rdma_cm_listener_input(struct op_rdma_cm_listener *l,
                                                  struct op_pkt *pkt, struct op_pkt *reply,
                                                  uint32_t *client)
{
    struct op_cm_msg m;
    enum op_cm_err why;
    l->c[OP_RDMA_CM_C_cm_pkts_in]++;
    if (pkt->flow.dst.v4 == 0)
        pkt->flow.dst = op_addr_ipv4(asked_ip(pkt));
    if (op_cm_packet_decode(&pkt->flow, pkt->data, pkt->len, &m, &why) != OP_OK) {
        l->c[OP_RDMA_CM_C_cm_malformed]++;
        l->drops[why < OP_CM_E_COUNT_ ? why : OP_CM_E_length]++;
        return OP_RDMA_CM_DROPPED;
    }
    if (m.attr != OP_CM_REQ && m.attr != OP_CM_SIDR_REQ) { /* answers go to the clients' ports */
        l->c[OP_RDMA_CM_C_cm_unknown]++;
        return OP_RDMA_CM_DROPPED;
    }
    uint64_t tcp = OP_CM_SERVICE_RDMA_TCP | l->service_port;
    uint64_t udp = OP_CM_SERVICE_RDMA_UDP | l->service_port;
    if (m.attr == OP_CM_SIDR_REQ || m.service_id != tcp) {
        l->c[OP_RDMA_CM_C_cm_unknown]++;
        refuse(l, pkt, &m, REJ_BAD_SERVICE_ID,
               m.service_id == udp ? OP_CM_SIDR_NO_QP : OP_CM_SIDR_UNSUPPORTED, reply);
        return OP_RDMA_CM_REFUSED;
    }
    for (uint32_t i = 0; i < l->taken; i++)
        if (same(&l->who[i], pkt, m.local_comm_id)) {
            l->c[OP_RDMA_CM_C_cm_duplicates]++;
            *client = i;
            return OP_RDMA_CM_SAME_CLIENT;
        }
    if (l->taken == l->clients) {
        l->c[OP_RDMA_CM_C_cm_unknown]++;
        refuse(l, pkt, &m, REJ_NO_QP, 0, reply);
        return OP_RDMA_CM_REFUSED;
    }
    l->who[l->taken] = (struct who){pkt->flow.src.v4, m.local_comm_id, pkt->flow.src_port};
    *client = l->taken++;
    return OP_RDMA_CM_NEW_CLIENT;
}
