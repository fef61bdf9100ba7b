/* CM MADs (offpath/wire/cm.h): the IBTA layouts of REQ (12.6.5), REP
 * (12.6.8), RTU (12.6.9), REJ (12.6.7), SIDR_REQ (12.6.10) and SIDR_REP
 * (12.6.11) in a MAD (13.4.3), framed as a UD
 * send to the GSI QP. Decoding reads through the checked cursor: a short
 * buffer, trailing bytes or a wrong header field is refused with its
 * reason, never read past. */
#include <string.h>

#include "offpath/wire/cm.h"
#include "wire_cursor.h"

#define MAD_BASE_VERSION 1
#define MAD_CLASS_CM 0x07
#define MAD_CM_CLASS_VERSION 2
#define MAD_METHOD_SEND 0x03
#define MAD_HDR_LEN 24
#define UD_SEND_ONLY 0x64

static const char *const err_names[] = {OP_CM_ERRS(OP_COUNTER_NAME)};

const char *op_cm_err_str(unsigned e)
{
    return op_counter_name(err_names, OP_CM_E_COUNT_, e);
}

size_t op_cm_private_len(uint16_t attr)
{
    switch (attr) {
    case OP_CM_REQ: return 92;
    case OP_CM_REP: return 196;
    case OP_CM_RTU: return 224;
    case OP_CM_REJ: return 148;
    case OP_CM_SIDR_REQ: return 216;
    case OP_CM_SIDR_REP: return 136;
    default: return 0;
    }
}

static uint8_t *put(uint8_t *p, const void *src, size_t n)
{
    memcpy(p, src, n);
    return p + n;
}

static uint8_t *req_encode(const struct op_cm_msg *m, uint8_t *p)
{
    p = wp_u32(p, m->local_comm_id);
    p = wp_u32(p, 0);
    p = wp_u64(p, m->service_id);
    p = wp_u64(p, m->ca_guid);
    p = wp_u32(p, 0);
    p = wp_u32(p, m->qkey);
    p = wp_u8(wp_u24(p, m->qpn), m->responder_resources);
    p = wp_u8(wp_u24(p, 0), m->initiator_depth); /* local EECN */
    p = wp_u8(wp_u24(p, 0), (uint8_t)((m->cm_resp_timeout & 31u) << 3 | (m->transport & 3u) << 1));
    p = wp_u8(wp_u24(p, m->psn), (uint8_t)((m->cm_resp_timeout & 31u) << 3 | (m->retry_count & 7u)));
    p = wp_u16(p, m->pkey);
    p = wp_u8(p, (uint8_t)((m->path_mtu & 15u) << 4 | (m->rnr_retry & 7u)));
    p = wp_u8(p, (uint8_t)((m->max_cm_retries & 15u) << 4 | (m->srq ? 8u : 0u)));
    p = wp_u32(p, 0xffffffffu); /* primary local and remote LID: permissive on RoCE */
    p = put(p, m->local_gid, 16);
    p = put(p, m->remote_gid, 16);
    p = wp_u32(p, 0); /* flow label, packet rate */
    p = wp_u8(p, m->traffic_class);
    p = wp_u8(p, m->hop_limit);
    p = wp_u8(p, 0); /* SL, subnet local */
    p = wp_u8(p, (uint8_t)((m->ack_timeout & 31u) << 3));
    memset(p, 0, 44); /* no alternate path */
    return p + 44;
}

static uint8_t *rep_encode(const struct op_cm_msg *m, uint8_t *p)
{
    p = wp_u32(p, m->local_comm_id);
    p = wp_u32(p, m->remote_comm_id);
    p = wp_u32(p, m->qkey);
    p = wp_u8(wp_u24(p, m->qpn), 0);
    p = wp_u32(p, 0); /* local EECN */
    p = wp_u8(wp_u24(p, m->psn), 0);
    p = wp_u8(p, m->responder_resources);
    p = wp_u8(p, m->initiator_depth);
    p = wp_u8(p, (uint8_t)((m->target_ack_delay & 31u) << 3));
    p = wp_u8(p, (uint8_t)((m->rnr_retry & 7u) << 5 | (m->srq ? 16u : 0u)));
    return wp_u64(p, m->ca_guid);
}

static uint8_t *sidr_req_encode(const struct op_cm_msg *m, uint8_t *p)
{
    p = wp_u32(p, m->local_comm_id); /* request ID */
    p = wp_u16(wp_u16(p, m->pkey), 0);
    return wp_u64(p, m->service_id);
}

/* No additional information (its length 0): the 72 bytes stay zero. */
static uint8_t *sidr_rep_encode(const struct op_cm_msg *m, uint8_t *p)
{
    p = wp_u32(p, m->local_comm_id);
    p = wp_u16(wp_u8(wp_u8(p, m->status), 0), 0);
    p = wp_u8(wp_u24(p, m->qpn), 0);
    p = wp_u32(wp_u64(p, m->service_id), m->qkey);
    return p + OP_CM_SIDR_INFO_LEN;
}

static uint8_t *ids_encode(const struct op_cm_msg *m, uint8_t *p)
{
    return wp_u32(wp_u32(p, m->local_comm_id), m->remote_comm_id);
}

void op_cm_mad_encode(const struct op_cm_msg *m, uint8_t out[OP_CM_MAD_LEN])
{
    memset(out, 0, OP_CM_MAD_LEN);
    uint8_t *p = wp_u8(out, MAD_BASE_VERSION);
    p = wp_u8(p, MAD_CLASS_CM);
    p = wp_u8(p, MAD_CM_CLASS_VERSION);
    p = wp_u8(p, MAD_METHOD_SEND);
    p = wp_u32(p, 0); /* status, class specific */
    p = wp_u64(p, m->tid);
    p = wp_u16(p, m->attr);
    p = wp_u16(p, 0);
    p = wp_u32(p, 0); /* attribute modifier */
    if (m->attr == OP_CM_REQ)
        p = req_encode(m, p);
    else if (m->attr == OP_CM_REP)
        p = rep_encode(m, p);
    else if (m->attr == OP_CM_REJ)
        p = wp_u16(wp_u16(ids_encode(m, p), 0), m->reason) + 72; /* no ARI */
    else if (m->attr == OP_CM_SIDR_REQ)
        p = sidr_req_encode(m, p);
    else if (m->attr == OP_CM_SIDR_REP)
        p = sidr_rep_encode(m, p);
    else
        p = ids_encode(m, p);
    memcpy(p, m->private_data, op_cm_private_len(m->attr));
}

static void take(struct wire_cur *c, void *dst, size_t n)
{
    const uint8_t *b = wc_take(c, n);
    if (b != NULL)
        memcpy(dst, b, n);
}

static void req_decode(struct wire_cur *c, struct op_cm_msg *m)
{
    m->local_comm_id = wc_u32(c);
    (void)wc_u32(c);
    m->service_id = wc_u64(c);
    m->ca_guid = wc_u64(c);
    (void)wc_u32(c);
    m->qkey = wc_u32(c);
    m->qpn = wc_u24(c);
    m->responder_resources = wc_u8(c);
    (void)wc_u24(c); /* local EECN */
    m->initiator_depth = wc_u8(c);
    (void)wc_u24(c); /* remote EECN */
    uint8_t b = wc_u8(c);
    m->cm_resp_timeout = b >> 3;
    m->transport = (b >> 1) & 3u;
    m->psn = wc_u24(c);
    m->retry_count = wc_u8(c) & 7u;
    m->pkey = wc_u16(c);
    b = wc_u8(c);
    m->path_mtu = b >> 4;
    m->rnr_retry = b & 7u;
    b = wc_u8(c);
    m->max_cm_retries = b >> 4;
    m->srq = (b & 8u) != 0;
    (void)wc_u32(c); /* LIDs */
    take(c, m->local_gid, 16);
    take(c, m->remote_gid, 16);
    (void)wc_u32(c);
    m->traffic_class = wc_u8(c);
    m->hop_limit = wc_u8(c);
    (void)wc_u8(c);
    m->ack_timeout = wc_u8(c) >> 3;
    (void)wc_take(c, 44); /* alternate path */
}

static void rep_decode(struct wire_cur *c, struct op_cm_msg *m)
{
    m->local_comm_id = wc_u32(c);
    m->remote_comm_id = wc_u32(c);
    m->qkey = wc_u32(c);
    m->qpn = wc_u24(c);
    (void)wc_u8(c);
    (void)wc_u32(c);
    m->psn = wc_u24(c);
    (void)wc_u8(c);
    m->responder_resources = wc_u8(c);
    m->initiator_depth = wc_u8(c);
    m->target_ack_delay = wc_u8(c) >> 3;
    uint8_t b = wc_u8(c);
    m->rnr_retry = b >> 5;
    m->srq = (b & 16u) != 0;
    m->ca_guid = wc_u64(c);
}

static void sidr_req_decode(struct wire_cur *c, struct op_cm_msg *m)
{
    m->local_comm_id = wc_u32(c);
    m->pkey = wc_u16(c);
    (void)wc_u16(c);
    m->service_id = wc_u64(c);
}

/* Additional information is not kept (we send none, and redirect to no
 * one); a length past its field or a status the IBTA does not define is
 * refused. */
static void sidr_rep_decode(struct wire_cur *c, struct op_cm_msg *m, enum op_cm_err *why)
{
    m->local_comm_id = wc_u32(c);
    m->status = wc_u8(c);
    uint8_t info_len = wc_u8(c);
    (void)wc_u16(c);
    m->qpn = wc_u24(c);
    (void)wc_u8(c);
    m->service_id = wc_u64(c);
    m->qkey = wc_u32(c);
    (void)wc_take(c, OP_CM_SIDR_INFO_LEN);
    if (*why == OP_CM_E_ok && (m->status > OP_CM_SIDR_BAD_VERSION || info_len > OP_CM_SIDR_INFO_LEN))
        *why = OP_CM_E_sidr;
    wc_check(c, *why == OP_CM_E_ok);
}

/* The MAD header; its first failed check is why. */
static void header_decode(struct wire_cur *c, struct op_cm_msg *m, enum op_cm_err *why)
{
    uint8_t base = wc_u8(c), mclass = wc_u8(c), cver = wc_u8(c), method = wc_u8(c);
    (void)wc_u32(c);
    m->tid = wc_u64(c);
    m->attr = wc_u16(c);
    (void)wc_u16(c);
    (void)wc_u32(c);
    *why = base != MAD_BASE_VERSION              ? OP_CM_E_version
           : mclass != MAD_CLASS_CM              ? OP_CM_E_mgmt_class
           : cver != MAD_CM_CLASS_VERSION        ? OP_CM_E_version
           : method != MAD_METHOD_SEND           ? OP_CM_E_method
           : op_cm_private_len(m->attr) == 0 ||
                   m->attr == OP_CM_MRA           ? OP_CM_E_attribute
                                                 : OP_CM_E_ok;
    wc_check(c, *why == OP_CM_E_ok);
}

op_status_t op_cm_mad_decode(const uint8_t *buf, size_t len, struct op_cm_msg *out,
                             enum op_cm_err *why)
{
    struct op_cm_msg m;
    struct wire_cur c;
    memset(&m, 0, sizeof m);
    *why = len == OP_CM_MAD_LEN ? OP_CM_E_ok : OP_CM_E_length;
    wc_init(&c, buf, len);
    wc_check(&c, *why == OP_CM_E_ok); /* trailing bytes too */
    if (c.err == OP_OK)
        header_decode(&c, &m, why);
    if (m.attr == OP_CM_REQ)
        req_decode(&c, &m);
    else if (m.attr == OP_CM_REP)
        rep_decode(&c, &m);
    else if (m.attr == OP_CM_SIDR_REQ)
        sidr_req_decode(&c, &m);
    else if (m.attr == OP_CM_SIDR_REP)
        sidr_rep_decode(&c, &m, why);
    else {
        m.local_comm_id = wc_u32(&c);
        m.remote_comm_id = wc_u32(&c);
        if (m.attr == OP_CM_REJ) {
            (void)wc_u16(&c);
            m.reason = wc_u16(&c);
            (void)wc_take(&c, 72);
        }
    }
    take(&c, m.private_data, op_cm_private_len(m.attr));
    wc_check(&c, c.left == 0);
    return wc_publish(&c, out, &m, sizeof m);
}

size_t op_cm_packet_encode(const struct op_flow *flow, uint32_t psn, const struct op_cm_msg *m,
                           uint8_t *out, size_t cap)
{
    if (cap < OP_CM_PKT_LEN)
        return 0;
    const struct op_bth bth = {.opcode = UD_SEND_ONLY, .pkey = 0xffff,
                               .dest_qp = OP_CM_GSI_QPN, .psn = psn};
    const struct op_deth deth = {.qkey = OP_CM_GSI_QKEY, .src_qp = OP_CM_GSI_QPN};
    op_bth_encode(&bth, out);
    op_deth_encode(&deth, out + OP_BTH_LEN);
    op_cm_mad_encode(m, out + OP_BTH_LEN + OP_DETH_LEN);
    return op_icrc_seal(flow, out, OP_CM_PKT_LEN - OP_ICRC_LEN, cap);
}

op_status_t op_cm_packet_decode(const struct op_flow *flow, const uint8_t *roce, size_t len,
                                struct op_cm_msg *m, enum op_cm_err *why)
{
    struct op_bth bth;
    struct op_deth deth;
    if (len != OP_CM_PKT_LEN) {
        *why = OP_CM_E_length;
        return len < OP_CM_PKT_LEN ? OP_ERR_TRUNCATED : OP_ERR_MALFORMED;
    }
    (void)op_bth_decode(roce, len, &bth);
    (void)op_deth_decode(roce + OP_BTH_LEN, len - OP_BTH_LEN, &deth);
    *why = bth.opcode != UD_SEND_ONLY || bth.dest_qp != OP_CM_GSI_QPN || bth.pkey != 0xffff ||
                   bth.tver != 0 || bth.padcnt != 0
               ? OP_CM_E_bth
           : deth.qkey != OP_CM_GSI_QKEY || deth.src_qp != OP_CM_GSI_QPN ? OP_CM_E_deth
           : !op_icrc_check(flow, roce, len)                             ? OP_CM_E_icrc
                                                                          : OP_CM_E_ok;
    if (*why != OP_CM_E_ok)
        return OP_ERR_MALFORMED;
    return op_cm_mad_decode(roce + OP_BTH_LEN + OP_DETH_LEN, OP_CM_MAD_LEN, m, why);
}
