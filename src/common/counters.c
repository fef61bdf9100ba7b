/* One printer for every counter list: the X-macro lists (switch, io, rdma,
 * hostar) give names and values side by side, and each tool's text or JSON
 * comes from here, so a name is spelt once and printed the same everywhere. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "offpath/common.h"

static void print_one(FILE *out, const char *name, uint64_t v, int i,
                      enum op_counters_format fmt)
{
    switch (fmt) {
    case OP_COUNTERS_TABLE:
        fprintf(out, "  %-20s %" PRIu64 "\n", name, v);
        break;
    case OP_COUNTERS_LINE:
        fprintf(out, "%s %s %" PRIu64, i ? "," : "", name, v);
        break;
    case OP_COUNTERS_JSON:
        fprintf(out, "%s\"%s\": %" PRIu64, i ? ", " : "", name, v);
        break;
    case OP_COUNTERS_KV:
        fprintf(out, " %s=%" PRIu64, name, v);
        break;
    }
}

void op_counters_print(FILE *out, const char *const *names, const uint64_t *vals, int n,
                       enum op_counters_format fmt)
{
    for (int i = 0; i < n; i++)
        print_one(out, names[i], vals[i], i, fmt);
}

void op_counter_set_print(FILE *out, const struct op_counter_set *s, enum op_counters_format fmt)
{
    op_counters_print(out, s->names, s->vals, (int)s->n, fmt);
}

char *op_counter_set_format(const struct op_counter_set *s, enum op_counters_format fmt,
                            char *buf, size_t cap)
{
    if (cap == 0)
        return buf;
    buf[0] = '\0';
    FILE *m = fmemopen(buf, cap, "w");
    if (m == NULL)
        return buf;
    op_counter_set_print(m, s, fmt);
    fclose(m); /* fmemopen keeps the last byte for the NUL */
    return buf;
}

static const uint64_t *value_of(const struct op_counter_set *s, const char *name, size_t len)
{
    for (unsigned i = 0; i < s->n; i++)
        if (strlen(s->names[i]) == len && memcmp(s->names[i], name, len) == 0)
            return &s->vals[i];
    return NULL;
}

bool op_counter_set_render(FILE *out, const struct op_counter_set *s, const char *text)
{
    bool ok = true;
    for (const char *p = text; *p != '\0';) {
        const char *open = strchr(p, '{'), *close = open ? strchr(open, '}') : NULL;
        if (close == NULL) {
            fputs(p, out);
            break;
        }
        fwrite(p, 1, (size_t)(open - p), out);
        const uint64_t *v = value_of(s, open + 1, (size_t)(close - open - 1));
        if (v != NULL)
            fprintf(out, "%" PRIu64, *v);
        else
            fprintf(out, "{%.*s?}", (int)(close - open - 1), open + 1), ok = false;
        p = close + 1;
    }
    return ok;
}

/* All of len bytes, through short writes and signals. */
static op_status_t write_all(int fd, const void *p, size_t len)
{
    const uint8_t *b = p;
    while (len > 0) {
        ssize_t n = write(fd, b, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return op_status_from_errno(n < 0 ? errno : EIO);
        b += n;
        len -= (size_t)n;
    }
    return OP_OK;
}

static op_status_t read_all(int fd, void *p, size_t len)
{
    uint8_t *b = p;
    while (len > 0) {
        ssize_t n = read(fd, b, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return op_status_from_errno(errno);
        if (n == 0)
            return OP_ERR_TRUNCATED;
        b += n;
        len -= (size_t)n;
    }
    return OP_OK;
}

op_status_t op_counter_set_write(int fd, const struct op_counter_set *s)
{
    uint32_t n = s->n;
    op_status_t st = write_all(fd, &n, sizeof n);
    return st == OP_OK ? write_all(fd, s->vals, (size_t)s->n * sizeof s->vals[0]) : st;
}

op_status_t op_counter_set_read(int fd, uint64_t *vals, unsigned cap)
{
    uint32_t n;
    op_status_t st = read_all(fd, &n, sizeof n);
    if (st != OP_OK)
        return st;
    if (n != cap)
        return OP_ERR_MALFORMED;
    uint64_t tmp[256];
    if (cap > sizeof tmp / sizeof tmp[0])
        return OP_ERR_MALFORMED;
    st = read_all(fd, tmp, (size_t)cap * sizeof tmp[0]);
    if (st == OP_OK)
        memcpy(vals, tmp, (size_t)cap * sizeof tmp[0]);
    return st;
}
