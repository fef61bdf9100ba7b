/* The bounded output buffer (offpath/wire.h). */
#include <string.h>

#include "offpath/wire.h"

bool op_wbuf_put(struct op_wbuf *w, const void *p, size_t n)
{
    if (n > w->cap - w->len)
        return false;
    memcpy(w->buf + w->len, p, n);
    w->len += n;
    return true;
}

bool op_wbuf_put_be(struct op_wbuf *w, uint64_t v, size_t n)
{
    uint8_t b[8];
    if (n == 0 || n > sizeof b)
        return false;
    for (size_t i = n; i > 0; i--) {
        b[i - 1] = (uint8_t)v;
        v >>= 8;
    }
    return op_wbuf_put(w, b, n);
}
