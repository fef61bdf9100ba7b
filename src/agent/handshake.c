/* DOCA allreduce's configuration handshake: "-s %zu -d %s -b %zu -i %zu".
 * A strict parser: the whole string, each field once, in order. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "offpath/agent.h"

struct handshake {
    uint64_t size, batch, batches;
    char dtype[16];
};

int op_ar_handshake_format(uint64_t size, const char *dtype, uint64_t batch, uint64_t batches,
                           char *buf, size_t cap)
{
    return snprintf(buf, cap, "-s %" PRIu64 " -d %s -b %" PRIu64 " -i %" PRIu64, size, dtype,
                    batch, batches);
}

/* "-X value " at *p: the value's text into out; false if not so. */
static bool field(const char **p, char flag, char *out, size_t cap)
{
    const char *s = *p;
    if (s[0] != '-' || s[1] != flag || s[2] != ' ')
        return false;
    s += 3;
    size_t n = strcspn(s, " ");
    if (n == 0 || n >= cap)
        return false;
    memcpy(out, s, n);
    out[n] = '\0';
    s += n;
    if (*s == ' ')
        s++;
    *p = s;
    return true;
}

/* Canonical decimal only ("2", not "02" or "+2"): the handshake is
 * compared as the peer wrote it, so one value has one spelling. */
static bool number(const char **p, char flag, uint64_t *out)
{
    char text[24];
    if (!field(p, flag, text, sizeof text) || text[0] < '1' || text[0] > '9' ||
        text[strspn(text, "0123456789")] != '\0')
        return false;
    return op_parse_u64(text, 1, UINT64_MAX, out) == OP_OK;
}

static bool parse(const char *text, struct handshake *h)
{
    const char *p = text;
    if (strlen(text) >= OP_AR_HANDSHAKE_MAX)
        return false;
    return number(&p, 's', &h->size) && field(&p, 'd', h->dtype, sizeof h->dtype) &&
           number(&p, 'b', &h->batch) && number(&p, 'i', &h->batches) && *p == '\0' &&
           p[-1] != ' ';
}

op_status_t op_ar_handshake_check(const char *mine, const char *theirs, char *why, size_t why_len)
{
    struct handshake a, b;
    if (!parse(theirs, &b)) {
        snprintf(why, why_len, "malformed configuration \"%.*s\" (expected \"-s N -d TYPE -b N -i N\")",
                 OP_AR_HANDSHAKE_MAX, theirs);
        return OP_ERR_MALFORMED;
    }
    if (!parse(mine, &a)) {
        snprintf(why, why_len, "own configuration \"%s\" is malformed", mine);
        return OP_ERR_INVAL;
    }
    if (a.size != b.size)
        snprintf(why, why_len, "vector size (-s): %" PRIu64 " here, %" PRIu64 " there", a.size,
                 b.size);
    else if (strcmp(a.dtype, b.dtype) != 0)
        snprintf(why, why_len, "datatype (-d): %s here, %s there", a.dtype, b.dtype);
    else if (a.batch != b.batch)
        snprintf(why, why_len, "batch size (-b): %" PRIu64 " here, %" PRIu64 " there", a.batch,
                 b.batch);
    else if (a.batches != b.batches)
        snprintf(why, why_len, "batches (-i): %" PRIu64 " here, %" PRIu64 " there", a.batches,
                 b.batches);
    else
        return OP_OK;
    return OP_ERR_INVAL;
}
