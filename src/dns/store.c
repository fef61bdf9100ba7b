/* The zone store: names in wire form, the sorted arrays a zone is built
 * into, and the searches the responder makes over them. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dns_internal.h"

unsigned dns_name_labels(const uint8_t *name)
{
    unsigned n = 0;
    for (; *name != 0; name += 1 + *name)
        n++;
    return n;
}

size_t dns_name_len(const uint8_t *name)
{
    const uint8_t *p = name;
    for (; *p != 0; p += 1 + *p)
        ;
    return (size_t)(p - name) + 1;
}

void dns_name_lower(uint8_t *name, size_t len)
{
    for (size_t i = 0; i < len && name[i] != 0; i += 1 + name[i])
        for (size_t k = 1; k <= name[i]; k++)
            name[i + k] = dns_lc(name[i + k]);
}

const uint8_t *dns_name_skip(const uint8_t *name, unsigned skip)
{
    for (unsigned i = 0; i < skip && *name != 0; i++)
        name += 1 + *name;
    return name;
}

bool dns_name_eq(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    if (alen != blen)
        return false;
    for (size_t i = 0; i < alen; i++)
        if (dns_lc(a[i]) != dns_lc(b[i]))
            return false;
    return true;
}

bool dns_name_under(const uint8_t *name, unsigned name_labels, const uint8_t *parent,
                    unsigned parent_labels)
{
    if (name_labels < parent_labels)
        return false;
    const uint8_t *s = dns_name_skip(name, name_labels - parent_labels);
    return dns_name_eq(s, dns_name_len(s), parent, dns_name_len(parent));
}

/* Label starts of a name, so it can be walked from the root end. */
static unsigned label_offsets(const uint8_t *name, const uint8_t *at[128])
{
    unsigned n = 0;
    for (; *name != 0 && n < 128; name += 1 + *name)
        at[n++] = name;
    return n;
}

/* a against the name whose label starts are lb[0..nb): walked from the
 * root end, label by label. */
static int name_cmp_labels(const uint8_t *a, const uint8_t *const *lb, unsigned nb)
{
    const uint8_t *la[128];
    unsigned na = label_offsets(a, la);
    while (na > 0 && nb > 0) {
        const uint8_t *x = la[--na], *y = lb[--nb];
        size_t common = x[0] < y[0] ? x[0] : y[0];
        int d = memcmp(x + 1, y + 1, common);
        if (d != 0)
            return d;
        if (x[0] != y[0])
            return x[0] < y[0] ? -1 : 1;
    }
    return na == nb ? 0 : (na < nb ? -1 : 1);
}

int dns_name_cmp(const uint8_t *a, const uint8_t *b)
{
    const uint8_t *lb[128];
    unsigned nb = label_offsets(b, lb);
    return name_cmp_labels(a, lb, nb);
}

void dns_load_fail(struct op_dns_load_err *err, int reason, const char *file, unsigned line,
                   const char *fmt, ...)
{
    if (err == NULL || err->reason != OP_DNS_Z_ok)
        return; /* keep the first */
    err->reason = reason;
    int n = line > 0 ? snprintf(err->msg, sizeof(err->msg), "%s:%u: %s: ", file, line,
                                op_dns_zone_err_name(reason))
                     : snprintf(err->msg, sizeof(err->msg), "%s: %s: ", file,
                                op_dns_zone_err_name(reason));
    if (n < 0 || (size_t)n >= sizeof(err->msg))
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg + n, sizeof(err->msg) - (size_t)n, fmt, ap);
    va_end(ap);
}

static const char *const zone_err_names[] = {OP_DNS_ZONE_ERRORS(OP_COUNTER_NAME)};

const char *op_dns_zone_err_name(int e)
{
    return e >= 0 && e < OP_DNS_Z_COUNT_ ? zone_err_names[e] : "unknown";
}

void dns_zone_free(struct dns_zone *z)
{
    free(z->arena);
    free(z->recs);
    free(z->sets);
    free(z->nodes);
    free(z->index);
    memset(z, 0, sizeof(*z));
}

/* qsort has no context argument: records carry offsets into one arena, so
 * sorting goes through an index array holding the arena pointer. */
struct rec_ref {
    const uint8_t *arena;
    struct dns_rec r;
};

static int rdata_cmp(const struct rec_ref *x, const struct rec_ref *y)
{
    size_t n = x->r.rdlen < y->r.rdlen ? x->r.rdlen : y->r.rdlen;
    int d = memcmp(x->arena + x->r.rd_off, y->arena + y->r.rd_off, n);
    return d != 0 ? d : (int)x->r.rdlen - (int)y->r.rdlen;
}

static int rec_cmp(const void *a, const void *b)
{
    const struct rec_ref *x = a, *y = b;
    int d = dns_name_cmp(x->arena + x->r.owner_off, y->arena + y->r.owner_off);
    if (d != 0)
        return d;
    if (x->r.type != y->r.type)
        return x->r.type < y->r.type ? -1 : 1;
    return rdata_cmp(x, y);
}

/* Sort the records and drop exact duplicates (a zone may repeat one). */
static bool sort_records(struct dns_zone *z)
{
    struct rec_ref *refs = malloc((z->nrecs ? z->nrecs : 1) * sizeof(*refs));
    if (refs == NULL)
        return false;
    for (size_t i = 0; i < z->nrecs; i++)
        refs[i] = (struct rec_ref){z->arena, z->recs[i]};
    qsort(refs, z->nrecs, sizeof(*refs), rec_cmp);
    size_t n = 0;
    for (size_t i = 0; i < z->nrecs; i++)
        if (n == 0 || rec_cmp(&refs[i], &refs[i - 1]) != 0)
            z->recs[n++] = refs[i].r;
    z->nrecs = n;
    free(refs);
    return true;
}

static bool same_owner(const struct dns_zone *z, const struct dns_rec *a, const struct dns_rec *b)
{
    return a->owner_len == b->owner_len &&
           memcmp(z->arena + a->owner_off, z->arena + b->owner_off, a->owner_len) == 0;
}

/* Runs of one type become rrsets, runs of one owner nodes. */
static bool group_records(struct dns_zone *z)
{
    z->sets = calloc(z->nrecs ? z->nrecs : 1, sizeof(*z->sets));
    z->nodes = calloc(z->nrecs ? z->nrecs : 1, sizeof(*z->nodes));
    if (z->sets == NULL || z->nodes == NULL)
        return false;
    for (size_t i = 0; i < z->nrecs; i++) {
        const struct dns_rec *r = &z->recs[i];
        bool new_node = i == 0 || !same_owner(z, r, r - 1);
        if (new_node) {
            struct dns_node *nd = &z->nodes[z->nnodes++];
            nd->name = z->arena + r->owner_off;
            nd->name_len = r->owner_len;
            nd->labels = (uint8_t)dns_name_labels(nd->name);
            nd->set_first = (uint32_t)z->nsets;
        }
        if (new_node || r->type != r[-1].type) {
            z->sets[z->nsets++] = (struct dns_rrset){r->type, r->ttl, (uint32_t)i, 0};
            z->nodes[z->nnodes - 1].set_count++;
        }
        z->sets[z->nsets - 1].count++;
    }
    return true;
}

/* What Knot's semantic checks refuse too: one SOA at the apex and nowhere
 * else, a CNAME alone at its name (DNSSEC records aside). */
static bool check_zone(struct dns_zone *z, const char *file, struct op_dns_load_err *err)
{
    size_t ins;
    long apex = dns_zone_find(z, z->origin, &ins);
    const struct dns_rrset *soa =
        apex >= 0 ? dns_node_rrset(z, &z->nodes[apex], T_SOA) : NULL;
    if (soa == NULL || soa->count != 1) {
        dns_load_fail(err, OP_DNS_Z_no_soa, file, 0, "the apex needs exactly one SOA record");
        return false;
    }
    z->apex = (size_t)apex;
    for (size_t i = 0; i < z->nnodes; i++) {
        const struct dns_node *nd = &z->nodes[i];
        bool cname = false, other = false;
        for (uint32_t k = 0; k < nd->set_count; k++) {
            uint16_t t = z->sets[nd->set_first + k].type;
            cname |= t == T_CNAME;
            uint64_t depth = 1ull << (nd->labels < 63 ? nd->labels : 63);
            z->dname_depths |= t == T_DNAME ? depth : 0;
            z->cut_depths |= t == T_NS && i != z->apex ? depth : 0;
            other |= t != T_CNAME && t != T_RRSIG && t != T_NSEC;
            if (t == T_SOA && i != z->apex) {
                dns_load_fail(err, OP_DNS_Z_no_soa, file, 0, "an SOA below the apex");
                return false;
            }
        }
        if (cname && other) {
            dns_load_fail(err, OP_DNS_Z_cname_conflict, file, 0,
                          "a CNAME beside other data at node %zu", i);
            return false;
        }
    }
    return true;
}

/* The exact-match index's hash of a lower-case wire name: eight bytes at
 * a time, as names are short and every query hashes a few of them. */
static uint64_t name_hash(const uint8_t *p, size_t len)
{
    uint64_t h = 0x9e3779b97f4a7c15u ^ len;
    for (; len >= 8; p += 8, len -= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = (h ^ v) * 0xff51afd7ed558ccdu;
        h ^= h >> 32;
    }
    uint64_t v = 0;
    memcpy(&v, p, len);
    h = (h ^ v) * 0xc4ceb9fe1a85ec53u;
    return h ^ h >> 29;
}

/* Open addressing over node indexes plus one (0: empty), at most half
 * full: a lookup that hits costs a hash and one compare, not the binary
 * search's log2(nodes) canonical comparisons. */
static bool build_index(struct dns_zone *z)
{
    size_t size = 16;
    while (size < 2 * z->nnodes)
        size *= 2;
    z->index = calloc(size, sizeof(*z->index));
    if (z->index == NULL)
        return false;
    z->index_mask = size - 1;
    for (size_t i = 0; i < z->nnodes; i++) {
        size_t at = name_hash(z->nodes[i].name, z->nodes[i].name_len) & z->index_mask;
        while (z->index[at] != 0)
            at = (at + 1) & z->index_mask;
        z->index[at] = (uint32_t)i + 1;
    }
    return true;
}

bool dns_zone_build(struct dns_zone *z, const char *file, struct op_dns_load_err *err)
{
    if (!sort_records(z) || !group_records(z) || !build_index(z)) {
        dns_load_fail(err, OP_DNS_Z_nomem, file, 0, "out of memory");
        return false;
    }
    if (!check_zone(z, file, err))
        return false;
    dns_nsec3_setup(z);
    return true;
}

long dns_zone_lookup(const struct dns_zone *z, const uint8_t *name, size_t len)
{
    size_t at = name_hash(name, len) & z->index_mask;
    for (uint32_t k; (k = z->index[at]) != 0; at = (at + 1) & z->index_mask) {
        const struct dns_node *nd = &z->nodes[k - 1];
        if (nd->name_len == len && memcmp(nd->name, name, len) == 0)
            return (long)k - 1;
    }
    return -1;
}

long dns_zone_find(const struct dns_zone *z, const uint8_t *name, size_t *ins)
{
    long hit = dns_zone_lookup(z, name, dns_name_len(name));
    if (hit >= 0) {
        *ins = (size_t)hit;
        return hit;
    }
    const uint8_t *lb[128];
    unsigned nb = label_offsets(name, lb);
    size_t lo = 0, hi = z->nnodes;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int d = name_cmp_labels(z->nodes[mid].name, lb, nb);
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid; /* d == 0 cannot be: the index missed it */
    }
    *ins = lo;
    return -1;
}

const struct dns_rrset *dns_node_rrset(const struct dns_zone *z, const struct dns_node *n,
                                       uint16_t type)
{
    for (uint32_t k = 0; k < n->set_count; k++)
        if (z->sets[n->set_first + k].type == type)
            return &z->sets[n->set_first + k];
    return NULL;
}

const struct dns_zone *dns_zones_match(const struct op_dns_zones *zs, const uint8_t *name,
                                       unsigned labels)
{
    const struct dns_zone *best = NULL;
    for (size_t i = 0; i < zs->n; i++) {
        const struct dns_zone *z = &zs->z[i];
        if (dns_name_under(name, labels, z->origin, z->origin_labels) &&
            (best == NULL || z->origin_labels > best->origin_labels))
            best = z;
    }
    return best;
}

void op_dns_zones_free(struct op_dns_zones *zs)
{
    if (zs == NULL)
        return;
    for (size_t i = 0; i < zs->n; i++)
        dns_zone_free(&zs->z[i]);
    free(zs->z);
    free(zs);
}

size_t op_dns_zones_count(const struct op_dns_zones *zs) { return zs->n; }

size_t op_dns_zones_records(const struct op_dns_zones *zs)
{
    size_t n = 0;
    for (size_t i = 0; i < zs->n; i++)
        n += zs->z[i].nrecs;
    return n;
}
