/* The responder: one query's bytes in, the answer's bytes out.
 *
 * Three steps: parse the query (header, one question, OPT) counting every
 * reason for FORMERR; plan the answer as lists of RRsets per section
 * (RFC 1034 section 4.3.2, RFC 4592 wildcards, RFC 4035 section 3.1 for
 * DNSSEC); write the plan with name compression, stopping with TC set when
 * the answer or authority section does not fit. */
#include <string.h>

#include "dns_internal.h"

#define MAX_ITEMS 48
#define MAX_CHAIN 16 /* CNAMEs followed inside a zone */
#define OPT_LEN 11   /* an OPT record without options */
#define OPT_NSID 3   /* RFC 5001 */

#define RC_NOERROR 0
#define RC_FORMERR 1
#define RC_SERVFAIL 2
#define RC_NXDOMAIN 3
#define RC_NOTIMP 4
#define RC_REFUSED 5
#define RC_YXDOMAIN 6
#define RC_BADVERS 16

#define F_QR 0x8000
#define F_AA 0x0400
#define F_TC 0x0200
#define F_RD 0x0100
#define F_CD 0x0010
#define EDNS_DO 0x8000

struct query {
    struct op_dns_hdr h;
    struct op_dns_rr q;        /* the question, name as sent */
    uint8_t lname[OP_DNS_NAME_MAX]; /* the question's name in lower case */
    unsigned labels;
    bool has_q, edns, dnssec;
    bool nsid; /* the client asked for the server's identity */
    uint16_t edns_size;
};

/* One RRset to write: owner is where it is written (the question's name
 * for a wildcard's records); sigs adds its RRSIGs from the node. A CNAME a
 * DNAME synthesized has no set: cname is its target. */
struct item {
    const struct dns_zone *z;
    const struct dns_node *node;
    const struct dns_rrset *set;
    const uint8_t *owner;
    uint32_t ttl;
    bool sigs;
    const uint8_t *cname;
};

struct plan {
    unsigned n[3];
    int rcode;
    bool aa;
    struct item sec[3][MAX_ITEMS]; /* only the first n[s] of each are set */
    /* owners the chain went through, and room for a DNAME's synthesis at
     * its last hop */
    uint8_t names[MAX_CHAIN + 2][OP_DNS_NAME_MAX];
};

enum { S_AN, S_NS, S_AR };

/* ---- parsing ---- */
static void count_werr(uint64_t *c, int e)
{
    static const enum op_dns_counter map[OP_DNS_W_ERRS_] = {
        [OP_DNS_W_TRUNCATED] = OP_DNS_C_formerr_truncated,
        [OP_DNS_W_LABEL_TYPE] = OP_DNS_C_formerr_label_type,
        [OP_DNS_W_PTR_FORWARD] = OP_DNS_C_formerr_ptr_forward,
        [OP_DNS_W_PTR_LOOP] = OP_DNS_C_formerr_ptr_loop,
        [OP_DNS_W_NAME_LONG] = OP_DNS_C_formerr_name_long,
        [OP_DNS_W_RDATA_LEN] = OP_DNS_C_formerr_rdata_len,
    };
    if (e > OP_DNS_W_OK && e < OP_DNS_W_ERRS_)
        c[map[e]]++;
}

/* OPT (RFC 6891 section 6.1): at the root, once, in the additional
 * section, its options framed inside its RDATA. */
static int take_opt(struct query *qr, const uint8_t *msg, const struct op_dns_rr *rr, uint64_t *c)
{
    if (qr->edns || rr->name_len != 1) {
        c[OP_DNS_C_formerr_opt]++;
        return RC_FORMERR;
    }
    for (size_t at = 0; at < rr->rdlen;) {
        if (rr->rdlen - at < 4) {
            c[OP_DNS_C_formerr_opt]++;
            return RC_FORMERR;
        }
        const uint8_t *o = msg + rr->rdata_off + at;
        size_t olen = (size_t)o[2] << 8 | o[3];
        qr->nsid |= ((unsigned)o[0] << 8 | o[1]) == OPT_NSID;
        at += 4 + olen;
        if (at > rr->rdlen) {
            c[OP_DNS_C_formerr_opt]++;
            return RC_FORMERR;
        }
    }
    qr->edns = true;
    qr->edns_size = rr->cls < OP_DNS_UDP_MIN ? OP_DNS_UDP_MIN : rr->cls;
    qr->dnssec = (rr->ttl & EDNS_DO) != 0;
    c[OP_DNS_C_edns]++;
    if (qr->dnssec)
        c[OP_DNS_C_do_bit]++;
    if ((rr->ttl >> 16 & 0xff) != 0)
        return RC_BADVERS;
    return RC_NOERROR;
}

/* The records after the question: only OPT matters to a query, but all of
 * them must be well formed, and nothing may follow them. */
static int parse_records(struct query *qr, const uint8_t *msg, size_t len, size_t off,
                         uint64_t *c)
{
    unsigned counts[3] = {qr->h.ancount, qr->h.nscount, qr->h.arcount};
    int rc = RC_NOERROR;
    for (int s = 0; s < 3; s++) {
        for (unsigned i = 0; i < counts[s]; i++) {
            struct op_dns_rr rr;
            int e = op_dns_rr_decode(msg, len, &off, &rr);
            if (e != OP_DNS_W_OK) {
                count_werr(c, e);
                return RC_FORMERR;
            }
            if (rr.type == T_OPT && s != S_AR) {
                c[OP_DNS_C_formerr_opt]++;
                return RC_FORMERR;
            }
            /* IXFR carries the client's SOA in authority (RFC 1995 section 3) */
            bool ixfr_soa = s == S_NS && counts[S_NS] == 1 && rr.type == T_SOA &&
                            qr->has_q && qr->q.type == T_IXFR;
            if (s != S_AR && !ixfr_soa) {
                c[OP_DNS_C_formerr_section]++;
                return RC_FORMERR;
            }
            if (rr.type == T_OPT) {
                int r = take_opt(qr, msg, &rr, c);
                if (r == RC_FORMERR)
                    return r;
                if (r != RC_NOERROR)
                    rc = r;
            }
        }
    }
    if (off != len) {
        c[OP_DNS_C_formerr_trailing]++;
        return RC_FORMERR;
    }
    return rc;
}

static int parse_query(struct query *qr, const uint8_t *msg, size_t len, uint64_t *c)
{
    if (qr->h.qdcount != 1) {
        c[OP_DNS_C_formerr_qdcount]++;
        return RC_FORMERR;
    }
    size_t off = OP_DNS_HDR_LEN;
    int e = op_dns_question_decode(msg, len, &off, &qr->q);
    if (e != OP_DNS_W_OK) {
        count_werr(c, e);
        return RC_FORMERR;
    }
    qr->has_q = true;
    memcpy(qr->lname, qr->q.name, qr->q.name_len);
    dns_name_lower(qr->lname, qr->q.name_len);
    qr->labels = dns_name_labels(qr->lname);
    int rc = parse_records(qr, msg, len, off, c);
    if (rc == RC_NOERROR && (qr->h.flags >> 11 & 0xf) != 0) {
        c[OP_DNS_C_notimp_opcode]++;
        return RC_NOTIMP;
    }
    return rc;
}

/* ---- planning ---- */
/* Each RRset once: in its own section once per owner, and not again in a
 * later section at all (a wildcard's NSEC asked for by type is not repeated
 * as its proof; an address in the answer is not repeated as additional). */
static bool plan_has(const struct plan *p, int s, const struct dns_rrset *set,
                     const uint8_t *owner)
{
    for (int k = S_AN; k <= s; k++)
        for (unsigned i = 0; i < p->n[k]; i++)
            if (p->sec[k][i].set == set &&
                (k != s || dns_name_eq(p->sec[k][i].owner, dns_name_len(p->sec[k][i].owner),
                                       owner, dns_name_len(owner))))
                return true;
    return false;
}

static bool plan_add(struct plan *p, int s, const struct dns_zone *z, const struct dns_node *nd,
                     const struct dns_rrset *set, const uint8_t *owner, bool sigs)
{
    if (set == NULL || p->n[s] >= MAX_ITEMS)
        return false;
    if (plan_has(p, s, set, owner))
        return true;
    p->sec[s][p->n[s]++] = (struct item){z, nd, set, owner, set->ttl, sigs, NULL};
    return true;
}

static const struct dns_node *node_of(const struct dns_zone *z, const uint8_t *name)
{
    long i = dns_zone_lookup(z, name, dns_name_len(name));
    return i >= 0 ? &z->nodes[i] : NULL;
}

/* Does any name exist at or below name (an empty non-terminal does)? */
static bool name_exists(const struct dns_zone *z, const uint8_t *name, unsigned labels)
{
    size_t ins;
    if (dns_zone_find(z, name, &ins) >= 0)
        return true;
    return ins < z->nnodes &&
           dns_name_under(z->nodes[ins].name, z->nodes[ins].labels, name, labels);
}

/* Can a node of l labels hold what mask records (store.c: a bit per
 * label count, the last for all deeper ones)? Most levels of most names
 * cannot, and are not looked up. */
static bool depth_may(uint64_t mask, unsigned l) { return (mask >> (l < 63 ? l : 63)) & 1; }

/* The zone cut (a node with NS below the apex) at or above name, or NULL;
 * own is name's node (NULL if none). skip_own: a cut at the name itself
 * does not count (DS is the parent's). */
static const struct dns_node *find_cut(const struct dns_zone *z, const uint8_t *name,
                                       unsigned labels, const struct dns_node *own,
                                       bool skip_own)
{
    for (unsigned l = z->origin_labels + 1; l < labels; l++) {
        if (!depth_may(z->cut_depths, l))
            continue;
        const struct dns_node *nd = node_of(z, dns_name_skip(name, labels - l));
        if (nd != NULL && dns_node_rrset(z, nd, T_NS) != NULL)
            return nd;
    }
    if (skip_own || own == NULL || labels <= z->origin_labels)
        return NULL;
    return dns_node_rrset(z, own, T_NS) != NULL ? own : NULL;
}

/* The DNAME above name (at the apex or below, never name itself) that
 * redirects it, or NULL. Where a zone cut is above it, the cut wins: it is
 * met first on the way down. */
static const struct dns_node *find_dname(const struct dns_zone *z, const uint8_t *name,
                                         unsigned labels, const struct dns_node *cut)
{
    unsigned stop = cut != NULL ? cut->labels : labels;
    for (unsigned l = z->origin_labels; l < stop && l < labels; l++) {
        if (!depth_may(z->dname_depths, l))
            continue;
        const struct dns_node *nd = node_of(z, dns_name_skip(name, labels - l));
        if (nd != NULL && dns_node_rrset(z, nd, T_DNAME) != NULL)
            return nd;
    }
    return NULL;
}

/* RFC 6672 section 3.1: the DNAME, then a CNAME from name to name with the
 * DNAME's owner replaced by its target, TTL the DNAME's and unsigned (the
 * resolver checks the DNAME's signature and does the same substitution).
 * Returns the CNAME's target to follow, written into next, or NULL: a
 * substituted name over 255 octets is YXDOMAIN. */
static const uint8_t *synthesize(struct plan *p, const struct dns_zone *z,
                                 const struct dns_node *dn, const uint8_t *name, unsigned labels,
                                 uint8_t next[OP_DNS_NAME_MAX], const struct query *qr,
                                 uint64_t *c)
{
    const struct dns_rrset *set = dns_node_rrset(z, dn, T_DNAME);
    const uint8_t *target = dns_rec_rdata(z, &z->recs[set->first]);
    size_t prefix = (size_t)(dns_name_skip(name, labels - dn->labels) - name);
    size_t tlen = dns_name_len(target);
    plan_add(p, S_AN, z, dn, set, dn->name, qr->dnssec);
    if (prefix + tlen > OP_DNS_NAME_MAX) {
        p->rcode = RC_YXDOMAIN;
        return NULL;
    }
    memcpy(next, name, prefix);
    memcpy(next + prefix, target, tlen);
    dns_name_lower(next, prefix + tlen);
    if (p->n[S_AN] < MAX_ITEMS)
        p->sec[S_AN][p->n[S_AN]++] = (struct item){z, dn, NULL, name, set->ttl, false, next};
    c[OP_DNS_C_dname_synthesized]++;
    return qr->q.type == T_CNAME ? NULL : next; /* the CNAME asked for: not followed */
}

/* The NSEC at the name before name in canonical order: it covers name. */
static const struct dns_node *covering_nsec(const struct dns_zone *z, const uint8_t *name)
{
    size_t ins;
    long i = dns_zone_find(z, name, &ins);
    size_t k = i >= 0 ? (size_t)i : ins;
    while (k > 0) {
        k--;
        if (dns_node_rrset(z, &z->nodes[k], T_NSEC) != NULL)
            return &z->nodes[k];
    }
    return NULL;
}

static void add_nsec(struct plan *p, const struct dns_zone *z, const struct dns_node *nd)
{
    if (nd != NULL)
        plan_add(p, S_NS, z, nd, dns_node_rrset(z, nd, T_NSEC), nd->name, true);
}

/* The NSEC3 matching name's hash, or covering it when none matches. */
static void add_nsec3(struct plan *p, const struct dns_zone *z, const uint8_t *name)
{
    bool match;
    const struct dns_node *nd = dns_nsec3_find(z, name, &match);
    if (nd != NULL)
        plan_add(p, S_NS, z, nd, dns_node_rrset(z, nd, T_NSEC3), nd->name, true);
}

/* RFC 5155 section 7.2.1: the closest provable encloser has a matching
 * NSEC3 (with_encloser: given) and the next closer name, one label longer,
 * is covered by one. The closest encloser (its labels count ce) is that
 * encloser unless opt-out left it without an NSEC3 (an unsigned delegation,
 * or an empty non-terminal above only such): then the nearest name above
 * it that has one is. ce == labels asks for name's own NSEC3, or the proof
 * in its place (sections 7.2.3 and 7.2.7). Returns the labels of the
 * encloser it proved. */
static unsigned add_encloser_proof(struct plan *p, const struct dns_zone *z, const uint8_t *name,
                                   unsigned labels, unsigned ce, bool with_encloser)
{
    bool match = false;
    const struct dns_node *nd = dns_nsec3_find(z, dns_name_skip(name, labels - ce), &match);
    while (!match && ce > z->origin_labels) {
        ce--;
        nd = dns_nsec3_find(z, dns_name_skip(name, labels - ce), &match);
    }
    if (with_encloser && match && nd != NULL)
        plan_add(p, S_NS, z, nd, dns_node_rrset(z, nd, T_NSEC3), nd->name, true);
    if (ce < labels)
        add_nsec3(p, z, dns_name_skip(name, labels - ce - 1));
    return ce;
}

/* The NSEC3 matching name, or the closest provable encloser proof in its
 * place where opt-out left name without one. */
static void add_nsec3_match(struct plan *p, const struct dns_zone *z, const uint8_t *name)
{
    unsigned labels = dns_name_labels(name);
    add_encloser_proof(p, z, name, labels, labels, true);
}

/* The proof that the node itself has no such type: its NSEC, or the NSEC3
 * matching its name (RFC 5155 section 7.2.3; a wildcard's, 7.2.5). */
static void deny_type(struct plan *p, const struct dns_zone *z, const struct dns_node *nd)
{
    if (z->nsec3.on)
        add_nsec3_match(p, z, nd->name);
    else
        add_nsec(p, z, nd);
}

/* A and AAAA of a name the answer points to (NS, MX, SRV targets; glue). */
static void add_addresses(struct plan *p, const struct dns_zone *z, const uint8_t *name,
                          bool dnssec)
{
    uint8_t lname[OP_DNS_NAME_MAX];
    size_t len = dns_name_len(name);
    memcpy(lname, name, len);
    dns_name_lower(lname, len);
    unsigned labels = dns_name_labels(lname);
    if (!dns_name_under(lname, labels, z->origin, z->origin_labels))
        return;
    const struct dns_node *nd = node_of(z, lname);
    if (nd == NULL)
        return;
    bool sigs = dnssec && find_cut(z, lname, labels, nd, false) == NULL; /* glue is unsigned */
    plan_add(p, S_AR, z, nd, dns_node_rrset(z, nd, T_A), nd->name, sigs);
    plan_add(p, S_AR, z, nd, dns_node_rrset(z, nd, T_AAAA), nd->name, sigs);
}

/* Where the name sits in a record of type NS, MX or SRV (0: no name). */
static size_t target_offset(uint16_t type)
{
    return type == T_NS ? 0 : type == T_MX ? 2 : type == T_SRV ? 6 : SIZE_MAX;
}

static void add_additionals(struct plan *p, const struct dns_zone *z, const struct dns_rrset *set,
                            bool dnssec)
{
    size_t off = target_offset(set->type);
    if (off == SIZE_MAX)
        return;
    for (uint32_t i = 0; i < set->count; i++) {
        const struct dns_rec *r = &z->recs[set->first + i];
        add_addresses(p, z, dns_rec_rdata(z, r) + off, dnssec);
    }
}

/* SOA RDATA's numbers after its two names: serial, refresh, retry,
 * expire, minimum. */
enum soa_field { SOA_SERIAL, SOA_REFRESH, SOA_RETRY, SOA_EXPIRE, SOA_MINIMUM };

static uint32_t soa_field(const struct dns_zone *z, const struct dns_rec *soa, enum soa_field f)
{
    const uint8_t *rd = dns_rec_rdata(z, soa);
    size_t off = dns_name_len(rd);
    off += dns_name_len(rd + off) + 4 * (size_t)f;
    return (uint32_t)rd[off] << 24 | (uint32_t)rd[off + 1] << 16 | (uint32_t)rd[off + 2] << 8 |
           rd[off + 3];
}

static void add_soa(struct plan *p, const struct dns_zone *z, bool dnssec)
{
    const struct dns_node *apex = &z->nodes[z->apex];
    const struct dns_rrset *soa = dns_node_rrset(z, apex, T_SOA);
    if (!plan_add(p, S_NS, z, apex, soa, apex->name, dnssec))
        return;
    /* RFC 2308 section 3: a negative answer lives min(SOA TTL, MINIMUM). */
    uint32_t min = soa_field(z, &z->recs[soa->first], SOA_MINIMUM);
    struct item *it = &p->sec[S_NS][p->n[S_NS] - 1];
    if (it->set == soa && min < it->ttl)
        it->ttl = min;
}

static void referral(struct plan *p, const struct dns_zone *z, const struct dns_node *cut,
                     bool dnssec, uint64_t *c)
{
    const struct dns_rrset *ns = dns_node_rrset(z, cut, T_NS);
    plan_add(p, S_NS, z, cut, ns, cut->name, false);
    if (dnssec) {
        const struct dns_rrset *ds = dns_node_rrset(z, cut, T_DS);
        if (ds != NULL)
            plan_add(p, S_NS, z, cut, ds, cut->name, true);
        else
            deny_type(p, z, cut);
    }
    add_additionals(p, z, ns, dnssec);
    if (p->n[S_AN] == 0)
        p->aa = false;
    c[OP_DNS_C_referral]++;
}

/* ANY: one RRset, the first by type, on every transport (RFC 8482 section
 * 4.1, as Knot does); its RRSIGs ride along when DO is set. */
static void answer_any(struct plan *p, const struct dns_zone *z, const struct dns_node *nd,
                       const uint8_t *owner, bool dnssec, uint64_t *c)
{
    for (uint32_t k = 0; k < nd->set_count; k++) {
        const struct dns_rrset *set = &z->sets[nd->set_first + k];
        if (set->type != T_RRSIG) {
            plan_add(p, S_AN, z, nd, set, owner, dnssec);
            add_additionals(p, z, set, dnssec);
            c[OP_DNS_C_any_minimal]++;
            return;
        }
    }
}

/* The data at a node (found, or the wildcard standing in for the name):
 * returns the CNAME's target to follow, or NULL when the answer is done. */
static const uint8_t *answer_node(struct plan *p, const struct dns_zone *z,
                                  const struct dns_node *nd, const uint8_t *owner,
                                  uint16_t qtype, const struct query *qr, uint64_t *c)
{
    const struct dns_rrset *cname = dns_node_rrset(z, nd, T_CNAME);
    /* the types that live beside a CNAME are answered, not followed */
    if (cname != NULL && qtype != T_CNAME && qtype != T_ANY && qtype != T_RRSIG &&
        qtype != T_NSEC) {
        plan_add(p, S_AN, z, nd, cname, owner, qr->dnssec);
        return dns_rec_rdata(z, &z->recs[cname->first]);
    }
    if (qtype == T_ANY) {
        answer_any(p, z, nd, owner, qr->dnssec, c);
        return NULL;
    }
    const struct dns_rrset *set = dns_node_rrset(z, nd, qtype);
    if (set != NULL) {
        plan_add(p, S_AN, z, nd, set, owner, qr->dnssec && qtype != T_RRSIG);
        add_additionals(p, z, set, qr->dnssec);
        return NULL;
    }
    add_soa(p, z, qr->dnssec); /* NODATA */
    if (qr->dnssec)
        deny_type(p, z, nd);
    return NULL;
}

/* A name with no node: an empty non-terminal (NODATA), a wildcard's
 * synthesis, or NXDOMAIN. */
static const uint8_t *answer_missing(struct plan *p, const struct dns_zone *z,
                                     const uint8_t *name, unsigned labels, uint16_t qtype,
                                     const struct query *qr, uint64_t *c)
{
    if (name_exists(z, name, labels)) {
        add_soa(p, z, qr->dnssec);
        if (qr->dnssec && z->nsec3.on) /* an empty non-terminal has an NSEC3 */
            add_nsec3_match(p, z, name);
        else if (qr->dnssec)
            add_nsec(p, z, covering_nsec(z, name));
        return NULL;
    }
    unsigned ce = labels - 1;
    while (ce > z->origin_labels && !name_exists(z, dns_name_skip(name, labels - ce), ce))
        ce--;
    uint8_t wild[OP_DNS_NAME_MAX];
    const uint8_t *encloser = dns_name_skip(name, labels - ce);
    size_t elen = dns_name_len(encloser);
    wild[0] = 1;
    wild[1] = '*';
    memcpy(wild + 2, encloser, elen);
    const struct dns_node *wn = node_of(z, wild);
    if (wn != NULL) {
        c[OP_DNS_C_wildcard]++;
        const uint8_t *next = answer_node(p, z, wn, name, qtype, qr, c);
        /* no closer match exists: RFC 4035 section 3.1.3.3, RFC 5155
         * section 7.2.6 (and 7.2.5 for NODATA: the encloser's NSEC3 too) */
        if (qr->dnssec && z->nsec3.on)
            add_encloser_proof(p, z, name, labels, ce, p->n[S_AN] == 0);
        else if (qr->dnssec)
            add_nsec(p, z, covering_nsec(z, name));
        return next;
    }
    p->rcode = RC_NXDOMAIN;
    add_soa(p, z, qr->dnssec);
    if (qr->dnssec && z->nsec3.on) { /* RFC 5155 section 7.2.2 */
        unsigned proved = add_encloser_proof(p, z, name, labels, ce, true);
        /* the wildcard at the encloser proved (under opt-out, as Knot) */
        size_t plen = dns_name_len(dns_name_skip(name, labels - proved));
        memcpy(wild + 2, dns_name_skip(name, labels - proved), plen);
        add_nsec3(p, z, wild);
    } else if (qr->dnssec) {
        add_nsec(p, z, covering_nsec(z, name));
        add_nsec(p, z, covering_nsec(z, wild));
    }
    return NULL;
}

static void plan_answer(struct plan *p, const struct op_dns_zones *zs, const struct query *qr,
                        uint64_t *c)
{
    uint16_t qtype = qr->q.type;
    const struct dns_zone *z = dns_zones_match(zs, qr->lname, qr->labels);
    if (z == NULL) {
        c[OP_DNS_C_refused_zone]++;
        p->rcode = RC_REFUSED;
        return;
    }
    p->aa = true;
    memcpy(p->names[0], qr->lname, qr->q.name_len);
    for (unsigned hop = 0;; hop++) {
        const uint8_t *name = p->names[hop];
        unsigned labels = dns_name_labels(name);
        const struct dns_node *nd = node_of(z, name);
        const struct dns_node *cut = find_cut(z, name, labels, nd, qtype == T_DS);
        const struct dns_node *dn = find_dname(z, name, labels, cut);
        const uint8_t *next;
        if (dn != NULL) {
            next = synthesize(p, z, dn, name, labels, p->names[hop + 1], qr, c);
        } else if (cut != NULL) {
            referral(p, z, cut, qr->dnssec, c);
            return;
        } else {
            next = nd != NULL ? answer_node(p, z, nd, name, qtype, qr, c)
                              : answer_missing(p, z, name, labels, qtype, qr, c);
        }
        if (next == NULL || hop + 1 > MAX_CHAIN)
            return;
        size_t len = dns_name_len(next);
        if (next != p->names[hop + 1]) {
            memcpy(p->names[hop + 1], next, len);
            dns_name_lower(p->names[hop + 1], len);
        }
        unsigned nl = dns_name_labels(p->names[hop + 1]);
        if (!dns_name_under(p->names[hop + 1], nl, z->origin, z->origin_labels))
            return; /* out of the zone: the client follows it */
        for (unsigned k = 0; k <= hop; k++)
            if (dns_name_eq(p->names[k], dns_name_len(p->names[k]), p->names[hop + 1], len))
                return; /* a loop: what we have is the answer */
        c[OP_DNS_C_cname_followed]++;
    }
}

/* ---- writing ---- */
struct writer {
    struct op_wbuf out;
    uint16_t count[3];
    uint16_t comp[64]; /* offsets of names written, for compression */
    uint8_t comp_len[64]; /* the uncompressed length of the name at each */
    unsigned ncomp;
};

/* Is the (possibly compressed) name at off in buf equal to name? */
static bool name_at_eq(const uint8_t *buf, size_t off, const uint8_t *name)
{
    for (unsigned guard = 0; guard < 128; guard++) {
        while ((buf[off] & 0xc0) == 0xc0)
            off = (size_t)(buf[off] & 0x3f) << 8 | buf[off + 1];
        uint8_t l = buf[off];
        if (l != *name)
            return false;
        if (l == 0)
            return true;
        for (uint8_t i = 1; i <= l; i++)
            if (dns_lc(buf[off + i]) != dns_lc(name[i]))
                return false;
        off += 1 + (size_t)l;
        name += 1 + l;
    }
    return false;
}

/* Where the writer stands, to take back what did not fit whole. */
struct mark {
    size_t len;
    unsigned ncomp;
};

static struct mark w_mark(const struct writer *w) { return (struct mark){w->out.len, w->ncomp}; }

static bool w_rewind(struct writer *w, struct mark m)
{
    w->out.len = m.len;
    w->ncomp = m.ncomp;
    return false;
}

static bool w_bytes(struct writer *w, const void *p, size_t n)
{
    return op_wbuf_put(&w->out, p, n);
}

static bool w_be(struct writer *w, uint32_t v, size_t n) { return op_wbuf_put_be(&w->out, v, n); }

/* A name, its longest suffix already written replaced by a pointer. Only
 * an entry of the suffix's length can be equal to it, so the length is
 * compared before the names. */
static bool w_name(struct writer *w, const uint8_t *name, bool compress)
{
    size_t len = dns_name_len(name);
    for (const uint8_t *s = name; *s != 0; s += 1 + *s) {
        size_t slen = len - (size_t)(s - name);
        for (unsigned i = 0; compress && i < w->ncomp; i++)
            if (w->comp_len[i] == slen && name_at_eq(w->out.buf, w->comp[i], s))
                return w_bytes(w, name, (size_t)(s - name)) && w_be(w, 0xc000u | w->comp[i], 2);
    }
    size_t start = w->out.len;
    if (!w_bytes(w, name, len))
        return false;
    for (const uint8_t *s = name; *s != 0 && w->ncomp < 64; s += 1 + *s)
        if (start + (size_t)(s - name) < 0x4000) {
            w->comp_len[w->ncomp] = (uint8_t)(len - (size_t)(s - name));
            w->comp[w->ncomp++] = (uint16_t)(start + (size_t)(s - name));
        }
    return true;
}

/* RDATA with its names compressed where RFC 3597 section 4 allows it. */
static bool w_rdata(struct writer *w, uint16_t type, const uint8_t *rd, uint16_t rdlen)
{
    switch (type) {
    case T_NS:
    case T_CNAME:
    case T_PTR:
        return w_name(w, rd, true);
    case T_MX:
        return w_bytes(w, rd, 2) && w_name(w, rd + 2, true);
    case T_SOA: {
        size_t m = dns_name_len(rd), r = dns_name_len(rd + m);
        return w_name(w, rd, true) && w_name(w, rd + m, true) && w_bytes(w, rd + m + r, 20);
    }
    default:
        return w_bytes(w, rd, rdlen);
    }
}

static bool w_rr(struct writer *w, const uint8_t *owner, uint16_t type, uint32_t ttl,
                 const uint8_t *rd, uint16_t rdlen)
{
    if (!w_name(w, owner, true) || !w_be(w, type, 2) || !w_be(w, C_IN, 2) || !w_be(w, ttl, 4))
        return false;
    size_t at = w->out.len;
    if (!w_be(w, 0, 2) || !w_rdata(w, type, rd, rdlen))
        return false;
    size_t n = w->out.len - at - 2;
    w->out.buf[at] = (uint8_t)(n >> 8);
    w->out.buf[at + 1] = (uint8_t)n;
    return true;
}

/* An RRset's records, or (sigs) the RRSIGs covering it: all or nothing. */
static bool w_item(struct writer *w, int s, const struct item *it, bool sigs)
{
    struct mark m = w_mark(w);
    unsigned n = 0;
    bool ok = true;
    if (it->cname != NULL) { /* synthesized: one record, no signature */
        if (sigs)
            return true;
        const uint8_t *rd = it->cname;
        if (!w_rr(w, it->owner, T_CNAME, it->ttl, rd, (uint16_t)dns_name_len(rd)))
            return w_rewind(w, m);
        w->count[s]++;
        return true;
    }
    const struct dns_rrset *set =
        !sigs ? it->set : it->sigs ? dns_node_rrset(it->z, it->node, T_RRSIG) : NULL;
    for (uint32_t i = 0; ok && set != NULL && i < set->count; i++) {
        const struct dns_rec *r = &it->z->recs[set->first + i];
        const uint8_t *rd = dns_rec_rdata(it->z, r);
        if (sigs && (r->rdlen < 2 || ((uint16_t)(rd[0] << 8 | rd[1])) != it->set->type))
            continue;
        uint32_t ttl = sigs && r->ttl < it->ttl ? r->ttl : it->ttl;
        ok = w_rr(w, it->owner, r->type, ttl, rd, r->rdlen);
        n++;
    }
    if (!ok)
        return w_rewind(w, m);
    w->count[s] = (uint16_t)(w->count[s] + n);
    return true;
}

/* Must the item be written whole, or the answer truncated? Additional
 * records need not, nor a negative answer's SOA (as Knot: a long CNAME or
 * DNAME chain may leave no room for it, and it only sets a cache's time). */
static bool required(int s, const struct item *it)
{
    return s == S_AN || (s == S_NS && (it->set == NULL || it->set->type != T_SOA));
}

/* Answer and authority whole, or TC; additional records only if they fit.
 * Each section's RRsets go first and their RRSIGs after them, as Knot
 * writes them, so a truncated answer keeps the same records as Knot's. */
static bool write_sections(struct writer *w, const struct plan *p)
{
    for (int s = S_AN; s <= S_AR; s++) {
        bool in[MAX_ITEMS];
        for (unsigned i = 0; i < p->n[s]; i++)
            if (!(in[i] = w_item(w, s, &p->sec[s][i], false)) && required(s, &p->sec[s][i]))
                return false;
        for (unsigned i = 0; i < p->n[s]; i++)
            if (in[i] && !w_item(w, s, &p->sec[s][i], true) && required(s, &p->sec[s][i]))
                return false;
    }
    return true;
}

/* Our OPT's length: with NSID when asked and we have one. */
static size_t opt_len(const struct query *qr, const struct op_dns_query_info *qi)
{
    return !qr->edns ? 0 : OPT_LEN + (qr->nsid && qi->nsid_len > 0 ? 4u + qi->nsid_len : 0);
}

static size_t finish(struct writer *w, const struct query *qr, const struct op_dns_query_info *qi,
                     int rcode, bool aa, bool tc)
{
    struct op_dns_hdr h = {
        .id = qr->h.id,
        .flags = (uint16_t)(F_QR | (qr->h.flags & (0x7800 | F_RD | F_CD)) | (aa ? F_AA : 0) |
                            (tc ? F_TC : 0) | (rcode & 0xf)),
        .qdcount = qr->has_q ? 1 : 0,
        .ancount = w->count[S_AN],
        .nscount = w->count[S_NS],
        .arcount = (uint16_t)(w->count[S_AR] + (qr->edns ? 1 : 0)),
    };
    op_dns_hdr_encode(&h, w->out.buf);
    if (qr->edns) { /* room for it was kept */
        uint32_t ttl = (uint32_t)(rcode >> 4) << 24 | (qr->dnssec ? EDNS_DO : 0);
        size_t len = opt_len(qr, qi);
        w->out.cap += len;
        w_be(w, 0, 1);
        w_be(w, T_OPT, 2);
        w_be(w, qi->udp_max, 2);
        w_be(w, ttl, 4);
        w_be(w, len - OPT_LEN, 2);
        if (len > OPT_LEN)
            w_be(w, OPT_NSID, 2), w_be(w, qi->nsid_len, 2), w_bytes(w, qi->nsid, qi->nsid_len);
    }
    return w->out.len;
}

static void count_rcode(uint64_t *c, int rcode)
{
    static const enum op_dns_counter map[] = {
        [RC_NOERROR] = OP_DNS_C_rcode_noerror, [RC_FORMERR] = OP_DNS_C_rcode_formerr,
        [RC_SERVFAIL] = OP_DNS_C_rcode_servfail,         [RC_NXDOMAIN] = OP_DNS_C_rcode_nxdomain,
        [RC_NOTIMP] = OP_DNS_C_rcode_notimp,   [RC_REFUSED] = OP_DNS_C_rcode_refused,
        [RC_YXDOMAIN] = OP_DNS_C_rcode_yxdomain,
    };
    c[rcode == RC_BADVERS ? OP_DNS_C_rcode_badvers : map[rcode]]++;
}

/* ---- zone transfers ---- */

static bool is_xfr(uint16_t type) { return type == T_AXFR || type == T_IXFR; }

/* The zone whose apex name is, or SIZE_MAX. */
static size_t apex_zone(const struct op_dns_zones *zs, const uint8_t *name, size_t len)
{
    for (size_t i = 0; i < zs->n; i++)
        if (dns_name_eq(zs->z[i].origin, zs->z[i].origin_len, name, len))
            return i;
    return SIZE_MAX;
}

static const struct dns_rec *apex_soa(const struct dns_zone *z)
{
    const struct dns_rrset *soa = dns_node_rrset(z, &z->nodes[z->apex], T_SOA);
    return &z->recs[soa->first];
}

/* The record at transfer position pos: the SOA at 0 and after the last,
 * the zone's records in between, its SOA skipped there (NULL). */
static const struct dns_rec *xfr_record(const struct dns_zone *z, const struct dns_rec *soa,
                                        size_t pos)
{
    if (pos == 0 || pos == z->nrecs + 1)
        return soa;
    const struct dns_rec *r = &z->recs[pos - 1];
    return r == soa ? NULL : r;
}

/* Writes records from x->next while they fit; ends the transfer after the
 * closing SOA. False if not even one record fit (the transfer cannot go on). */
static bool xfr_fill(struct writer *w, struct op_dns_xfr *x)
{
    const struct dns_zone *z = &x->zones->z[x->zone];
    const struct dns_rec *soa = apex_soa(z);
    unsigned wrote = 0;
    for (; x->next <= z->nrecs + 1; x->next++) {
        const struct dns_rec *r = xfr_record(z, soa, x->next);
        if (r == NULL)
            continue;
        struct mark m = w_mark(w);
        if (!w_rr(w, z->arena + r->owner_off, r->type, r->ttl, dns_rec_rdata(z, r), r->rdlen)) {
            w_rewind(w, m);
            return wrote > 0;
        }
        wrote++;
        w->count[S_AN]++;
    }
    x->active = false;
    return true;
}

size_t op_dns_xfr_next(struct op_dns_xfr *x, uint8_t *out, size_t cap, uint64_t *c)
{
    if (!x->active || cap < OP_DNS_UDP_MIN)
        return 0;
    struct writer w = {.out = {.buf = out, .cap = cap, .len = OP_DNS_HDR_LEN}};
    bool ok = xfr_fill(&w, x);
    if (!ok)
        x->active = false;
    struct op_dns_hdr h = {.id = x->id, .flags = (uint16_t)(F_QR | F_AA | (ok ? 0 : RC_SERVFAIL)),
                           .ancount = w.count[S_AN]};
    op_dns_hdr_encode(&h, out);
    c[OP_DNS_C_xfr_messages]++;
    return w.out.len;
}

/* A transfer query allowed here: its zone, where the first message's
 * records go; REFUSED for a name that is no zone's apex. */
static int xfr_start(const struct op_dns_zones *zs, const struct query *qr,
                     const struct op_dns_query_info *qi, struct writer *w, uint64_t *c)
{
    size_t zone = apex_zone(zs, qr->lname, qr->q.name_len);
    if (zone == SIZE_MAX) {
        c[OP_DNS_C_refused_xfr]++;
        return RC_REFUSED;
    }
    *qi->xfr = (struct op_dns_xfr){.zones = zs, .zone = zone, .id = qr->h.id, .active = true};
    c[OP_DNS_C_xfr_started]++;
    if (!xfr_fill(w, qi->xfr)) {
        qi->xfr->active = false;
        return RC_SERVFAIL; /* a record larger than a message */
    }
    return RC_NOERROR;
}

/* ---- NOTIFY (RFC 1996) ---- */

#define OPCODE_NOTIFY 4

size_t op_dns_notify_build(const struct op_dns_zones *zs, size_t zone, uint16_t id,
                           uint8_t *out, size_t cap)
{
    const struct dns_zone *z = &zs->z[zone];
    const struct dns_rec *soa = apex_soa(z);
    struct writer w = {.out = {.buf = out, .cap = cap, .len = OP_DNS_HDR_LEN}};
    if (!w_name(&w, z->origin, true) || !w_be(&w, T_SOA, 2) || !w_be(&w, C_IN, 2) ||
        !w_rr(&w, z->origin, T_SOA, soa->ttl, dns_rec_rdata(z, soa), soa->rdlen))
        return 0;
    struct op_dns_hdr h = {.id = id, .flags = OPCODE_NOTIFY << 11 | F_AA, .qdcount = 1,
                           .ancount = 1};
    op_dns_hdr_encode(&h, out);
    return w.out.len;
}

bool op_dns_notify_acked(const uint8_t *msg, size_t len, uint16_t id)
{
    struct op_dns_hdr h;
    return op_dns_hdr_decode(msg, len, &h) == OP_OK && h.id == id && (h.flags & F_QR) &&
           (h.flags >> 11 & 0xf) == OPCODE_NOTIFY && (h.flags & 0xf) == RC_NOERROR;
}

static uint32_t zone_serial(const struct dns_zone *z)
{
    return soa_field(z, apex_soa(z), SOA_SERIAL);
}

bool op_dns_zone_changed(const struct op_dns_zones *old, const struct op_dns_zones *now,
                         size_t zone)
{
    const struct dns_zone *z = &now->z[zone];
    size_t before = old != NULL ? apex_zone(old, z->origin, z->origin_len) : SIZE_MAX;
    return before == SIZE_MAX || zone_serial(&old->z[before]) != zone_serial(z);
}

/* The rcode for the query as parsed, before any lookup. */
static int precheck(const struct query *qr, const struct op_dns_query_info *qi, uint64_t *c)
{
    if (qr->q.cls != C_IN) {
        c[OP_DNS_C_refused_class]++;
        return RC_REFUSED;
    }
    if (is_xfr(qr->q.type) && (!qi->tcp || qi->xfr == NULL)) {
        c[OP_DNS_C_refused_xfr]++;
        return RC_REFUSED;
    }
    return RC_NOERROR;
}

size_t op_dns_respond(const struct op_dns_zones *zs, const struct op_dns_query_info *qi,
                      const uint8_t *q, size_t qlen, uint8_t *out, size_t cap, uint64_t *c)
{
    struct query qr = {0};
    c[OP_DNS_C_received]++;
    if (op_dns_hdr_decode(q, qlen, &qr.h) != OP_OK || cap < OP_DNS_UDP_MIN) {
        c[OP_DNS_C_drop_short]++;
        return 0;
    }
    if (qr.h.flags & F_QR) {
        c[OP_DNS_C_drop_response]++;
        return 0;
    }
    int rcode = parse_query(&qr, q, qlen, c);
    if (rcode == RC_FORMERR)
        qr.edns = false; /* nothing of the query is trusted */
    size_t limit = qi->tcp ? OP_DNS_MSG_MAX
                           : !qr.edns ? OP_DNS_UDP_MIN
                                      : (qr.edns_size < qi->udp_max ? qr.edns_size : qi->udp_max);
    if (limit < OP_DNS_UDP_MIN)
        limit = OP_DNS_UDP_MIN;
    struct writer w = {.out = {.buf = out,
                               .cap = (limit < cap ? limit : cap) - opt_len(&qr, qi),
                               .len = OP_DNS_HDR_LEN}};
    bool tc = false, aa = false;
    if (qr.has_q && !w_name(&w, qr.q.name, true))
        qr.has_q = false;
    if (qr.has_q)
        w_be(&w, qr.q.type, 2), w_be(&w, qr.q.cls, 2);
    if (rcode == RC_NOERROR)
        rcode = precheck(&qr, qi, c);
    if (rcode == RC_NOERROR && is_xfr(qr.q.type)) {
        rcode = xfr_start(zs, &qr, qi, &w, c);
        aa = rcode == RC_NOERROR;
    } else if (rcode == RC_NOERROR) {
        struct plan p;
        memset(&p, 0, offsetof(struct plan, sec)); /* items and names are written as used */
        plan_answer(&p, zs, &qr, c);
        rcode = p.rcode;
        aa = p.aa;
        tc = !write_sections(&w, &p);
    }
    if (tc)
        c[OP_DNS_C_truncated]++;
    count_rcode(c, rcode);
    c[OP_DNS_C_responses]++;
    return finish(&w, &qr, qi, rcode, aa, tc);
}

static const char *const counter_names[] = {OP_DNS_COUNTERS(OP_COUNTER_NAME)};

const char *op_dns_counter_name(unsigned c)
{
    return op_counter_name(counter_names, OP_DNS_C_COUNT_, c);
}

bool op_dns_counters_balanced(const uint64_t c[OP_DNS_C_COUNT_])
{
    uint64_t rx = c[OP_DNS_C_received];
    uint64_t out = c[OP_DNS_C_responses] + c[OP_DNS_C_drop_short] + c[OP_DNS_C_drop_response];
    uint64_t sent = c[OP_DNS_C_udp_tx] + c[OP_DNS_C_tcp_tx] + c[OP_DNS_C_drop_tx] +
                    c[OP_DNS_C_drop_tcp_closed] + c[OP_DNS_C_rrl_dropped];
    bool io = c[OP_DNS_C_udp_rx] + c[OP_DNS_C_tcp_rx] == 0 ||
              (c[OP_DNS_C_udp_rx] + c[OP_DNS_C_tcp_rx] == rx && sent == c[OP_DNS_C_responses]);
    uint64_t frames = c[OP_DNS_C_udp_rx] + c[OP_DNS_C_ctl_rx] + c[OP_DNS_C_drop_not_ours] +
                      c[OP_DNS_C_drop_frame] + c[OP_DNS_C_drop_ring_rx];
    bool l2 = c[OP_DNS_C_frames_rx] == 0 ||
              (c[OP_DNS_C_frames_rx] == frames &&
               c[OP_DNS_C_ctl_rx] == c[OP_DNS_C_ctl_tx] + c[OP_DNS_C_drop_tx_ctl]);
    return rx == out && io && l2;
}
