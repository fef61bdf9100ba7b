/* The RFC 1035 master-file reader (section 5): entries split into tokens
 * (parentheses join lines, ';' starts a comment, quotes and backslash
 * escapes), $ORIGIN, $TTL, $INCLUDE, relative names and '@', TTL and class
 * in either order, then the record's RDATA from a per-type field list.
 * Any error stops the load with "file:line: reason: detail". */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dns_internal.h"

#define MAX_TOKENS 2048
#define MAX_INCLUDE_DEPTH 8
#define MAX_RECORDS 4000000u

struct tok {
    const char *p;
    size_t n;
    bool quoted;
};

struct reader {
    struct dns_zone *z;
    const char *file;
    unsigned line;
    uint8_t origin[OP_DNS_NAME_MAX];
    size_t origin_len; /* 0: none yet */
    uint8_t owner[OP_DNS_NAME_MAX];
    size_t owner_len;
    uint32_t ttl_default, ttl_last;
    bool has_ttl_default, has_ttl_last, allow_include;
    int depth;
    struct op_wbuf rd_out; /* RDATA being built: at most 65535 bytes */
    struct tok *toks;
    struct op_dns_load_err *err;
};

#define FAIL(rd, reason, ...)                                                                      \
    (dns_load_fail((rd)->err, OP_DNS_Z_##reason, (rd)->file, (rd)->line, __VA_ARGS__), false)

/* ---- lexer ---- */
struct lexer {
    const char *s, *end;
    unsigned line;
};

static bool lex_quoted(struct lexer *lx, struct tok *t)
{
    const char *start = ++lx->s;
    while (lx->s < lx->end && *lx->s != '"') {
        if (*lx->s == '\\' && lx->s + 1 < lx->end)
            lx->s++;
        if (*lx->s == '\n')
            lx->line++;
        lx->s++;
    }
    if (lx->s >= lx->end)
        return false;
    *t = (struct tok){start, (size_t)(lx->s - start), true};
    lx->s++;
    return true;
}

static bool is_delim(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ';' || c == '(' || c == ')' ||
           c == '"';
}

static void lex_word(struct lexer *lx, struct tok *t)
{
    const char *start = lx->s;
    while (lx->s < lx->end && !is_delim(*lx->s)) {
        if (*lx->s == '\\' && lx->s + 1 < lx->end)
            lx->s++;
        lx->s++;
    }
    *t = (struct tok){start, (size_t)(lx->s - start), false};
}

/* One entry: its tokens, whether it began with blank space (the previous
 * owner's record) and the line it started on. 1: an entry (maybe empty),
 * 0: the end, -1: a syntax error (*line is where). */
static int lex_entry(struct lexer *lx, struct tok *toks, size_t *ntok, bool *blank,
                     unsigned *line)
{
    int depth = 0;
    *ntok = 0;
    if (lx->s >= lx->end)
        return 0;
    *line = lx->line;
    *blank = *lx->s == ' ' || *lx->s == '\t';
    while (lx->s < lx->end) {
        char c = *lx->s;
        if (c == '\n') {
            lx->line++;
            lx->s++;
            if (depth == 0)
                return 1;
        } else if (c == ' ' || c == '\t' || c == '\r') {
            lx->s++;
        } else if (c == ';') {
            while (lx->s < lx->end && *lx->s != '\n')
                lx->s++;
        } else if (c == '(' || c == ')') {
            depth += c == '(' ? 1 : -1;
            lx->s++;
            if (depth < 0)
                return -1;
        } else if (*ntok >= MAX_TOKENS) {
            return -1;
        } else if (c == '"') {
            if (!lex_quoted(lx, &toks[(*ntok)++]))
                return -1;
        } else {
            lex_word(lx, &toks[(*ntok)++]);
        }
    }
    return depth == 0 ? 1 : -1;
}

/* ---- fields ---- */
/* The byte at *i of a token, an escape (\DDD or \X) read as one byte. */
static int tok_byte(const struct tok *t, size_t *i, bool *escaped)
{
    *escaped = false;
    if (t->p[*i] != '\\') {
        return (unsigned char)t->p[(*i)++];
    }
    *escaped = true;
    if (*i + 1 >= t->n)
        return -1;
    if (*i + 3 < t->n && isdigit((unsigned char)t->p[*i + 1]) &&
        isdigit((unsigned char)t->p[*i + 2]) && isdigit((unsigned char)t->p[*i + 3])) {
        int v = (t->p[*i + 1] - '0') * 100 + (t->p[*i + 2] - '0') * 10 + (t->p[*i + 3] - '0');
        *i += 4;
        return v <= 255 ? v : -1;
    }
    if (isdigit((unsigned char)t->p[*i + 1]))
        return -1;
    *i += 2;
    return (unsigned char)t->p[*i - 1];
}

static bool tok_is(const struct tok *t, const char *s)
{
    return t->n == strlen(s) && strncasecmp(t->p, s, t->n) == 0;
}

/* Labels joined into out, checked as they close. */
static bool append_label(struct reader *rd, const struct tok *t, uint8_t *out, size_t *n,
                         const uint8_t *lab, size_t ll)
{
    if (ll == 0)
        return FAIL(rd, bad_name, "empty label in '%.*s'", (int)t->n, t->p);
    if (*n + 1 + ll + 1 > OP_DNS_NAME_MAX)
        return FAIL(rd, bad_name, "name '%.*s' longer than 255 octets", (int)t->n, t->p);
    out[(*n)++] = (uint8_t)ll;
    memcpy(out + *n, lab, ll);
    *n += ll;
    return true;
}

static bool read_name(struct reader *rd, const struct tok *t, uint8_t out[OP_DNS_NAME_MAX],
                      size_t *len)
{
    if (tok_is(t, "@")) {
        if (rd->origin_len == 0)
            return FAIL(rd, no_origin, "'@' before any $ORIGIN");
        memcpy(out, rd->origin, rd->origin_len);
        *len = rd->origin_len;
        return true;
    }
    if (t->n == 1 && t->p[0] == '.') {
        out[0] = 0;
        *len = 1;
        return true;
    }
    uint8_t lab[OP_DNS_LABEL_MAX];
    size_t n = 0, ll = 0, i = 0;
    bool absolute = false;
    while (i < t->n) {
        bool esc;
        int b = tok_byte(t, &i, &esc);
        if (b < 0)
            return FAIL(rd, syntax, "bad escape in name '%.*s'", (int)t->n, t->p);
        if (b == '.' && !esc) {
            if (!append_label(rd, t, out, &n, lab, ll))
                return false;
            ll = 0;
            absolute = i == t->n;
            continue;
        }
        if (ll == OP_DNS_LABEL_MAX)
            return FAIL(rd, bad_name, "label longer than 63 octets in '%.*s'", (int)t->n, t->p);
        lab[ll++] = (uint8_t)b;
    }
    if (!absolute) {
        if (ll > 0 && !append_label(rd, t, out, &n, lab, ll))
            return false;
        if (rd->origin_len == 0)
            return FAIL(rd, no_origin, "relative name '%.*s' before any $ORIGIN", (int)t->n,
                        t->p);
        if (n + rd->origin_len > OP_DNS_NAME_MAX)
            return FAIL(rd, bad_name, "name '%.*s' longer than 255 octets with the origin",
                        (int)t->n, t->p);
        memcpy(out + n, rd->origin, rd->origin_len);
        *len = n + rd->origin_len;
        return true;
    }
    out[n++] = 0;
    *len = n;
    return true;
}

static bool parse_num(const struct tok *t, uint64_t max, uint64_t *v)
{
    if (t->quoted || t->n == 0 || t->n > 20)
        return false;
    uint64_t x = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (!isdigit((unsigned char)t->p[i]))
            return false;
        x = x * 10 + (uint64_t)(t->p[i] - '0');
        if (x > max)
            return false;
    }
    *v = x;
    return true;
}

/* A TTL: seconds, or a sum of numbers with units (1h30m, 2W). */
static bool parse_ttl(const struct tok *t, uint32_t *ttl)
{
    uint64_t total = 0, cur = 0;
    bool digits = false;
    if (t->quoted || t->n == 0 || !isdigit((unsigned char)t->p[0]))
        return false;
    for (size_t i = 0; i < t->n; i++) {
        char c = (char)tolower((unsigned char)t->p[i]);
        if (isdigit((unsigned char)c)) {
            cur = cur * 10 + (uint64_t)(c - '0');
            digits = true;
            if (cur > 0x7fffffffu)
                return false;
            continue;
        }
        const char *units = "smhdw";
        static const uint64_t mult[] = {1, 60, 3600, 86400, 604800};
        const char *u = strchr(units, c);
        if (u == NULL || c == 0 || !digits)
            return false;
        total += cur * mult[u - units];
        cur = 0;
        digits = false;
    }
    total += cur;
    if (total > 0x7fffffffu)
        return false;
    *ttl = (uint32_t)total;
    return true;
}

static bool put(struct reader *rd, const void *p, size_t n)
{
    return op_wbuf_put(&rd->rd_out, p, n);
}

static bool put_be(struct reader *rd, uint64_t v, size_t n)
{
    return op_wbuf_put_be(&rd->rd_out, v, n);
}

static bool put_charstr(struct reader *rd, const struct tok *t)
{
    uint8_t s[256];
    size_t n = 0, i = 0;
    while (i < t->n) {
        bool esc;
        int b = tok_byte(t, &i, &esc);
        if (b < 0 || n == 255)
            return false;
        s[1 + n++] = (uint8_t)b;
    }
    s[0] = (uint8_t)n;
    return put(rd, s, n + 1);
}

static int b64_val(char c)
{
    const char *a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *p = c != 0 ? strchr(a, c) : NULL;
    return p != NULL ? (int)(p - a) : -1;
}

/* Base64 over the rest of the tokens (signatures and keys span several). */
static bool put_base64(struct reader *rd, const struct tok *t, size_t n)
{
    uint32_t acc = 0;
    int bits = 0, pad = 0;
    for (size_t k = 0; k < n; k++) {
        for (size_t i = 0; i < t[k].n; i++) {
            char c = t[k].p[i];
            if (c == '=') {
                pad++;
                continue;
            }
            int v = b64_val(c);
            if (v < 0 || pad > 0)
                return false;
            acc = acc << 6 | (uint32_t)v;
            bits += 6;
            if (bits >= 8) {
                bits -= 8;
                if (!put_be(rd, acc >> bits & 0xff, 1))
                    return false;
            }
        }
    }
    return pad <= 2;
}

static bool put_hex(struct reader *rd, const struct tok *t, size_t n)
{
    int hi = -1;
    for (size_t k = 0; k < n; k++) {
        for (size_t i = 0; i < t[k].n; i++) {
            char c = (char)tolower((unsigned char)t[k].p[i]);
            int v = isdigit((unsigned char)c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
            if (v < 0)
                return false;
            if (hi < 0) {
                hi = v;
            } else {
                if (!put_be(rd, (uint64_t)(hi << 4 | v), 1))
                    return false;
                hi = -1;
            }
        }
    }
    return hi < 0;
}

/* RFC 5155 section 3.3: the salt, "-" when empty. */
static bool put_salt(struct reader *rd, const struct tok *t)
{
    if (t->n == 1 && t->p[0] == '-')
        return put_be(rd, 0, 1);
    return t->n % 2 == 0 && t->n / 2 <= 255 && put_be(rd, t->n / 2, 1) && put_hex(rd, t, 1);
}

/* RFC 4648 section 7, no padding: the NSEC3 next hashed owner. */
static bool put_base32hex(struct reader *rd, const struct tok *t)
{
    uint8_t out[255];
    size_t n = 0;
    unsigned acc = 0, bits = 0;
    for (size_t i = 0; i < t->n; i++) {
        int c = tolower((unsigned char)t->p[i]);
        int v = isdigit(c) ? c - '0' : (c >= 'a' && c <= 'v') ? c - 'a' + 10 : -1;
        if (v < 0)
            return false;
        acc = acc << 5 | (unsigned)v;
        if ((bits += 5) >= 8) {
            bits -= 8;
            if (n == sizeof(out))
                return false;
            out[n++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    return n > 0 && acc == 0 && put_be(rd, n, 1) && put(rd, out, n); /* no stray bits */
}

/* Days from 1970-01-01 to a civil date (proleptic Gregorian). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

/* An RRSIG time: YYYYMMDDHHmmSS (UTC) or seconds (RFC 4034 section 3.2). */
static bool parse_sigtime(const struct tok *t, uint32_t *out)
{
    uint64_t v;
    if (t->n != 14) {
        if (!parse_num(t, UINT32_MAX, &v))
            return false;
        *out = (uint32_t)v;
        return true;
    }
    if (!parse_num(t, UINT64_MAX, &v))
        return false;
    unsigned f[6];
    int w[6] = {4, 2, 2, 2, 2, 2}, at = 0;
    for (int i = 0; i < 6; i++) {
        f[i] = 0;
        for (int k = 0; k < w[i]; k++)
            f[i] = f[i] * 10 + (unsigned)(t->p[at++] - '0');
    }
    if (f[1] < 1 || f[1] > 12 || f[2] < 1 || f[2] > 31 || f[3] > 23 || f[4] > 59 || f[5] > 60)
        return false;
    int64_t s = days_from_civil(f[0], f[1], f[2]) * 86400 + f[3] * 3600 + f[4] * 60 + f[5];
    *out = (uint32_t)s; /* serial arithmetic (RFC 1982): modulo 2^32 */
    return true;
}

/* An NSEC type bitmap (RFC 4034 section 4.1.2) from the type mnemonics. */
static bool put_bitmap(struct reader *rd, const struct tok *t, size_t n)
{
    static const size_t map_len = 8192;
    uint8_t *map = calloc(1, map_len);
    if (map == NULL)
        return false;
    bool ok = true;
    for (size_t k = 0; k < n && ok; k++) {
        int type = dns_type_parse(t[k].p, t[k].n);
        ok = type >= 0;
        if (ok)
            map[type >> 3] |= (uint8_t)(0x80 >> (type & 7));
    }
    for (unsigned win = 0; win < 256 && ok; win++) {
        unsigned last = 0;
        for (unsigned i = 0; i < 32; i++)
            if (map[win * 32 + i] != 0)
                last = i + 1;
        if (last > 0)
            ok = put_be(rd, win, 1) && put_be(rd, last, 1) && put(rd, map + win * 32, last);
    }
    free(map);
    return ok;
}

/* ---- types ---- */
/* RDATA fields per type: 4 IPv4, 6 IPv6, b/s/l 8/16/32-bit numbers, t a
 * TTL-like number, n a name, x one character-string, X one or more, c the
 * CAA tag and value, y a type mnemonic, T an RRSIG time, B base64 of the
 * rest, H hex of the rest, M an NSEC type bitmap of the rest, S an NSEC3
 * salt (hex or "-", with its length byte), Z an NSEC3 hashed owner
 * (base32hex, with its length byte). */
struct type_desc {
    const char *name;
    uint16_t type;
    const char *fields;
};

static const struct type_desc types[] = {
    {"A", T_A, "4"},          {"NS", T_NS, "n"},         {"CNAME", T_CNAME, "n"},
    {"SOA", T_SOA, "nnltttt"}, {"PTR", T_PTR, "n"},      {"HINFO", T_HINFO, "xx"},
    {"MX", T_MX, "sn"},       {"TXT", T_TXT, "X"},       {"AAAA", T_AAAA, "6"},
    {"SRV", T_SRV, "sssn"},   {"DNAME", T_DNAME, "n"},   {"DS", T_DS, "sbbH"},
    {"RRSIG", T_RRSIG, "ybbtTTsnB"}, {"NSEC", T_NSEC, "nM"}, {"DNSKEY", T_DNSKEY, "sbbB"},
    {"CAA", T_CAA, "bc"},     {"SSHFP", 44, "bbH"},      {"TLSA", 52, "bbbH"},
    {"CDS", 59, "sbbH"},      {"CDNSKEY", 60, "sbbB"},
    {"NSEC3", T_NSEC3, "bbsSZM"}, {"NSEC3PARAM", T_NSEC3PARAM, "bbsS"},
};

static const struct type_desc *type_desc_of(uint16_t type)
{
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (types[i].type == type)
            return &types[i];
    return NULL;
}

int dns_type_parse(const char *s, size_t n)
{
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (strlen(types[i].name) == n && strncasecmp(types[i].name, s, n) == 0)
            return types[i].type;
    if (n > 4 && n <= 9 && strncasecmp(s, "TYPE", 4) == 0) {
        struct tok t = {s + 4, n - 4, false};
        uint64_t v;
        if (parse_num(&t, 65535, &v))
            return (int)v;
    }
    return -1;
}

static bool put_caa(struct reader *rd, const struct tok *t, size_t n)
{
    if (n != 2 || t[0].quoted || t[0].n == 0 || t[0].n > 255)
        return false;
    for (size_t i = 0; i < t[0].n; i++)
        if (!isalnum((unsigned char)t[0].p[i]))
            return false;
    if (!put_be(rd, t[0].n, 1) || !put(rd, t[0].p, t[0].n))
        return false;
    for (size_t i = 0; i < t[1].n;) {
        bool esc;
        int b = tok_byte(&t[1], &i, &esc);
        if (b < 0 || !put_be(rd, (uint64_t)b, 1))
            return false;
    }
    return true;
}

/* One field; *k moves past the tokens it used. */
static bool put_field(struct reader *rd, char f, const struct tok *t, size_t n, size_t *k)
{
    uint64_t v;
    uint32_t u;
    uint8_t name[OP_DNS_NAME_MAX], addr[16];
    size_t len;
    if (f == 'B' || f == 'H' || f == 'M' || f == 'X' || f == 'c') {
        size_t rest = n - *k;
        const struct tok *r = t + *k;
        *k = n;
        switch (f) {
        case 'B': return rest > 0 && put_base64(rd, r, rest);
        case 'H': return rest > 0 && put_hex(rd, r, rest);
        case 'M': return put_bitmap(rd, r, rest);
        case 'c': return put_caa(rd, r, rest);
        default:
            for (size_t i = 0; i < rest; i++)
                if (!put_charstr(rd, &r[i]))
                    return false;
            return rest > 0;
        }
    }
    if (*k >= n)
        return false;
    const struct tok *x = &t[(*k)++];
    char s[64];
    switch (f) {
    case '4':
    case '6':
        if (x->n >= sizeof(s))
            return false;
        memcpy(s, x->p, x->n);
        s[x->n] = 0;
        return inet_pton(f == '4' ? AF_INET : AF_INET6, s, addr) == 1 &&
               put(rd, addr, f == '4' ? 4 : 16);
    case 'b': return parse_num(x, 255, &v) && put_be(rd, v, 1);
    case 's': return parse_num(x, 65535, &v) && put_be(rd, v, 2);
    case 'l': return parse_num(x, UINT32_MAX, &v) && put_be(rd, v, 4);
    case 't': return parse_ttl(x, &u) && put_be(rd, u, 4);
    case 'T': return parse_sigtime(x, &u) && put_be(rd, u, 4);
    case 'x': return put_charstr(rd, x);
    case 'S': return put_salt(rd, x);
    case 'Z': return put_base32hex(rd, x);
    case 'y': {
        int type = dns_type_parse(x->p, x->n);
        return type >= 0 && put_be(rd, (uint64_t)type, 2);
    }
    case 'n':
        if (!read_name(rd, x, name, &len))
            return false;
        return put(rd, name, len);
    }
    return false;
}

/* RFC 3597's generic form: \# length hex. */
static bool put_generic(struct reader *rd, const struct tok *t, size_t n)
{
    uint64_t len;
    if (n < 2 || !parse_num(&t[1], 65535, &len))
        return false;
    if (len == 0)
        return n == 2;
    return put_hex(rd, t + 2, n - 2) && rd->rd_out.len == len;
}

static bool read_rdata(struct reader *rd, uint16_t type, const struct tok *t, size_t n)
{
    rd->rd_out.len = 0;
    if (n > 0 && t[0].n == 2 && memcmp(t[0].p, "\\#", 2) == 0 && !t[0].quoted) {
        if (!put_generic(rd, t, n))
            return FAIL(rd, bad_rdata, "bad generic (\\#) RDATA");
        return true;
    }
    const struct type_desc *d = type_desc_of(type);
    if (d == NULL)
        return FAIL(rd, bad_type, "type %u has no text form here: use \\# (RFC 3597)", type);
    size_t k = 0;
    for (const char *f = d->fields; *f != 0; f++) {
        if (!put_field(rd, *f, t, n, &k)) {
            if (rd->err->reason != OP_DNS_Z_ok)
                return false;
            return FAIL(rd, bad_rdata, "%s: field %d of the RDATA cannot be read", d->name,
                        (int)(f - d->fields) + 1);
        }
    }
    if (k != n)
        return FAIL(rd, bad_rdata, "%s: %zu fields too many", d->name, n - k);
    return true;
}

/* ---- records and directives ---- */
static bool arena_put(struct dns_zone *z, const void *p, size_t n, uint32_t *off)
{
    if (z->arena_len + n > z->arena_cap) {
        size_t cap = z->arena_cap ? z->arena_cap * 2 : 4096;
        while (cap < z->arena_len + n)
            cap *= 2;
        if (cap > UINT32_MAX)
            return false;
        uint8_t *a = realloc(z->arena, cap);
        if (a == NULL)
            return false;
        z->arena = a;
        z->arena_cap = cap;
    }
    memcpy(z->arena + z->arena_len, p, n);
    *off = (uint32_t)z->arena_len;
    z->arena_len += n;
    return true;
}

static bool add_record(struct reader *rd, uint16_t type, uint32_t ttl)
{
    struct dns_zone *z = rd->z;
    if (z->nrecs >= MAX_RECORDS)
        return FAIL(rd, too_big, "more than %u records", MAX_RECORDS);
    if (z->nrecs == z->recs_cap) {
        size_t cap = z->recs_cap ? z->recs_cap * 2 : 256;
        struct dns_rec *r = realloc(z->recs, cap * sizeof(*r));
        if (r == NULL)
            return FAIL(rd, nomem, "out of memory");
        z->recs = r;
        z->recs_cap = cap;
    }
    uint8_t owner[OP_DNS_NAME_MAX];
    memcpy(owner, rd->owner, rd->owner_len);
    dns_name_lower(owner, rd->owner_len);
    struct dns_rec *r = &z->recs[z->nrecs];
    if (!arena_put(z, owner, rd->owner_len, &r->owner_off) ||
        !arena_put(z, rd->rd_out.buf, rd->rd_out.len, &r->rd_off))
        return FAIL(rd, nomem, "out of memory");
    r->owner_len = (uint8_t)rd->owner_len;
    r->type = type;
    r->ttl = ttl;
    r->rdlen = (uint16_t)rd->rd_out.len;
    z->nrecs++;
    return true;
}

/* The zone's origin: the first $ORIGIN, or the first owner when the
 * caller gave none. Every owner must lie under it. */
static bool check_owner(struct reader *rd)
{
    struct dns_zone *z = rd->z;
    if (z->origin_len == 0) {
        memcpy(z->origin, rd->owner, rd->owner_len);
        dns_name_lower(z->origin, rd->owner_len);
        z->origin_len = (uint8_t)rd->owner_len;
        z->origin_labels = (uint8_t)dns_name_labels(z->origin);
    }
    if (!dns_name_under(rd->owner, dns_name_labels(rd->owner), z->origin, z->origin_labels))
        return FAIL(rd, out_of_zone, "owner outside the zone's origin");
    return true;
}

static bool read_file_text(const char *path, char **text, size_t *len);
static bool read_text(struct reader *rd, const char *text, size_t len);

static bool directive_include(struct reader *rd, const struct tok *t, size_t n)
{
    if (!rd->allow_include)
        return FAIL(rd, bad_directive, "$INCLUDE is not allowed here");
    if (n < 2 || n > 3)
        return FAIL(rd, bad_directive, "$INCLUDE takes a file and an optional origin");
    if (rd->depth >= MAX_INCLUDE_DEPTH)
        return FAIL(rd, include_depth, "$INCLUDE nested deeper than %d", MAX_INCLUDE_DEPTH);
    char path[4096];
    const char *slash = strrchr(rd->file, '/');
    int dir = t[1].p[0] == '/' || slash == NULL ? 0 : (int)(slash - rd->file) + 1;
    if (snprintf(path, sizeof(path), "%.*s%.*s", dir, rd->file, (int)t[1].n, t[1].p) >=
        (int)sizeof(path))
        return FAIL(rd, bad_directive, "$INCLUDE path too long");
    struct reader sub = *rd;
    sub.file = path;
    sub.depth++;
    sub.owner_len = 0;
    if (n == 3 && !read_name(rd, &t[2], sub.origin, &sub.origin_len))
        return false;
    char *text;
    size_t len;
    if (!read_file_text(path, &text, &len))
        return FAIL(rd, open, "$INCLUDE %s: %s", path, strerror(errno));
    sub.line = 1;
    bool ok = read_text(&sub, text, len);
    free(text);
    return ok; /* $ORIGIN and the owner return to what they were (RFC 1035 5.1) */
}

static bool directive(struct reader *rd, const struct tok *t, size_t n)
{
    if (tok_is(&t[0], "$ORIGIN")) {
        if (n != 2)
            return FAIL(rd, bad_directive, "$ORIGIN takes one name");
        uint8_t o[OP_DNS_NAME_MAX];
        size_t len;
        if (!read_name(rd, &t[1], o, &len))
            return false;
        memcpy(rd->origin, o, len);
        rd->origin_len = len;
        return true;
    }
    if (tok_is(&t[0], "$TTL")) {
        if (n != 2 || !parse_ttl(&t[1], &rd->ttl_default))
            return FAIL(rd, bad_ttl, "$TTL takes one TTL");
        rd->has_ttl_default = true;
        return true;
    }
    if (tok_is(&t[0], "$INCLUDE"))
        return directive_include(rd, t, n);
    return FAIL(rd, bad_directive, "unknown directive '%.*s'", (int)t[0].n, t[0].p);
}

/* [owner] [ttl] [class] type rdata... (TTL and class in either order). */
static bool entry(struct reader *rd, const struct tok *t, size_t n, bool blank)
{
    size_t k = 0;
    if (!blank) {
        if (!read_name(rd, &t[k++], rd->owner, &rd->owner_len))
            return false;
    } else if (rd->owner_len == 0) {
        return FAIL(rd, bad_name, "a record with no owner and none before it");
    }
    uint32_t ttl = 0;
    bool has_ttl = false, has_class = false;
    int type = -1;
    while (k < n && type < 0) {
        const struct tok *x = &t[k++];
        if (!has_ttl && x->n > 0 && isdigit((unsigned char)x->p[0])) {
            if (!parse_ttl(x, &ttl))
                return FAIL(rd, bad_ttl, "bad TTL '%.*s'", (int)x->n, x->p);
            has_ttl = true;
        } else if (!has_class && tok_is(x, "IN")) {
            has_class = true;
        } else if (tok_is(x, "CH") || tok_is(x, "HS") || tok_is(x, "CS")) {
            return FAIL(rd, bad_rdata, "class %.*s: only IN is served", (int)x->n, x->p);
        } else if ((type = dns_type_parse(x->p, x->n)) < 0) {
            return FAIL(rd, bad_type, "unknown type '%.*s'", (int)x->n, x->p);
        }
    }
    if (type < 0)
        return FAIL(rd, bad_type, "no type");
    if (!has_ttl) {
        if (!rd->has_ttl_default && !rd->has_ttl_last)
            return FAIL(rd, bad_ttl, "no TTL, no $TTL and no TTL before");
        ttl = rd->has_ttl_default ? rd->ttl_default : rd->ttl_last;
    }
    rd->ttl_last = ttl;
    rd->has_ttl_last = true;
    if (!check_owner(rd) || !read_rdata(rd, (uint16_t)type, t + k, n - k))
        return false;
    return add_record(rd, (uint16_t)type, ttl);
}

static bool read_text(struct reader *rd, const char *text, size_t len)
{
    struct lexer lx = {text, text + len, rd->line};
    size_t n;
    bool blank;
    int r;
    while ((r = lex_entry(&lx, rd->toks, &n, &blank, &rd->line)) == 1) {
        if (n == 0)
            continue;
        bool ok = !blank && rd->toks[0].p[0] == '$' && !rd->toks[0].quoted
                      ? directive(rd, rd->toks, n)
                      : entry(rd, rd->toks, n, blank);
        if (!ok)
            return false;
    }
    if (r < 0) /* reported at the line the entry started on */
        return FAIL(rd, syntax, "unbalanced parentheses or quotes, or too many fields");
    return true;
}

static bool read_file_text(const char *path, char **text, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return false;
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap)
            break;
        char *b = realloc(buf, cap * 2);
        if (b == NULL) {
            free(buf);
            buf = NULL;
            errno = ENOMEM;
            break;
        }
        buf = b;
        cap *= 2;
    }
    bool ok = buf != NULL && !ferror(f);
    fclose(f);
    if (!ok) {
        free(buf);
        return false;
    }
    *text = buf;
    *len = n;
    return true;
}

bool dns_zone_read(struct dns_zone *z, const char *file, const char *text, size_t len,
                   const uint8_t *origin, size_t origin_len, bool allow_include,
                   struct op_dns_load_err *err)
{
    struct reader rd = {.z = z, .file = file, .line = 1, .allow_include = allow_include,
                        .err = err};
    rd.rd_out = (struct op_wbuf){.buf = malloc(65535), .cap = 65535};
    rd.toks = malloc(MAX_TOKENS * sizeof(*rd.toks));
    bool ok = rd.rd_out.buf != NULL && rd.toks != NULL;
    if (!ok)
        dns_load_fail(err, OP_DNS_Z_nomem, file, 0, "out of memory");
    if (ok && origin_len > 0) {
        memcpy(rd.origin, origin, origin_len);
        rd.origin_len = origin_len;
        memcpy(z->origin, origin, origin_len);
        dns_name_lower(z->origin, origin_len);
        z->origin_len = (uint8_t)origin_len;
        z->origin_labels = (uint8_t)dns_name_labels(z->origin);
    }
    ok = ok && read_text(&rd, text, len);
    free(rd.rd_out.buf);
    free(rd.toks);
    return ok;
}

/* ---- loading ---- */
static bool zones_add(struct op_dns_zones *zs, struct dns_zone *z, const char *file,
                      struct op_dns_load_err *err)
{
    for (size_t i = 0; i < zs->n; i++)
        if (dns_name_eq(zs->z[i].origin, zs->z[i].origin_len, z->origin, z->origin_len)) {
            dns_load_fail(err, OP_DNS_Z_duplicate_zone, file, 0, "zone loaded twice");
            return false;
        }
    struct dns_zone *a = realloc(zs->z, (zs->n + 1) * sizeof(*a));
    if (a == NULL) {
        dns_load_fail(err, OP_DNS_Z_nomem, file, 0, "out of memory");
        return false;
    }
    zs->z = a;
    zs->z[zs->n++] = *z;
    return true;
}

/* $ORIGIN given by the caller, as text. */
static bool origin_of(const char *text, uint8_t out[OP_DNS_NAME_MAX], size_t *len,
                      struct op_dns_load_err *err)
{
    struct reader rd = {.file = "origin", .err = err};
    struct tok t = {text, strlen(text), false};
    if (t.n == 0 || text[t.n - 1] != '.')
        return dns_load_fail(err, OP_DNS_Z_bad_name, "origin", 0, "must be absolute"), false;
    return read_name(&rd, &t, out, len);
}

static op_status_t load_one(struct op_dns_zones *zs, const char *file, const char *text,
                            size_t len, const char *origin, bool allow_include,
                            struct op_dns_load_err *err)
{
    struct dns_zone z = {0};
    uint8_t o[OP_DNS_NAME_MAX] = {0}; /* -O3 cannot see that olen 0 means unread */
    size_t olen = 0;
    if (origin != NULL && !origin_of(origin, o, &olen, err))
        return OP_ERR_INVAL;
    if (!dns_zone_read(&z, file, text, len, o, olen, allow_include, err) ||
        !dns_zone_build(&z, file, err) || !zones_add(zs, &z, file, err)) {
        dns_zone_free(&z);
        return err->reason == OP_DNS_Z_nomem ? OP_ERR_NOMEM : OP_ERR_MALFORMED;
    }
    return OP_OK;
}

op_status_t op_dns_zones_parse(const char *text, size_t len, const char *origin,
                               struct op_dns_zones **out, struct op_dns_load_err *err)
{
    struct op_dns_zones *zs = calloc(1, sizeof(*zs));
    err->reason = OP_DNS_Z_ok;
    err->msg[0] = 0;
    if (zs == NULL)
        return OP_ERR_NOMEM;
    op_status_t st = load_one(zs, "<text>", text, len, origin, false, err);
    if (st != OP_OK) {
        op_dns_zones_free(zs);
        return st;
    }
    *out = zs;
    return OP_OK;
}

op_status_t op_dns_zones_load(const char *const *files, size_t n, struct op_dns_zones **out,
                              struct op_dns_load_err *err)
{
    struct op_dns_zones *zs = calloc(1, sizeof(*zs));
    err->reason = OP_DNS_Z_ok;
    err->msg[0] = 0;
    if (zs == NULL)
        return OP_ERR_NOMEM;
    op_status_t st = OP_OK;
    for (size_t i = 0; i < n && st == OP_OK; i++) {
        char *text;
        size_t len;
        if (!read_file_text(files[i], &text, &len)) {
            dns_load_fail(err, OP_DNS_Z_open, files[i], 0, "%s", strerror(errno));
            st = OP_ERR_INVAL;
            break;
        }
        st = load_one(zs, files[i], text, len, NULL, true, err);
        free(text);
    }
    if (st != OP_OK) {
        op_dns_zones_free(zs);
        return st;
    }
    *out = zs;
    return OP_OK;
}
