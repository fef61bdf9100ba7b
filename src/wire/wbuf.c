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

/* Written in place, not through memcpy: DNS answers are mostly two- and
 * four-byte fields, and a library call for each cost the responder more
 * than its lookups. */
bool op_wbuf_put_be(struct op_wbuf *w, uint64_t v, size_t n)
{
    if (n == 0 || n > 8 || n > w->cap - w->len)
        return false;
    for (size_t i = n; i > 0; i--, v >>= 8)
        w->buf[w->len + i - 1] = (uint8_t)v;
    w->len += n;
    return true;
}
