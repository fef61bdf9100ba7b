/* The offload agent's messages (docs/wire.md section 14) on the checked
 * cursor: every decoder reads through wire_cur and publishes only a whole,
 * valid message. */
#include <string.h>

#include "offpath/wire.h"
#include "wire_cursor.h"

/* The type byte, then the fields; the message must end where they do. */
static void start(struct wire_cur *c, const uint8_t *msg, size_t len, enum op_agent_msg type)
{
    wc_init(c, msg, len);
    wc_check(c, wc_u8(c) == (uint8_t)type || c->err != OP_OK);
}

static op_status_t finish(struct wire_cur *c, void *out, const void *val, size_t size)
{
    wc_check(c, c->left == 0);
    return wc_publish(c, out, val, size);
}

/* The fixed messages as field tables: one list serves the encoder and the
 * decoder of each. */
static const struct wire_field welcome_layout[] = {
    WIRE_FIELD(struct op_agent_welcome, rank),
    WIRE_FIELD(struct op_agent_welcome, clients),
    WIRE_FIELD(struct op_agent_welcome, daemons),
    WIRE_FIELD(struct op_agent_welcome, per_daemon),
};
static const struct wire_field a2a_hello_layout[] = {
    WIRE_FIELD(struct op_agent_a2a_hello, rank),
    WIRE_FIELD(struct op_agent_a2a_hello, ranks),
    WIRE_FIELD(struct op_agent_a2a_hello, workers),
    WIRE_FIELD(struct op_agent_a2a_hello, chunk),
};
#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

size_t op_agent_welcome_encode(const struct op_agent_welcome *w, uint8_t out[OP_AGENT_WELCOME_LEN])
{
    wp_fields(wp_u8(out, OP_AGENT_MSG_WELCOME), w, welcome_layout, COUNT_OF(welcome_layout));
    return OP_AGENT_WELCOME_LEN;
}

op_status_t op_agent_welcome_decode(const uint8_t *msg, size_t len, struct op_agent_welcome *w)
{
    struct wire_cur c;
    struct op_agent_welcome v;
    start(&c, msg, len, OP_AGENT_MSG_WELCOME);
    wc_fields(&c, &v, welcome_layout, COUNT_OF(welcome_layout));
    wc_check(&c, v.clients > 0 && v.rank < v.clients && v.daemons > 0 && v.per_daemon > 0 &&
                     (uint64_t)v.daemons * v.per_daemon == v.clients);
    return finish(&c, w, &v, sizeof v);
}

size_t op_agent_id_encode(enum op_agent_msg type, uint64_t id, uint8_t out[OP_AGENT_ID_HDR])
{
    wp_u64(wp_u8(out, (uint8_t)type), id);
    return OP_AGENT_ID_HDR;
}

op_status_t op_agent_id_decode(const uint8_t *msg, size_t len, enum op_agent_msg type,
                               size_t bytes, uint64_t *id, const uint8_t **data)
{
    struct wire_cur c;
    start(&c, msg, len, type);
    uint64_t v = wc_u64(&c);
    const uint8_t *d = wc_take(&c, bytes);
    wc_check(&c, c.left == 0);
    if (c.err == OP_OK) {
        *id = v;
        *data = d;
    }
    return c.err;
}

size_t op_agent_mesh_encode(uint32_t rank, const char *text, uint8_t *out, size_t cap)
{
    size_t n = strnlen(text, OP_AR_HANDSHAKE_MAX - 1);
    if (n == 0 || cap < 5 + n)
        return 0;
    memcpy(wp_u32(wp_u8(out, OP_AGENT_MSG_MESH), rank), text, n);
    return 5 + n;
}

op_status_t op_agent_mesh_decode(const uint8_t *msg, size_t len, uint32_t *rank,
                                 char text[OP_AR_HANDSHAKE_MAX])
{
    struct wire_cur c;
    start(&c, msg, len, OP_AGENT_MSG_MESH);
    uint32_t r = wc_u32(&c);
    size_t n = c.left;
    wc_need(&c, 1); /* an empty text is a short message */
    const uint8_t *t = wc_take(&c, n);
    wc_check(&c, t != NULL && n < OP_AR_HANDSHAKE_MAX && memchr(t, '\0', n) == NULL);
    if (c.err != OP_OK)
        return c.err;
    *rank = r;
    memcpy(text, t, n);
    text[n] = '\0';
    return OP_OK;
}

size_t op_agent_a2a_hello_encode(const struct op_agent_a2a_hello *h,
                                 uint8_t out[OP_AGENT_A2A_HELLO_LEN])
{
    wp_fields(wp_u8(out, OP_AGENT_MSG_A2A), h, a2a_hello_layout, COUNT_OF(a2a_hello_layout));
    return OP_AGENT_A2A_HELLO_LEN;
}

op_status_t op_agent_a2a_hello_decode(const uint8_t *msg, size_t len, struct op_agent_a2a_hello *h)
{
    struct wire_cur c;
    struct op_agent_a2a_hello v;
    memset(&v, 0, sizeof v); /* the padding too: the caller may compare bytes */
    start(&c, msg, len, OP_AGENT_MSG_A2A);
    wc_fields(&c, &v, a2a_hello_layout, COUNT_OF(a2a_hello_layout));
    wc_check(&c, v.ranks > 0 && v.ranks <= OP_A2A_MAX_RANKS && v.rank < v.ranks &&
                     v.workers >= 1 && v.workers <= OP_A2A_MAX_WORKERS && v.chunk > 0);
    return finish(&c, h, &v, sizeof v);
}

size_t op_agent_pair_encode(const struct op_agent_pair *m, uint8_t out[OP_AGENT_PAIR_LEN])
{
    uint8_t *p = wp_u8(out, OP_AGENT_MSG_PAIR);
    p = wp_u32(p, m->index);
    p = wp_u32(p, m->ep.ip);
    p = wp_u32(p, m->ep.workers);
    p = wp_u64(p, m->ep.recv_addr);
    p = wp_u64(p, m->ep.chunk);
    for (int i = 0; i < OP_A2A_MAX_WORKERS; i++)
        p = wp_u32(wp_u16(p, m->ep.port[i]), m->ep.rkey[i]);
    p = wp_u32(p, m->qp.qpn);
    wp_u32(p, m->qp.psn);
    return OP_AGENT_PAIR_LEN;
}

op_status_t op_agent_pair_decode(const uint8_t *msg, size_t len, struct op_agent_pair *m)
{
    struct wire_cur c;
    struct op_agent_pair v;
    memset(&v, 0, sizeof v);
    start(&c, msg, len, OP_AGENT_MSG_PAIR);
    v.index = wc_u32(&c);
    v.ep.ip = wc_u32(&c);
    v.ep.workers = wc_u32(&c);
    v.ep.recv_addr = wc_u64(&c);
    v.ep.chunk = wc_u64(&c);
    for (int i = 0; i < OP_A2A_MAX_WORKERS; i++) {
        v.ep.port[i] = wc_u16(&c);
        v.ep.rkey[i] = wc_u32(&c);
    }
    v.qp.qpn = wc_u32(&c);
    v.qp.psn = wc_u32(&c);
    wc_check(&c, v.ep.workers >= 1 && v.ep.workers <= OP_A2A_MAX_WORKERS);
    return finish(&c, m, &v, sizeof v);
}
