/* Topology files: which hosts sit under which TOR, which TORs under which
 * SPINEs. Strict: any unknown word, bad address or dangling name is an error
 * that names the line. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "offpath/switch.h"

#define TOPO_MAX_WORDS 16
#define TOPO_LINE_MAX 512

struct topo_parse {
    struct op_topo *topo;
    char up_names[OP_TOPO_MAX_SWITCHES][OP_TOPO_MAX_UPLINKS][32];
    char *err;
    size_t errlen;
    int line;
    int sw_line[OP_TOPO_MAX_SWITCHES]; /* where each switch was declared */
};

static op_status_t fail(struct topo_parse *tp, const char *fmt, ...) OP_PRINTF(2, 3);
static op_status_t fail(struct topo_parse *tp, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (tp->err != NULL && tp->errlen > 0)
        snprintf(tp->err, tp->errlen, "line %d: %s", tp->line, msg);
    return OP_ERR_MALFORMED;
}

int op_topo_find(const struct op_topo *topo, const char *name)
{
    for (int i = 0; i < topo->n; i++)
        if (strcmp(topo->sw[i].name, name) == 0)
            return i;
    return -1;
}

int op_topo_tor_of(const struct op_topo *topo, uint32_t host_ip)
{
    for (int i = 0; i < topo->n; i++) {
        const struct op_topo_switch *s = &topo->sw[i];
        if (!s->spine && host_ip >= s->host_lo && host_ip <= s->host_hi)
            return i;
    }
    return -1;
}

static op_status_t parse_range(struct topo_parse *tp, const char *text, struct op_topo_switch *s)
{
    char lo[32];
    const char *dash = strchr(text, '-');
    if (dash == NULL || (size_t)(dash - text) >= sizeof(lo))
        return fail(tp, "hosts wants <first-ip>-<last-ip>, got '%s'", text);
    memcpy(lo, text, (size_t)(dash - text));
    lo[dash - text] = '\0';
    if (op_parse_ipv4(lo, &s->host_lo, NULL) != OP_OK ||
        op_parse_ipv4(dash + 1, &s->host_hi, NULL) != OP_OK || s->host_lo > s->host_hi)
        return fail(tp, "bad host range '%s'", text);
    return OP_OK;
}

static op_status_t parse_spines(struct topo_parse *tp, char *text, int self)
{
    struct op_topo_switch *s = &tp->topo->sw[self];
    for (char *save = NULL, *name = strtok_r(text, ",", &save); name != NULL;
         name = strtok_r(NULL, ",", &save)) {
        if (s->n_up == OP_TOPO_MAX_UPLINKS)
            return fail(tp, "more than %d spines", OP_TOPO_MAX_UPLINKS);
        if (strlen(name) >= 32)
            return fail(tp, "spine name too long");
        strcpy(tp->up_names[self][s->n_up++], name);
    }
    return OP_OK;
}

static op_status_t parse_option(struct topo_parse *tp, char **w, int nw, int *i, int self)
{
    struct op_topo_switch *s = &tp->topo->sw[self];
    const char *key = w[*i];
    if (*i + 1 >= nw)
        return fail(tp, "'%s' wants a value", key);
    char *val = w[++*i];
    if (strcmp(key, "port") == 0) {
        uint64_t port;
        if (op_parse_u64(val, 1, 65535, &port) != OP_OK)
            return fail(tp, "bad port '%s'", val);
        s->port = (uint16_t)port;
        return OP_OK;
    }
    if (!s->spine && strcmp(key, "hosts") == 0)
        return parse_range(tp, val, s);
    if (!s->spine && strcmp(key, "spines") == 0)
        return parse_spines(tp, val, self);
    return fail(tp, "unknown word '%s'", key);
}

static op_status_t parse_switch(struct topo_parse *tp, char **w, int nw)
{
    struct op_topo *topo = tp->topo;
    bool spine = strcmp(w[0], "spine") == 0;
    if (!spine && strcmp(w[0], "tor") != 0)
        return fail(tp, "expected 'tor' or 'spine', got '%s'", w[0]);
    if (nw < 3)
        return fail(tp, "wants '%s <name> <ip>'", w[0]);
    if (topo->n == OP_TOPO_MAX_SWITCHES)
        return fail(tp, "more than %d switches", OP_TOPO_MAX_SWITCHES);
    if (strlen(w[1]) >= sizeof(topo->sw[0].name) || op_topo_find(topo, w[1]) >= 0)
        return fail(tp, "switch name '%s' too long or used twice", w[1]);
    int self = topo->n;
    tp->sw_line[self] = tp->line;
    struct op_topo_switch *s = &topo->sw[self];
    memset(s, 0, sizeof(*s));
    strcpy(s->name, w[1]);
    s->spine = spine;
    s->port = OP_ROCE_UDP_PORT;
    if (op_parse_ipv4(w[2], &s->ip, NULL) != OP_OK)
        return fail(tp, "bad address '%s'", w[2]);
    for (int i = 3; i < nw; i++) {
        op_status_t st = parse_option(tp, w, nw, &i, self);
        if (st != OP_OK)
            return st;
    }
    if (!spine && s->host_hi == 0)
        return fail(tp, "tor '%s' has no 'hosts' range", s->name);
    topo->n++;
    return OP_OK;
}

static op_status_t parse_line(struct topo_parse *tp, char *line)
{
    char *hash = strchr(line, '#');
    if (hash != NULL)
        *hash = '\0';
    char *w[TOPO_MAX_WORDS];
    int nw = 0;
    for (char *save = NULL, *t = strtok_r(line, " \t\r", &save); t != NULL;
         t = strtok_r(NULL, " \t\r", &save)) {
        if (nw == TOPO_MAX_WORDS)
            return fail(tp, "too many words");
        w[nw++] = t;
    }
    return nw == 0 ? OP_OK : parse_switch(tp, w, nw);
}

/* Second pass: spine names to indices, roles' indices, overlap checks. An
 * error names the line of the switch at fault; "no tor", the file's last line. */
static op_status_t resolve(struct topo_parse *tp)
{
    struct op_topo *topo = tp->topo;
    uint16_t n_spine = 0, n_tor = 0;
    int last_line = tp->line;
    for (int i = 0; i < topo->n; i++) {
        struct op_topo_switch *s = &topo->sw[i];
        tp->line = tp->sw_line[i];
        s->index = s->spine ? n_spine++ : n_tor++;
        for (int u = 0; u < s->n_up; u++) {
            int j = op_topo_find(topo, tp->up_names[i][u]);
            if (j < 0 || !topo->sw[j].spine)
                return fail(tp, "tor '%s' names unknown spine '%s'", s->name, tp->up_names[i][u]);
            for (int v = 0; v < u; v++)
                if (s->up[v] == j)
                    return fail(tp, "tor '%s' names spine '%s' twice", s->name, topo->sw[j].name);
            s->up[u] = (uint16_t)j;
        }
        for (int j = 0; j < i; j++) {
            const struct op_topo_switch *o = &topo->sw[j];
            if (o->ip == s->ip && o->port == s->port)
                return fail(tp, "'%s' and '%s' have the same address", o->name, s->name);
            if (!s->spine && !o->spine && s->host_lo <= o->host_hi && o->host_lo <= s->host_hi)
                return fail(tp, "host ranges of '%s' and '%s' overlap", o->name, s->name);
        }
    }
    tp->line = last_line;
    if (n_tor == 0)
        return fail(tp, "no tor");
    return OP_OK;
}

op_status_t op_topo_parse(const char *text, struct op_topo *topo, char *err, size_t errlen)
{
    struct topo_parse *tp = calloc(1, sizeof(*tp));
    if (tp == NULL)
        return OP_ERR_NOMEM;
    *tp = (struct topo_parse){.topo = topo, .err = err, .errlen = errlen};
    topo->n = 0;
    op_status_t st = OP_OK;
    for (const char *p = text; *p != '\0' && st == OP_OK;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[TOPO_LINE_MAX];
        tp->line++;
        if (len >= sizeof(line))
            st = fail(tp, "line longer than %d bytes", TOPO_LINE_MAX - 1);
        else {
            memcpy(line, p, len);
            line[len] = '\0';
            st = parse_line(tp, line);
        }
        p += len + (nl != NULL);
    }
    if (st == OP_OK)
        st = resolve(tp);
    free(tp);
    return st;
}

op_status_t op_topo_load(const char *path, struct op_topo *topo, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", path, strerror(e));
        return op_status_from_errno(e);
    }
    char *text = calloc(1, 1 << 20);
    size_t n = text ? fread(text, 1, (1 << 20) - 1, f) : 0;
    int too_big = text && !feof(f);
    fclose(f);
    if (text == NULL)
        return OP_ERR_NOMEM;
    op_status_t st = OP_ERR_MALFORMED;
    if (too_big)
        snprintf(err, errlen, "%s: larger than 1 MiB", path);
    else if (memchr(text, '\0', n) != NULL)
        snprintf(err, errlen, "%s: contains a NUL byte", path);
    else
        st = op_topo_parse(text, topo, err, errlen);
    free(text);
    return st;
}
