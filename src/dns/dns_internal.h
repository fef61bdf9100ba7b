/* Internal to src/dns: the zone store's layout and the helpers its parts
 * share (names, the record types, the store's search functions).
 *
 * A zone is three flat arrays built once: records sorted by owner (in
 * DNSSEC canonical order, RFC 4034 section 6.1), then type; rrsets (runs of
 * one type at one owner); nodes (runs of one owner). Owners are stored in
 * lower case, so a lookup lower-cases the question once and compares bytes. */
#ifndef OFFPATH_DNS_INTERNAL_H
#define OFFPATH_DNS_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offpath/dns.h"
#include "offpath/io.h"
#include "offpath/loop.h"
#include "offpath/wire.h"

enum dns_type {
    T_A = 1,
    T_NS = 2,
    T_CNAME = 5,
    T_SOA = 6,
    T_PTR = 12,
    T_HINFO = 13,
    T_MX = 15,
    T_TXT = 16,
    T_AAAA = 28,
    T_SRV = 33,
    T_DNAME = 39,
    T_OPT = 41,
    T_DS = 43,
    T_RRSIG = 46,
    T_NSEC = 47,
    T_DNSKEY = 48,
    T_NSEC3 = 50,
    T_NSEC3PARAM = 51,
    T_IXFR = 251,
    T_AXFR = 252,
    T_ANY = 255,
    T_CAA = 257,
};
#define C_IN 1

struct dns_rec {
    uint32_t owner_off, rd_off; /* into the zone's arena */
    uint32_t ttl;
    uint16_t type, rdlen;
    uint8_t owner_len;
};

struct dns_rrset {
    uint16_t type;
    uint32_t ttl;  /* of the first record: an RRset has one TTL */
    uint32_t first, count; /* records */
};

struct dns_node {
    const uint8_t *name;
    uint8_t name_len, labels;
    uint32_t set_first, set_count;
};

struct dns_zone {
    uint8_t origin[OP_DNS_NAME_MAX];
    uint8_t origin_len, origin_labels;
    uint8_t *arena;
    size_t arena_len, arena_cap;
    struct dns_rec *recs;
    size_t nrecs, recs_cap;
    struct dns_rrset *sets;
    size_t nsets;
    struct dns_node *nodes;
    size_t nnodes;
    size_t apex; /* node index of the origin */
    uint32_t *index; /* exact-match hash index of nodes (store.c) */
    size_t index_mask;
    /* bit l: a zone cut (a DNAME) at a node of l labels, bit 63 for 63 or
     * more; a lookup probes only those levels of a name */
    uint64_t cut_depths, dname_depths;
    struct {     /* from the apex's NSEC3PARAM (RFC 5155): denial by NSEC3 */
        bool on;
        uint16_t iterations;
        uint8_t salt_len;
        uint8_t salt[255];
    } nsec3;
};

struct op_dns_zones {
    struct dns_zone *z;
    size_t n;
};

/* ---- names (wire form, uncompressed) ---- */
unsigned dns_name_labels(const uint8_t *name);
void dns_name_lower(uint8_t *name, size_t len);
/* DNSSEC canonical order of two lower-case names: <0, 0, >0. */
int dns_name_cmp(const uint8_t *a, const uint8_t *b);
bool dns_name_eq(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen);
/* Is name (of name_labels labels) at or below parent? */
bool dns_name_under(const uint8_t *name, unsigned name_labels, const uint8_t *parent,
                    unsigned parent_labels);
/* The suffix of name that drops its first skip labels. */
const uint8_t *dns_name_skip(const uint8_t *name, unsigned skip);
size_t dns_name_len(const uint8_t *name);
/* Lower-case ASCII letters only (DNS compares case-insensitively, RFC 4343). */
static inline uint8_t dns_lc(uint8_t c) { return c >= 'A' && c <= 'Z' ? (uint8_t)(c + 32) : c; }

/* ---- the store ---- */
void dns_zone_free(struct dns_zone *z);
/* Sort, group and check a parsed zone; err filled on failure. */
bool dns_zone_build(struct dns_zone *z, const char *file, struct op_dns_load_err *err);
/* Node index of name (lower case, len bytes), or -1: a hash probe. */
long dns_zone_lookup(const struct dns_zone *z, const uint8_t *name, size_t len);
/* Node index of name (lower case), or -1; *ins is where it would go. */
long dns_zone_find(const struct dns_zone *z, const uint8_t *name, size_t *ins);
const struct dns_rrset *dns_node_rrset(const struct dns_zone *z, const struct dns_node *n,
                                       uint16_t type);
static inline const uint8_t *dns_rec_rdata(const struct dns_zone *z, const struct dns_rec *r)
{
    return z->arena + r->rd_off;
}
/* ---- NSEC3 (nsec3.c) ---- */
/* Read the apex's NSEC3PARAM (after the build): sets z->nsec3. */
void dns_nsec3_setup(struct dns_zone *z);
/* The NSEC3 node whose owner is name's hash (*match), else the one
 * covering that hash; NULL when the zone has no NSEC3 record. */
const struct dns_node *dns_nsec3_find(const struct dns_zone *z, const uint8_t *name, bool *match);

/* The zone whose origin is the longest suffix of name, or NULL. */
const struct dns_zone *dns_zones_match(const struct op_dns_zones *zs, const uint8_t *name,
                                       unsigned labels);

/* ---- the zone-file reader ---- */
/* Parse the text of one zone file (with its $INCLUDEs) into z. */
bool dns_zone_read(struct dns_zone *z, const char *file, const char *text, size_t len,
                   const uint8_t *origin, size_t origin_len, bool allow_include,
                   struct op_dns_load_err *err);
/* The type's number from its mnemonic ("A", "TYPE65534"), or -1. */
int dns_type_parse(const char *s, size_t n);

/* ---- the servers' shared parts (server.c) ---- */
/* One thread (socket model) or lcore (DPDK models): its counters, written
 * by it alone and published for the stats reader, and the zone set it is
 * reading (a hazard pointer: a reload frees a set no thread announces). */
struct dns_worker {
    struct op_dns_server *s;
    pthread_t th;
    bool started;
    bool other_family; /* TCP: the dual stack's second kernel socket (not --listen's family) */
    struct op_dns_rrl *rrl; /* its own rate-limit table (NULL: no limit) */
    int fd;
    unsigned index;
    uint64_t c[OP_DNS_C_COUNT_];
    _Alignas(64) _Atomic uint64_t pub[OP_DNS_C_COUNT_];
    _Atomic(const struct op_dns_zones *) hazard;
};

struct op_dns_server {
    struct op_dns_server_config cfg;
    _Atomic(struct op_dns_zones *) zones;
    atomic_bool stop;
    struct dns_worker *w;
    unsigned nw;
    _Atomic uint64_t ctl[OP_DNS_C_COUNT_]; /* counted by the caller's thread (reloads) */
    /* stop the model's threads, close its I/O; the device's last counters
     * go into final (if not NULL) before it closes */
    void (*halt)(struct op_dns_server *s, uint64_t *final);
    void (*port_stats)(const struct op_dns_server *s, uint64_t *c); /* the device's drops */
    void *priv;                            /* the model's own state */
};

/* How a query reached one of the models: over TCP or UDP (its answer at
 * most udp_max), with the server's identity for NSID. */
static inline struct op_dns_query_info dns_query_info(const struct op_dns_server_config *cfg,
                                                      bool tcp, uint16_t udp_max)
{
    return (struct op_dns_query_info){.tcp = tcp, .udp_max = udp_max,
                                      .nsid = (const uint8_t *)cfg->nsid,
                                      .nsid_len = cfg->nsid_len};
}


struct op_dns_server *dns_server_alloc(const struct op_dns_server_config *cfg,
                                       struct op_dns_zones *zones, unsigned nw);
/* TCP (RFC 7766) through the kernel, for every model: w gets a listening
 * socket on the configuration's address and a thread serving it. */
op_status_t dns_tcp_start(struct dns_worker *w);
/* A kernel socket of type on the configuration's address (w's family, or
 * the dual stack's other one) and the thread fn serving it (socket.c). */
op_status_t dns_worker_start(struct dns_worker *w, int type, void *(*fn)(void *));
/* Join w's thread (once the server is stopping) and close its socket. */
void dns_thread_stop(struct dns_worker *w);
bool dns_server_stopping(const struct op_dns_server *s);
void dns_publish(struct dns_worker *w);
/* Rate limiting of a UDP answer to client: false to drop it; a slipped
 * answer is cut in place (*len). The limiter keys IPv4's 4 bytes or IPv6's
 * 16, in network order. */
static inline bool dns_rrl_pass(struct dns_worker *w, const struct op_addr *client,
                                uint8_t *answer, size_t *len)
{
    if (w->rrl == NULL)
        return true;
    uint8_t v4[4] = {(uint8_t)(client->v4 >> 24), (uint8_t)(client->v4 >> 16),
                     (uint8_t)(client->v4 >> 8), (uint8_t)client->v4};
    bool v6 = op_addr_is_ipv6(client);
    return op_dns_rrl_check(w->rrl, v6 ? client->v6 : v4, v6, answer, len, op_now_ns(), w->c) !=
           OP_DNS_RRL_DROP;
}

/* ---- the UDP answer engine of the packet-level models (udp.c) ---- */
struct dns_udp {
    struct dns_worker *w;
    uint16_t udp_max; /* the largest answer: --udp-max-payload, or what the link takes */
};
extern const struct op_engine_ops dns_udp_ops;
/* The loop's flush: answers out, sent and refused ones counted, published. */
void dns_udp_flush(void *ctx, struct op_io *io, struct op_txq *q);
/* A loop over io with u as its only engine. */
op_status_t dns_udp_loop(struct dns_udp *u, struct op_io *io, struct op_loop **out);
const struct op_dns_zones *dns_zones_enter(struct dns_worker *w);
void dns_zones_leave(struct dns_worker *w);

/* ---- polling workers (poll.c) ---- */
struct dns_poll {
    uint64_t since_ns; /* the first empty poll in a row; 0 while busy */
    uint64_t after_ns; /* --idle-after-us */
    uint64_t yield_at_ns, yield_every_ns; /* real-time workers: the next forced sleep */
    uint64_t *c;                          /* the worker's counters */
    unsigned empty, sleep_us, idle_sleep_us, yield_us;
    bool shared; /* another of our workers runs on its CPU */
    bool rt;     /* it runs under SCHED_FIFO or SCHED_RR */
};
void dns_poll_init(struct dns_poll *p, const struct op_dns_poll_config *pc, bool shared,
                   uint64_t *c);
/* After each poll: returns busy, sleeping first when it is time to, so a
 * loop reads `if (!dns_polled(&p, n > 0)) continue;`. */
bool dns_polled(struct dns_poll *p, bool busy);

void dns_load_fail(struct op_dns_load_err *err, int reason, const char *file, unsigned line,
                   const char *fmt, ...) OP_PRINTF(5, 6);

#endif
