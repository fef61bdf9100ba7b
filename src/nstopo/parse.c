/* Topology files for `offpath topo` (docs/topo.md). Every line is checked,
 * so one run lists how many are bad; the first bad one is named with why. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offpath/nstopo.h"

#define WORDS_MAX 12
#define LINE_MAX_LEN 512

struct parse {
    struct op_nstopo *t;
    struct op_nstopo_stats *stats;
    char *err;
    size_t errlen;
    int line;
    int node_line[OP_NSTOPO_MAX_NODES]; /* where each node was declared */
    bool failed;
};

static bool fail_at(struct parse *p, int line, const char *fmt, ...) OP_PRINTF(3, 4);
static bool fail_at(struct parse *p, int line, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (!p->failed && p->err != NULL && p->errlen > 0)
        snprintf(p->err, p->errlen, "line %d: %s", line, msg);
    p->failed = true;
    p->stats->malformed++;
    return false;
}
#define FAIL(p, ...) fail_at((p), (p)->line, __VA_ARGS__)

int op_nstopo_find(const struct op_nstopo *t, const char *name_or_ip)
{
    uint32_t ip;
    uint16_t port = 0;
    uint8_t ip6[16];
    bool is_ip = strchr(name_or_ip, ':') == NULL &&
                 op_parse_ipv4(name_or_ip, &ip, &port) == OP_OK;
    bool is_ip6 = inet_pton(AF_INET6, name_or_ip, ip6) == 1;
    for (int i = 0; i < t->n_nodes; i++) {
        const struct op_nstopo_node *nd = &t->nodes[i];
        if (strcmp(nd->name, name_or_ip) == 0 || (is_ip && nd->ip == ip) ||
            (is_ip6 && nd->has_ip6 && memcmp(nd->ip6, ip6, 16) == 0))
            return i;
    }
    return -1;
}

void op_nstopo_netns(const struct op_nstopo *t, int node, char *out, size_t len)
{
    snprintf(out, len, "opt-%s-%s", t->name, t->nodes[node].name);
}

/* Names become interface and namespace names: keep them to what both take. */
static bool good_name(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n >= max || !(s[0] >= 'a' && s[0] <= 'z'))
        return false;
    return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

/* "<n><unit>" with unit among units (each a suffix and its multiplier). */
static bool parse_size(const char *s, const char *const *units, const uint64_t *mult,
                       uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || s[0] < '0' || s[0] > '9')
        return false;
    for (int i = 0; units[i] != NULL; i++) {
        if (strcmp(end, units[i]) != 0)
            continue;
        if (v > max / mult[i])
            return false;
        *out = v * mult[i];
        return *out >= min && *out <= max;
    }
    return false;
}

static bool parse_rate(const char *s, uint64_t *bps)
{
    static const char *const units[] = {"bit", "kbit", "mbit", "gbit", NULL};
    static const uint64_t mult[] = {1, 1000, 1000000, 1000000000};
    return parse_size(s, units, mult, 8000, 100000000000ull, bps);
}

static bool parse_queue(const char *s, uint32_t *bytes)
{
    static const char *const units[] = {"b", "kb", "mb", NULL};
    static const uint64_t mult[] = {1, 1024, 1024 * 1024};
    uint64_t v;
    if (!parse_size(s, units, mult, 2048, 64u << 20, &v))
        return false;
    *bytes = (uint32_t)v;
    return true;
}

/* "P%" with P in 0..100, decimals allowed: a chance. */
static bool parse_loss(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || s[0] < '0' || s[0] > '9' || strcmp(end, "%") != 0 || v > 100)
        return false;
    *out = v / 100;
    return true;
}

static bool parse_delay(const char *s, uint32_t *us)
{
    static const char *const units[] = {"us", "ms", NULL};
    static const uint64_t mult[] = {1, 1000};
    uint64_t v;
    if (!parse_size(s, units, mult, 0, 1000000, &v))
        return false;
    *us = (uint32_t)v;
    return true;
}

/* "AFTER+FOR" in milliseconds: the link down for a while; "inc:N+FOR": from
 * the N-th INC packet at the switch's end. */
static bool parse_down(const char *s, struct op_nstopo_link *l)
{
    char *end, *end2;
    bool at_inc = strncmp(s, "inc:", 4) == 0;
    s += at_inc ? 4 : 0;
    errno = 0;
    unsigned long a = strtoul(s, &end, 10), f = *end == '+' ? strtoul(end + 1, &end2, 10) : 0;
    if (errno != 0 || end == s || s[0] < '0' || s[0] > '9' || *end != '+' || end[1] < '0' ||
        end[1] > '9' || *end2 != '\0' || a > 86400000 || f < 1 || f > 86400000 ||
        (at_inc && a < 1))
        return false;
    l->down_after_ms = at_inc ? 0 : (uint32_t)a;
    l->down_at_inc = at_inc ? (uint32_t)a : 0;
    l->down_for_ms = (uint32_t)f;
    return true;
}

/* What follows a link's queue: loss P%, delay D and down T+D, each once.
 * The switches on the path inject them (netem does not exist here). */
static bool parse_link_faults(struct parse *p, char **w, int n, struct op_nstopo_link *l)
{
    bool loss = false, delay = false, down = false;
    for (int i = 7; i < n; i += 2) {
        if (i + 1 >= n)
            return FAIL(p, "'%s' wants a value", w[i]);
        if (strcmp(w[i], "down") == 0 && !down) {
            if (!parse_down(w[i + 1], l))
                return FAIL(p,
                            "bad down '%s' (AFTER_MS+FOR_MS from the switches' start, or "
                            "inc:N+FOR_MS from the link's N-th INC packet)",
                            w[i + 1]);
            down = true;
            continue;
        }
        if (strcmp(w[i], "loss") == 0 && !loss) {
            if (!parse_loss(w[i + 1], &l->loss))
                return FAIL(p, "bad loss '%s' (a percentage: e.g. 1%%, 0.5%%)", w[i + 1]);
            loss = true;
        } else if (strcmp(w[i], "delay") == 0 && !delay) {
            if (!parse_delay(w[i + 1], &l->delay_us))
                return FAIL(p, "bad delay '%s' (e.g. 100us, 2ms; at most 1000ms)", w[i + 1]);
            delay = true;
        } else {
            return FAIL(p, "'%s' after the queue: loss P%%, delay D or down T+D, once each",
                        w[i]);
        }
    }
    return true;
}

/* `mtu N`: every link's MTU; at most what a switch on the path reads
 * whole through AF_XDP (a 4 KiB frame less the kernel's headroom). */
static bool parse_mtu(struct parse *p, char **w, int n)
{
    uint64_t v;
    if (n != 2 || op_parse_u64(w[1], 1280, OP_NSTOPO_MTU_MAX, &v) != OP_OK)
        return FAIL(p, "mtu wants one number, 1280..%d", OP_NSTOPO_MTU_MAX);
    if (p->t->mtu != 0)
        return FAIL(p, "a second mtu line");
    p->t->mtu = (uint32_t)v;
    return true;
}

static bool parse_topo_name(struct parse *p, char **w, int n)
{
    if (n != 2)
        return FAIL(p, "topo wants one name");
    if (p->t->name[0] != '\0')
        return FAIL(p, "a second topo line");
    if (!good_name(w[1], OP_NSTOPO_TOPO_MAX))
        return FAIL(p, "bad topo name '%s' (a-z first, then a-z 0-9 _, under %d characters)",
                    w[1], OP_NSTOPO_TOPO_MAX);
    strcpy(p->t->name, w[1]);
    return true;
}

/* A global unicast IPv6 address: not ::, ::1, link-local or multicast. */
static bool parse_ip6(const char *s, uint8_t out[16])
{
    static const uint8_t zero[15];
    if (inet_pton(AF_INET6, s, out) != 1 || out[0] == 0xff ||
        (out[0] == 0xfe && (out[1] & 0xc0) == 0x80))
        return false;
    return memcmp(out, zero, 15) != 0 || out[15] > 1;
}

static bool parse_node(struct parse *p, enum op_nstopo_role role, char **w, int n)
{
    struct op_nstopo *t = p->t;
    uint32_t ip;
    uint16_t port = 0;
    uint8_t ip6[16];
    if (n != 3 && n != 4)
        return FAIL(p, "%s wants a name, an IPv4 address and optionally an IPv6 one", w[0]);
    if (!good_name(w[1], OP_NSTOPO_NAME_MAX))
        return FAIL(p, "bad node name '%s' (a-z first, then a-z 0-9 _, under %d characters)",
                    w[1], OP_NSTOPO_NAME_MAX);
    if (strchr(w[2], ':') != NULL || op_parse_ipv4(w[2], &ip, &port) != OP_OK || ip == 0 ||
        (ip >> 24) == 127 || (ip >> 28) >= 14)
        return FAIL(p, "bad address '%s' for %s (a unicast IPv4 address, not 127/8)", w[2], w[1]);
    if (op_nstopo_find(t, w[1]) >= 0)
        return FAIL(p, "node '%s' declared twice", w[1]);
    if (op_nstopo_find(t, w[2]) >= 0)
        return FAIL(p, "address %s given twice", w[2]);
    if (n == 4 && !parse_ip6(w[3], ip6))
        return FAIL(p, "bad IPv6 address '%s' for %s (global unicast)", w[3], w[1]);
    if (n == 4 && op_nstopo_find(t, w[3]) >= 0)
        return FAIL(p, "address %s given twice", w[3]);
    if (t->n_nodes == OP_NSTOPO_MAX_NODES)
        return FAIL(p, "more than %d nodes", OP_NSTOPO_MAX_NODES);
    struct op_nstopo_node *nd = &t->nodes[t->n_nodes];
    strcpy(nd->name, w[1]);
    nd->role = role;
    nd->ip = ip;
    nd->has_ip6 = n == 4;
    if (nd->has_ip6)
        memcpy(nd->ip6, ip6, 16);
    p->node_line[t->n_nodes++] = p->line;
    return true;
}

static bool link_roles_ok(enum op_nstopo_role a, enum op_nstopo_role b)
{
    return (a == OP_NSTOPO_HOST && b == OP_NSTOPO_TOR) ||
           (a == OP_NSTOPO_TOR && b == OP_NSTOPO_HOST) ||
           (a == OP_NSTOPO_TOR && b == OP_NSTOPO_SPINE) ||
           (a == OP_NSTOPO_SPINE && b == OP_NSTOPO_TOR);
}

static bool linked(const struct op_nstopo *t, int a, int b)
{
    for (int i = 0; i < t->n_links; i++)
        if ((t->links[i].a == a && t->links[i].b == b) ||
            (t->links[i].a == b && t->links[i].b == a))
            return true;
    return false;
}

static bool parse_link(struct parse *p, char **w, int n)
{
    struct op_nstopo *t = p->t;
    struct op_nstopo_link l = {0};
    if (n < 7 || strcmp(w[3], "rate") != 0 || strcmp(w[5], "queue") != 0)
        return FAIL(p, "link wants: link A B rate RATE queue SIZE [loss P%%] [delay D] [down T+D]");
    int a = op_nstopo_find(t, w[1]), b = op_nstopo_find(t, w[2]);
    if (a < 0 || b < 0)
        return FAIL(p, "link to undeclared node '%s'", a < 0 ? w[1] : w[2]);
    if (!link_roles_ok(t->nodes[a].role, t->nodes[b].role))
        return FAIL(p, "link %s-%s: links join a host and a tor, or a tor and a spine", w[1],
                    w[2]);
    if (linked(t, a, b))
        return FAIL(p, "link %s-%s given twice", w[1], w[2]);
    if (!parse_rate(w[4], &l.rate_bps))
        return FAIL(p, "bad rate '%s' (e.g. 100mbit, 1gbit; 8kbit..100gbit)", w[4]);
    if (!parse_queue(w[6], &l.queue))
        return FAIL(p, "bad queue '%s' (bytes: e.g. 64kb, 1mb; 2kb..64mb)", w[6]);
    if (!parse_link_faults(p, w, n, &l))
        return false;
    if (t->n_links == OP_NSTOPO_MAX_LINKS)
        return FAIL(p, "more than %d links", OP_NSTOPO_MAX_LINKS);
    l.a = (uint16_t)a;
    l.b = (uint16_t)b;
    t->links[t->n_links++] = l;
    return true;
}

static int split(char *line, char **w)
{
    int n = 0;
    char *save = NULL;
    char *hash = strchr(line, '#');
    if (hash != NULL)
        *hash = '\0';
    for (char *s = strtok_r(line, " \t\r", &save); s != NULL; s = strtok_r(NULL, " \t\r", &save)) {
        if (n == WORDS_MAX)
            return WORDS_MAX + 1;
        w[n++] = s;
    }
    return n;
}

static void parse_line(struct parse *p, char *line)
{
    char *w[WORDS_MAX];
    int n = split(line, w);
    if (n == 0)
        return;
    if (n > WORDS_MAX)
        FAIL(p, "more than %d words", WORDS_MAX);
    else if (strcmp(w[0], "topo") == 0)
        parse_topo_name(p, w, n);
    else if (strcmp(w[0], "mtu") == 0)
        parse_mtu(p, w, n);
    else if (strcmp(w[0], "host") == 0)
        parse_node(p, OP_NSTOPO_HOST, w, n);
    else if (strcmp(w[0], "tor") == 0)
        parse_node(p, OP_NSTOPO_TOR, w, n);
    else if (strcmp(w[0], "spine") == 0)
        parse_node(p, OP_NSTOPO_SPINE, w, n);
    else if (strcmp(w[0], "link") == 0)
        parse_link(p, w, n);
    else
        FAIL(p, "unknown keyword '%.32s' (topo, mtu, host, tor, spine, link)", w[0]);
}

static int degree(const struct op_nstopo *t, int node)
{
    int d = 0;
    for (int i = 0; i < t->n_links; i++)
        d += (t->links[i].a == node) + (t->links[i].b == node);
    return d;
}

/* What no single line shows: a name, and every host on exactly one link. */
static void check_whole(struct parse *p)
{
    const struct op_nstopo *t = p->t;
    if (t->name[0] == '\0')
        fail_at(p, p->line, "no 'topo NAME' line");
    /* IPv6 routes go hop by hop: every node on the way needs an address */
    p->t->ip6 = t->n_nodes > 0 && t->nodes[0].has_ip6;
    for (int i = 1; i < t->n_nodes; i++)
        if (t->nodes[i].has_ip6 != p->t->ip6)
            fail_at(p, p->node_line[i], "IPv6 on %s but not on %s (on all nodes or none)",
                    t->nodes[i].has_ip6 ? t->nodes[i].name : t->nodes[0].name,
                    t->nodes[i].has_ip6 ? t->nodes[0].name : t->nodes[i].name);
    int hosts = 0;
    for (int i = 0; i < t->n_nodes; i++) {
        int d = degree(t, i);
        if (t->nodes[i].role == OP_NSTOPO_HOST) {
            hosts++;
            if (d != 1)
                fail_at(p, p->node_line[i], "host %s has %d links (a host has one, to its tor)",
                        t->nodes[i].name, d);
        } else if (d == 0) {
            fail_at(p, p->node_line[i], "%s has no link", t->nodes[i].name);
        }
    }
    if (hosts == 0)
        fail_at(p, p->line, "no host");
}

op_status_t op_nstopo_parse(const char *text, struct op_nstopo *t, struct op_nstopo_stats *stats,
                            char *err, size_t errlen)
{
    struct op_nstopo_stats dummy;
    struct parse p = {.t = t, .stats = stats != NULL ? stats : &dummy, .err = err,
                      .errlen = errlen};
    memset(t, 0, sizeof(*t));
    memset(p.stats, 0, sizeof(*p.stats));
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    for (const char *s = text; *s != '\0';) {
        const char *nl = strchr(s, '\n');
        size_t len = nl != NULL ? (size_t)(nl - s) : strlen(s);
        char line[LINE_MAX_LEN];
        p.line++;
        p.stats->lines++;
        if (len >= sizeof(line)) {
            FAIL(&p, "longer than %d characters", LINE_MAX_LEN - 1);
        } else {
            memcpy(line, s, len);
            line[len] = '\0';
            parse_line(&p, line);
        }
        s += len + (nl != NULL);
    }
    if (!p.failed)
        check_whole(&p);
    return p.failed ? OP_ERR_MALFORMED : OP_OK;
}

op_status_t op_nstopo_load(const char *path, struct op_nstopo *t, struct op_nstopo_stats *stats,
                           char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        int e = errno;
        snprintf(err, errlen, "cannot read '%s': %s", path, strerror(e));
        return op_status_from_errno(e);
    }
    static const size_t cap = 1 << 20; /* a topology file is small: refuse huge ones */
    char *text = malloc(cap + 1);
    size_t n = text != NULL ? fread(text, 1, cap + 1, f) : 0;
    fclose(f);
    if (text == NULL)
        return OP_ERR_NOMEM;
    op_status_t st;
    if (n > cap || memchr(text, '\0', n) != NULL) {
        snprintf(err, errlen, "'%s' is not a topology file (binary or over 1 MiB)", path);
        st = OP_ERR_MALFORMED;
    } else {
        text[n] = '\0';
        st = op_nstopo_parse(text, t, stats, err, errlen);
    }
    free(text);
    return st;
}
