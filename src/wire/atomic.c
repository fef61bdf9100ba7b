/* AtomicETH and AtomicAckETH (offpath/wire/atomic.h) on the checked cursor. */
#include "offpath/wire/atomic.h"
#include "wire_cursor.h"

void op_atomic_eth_encode(const struct op_atomic_eth *h, uint8_t out[OP_ATOMIC_ETH_LEN])
{
    uint8_t *p = wp_u64(out, h->va);
    p = wp_u32(p, h->rkey);
    p = wp_u64(p, h->swap_add);
    wp_u64(p, h->compare);
}

op_status_t op_atomic_eth_decode(const uint8_t *buf, size_t len, struct op_atomic_eth *out)
{
    struct op_atomic_eth h;
    struct wire_cur c;
    wc_init(&c, buf, len);
    h.va = wc_u64(&c);
    h.rkey = wc_u32(&c);
    h.swap_add = wc_u64(&c);
    h.compare = wc_u64(&c);
    return wc_publish(&c, out, &h, sizeof h);
}

void op_atomic_ack_encode(uint64_t orig, uint8_t out[OP_ATOMIC_ACK_ETH_LEN])
{
    wp_u64(out, orig);
}

op_status_t op_atomic_ack_decode(const uint8_t *buf, size_t len, uint64_t *orig)
{
    return wc_decode_be(buf, len, 8, orig);
}
