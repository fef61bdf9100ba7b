/* The secure_channel tool's run header (docs/wire.md section 13). */
#include <string.h>

#include "offpath/wire.h"
#include "wire_cursor.h"

void op_sc_meta_encode(const struct op_sc_meta *m, uint8_t out[OP_SC_META_LEN])
{
    uint8_t *p = wp_u32(out, OP_SC_META_MAGIC);
    p = wp_u32(p, m->msg_size);
    wp_u64(p, m->num_msgs);
}

op_status_t op_sc_meta_decode(const uint8_t *buf, size_t len, struct op_sc_meta *out)
{
    struct wire_cur c;
    wc_init(&c, buf, len);
    uint32_t magic = wc_u32(&c);
    struct op_sc_meta m = {.msg_size = wc_u32(&c)};
    m.num_msgs = wc_u64(&c);
    wc_check(&c, magic == OP_SC_META_MAGIC);
    wc_check(&c, c.left == 0); /* the header is a message of its own */
    return wc_publish(&c, out, &m, sizeof m);
}
