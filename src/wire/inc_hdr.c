/* The INC header (36 bytes) and control payload (72 bytes): big-endian
 * encode, and decode with every field check of docs/wire.md. */
#include "offpath/wire.h"
#include "wire_cursor.h"

#define INC_HDR_RESERVED 3
#define INC_CTRL_RESERVED_END 4
#define INC_FLAGS_KNOWN (OP_INC_F_RESULT | OP_INC_F_RETX | OP_INC_F_CONGESTED)
#define CTRL_TYPE_MASK 0x0fu

void op_inc_hdr_encode(const struct op_inc_hdr *h, uint8_t out[OP_INC_HDR_LEN])
{
    uint8_t *p = wp_u32(out, OP_INC_TAG);
    p = wp_u8(p, h->version);
    p = wp_u8(p, h->kind);
    p = wp_u8(p, h->flags);
    p = wp_u8(p, h->reason);
    p = wp_u16(p, h->group_id);
    p = wp_u8(p, h->op);
    p = wp_u8(p, h->dtype);
    p = wp_u32(p, h->src_rank);
    p = wp_u64(p, h->token);
    p = wp_u32(p, h->seq);
    p = wp_u16(p, h->slot);
    p = wp_u16(p, h->count);
    p = wp_u8(p, (uint8_t)(h->seq & 0xffu)); /* req_id is always seq & 0xff */
    wp_be(p, 0, INC_HDR_RESERVED);
}

static void inc_hdr_check(struct wire_cur *c, uint32_t tag, const struct op_inc_hdr *h)
{
    wc_check(c, tag == OP_INC_TAG);
    wc_check(c, h->version == OP_INC_VERSION);
    wc_check(c, h->kind == OP_INC_KIND_DATA || h->kind == OP_INC_KIND_CTRL);
    wc_check(c, (h->flags & ~INC_FLAGS_KNOWN) == 0);
    wc_check(c, h->reason < OP_INC_R_COUNT_);
    wc_check(c, h->req_id == (h->seq & 0xffu));
}

op_status_t op_inc_hdr_decode(const uint8_t *buf, size_t len, struct op_inc_hdr *out)
{
    struct op_inc_hdr h;
    struct wire_cur c;
    wc_init(&c, buf, len);
    uint32_t tag = wc_u32(&c);
    h.version = wc_u8(&c);
    h.kind = wc_u8(&c);
    h.flags = wc_u8(&c);
    h.reason = wc_u8(&c);
    h.group_id = wc_u16(&c);
    h.op = wc_u8(&c);
    h.dtype = wc_u8(&c);
    h.src_rank = wc_u32(&c);
    h.token = wc_u64(&c);
    h.seq = wc_u32(&c);
    h.slot = wc_u16(&c);
    h.count = wc_u16(&c);
    h.req_id = wc_u8(&c);
    wc_zeros(&c, INC_HDR_RESERVED);
    inc_hdr_check(&c, tag, &h);
    return wc_publish(&c, out, &h, sizeof h);
}

void op_inc_ctrl_encode(const struct op_inc_ctrl *c, uint8_t out[OP_INC_CTRL_LEN])
{
    uint8_t *p = wp_u8(out, c->sup_mpi_type);
    p = wp_u8(p, c->fail_cause);
    p = wp_u8(p, c->master_num);
    p = wp_u8(p, c->query_notify_hop);
    p = wp_u8(p, c->sup_comm_type);
    p = wp_u8(p, 0); /* reserved */
    p = wp_u16(p, c->sup_allreduce_op);
    p = wp_u16(p, c->sup_data_type);
    p = wp_u16(p, c->sup_max_data_size);
    p = wp_u16(p, c->global_group_size);
    p = wp_u16(p, c->local_group_size);
    p = wp_u32(p, c->true_comm_id);
    p = wp_u32(p, c->ava_grp_num);
    p = wp_u32(p, c->dst_rank);
    p = wp_u32(p, c->tor1_ip);
    p = wp_u32(p, c->spine_ip);
    p = wp_u32(p, c->tor2_ip);
    p = wp_u32(p, c->job_id);
    p = wp_u32(p, c->c_id);
    p = wp_u32(p, c->world_rank);
    p = wp_u32(p, c->dst_ip);
    p = wp_u32(p, c->src_ip);
    p = wp_u16(p, c->window);
    p = wp_u16(p, c->max_children);
    p = wp_u32(p, c->lease_ms);
    wp_be(p, 0, INC_CTRL_RESERVED_END);
}

/* Fields from the seed's control packet: bytes 0..51. */
static void inc_ctrl_read_seed(struct wire_cur *w, struct op_inc_ctrl *c)
{
    c->sup_mpi_type = wc_u8(w);
    c->fail_cause = wc_u8(w);
    c->master_num = wc_u8(w);
    c->query_notify_hop = wc_u8(w);
    c->sup_comm_type = wc_u8(w);
    wc_zeros(w, 1);
    c->sup_allreduce_op = wc_u16(w);
    c->sup_data_type = wc_u16(w);
    c->sup_max_data_size = wc_u16(w);
    c->global_group_size = wc_u16(w);
    c->local_group_size = wc_u16(w);
    c->true_comm_id = wc_u32(w);
    c->ava_grp_num = wc_u32(w);
    c->dst_rank = wc_u32(w);
    c->tor1_ip = wc_u32(w);
    c->spine_ip = wc_u32(w);
    c->tor2_ip = wc_u32(w);
    c->job_id = wc_u32(w);
    c->c_id = wc_u32(w);
    c->world_rank = wc_u32(w);
}

/* offpath's additions: bytes 52..71. */
static void inc_ctrl_read_ours(struct wire_cur *w, struct op_inc_ctrl *c)
{
    c->dst_ip = wc_u32(w);
    c->src_ip = wc_u32(w);
    c->window = wc_u16(w);
    c->max_children = wc_u16(w);
    c->lease_ms = wc_u32(w);
    wc_zeros(w, INC_CTRL_RESERVED_END);
}

op_status_t op_inc_ctrl_decode(const uint8_t *buf, size_t len, struct op_inc_ctrl *out)
{
    struct op_inc_ctrl c;
    struct wire_cur w;
    wc_init(&w, buf, len);
    inc_ctrl_read_seed(&w, &c);
    inc_ctrl_read_ours(&w, &c);
    unsigned type = c.query_notify_hop & CTRL_TYPE_MASK;
    wc_check(&w, type >= OP_INC_CTRL_QUERY && type <= OP_INC_CTRL_KILL);
    wc_check(&w, c.master_num == 1 || c.master_num == 2);
    wc_check(&w, c.fail_cause < OP_INC_R_COUNT_);
    return wc_publish(&w, out, &c, sizeof c);
}

const char *op_inc_reason_str(unsigned reason)
{
    static const char *const names[OP_INC_R_COUNT_] = {
        [OP_INC_R_NONE] = "none",
        [OP_INC_R_NO_GROUP] = "no free group",
        [OP_INC_R_NO_SLOT] = "no free slot",
        [OP_INC_R_UNSUPPORTED] = "unsupported",
        [OP_INC_R_BAD_TOKEN] = "bad token",
        [OP_INC_R_NOT_MEMBER] = "not a member",
        [OP_INC_R_MALFORMED] = "malformed",
        [OP_INC_R_EXPIRED] = "lease expired",
        [OP_INC_R_CONFLICT] = "conflict",
    };
    return reason < OP_INC_R_COUNT_ ? names[reason] : "unknown";
}
