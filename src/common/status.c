/* op_status_t to text: one table, indexed by -status (UCX's ucs_status_string),
 * and the C library's text for the errno range. */
#include <string.h>

#include "offpath/common.h"

static const char *const status_text[] = {
    [0] = "success",
    [-OP_ERR_INVAL] = "invalid parameter",
    [-OP_ERR_NOMEM] = "out of memory",
    [-OP_ERR_IO] = "input/output error",
    [-OP_ERR_TRUNCATED] = "truncated",
    [-OP_ERR_MALFORMED] = "malformed",
    [-OP_ERR_TIMEOUT] = "timed out",
    [-OP_ERR_REFUSED] = "refused",
    [-OP_ERR_UNSUPPORTED] = "unsupported",
    [-OP_ERR_BUSY] = "busy",
    [-OP_ERR_STATE] = "invalid state",
    [-OP_ERR_NOSPACE] = "no space",
};

/* A buffer per thread: strerror's own may be shared, and the text must
 * outlive the call (callers print it right away). */
static const char *errno_text(int e)
{
    static _Thread_local char buf[128];
    char msg[96];
    snprintf(buf, sizeof buf, "I/O: %s", strerror_r(e, msg, sizeof msg));
    return buf;
}

const char *op_status_str(op_status_t st)
{
    const int n = (int)(sizeof status_text / sizeof status_text[0]);
    const int e = op_status_errno(st);

    if (e != 0)
        return errno_text(e);

    if (st == OP_INPROGRESS)
        return "in progress";
    if (st <= 0 && (int)st > -n && status_text[-st] != NULL)
        return status_text[-st];
    return "unknown status";
}
