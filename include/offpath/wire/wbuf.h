/* offpath wire: a bounded output buffer for encoders (offpath/wire.h includes every part;
 * docs/wire.md). */
#ifndef OFFPATH_WIRE_WBUF_H
#define OFFPATH_WIRE_WBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"

/* A bounded output buffer for encoders: an append that would pass cap
 * fails and writes nothing, so a caller can try a record and fall back
 * (DNS truncation) with the buffer as it was. */
struct op_wbuf {
    uint8_t *buf;
    size_t len, cap;
};
OP_API bool op_wbuf_put(struct op_wbuf *w, const void *p, size_t n);
/* v's low n bytes (1..8), big-endian */
OP_API bool op_wbuf_put_be(struct op_wbuf *w, uint64_t v, size_t n);

#endif
