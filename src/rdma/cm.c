/* The connection manager: rdma_cm's exchange as a pure state machine on
 * the device. Active: REQ, resent every retry_ns until a REP (then RTU) or
 * max_retries (FAILED, with a cause). Passive: a new REQ takes the first
 * free listening connection of its transport type and is answered with a
 * REP, resent until the RTU; a REQ seen before gets the REP again, a REP
 * seen before the RTU again (a lost RTU or REP is repaired by the other
 * side's resend). UD connections resolve instead: SIDR_REQ, resent until
 * a SIDR_REP, which a passive side sends again for a SIDR_REQ seen before
 * (no RTU: the requester's resend repairs a lost reply). Everything
 * comes and goes as CM MADs to QP 1 (offpath/wire/cm.h); whatever is not
 * one is dropped and counted by its reason. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdma_internal.h"

#define CM_REJ_NO_QP 1          /* IBTA's REJ reasons: no QP available */
#define CM_REJ_BAD_SERVICE_ID 8 /* invalid service ID */
#define CM_REJ_BAD_TRANSPORT 9  /* invalid transport service type */

struct cm_conn {
    enum op_rdma_cm_state state;
    bool listening, active;
    struct op_rdma_cm_side mine, peer;
    uint32_t local_id, remote_id;
    uint64_t tid;
    uint32_t peer_ip;
    uint16_t peer_port;
    uint32_t tries;
    uint64_t resend_at; /* UINT64_MAX: nothing to resend */
    uint64_t first_at;
    char cause[RDMA_CAUSE_LEN];
};

struct op_rdma_cm {
    struct op_rdma_dev *dev;
    struct op_rdma_cm_config cfg;
    struct cm_conn *conns;
    uint32_t psn;
    uint64_t c[OP_RDMA_CM_C_COUNT_];
    uint64_t drops[OP_CM_E_COUNT_];
};

static const char *const counter_names[] = {OP_RDMA_CM_COUNTERS(OP_COUNTER_NAME)};

const char *op_rdma_cm_counter_name(unsigned c)
{
    return op_counter_name(counter_names, OP_RDMA_CM_C_COUNT_, c);
}
const uint64_t *op_rdma_cm_counters(const struct op_rdma_cm *cm) { return cm->c; }
const uint64_t *op_rdma_cm_drops(const struct op_rdma_cm *cm) { return cm->drops; }

op_status_t op_rdma_cm_create(struct op_rdma_dev *dev, const struct op_rdma_cm_config *cfg,
                              struct op_rdma_cm **out)
{
    if (dev->cm != NULL || cfg->nconn == 0 || cfg->nconn > RDMA_MAX_QPS || cfg->retry_ns == 0)
        return OP_ERR_INVAL;
    struct op_rdma_cm *cm = calloc(1, sizeof(*cm));
    if (cm == NULL || (cm->conns = calloc(cfg->nconn, sizeof(*cm->conns))) == NULL) {
        free(cm);
        return OP_ERR_NOMEM;
    }
    cm->dev = dev;
    cm->cfg = *cfg;
    for (uint32_t i = 0; i < cfg->nconn; i++) {
        cm->conns[i].resend_at = UINT64_MAX;
        /* communication IDs: random, never 0 (REQ's remote ID) */
        cm->conns[i].local_id = (uint32_t)op_rng_next(&dev->rng) | 1u;
    }
    dev->cm = cm;
    *out = cm;
    return OP_OK;
}

const struct op_rdma_cm *op_rdma_dev_cm(const struct op_rdma_dev *dev) { return dev->cm; }

void op_rdma_cm_destroy(struct op_rdma_cm *cm)
{
    if (cm == NULL)
        return;
    cm->dev->cm = NULL;
    free(cm->conns);
    free(cm);
}

enum op_rdma_cm_state op_rdma_cm_state(const struct op_rdma_cm *cm, uint32_t i)
{
    return i < cm->cfg.nconn ? cm->conns[i].state : OP_RDMA_CM_FAILED;
}

const char *op_rdma_cm_error(const struct op_rdma_cm *cm, uint32_t i)
{
    return i < cm->cfg.nconn ? cm->conns[i].cause : "no such connection";
}

op_status_t op_rdma_cm_peer(const struct op_rdma_cm *cm, uint32_t i, struct op_rdma_cm_side *peer,
                            uint32_t *ip, uint16_t *port)
{
    if (i >= cm->cfg.nconn || (cm->conns[i].state != OP_RDMA_CM_ESTABLISHED &&
                               cm->conns[i].state != OP_RDMA_CM_REP_SENT))
        return OP_ERR_STATE;
    *peer = cm->conns[i].peer;
    *ip = cm->conns[i].peer_ip;
    *port = cm->conns[i].peer_port;
    return OP_OK;
}

/* ---- MTU in bytes <-> IB's encoding (1 = 256 .. 5 = 4096); 0 if invalid */
static uint8_t mtu_code(uint32_t mtu)
{
    for (uint8_t k = 1; k <= 5; k++)
        if (mtu == 128u << k)
            return k;
    return 0;
}

static void gid_of(uint32_t ip, uint8_t gid[16])
{
    memset(gid, 0, 16);
    gid[10] = gid[11] = 0xff;
    for (int i = 0; i < 4; i++)
        gid[12 + i] = (uint8_t)(ip >> (24 - 8 * i));
}

static void emit(struct op_rdma_cm *cm, const struct cm_conn *k, const struct op_cm_msg *m,
                 struct op_txq *out)
{
    struct op_pkt *pkt = op_txq_next(out);
    pkt->flow = (struct op_flow){.src.v4 = cm->dev->cfg.ip, .src_port = cm->dev->cfg.port,
                                 .dst.v4 = k->peer_ip, .dst_port = k->peer_port};
    pkt->len = (uint32_t)op_cm_packet_encode(&pkt->flow, cm->psn++ & RDMA_PSN_MASK, m, pkt->data,
                                             OP_IO_BUF_SIZE);
    op_txq_commit(out);
    cm->c[OP_RDMA_CM_C_cm_pkts_out]++;
}

/* rdma_cm's port space: UD QPs are RDMA_PS_UDP's, RC and UC RDMA_PS_TCP's */
static uint64_t service_id(const struct op_rdma_cm *cm, uint8_t transport)
{
    return (transport == OP_RDMA_CM_UD ? OP_CM_SERVICE_RDMA_UDP : OP_CM_SERVICE_RDMA_TCP) |
           (cm->cfg.service_port ? cm->cfg.service_port : cm->dev->cfg.port);
}

static void send_req(struct op_rdma_cm *cm, const struct cm_conn *k, struct op_txq *out)
{
    struct op_cm_msg m = {.attr = OP_CM_REQ, .tid = k->tid, .local_comm_id = k->local_id,
                          .service_id = service_id(cm, k->mine.transport),
                          .ca_guid = (uint64_t)cm->dev->cfg.ip << 16 | 0x0200,
                          .qpn = k->mine.qpn, .psn = k->mine.psn,
                          .responder_resources = k->mine.responder_resources,
                          .initiator_depth = k->mine.initiator_depth, .cm_resp_timeout = 20,
                          .retry_count = k->mine.retry_count, .rnr_retry = k->mine.rnr_retry,
                          .pkey = 0xffff, .path_mtu = mtu_code(k->mine.mtu),
                          .transport = k->mine.transport,
                          .max_cm_retries = (uint8_t)(cm->cfg.max_retries > 15 ? 15 : cm->cfg.max_retries),
                          .hop_limit = 64, .ack_timeout = k->mine.timeout};
    gid_of(cm->dev->cfg.ip, m.local_gid);
    gid_of(k->peer_ip, m.remote_gid);
    memcpy(m.private_data, k->mine.private_data, OP_RDMA_CM_PRIVATE_MAX);
    emit(cm, k, &m, out);
}

static void send_rep(struct op_rdma_cm *cm, const struct cm_conn *k, struct op_txq *out)
{
    struct op_cm_msg m = {.attr = OP_CM_REP, .tid = k->tid, .local_comm_id = k->local_id,
                          .remote_comm_id = k->remote_id,
                          .ca_guid = (uint64_t)cm->dev->cfg.ip << 16 | 0x0200,
                          .qpn = k->mine.qpn, .psn = k->mine.psn,
                          .responder_resources = k->mine.responder_resources,
                          .initiator_depth = k->mine.initiator_depth, .target_ack_delay = 15,
                          .rnr_retry = k->mine.rnr_retry};
    memcpy(m.private_data, k->mine.private_data, OP_RDMA_CM_PRIVATE_MAX);
    emit(cm, k, &m, out);
}

static void send_sidr_req(struct op_rdma_cm *cm, const struct cm_conn *k, struct op_txq *out)
{
    struct op_cm_msg m = {.attr = OP_CM_SIDR_REQ, .tid = k->tid, .local_comm_id = k->local_id,
                          .pkey = 0xffff, .service_id = service_id(cm, OP_RDMA_CM_UD)};
    memcpy(m.private_data, k->mine.private_data, OP_RDMA_CM_PRIVATE_MAX);
    emit(cm, k, &m, out);
}

/* k->remote_id is the request ID; a refusal names no QP */
static void send_sidr_rep(struct op_rdma_cm *cm, const struct cm_conn *k, uint8_t status,
                          struct op_txq *out)
{
    struct op_cm_msg m = {.attr = OP_CM_SIDR_REP, .tid = k->tid, .local_comm_id = k->remote_id,
                          .status = status, .service_id = service_id(cm, OP_RDMA_CM_UD)};
    if (status == OP_CM_SIDR_OK) {
        m.qpn = k->mine.qpn;
        m.qkey = k->mine.qkey;
        memcpy(m.private_data, k->mine.private_data, OP_RDMA_CM_PRIVATE_MAX);
    }
    emit(cm, k, &m, out);
}

static void send_first(struct op_rdma_cm *cm, const struct cm_conn *k, struct op_txq *out)
{
    if (k->mine.transport == OP_RDMA_CM_UD)
        send_sidr_req(cm, k, out);
    else
        send_req(cm, k, out);
}

static void send_short(struct op_rdma_cm *cm, const struct cm_conn *k, uint16_t attr,
                       uint16_t reason, struct op_txq *out)
{
    const struct op_cm_msg m = {.attr = attr, .tid = k->tid, .local_comm_id = k->local_id,
                                .remote_comm_id = k->remote_id, .reason = reason};
    emit(cm, k, &m, out);
}

op_status_t op_rdma_cm_connect(struct op_rdma_cm *cm, uint32_t i,
                               const struct op_rdma_cm_side *mine, uint32_t peer_ip,
                               uint16_t peer_port, uint64_t now, struct op_txq *out)
{
    if (i >= cm->cfg.nconn || cm->conns[i].state != OP_RDMA_CM_IDLE || mtu_code(mine->mtu) == 0)
        return OP_ERR_INVAL;
    struct cm_conn *k = &cm->conns[i];
    k->mine = *mine;
    k->active = true;
    k->peer_ip = peer_ip;
    k->peer_port = peer_port;
    k->tid = (uint64_t)k->local_id << 32 | i;
    k->state = OP_RDMA_CM_REQ_SENT;
    k->first_at = now;
    k->resend_at = now + cm->cfg.retry_ns;
    send_first(cm, k, out);
    return OP_OK;
}

op_status_t op_rdma_cm_listen(struct op_rdma_cm *cm, uint32_t i, const struct op_rdma_cm_side *mine)
{
    if (i >= cm->cfg.nconn || cm->conns[i].state != OP_RDMA_CM_IDLE || mtu_code(mine->mtu) == 0)
        return OP_ERR_INVAL;
    cm->conns[i].mine = *mine;
    cm->conns[i].listening = true;
    return OP_OK;
}

/* ---- input */
static struct cm_conn *by_remote(struct op_rdma_cm *cm, uint32_t remote_id, const struct op_flow *f)
{
    for (uint32_t i = 0; i < cm->cfg.nconn; i++) {
        struct cm_conn *k = &cm->conns[i];
        if (k->state != OP_RDMA_CM_IDLE && k->remote_id == remote_id && k->peer_ip == f->src.v4 &&
            k->peer_port == f->src_port)
            return k;
    }
    return NULL;
}

static struct cm_conn *by_local(struct op_rdma_cm *cm, uint32_t local_id)
{
    for (uint32_t i = 0; i < cm->cfg.nconn; i++)
        if (cm->conns[i].local_id == local_id && cm->conns[i].state != OP_RDMA_CM_IDLE)
            return &cm->conns[i];
    return NULL;
}

/* The first listening connection of this transport type not yet taken;
 * NULL, and *other set if one of another type is free. */
static struct cm_conn *free_slot(struct op_rdma_cm *cm, uint8_t transport, bool *other)
{
    *other = false;
    for (uint32_t i = 0; i < cm->cfg.nconn; i++) {
        struct cm_conn *k = &cm->conns[i];
        if (!k->listening || k->state != OP_RDMA_CM_IDLE)
            continue;
        if (k->mine.transport == transport)
            return k;
        *other = true;
    }
    return NULL;
}

static void take_slot(struct op_rdma_cm *cm, struct cm_conn *k, const struct op_cm_msg *m,
                      const struct op_flow *f, uint64_t now)
{
    k->remote_id = m->local_comm_id;
    k->tid = m->tid;
    k->peer_ip = f->src.v4;
    k->peer_port = f->src_port;
    k->first_at = now;
    k->resend_at = m->attr == OP_CM_SIDR_REQ ? UINT64_MAX : now + cm->cfg.retry_ns;
    k->state = m->attr == OP_CM_SIDR_REQ ? OP_RDMA_CM_ESTABLISHED : OP_RDMA_CM_REP_SENT;
}

/* What a REQ or REP says, as a side; false if its values make no sense. */
static bool side_of(const struct op_cm_msg *m, struct op_rdma_cm_side *s)
{
    memset(s, 0, sizeof(*s));
    s->qpn = m->qpn;
    s->psn = m->psn;
    s->mtu = m->path_mtu >= 1 && m->path_mtu <= 5 ? 128u << m->path_mtu : 0;
    s->responder_resources = m->responder_resources;
    s->initiator_depth = m->initiator_depth;
    s->retry_count = m->retry_count;
    s->rnr_retry = m->rnr_retry;
    s->timeout = m->ack_timeout;
    s->transport = m->attr == OP_CM_REQ ? m->transport : 0;
    memcpy(s->private_data, m->private_data, OP_RDMA_CM_PRIVATE_MAX);
    return m->qpn > OP_CM_GSI_QPN && (m->attr != OP_CM_REQ || s->mtu != 0);
}

static void on_req(struct op_rdma_cm *cm, const struct op_cm_msg *m, const struct op_flow *f,
                   uint64_t now, struct op_txq *out)
{
    struct cm_conn *k = by_remote(cm, m->local_comm_id, f);
    if (k != NULL && !k->active) { /* our REP or the RTU was lost */
        cm->c[OP_RDMA_CM_C_cm_duplicates]++;
        send_rep(cm, k, out);
        return;
    }
    struct op_rdma_cm_side peer;
    bool ours = m->service_id == service_id(cm, 0), other = false;
    bool sane = side_of(m, &peer) && m->transport < 2;
    k = ours && sane ? free_slot(cm, peer.transport, &other) : NULL;
    if (k == NULL) {
        struct cm_conn tmp = {.tid = m->tid, .remote_id = m->local_comm_id,
                              .peer_ip = f->src.v4, .peer_port = f->src_port};
        cm->c[sane ? OP_RDMA_CM_C_cm_unknown : OP_RDMA_CM_C_cm_malformed]++;
        cm->c[OP_RDMA_CM_C_cm_rej_sent]++;
        send_short(cm, &tmp, OP_CM_REJ,
                   !ours ? CM_REJ_BAD_SERVICE_ID : other ? CM_REJ_BAD_TRANSPORT : CM_REJ_NO_QP, out);
        return;
    }
    k->peer = peer;
    take_slot(cm, k, m, f, now);
    send_rep(cm, k, out);
}

/* A SIDR_REQ carries no QPN: what the requester is, its private data says. */
static void on_sidr_req(struct op_rdma_cm *cm, const struct op_cm_msg *m, const struct op_flow *f,
                        uint64_t now, struct op_txq *out)
{
    struct cm_conn *k = by_remote(cm, m->local_comm_id, f);
    if (k != NULL && !k->active) { /* our SIDR_REP was lost */
        cm->c[OP_RDMA_CM_C_cm_duplicates]++;
        send_sidr_rep(cm, k, OP_CM_SIDR_OK, out);
        return;
    }
    bool ours = m->service_id == service_id(cm, OP_RDMA_CM_UD), other;
    k = ours ? free_slot(cm, OP_RDMA_CM_UD, &other) : NULL;
    if (k == NULL) {
        const struct cm_conn tmp = {.tid = m->tid, .remote_id = m->local_comm_id,
                                    .peer_ip = f->src.v4, .peer_port = f->src_port};
        cm->c[OP_RDMA_CM_C_cm_unknown]++;
        cm->c[OP_RDMA_CM_C_cm_rej_sent]++;
        send_sidr_rep(cm, &tmp, ours ? OP_CM_SIDR_NO_QP : OP_CM_SIDR_UNSUPPORTED, out);
        return;
    }
    memset(&k->peer, 0, sizeof k->peer);
    k->peer.transport = OP_RDMA_CM_UD;
    memcpy(k->peer.private_data, m->private_data, OP_RDMA_CM_PRIVATE_MAX);
    take_slot(cm, k, m, f, now);
    send_sidr_rep(cm, k, OP_CM_SIDR_OK, out);
}

static const char *sidr_status_str(uint8_t status)
{
    switch (status) {
    case OP_CM_SIDR_UNSUPPORTED: return "service ID not supported, no one listens on that port";
    case OP_CM_SIDR_REJECT: return "the service provider rejected the request";
    case OP_CM_SIDR_NO_QP: return "no QP available";
    case OP_CM_SIDR_REDIRECT: return "redirected";
    default: return "version not supported";
    }
}

static void on_sidr_rep(struct op_rdma_cm *cm, const struct op_cm_msg *m, const struct op_flow *f)
{
    struct cm_conn *k = by_local(cm, m->local_comm_id);
    if (k == NULL || !k->active || k->mine.transport != OP_RDMA_CM_UD) {
        cm->c[OP_RDMA_CM_C_cm_unknown]++;
        return;
    }
    if (k->state != OP_RDMA_CM_REQ_SENT) { /* a reply to a resent SIDR_REQ */
        cm->c[OP_RDMA_CM_C_cm_duplicates]++;
        return;
    }
    if (m->status == OP_CM_SIDR_OK && m->qpn <= OP_CM_GSI_QPN) {
        cm->c[OP_RDMA_CM_C_cm_malformed]++;
        return;
    }
    k->resend_at = UINT64_MAX;
    if (m->status != OP_CM_SIDR_OK) {
        cm->c[OP_RDMA_CM_C_cm_rej_recv]++;
        k->state = OP_RDMA_CM_FAILED;
        snprintf(k->cause, sizeof k->cause, "the peer refused the SIDR_REQ (status %u: %s)",
                 (unsigned)m->status, sidr_status_str(m->status));
        return;
    }
    k->peer = (struct op_rdma_cm_side){.qpn = m->qpn, .qkey = m->qkey, .mtu = k->mine.mtu,
                                       .transport = OP_RDMA_CM_UD};
    memcpy(k->peer.private_data, m->private_data, OP_RDMA_CM_PRIVATE_MAX);
    k->peer_ip = f->src.v4; /* the service answers from where it runs */
    k->peer_port = f->src_port;
    k->state = OP_RDMA_CM_ESTABLISHED;
}

static void on_rep(struct op_rdma_cm *cm, const struct op_cm_msg *m, const struct op_flow *f,
                   struct op_txq *out)
{
    struct cm_conn *k = by_local(cm, m->remote_comm_id);
    if (k == NULL || !k->active || k->mine.transport == OP_RDMA_CM_UD) {
        cm->c[OP_RDMA_CM_C_cm_unknown]++;
        return;
    }
    if (k->state == OP_RDMA_CM_ESTABLISHED) { /* our RTU was lost */
        cm->c[OP_RDMA_CM_C_cm_duplicates]++;
        send_short(cm, k, OP_CM_RTU, 0, out);
        return;
    }
    if (k->state != OP_RDMA_CM_REQ_SENT || !side_of(m, &k->peer)) {
        cm->c[OP_RDMA_CM_C_cm_malformed]++;
        return;
    }
    k->peer.mtu = k->mine.mtu; /* a REP has none: the REQ's is the connection's */
    k->remote_id = m->local_comm_id;
    /* the passive side may answer from another port than the one asked (a
     * server of several clients hands each REQ to a CM of its own) */
    k->peer_ip = f->src.v4;
    k->peer_port = f->src_port;
    k->state = OP_RDMA_CM_ESTABLISHED;
    k->resend_at = UINT64_MAX;
    send_short(cm, k, OP_CM_RTU, 0, out);
}

static void on_rtu_or_rej(struct op_rdma_cm *cm, const struct op_cm_msg *m)
{
    struct cm_conn *k = by_local(cm, m->remote_comm_id);
    if (k == NULL || k->remote_id != m->local_comm_id) {
        cm->c[OP_RDMA_CM_C_cm_unknown]++;
        return;
    }
    if (m->attr == OP_CM_RTU && k->state == OP_RDMA_CM_REP_SENT) {
        k->state = OP_RDMA_CM_ESTABLISHED;
        k->resend_at = UINT64_MAX;
    } else if (m->attr == OP_CM_REJ) {
        cm->c[OP_RDMA_CM_C_cm_rej_recv]++;
        k->state = OP_RDMA_CM_FAILED;
        k->resend_at = UINT64_MAX;
        snprintf(k->cause, sizeof k->cause, "the peer rejected the connection (REJ reason %u%s)",
                 (unsigned)m->reason,
                 m->reason == CM_REJ_NO_QP           ? ": no QP available"
                 : m->reason == CM_REJ_BAD_SERVICE_ID ? ": invalid service ID, no one listens "
                                                        "on that port"
                 : m->reason == CM_REJ_BAD_TRANSPORT ? ": invalid transport service type, the "
                                                       "peer's QP is not of this type"
                                                     : "");
    }
}

void rdma_cm_input(struct op_rdma_cm *cm, const struct op_pkt *pkt, uint64_t now,
                   struct op_txq *out)
{
    struct op_cm_msg m;
    enum op_cm_err why;
    cm->c[OP_RDMA_CM_C_cm_pkts_in]++;
    if (op_cm_packet_decode(&pkt->flow, pkt->data, pkt->len, &m, &why) != OP_OK) {
        cm->c[OP_RDMA_CM_C_cm_malformed]++;
        cm->drops[why < OP_CM_E_COUNT_ ? why : OP_CM_E_length]++;
        return;
    }
    if (m.attr == OP_CM_REQ)
        on_req(cm, &m, &pkt->flow, now, out);
    else if (m.attr == OP_CM_REP)
        on_rep(cm, &m, &pkt->flow, out);
    else if (m.attr == OP_CM_SIDR_REQ)
        on_sidr_req(cm, &m, &pkt->flow, now, out);
    else if (m.attr == OP_CM_SIDR_REP)
        on_sidr_rep(cm, &m, &pkt->flow);
    else
        on_rtu_or_rej(cm, &m);
}

/* ---- timers */
uint64_t rdma_cm_deadline(const struct op_rdma_cm *cm)
{
    uint64_t t = UINT64_MAX;
    for (uint32_t i = 0; i < cm->cfg.nconn; i++)
        t = cm->conns[i].resend_at < t ? cm->conns[i].resend_at : t;
    return t;
}

static void give_up(struct cm_conn *k, uint64_t now)
{
    char a[16];
    op_format_ipv4(k->peer_ip, a);
    k->state = OP_RDMA_CM_FAILED;
    k->resend_at = UINT64_MAX;
    snprintf(k->cause, sizeof k->cause,
             "no %s from %s:%u after %u tries over %" PRIu64 " ms (is its RoCE port free and "
             "the peer running with -R?)",
             !k->active ? "RTU" : k->mine.transport == OP_RDMA_CM_UD ? "SIDR_REP" : "REP", a, (unsigned)k->peer_port, k->tries + 1,
             (uint64_t)((now - k->first_at) / OP_NS_PER_MS));
}

void rdma_cm_timer(struct op_rdma_cm *cm, uint64_t now, struct op_txq *out)
{
    for (uint32_t i = 0; i < cm->cfg.nconn; i++) {
        struct cm_conn *k = &cm->conns[i];
        if (k->resend_at > now)
            continue;
        if (k->tries >= cm->cfg.max_retries) {
            give_up(k, now);
            continue;
        }
        k->tries++;
        k->resend_at = now + cm->cfg.retry_ns;
        cm->c[OP_RDMA_CM_C_cm_resent]++;
        if (k->active)
            send_first(cm, k, out);
        else
            send_rep(cm, k, out);
    }
}
