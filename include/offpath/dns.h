/* offpath dns: an authoritative DNS server's parts.
 *
 * - A zone set loaded from RFC 1035 master files (op_dns_zones_load): an
 *   immutable value, shared by every thread that answers, replaced whole on
 *   a reload.
 * - The responder (op_dns_respond): a pure function, query bytes in and
 *   answer bytes out, with the caller's counters. Every I/O model (sockets,
 *   DPDK) and every test calls the same function.
 * - The socket server (op_dns_serve_*): UDP threads (recvmmsg/sendmmsg,
 *   SO_REUSEPORT) and a TCP thread (RFC 7766) around the responder. */
#ifndef OFFPATH_DNS_H
#define OFFPATH_DNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"
#include "offpath/wire/addr.h"

#define OP_DNS_UDP_MIN 512       /* without EDNS (RFC 1035) */
#define OP_DNS_UDP_DEFAULT 1232  /* EDNS payload we offer (DNS flag day 2020, Knot's default) */
#define OP_DNS_MSG_MAX 65535     /* a TCP message */

/* The responder's counters. received = responses + drop_*; the server adds
 * its own below. Reasons a query gets FORMERR are counted one by one
 * (formerr_*), and every response's rcode (rcode_*). */
#define OP_DNS_ENGINE_COUNTERS(X)                                                                  \
    X(received)                                                                                    \
    X(responses)                                                                                   \
    X(drop_short)     /* shorter than a header: nothing to answer to */                            \
    X(drop_response)  /* QR set: never answer an answer */                                         \
    X(rcode_noerror)                                                                               \
    X(rcode_formerr)                                                                               \
    X(rcode_servfail)                                                                              \
    X(rcode_nxdomain)                                                                              \
    X(rcode_notimp)                                                                                \
    X(rcode_refused)                                                                               \
    X(rcode_yxdomain)    /* a DNAME's substitution over 255 octets */                              \
    X(rcode_badvers)                                                                               \
    X(formerr_truncated)                                                                           \
    X(formerr_label_type)                                                                          \
    X(formerr_ptr_forward)                                                                         \
    X(formerr_ptr_loop)                                                                            \
    X(formerr_name_long)                                                                           \
    X(formerr_rdata_len)                                                                           \
    X(formerr_qdcount)   /* not exactly one question */                                           \
    X(formerr_trailing)  /* bytes after the last record */                                        \
    X(formerr_opt)       /* OPT twice, not in additional, or not at the root */                   \
    X(formerr_section)   /* an answer or authority record in a query */                           \
    X(refused_class)     /* not IN */                                                              \
    X(refused_zone)      /* no zone of ours holds the name */                                      \
    X(refused_xfr)       /* AXFR/IXFR over UDP, from a client not allowed, or not a zone's apex */ \
    X(xfr_started)       /* transfers begun (each answered query counts once in responses) */      \
    X(xfr_messages)      /* their messages after the first */                                      \
    X(xfr_aborted)       /* transfers cut short: the client left, or a reload changed the zones */ \
    X(notimp_opcode)                                                                               \
    X(truncated)         /* TC set: a section did not fit */                                       \
    X(edns)                                                                                        \
    X(do_bit)                                                                                      \
    X(any_minimal)       /* ANY answered with one RRset (RFC 8482) */                     \
    X(wildcard)                                                                                    \
    X(referral)                                                                                    \
    X(cname_followed)                                                                              \
    X(dname_synthesized) /* a CNAME made from a DNAME above the name (RFC 6672) */

/* The socket server's own, counted beside the engine's. */
#define OP_DNS_SERVER_COUNTERS(X)                                                                  \
    X(udp_rx)                                                                                      \
    X(udp_tx)                                                                                      \
    X(tcp_rx)                                                                                      \
    X(tcp_tx)                                                                                      \
    X(drop_tx)           /* sendmmsg/write refused it */                                           \
    X(drop_tcp_closed)   /* the client went away before its answer */                            \
    X(rrl_dropped)       /* UDP answers not sent: over --rrl-rate for the client's network */   \
    X(rrl_slipped)       /* of those limited, sent truncated instead (--rrl-slip; in udp_tx) */ \
    X(tcp_conns)                                                                                   \
    X(tcp_conn_refused)  /* more connections than --tcp-max */                                     \
    X(tcp_idle_closed)                                                                             \
    X(reloads)                                                                                     \
    X(reload_failed)                                                                               \
    X(notify_sent)       /* NOTIFY messages sent to secondaries (tries included) */               \
    X(notify_acked)      /* a secondary acknowledged a zone's change */                          \
    X(notify_failed)     /* no acknowledgement after the last try */                             \
    X(frames_rx)         /* DPDK models: every frame the port gave */                              \
    X(ctl_rx)            /* ARP and ICMP echo requests for our address */                         \
    X(ctl_tx)                                                                                      \
    X(drop_tx_ctl)       /* ARP/ICMP replies the TX queue would not take */                       \
    X(drop_not_ours)     /* not for our address and port, not ARP/ICMP for us */                  \
    X(drop_frame)        /* a malformed frame (short, bad IPv4 or UDP, a fragment) */              \
    X(drop_ring_rx)      /* pipeline: the workers' ring was full */                                \
    X(tx_ring_full)      /* pipeline: answers lost to a full TX ring (in drop_tx) */               \
    X(tx_retries)        /* TX queue full: paused and tried again */                               \
    X(rt_yields)         /* a real-time lcore's bounded sleeps (--rt-yield-us) */                 \
    X(port_imissed)      /* DPDK port: frames the NIC/PMD dropped before us (RX ring full) */       \
    X(port_rx_nombuf)    /* DPDK port: frames dropped for want of an mbuf */                       \
    X(port_oerrors)      /* DPDK port: frames the NIC/PMD failed to send */

#define OP_DNS_COUNTERS(X) OP_DNS_ENGINE_COUNTERS(X) OP_DNS_SERVER_COUNTERS(X)

enum op_dns_counter {
#define OP_DNS_ENUM_(n) OP_DNS_C_##n,
    OP_DNS_COUNTERS(OP_DNS_ENUM_)
#undef OP_DNS_ENUM_
        OP_DNS_C_COUNT_
};
OP_API const char *op_dns_counter_name(unsigned c);
/* ---- Response rate limiting (rrl.c): UDP answers to one client network
 * (IPv4 /24, IPv6 /56) of one kind (a positive answer's name and type, or
 * a negative or error rcode) limited to `rate` a second; past that each is
 * dropped but every slip-th, which is cut to its question with TC set (the
 * client asks again over TCP). One table per worker thread. ---- */
struct op_dns_rrl;
OP_API struct op_dns_rrl *op_dns_rrl_new(unsigned rate, unsigned slip);
OP_API void op_dns_rrl_free(struct op_dns_rrl *r);
enum op_dns_rrl_verdict { OP_DNS_RRL_PASS, OP_DNS_RRL_SLIP, OP_DNS_RRL_DROP };
/* client: 4 (IPv4) or 16 (ipv6) bytes, network order (read: 3 or 7); answer and *len the
 * response, cut in place on SLIP; now_ns a monotonic clock. NULL r passes
 * everything. Counts rrl_dropped and rrl_slipped into c. */
OP_API enum op_dns_rrl_verdict op_dns_rrl_check(struct op_dns_rrl *r, const uint8_t *client,
                                                bool ipv6, uint8_t *answer, size_t *len,
                                                uint64_t now_ns, uint64_t *c);

/* Every query accounted for: received == sent + every drop; and every frame of the DPDK models: frames_rx = udp_rx + ctl_rx +
 * drop_not_ours + drop_frame + drop_ring_rx, ctl_rx = ctl_tx + drop_tx_ctl. */
OP_API bool op_dns_counters_balanced(const uint64_t c[OP_DNS_C_COUNT_]);

/* Why a zone file was refused (the message names file, line and this). */
#define OP_DNS_ZONE_ERRORS(X)                                                                      \
    X(ok)                                                                                          \
    X(open)             /* the file cannot be read */                                              \
    X(syntax)           /* unbalanced parentheses or quotes, a bad escape */                       \
    X(bad_name)         /* a label over 63 octets, a name over 255, an empty label */              \
    X(bad_ttl)                                                                                     \
    X(bad_type)         /* an unknown type mnemonic */                                             \
    X(bad_rdata)        /* a field of the record cannot be read */                                 \
    X(bad_directive)                                                                               \
    X(include_depth)                                                                               \
    X(no_origin)        /* a relative name before any $ORIGIN */                                   \
    X(out_of_zone)      /* an owner outside the zone's origin */                                   \
    X(no_soa)           /* the apex has no SOA, or it has two */                                   \
    X(cname_conflict)   /* a CNAME beside other data */                                            \
    X(duplicate_zone)                                                                              \
    X(too_big)          /* more records or RRs than the store holds */                             \
    X(nomem)

enum op_dns_zone_err {
#define OP_DNS_ZENUM_(n) OP_DNS_Z_##n,
    OP_DNS_ZONE_ERRORS(OP_DNS_ZENUM_)
#undef OP_DNS_ZENUM_
        OP_DNS_Z_COUNT_
};
OP_API const char *op_dns_zone_err_name(int e);

struct op_dns_zones;

/* What went wrong in a load: the reason and "file:line: what". */
struct op_dns_load_err {
    int reason; /* enum op_dns_zone_err */
    char msg[320];
};

/* Load n zone files. The origin of each is its first $ORIGIN, or, without
 * one, the owner of its SOA. On failure nothing is kept. */
OP_API op_status_t op_dns_zones_load(const char *const *files, size_t n,
                                     struct op_dns_zones **out, struct op_dns_load_err *err);
/* One zone from text in memory (tests and fuzzing); origin may be NULL
 * (then the text must set $ORIGIN or start with an absolute SOA owner).
 * $INCLUDE is refused here: memory has no folder to look in. */
OP_API op_status_t op_dns_zones_parse(const char *text, size_t len, const char *origin,
                                      struct op_dns_zones **out, struct op_dns_load_err *err);
OP_API void op_dns_zones_free(struct op_dns_zones *z);
OP_API size_t op_dns_zones_count(const struct op_dns_zones *z);
OP_API size_t op_dns_zones_records(const struct op_dns_zones *z);

/* A zone transfer in progress: AXFR, or IXFR answered with the whole zone
 * (RFC 1995 section 4: we keep no history). Its messages carry the apex's
 * SOA, every record of the zone, and the SOA again (RFC 5936). */
struct op_dns_xfr {
    const struct op_dns_zones *zones; /* the set it began on: it must stay */
    size_t zone;                      /* index in it */
    size_t next;                      /* the next record; past the last: the closing SOA */
    uint16_t id;
    bool active;
};

/* How one query arrived. */
struct op_dns_query_info {
    bool tcp;             /* no size limit but the message's */
    uint16_t udp_max;     /* the largest UDP answer we send (>= 512) */
    /* A TCP client allowed transfers: a transfer query starts one here (its
     * first message is the answer); NULL refuses them (refused_xfr). */
    struct op_dns_xfr *xfr;
    /* The server's identity, sent to a client whose OPT asks for it (NSID,
     * RFC 5001); nsid_len 0: none. */
    const uint8_t *nsid;
    uint16_t nsid_len;
};

/* Answer the query of qlen bytes into out (cap bytes, at least 512; 65535
 * for TCP). Returns the answer's length, or 0 when the query is dropped
 * (counted in c, OP_DNS_C_COUNT_ values, which the caller owns). */
OP_API size_t op_dns_respond(const struct op_dns_zones *z, const struct op_dns_query_info *qi,
                             const uint8_t *q, size_t qlen, uint8_t *out, size_t cap,
                             uint64_t *c);

/* The next message of an active transfer into out (cap bytes); 0 when it
 * has ended (x->active false). */
OP_API size_t op_dns_xfr_next(struct op_dns_xfr *x, uint8_t *out, size_t cap, uint64_t *c);

/* NOTIFY (RFC 1996): the message telling a secondary that zone (an index
 * in zs) changed, with its SOA; 0 if cap is too small. */
OP_API size_t op_dns_notify_build(const struct op_dns_zones *zs, size_t zone, uint16_t id,
                                  uint8_t *out, size_t cap);
/* Is msg the secondary's acknowledgement of NOTIFY id (NOERROR)? */
OP_API bool op_dns_notify_acked(const uint8_t *msg, size_t len, uint16_t id);
/* Is zone (an index in now) new since old, or its SOA serial another? */
OP_API bool op_dns_zone_changed(const struct op_dns_zones *old, const struct op_dns_zones *now,
                                size_t zone);

/* ---- The socket server ---- */
/* A network allowed zone transfers: addr/prefix, IPv4 (matching IPv4
 * clients and IPv4-mapped IPv6 ones) or IPv6. */
struct op_dns_acl {
    bool ipv6;
    uint8_t addr[16]; /* network order; IPv4 in the first 4 */
    uint8_t prefix;
};
#define OP_DNS_ACL_MAX 16

#define OP_DNS_NOTIFY_MAX 16
#define OP_DNS_NSID_MAX 128

struct op_dns_server_config {
    uint32_t addr;       /* host order */
    uint16_t port;
    /* ipv6: listen on addr6 instead of addr (the socket model; [::] takes
     * IPv4 too, as v4-mapped, where net.ipv6.bindv6only is 0) */
    bool ipv6;
    uint8_t addr6[16];
    /* the DPDK models: both addr and addr6 (TCP through a kernel socket
     * for each) */
    bool dual_stack;
    unsigned rrl_rate; /* UDP answers a second per client network and kind; 0: no limit */
    unsigned rrl_slip; /* every slip-th limited answer goes out truncated; 0: none */
    unsigned udp_threads;
    unsigned burst;      /* datagrams per recvmmsg */
    unsigned tcp_max;    /* concurrent TCP connections */
    unsigned tcp_idle_ms;
    uint16_t udp_max;
    struct op_log *log;
    struct op_dns_acl xfr_acl[OP_DNS_ACL_MAX]; /* who may transfer (over TCP) */
    unsigned n_xfr_acl;                        /* 0: nobody */
    struct op_endpoint notify[OP_DNS_NOTIFY_MAX]; /* secondaries told of changes */
    unsigned n_notify;
    char nsid[OP_DNS_NSID_MAX]; /* this server's identity (NSID), nsid_len octets */
    uint16_t nsid_len;
};
/* Does acl allow the client at sa (AF_INET or AF_INET6)? */
OP_API bool op_dns_acl_allows(const struct op_dns_acl *acl, unsigned n, const void *sa);
/* Parses ADDR[/PREFIX] (IPv4 or IPv6; the whole address without one). */
OP_API op_status_t op_dns_acl_parse(const char *text, struct op_dns_acl *out);
OP_API void op_dns_server_config_default(struct op_dns_server_config *cfg);

struct op_dns_server;
/* Binds UDP and TCP on addr:port and starts the threads; zones stays the
 * caller's until op_dns_server_reload hands it another set. */
OP_API op_status_t op_dns_server_start(const struct op_dns_server_config *cfg,
                                       struct op_dns_zones *zones, struct op_dns_server **out);
/* Swap in a new zone set without stopping: returns the old one once no
 * thread can still be reading it (the caller frees it). */
OP_API struct op_dns_zones *op_dns_server_reload(struct op_dns_server *s,
                                                 struct op_dns_zones *zones);
/* Sum of every thread's counters. */
OP_API void op_dns_server_counters(const struct op_dns_server *s, uint64_t out[OP_DNS_C_COUNT_]);
OP_API void op_dns_server_count(struct op_dns_server *s, enum op_dns_counter c);
/* After a reload from old: NOTIFY for every zone that changed to each of
 * cfg.notify over UDP, each tried 3 times 500 ms apart until acknowledged
 * (notify_sent, notify_acked, notify_failed); returns the acknowledged. */
OP_API unsigned op_dns_server_notify(struct op_dns_server *s, const struct op_dns_zones *old,
                                     const struct op_dns_zones *now);
/* How the polling models' workers wait (src/dns/poll.c). */
struct op_dns_poll_config {
    unsigned idle_sleep_us; /* the longest sleep of an idle worker (doubling from 1) */
    unsigned idle_after_us; /* how long a worker polls an empty queue before it sleeps */
    unsigned rt_yield_us, rt_yield_every_us; /* a worker under a real-time policy sleeps
                                                this long (0: what the kernel's real-time
                                                throttle needs, + 3%) this often */
};
#define OP_DNS_POLL_DEFAULT                                                                        \
    {.idle_sleep_us = 1000, .idle_after_us = 1000, .rt_yield_us = 0, .rt_yield_every_us = 10000}

/* ---- The xdp model: run to completion on offpath's own AF_XDP socket ---- */
struct op_dns_xdp_config {
    const char *ifname;  /* the interface; its queue 0 is served */
    unsigned rx_frames;  /* UMEM frames for RX, all on the fill ring (a power of 2) */
    struct op_dns_poll_config poll;
};
OP_API void op_dns_xdp_config_default(struct op_dns_xdp_config *xc);
/* Opens the AF_XDP socket (root), starts the worker and the TCP thread
 * (through the kernel: it needs the address too, else UDP alone is
 * served); setup failures are logged to cfg->log. */
OP_API op_status_t op_dns_xdp_start(const struct op_dns_server_config *cfg,
                                    const struct op_dns_xdp_config *xc,
                                    struct op_dns_zones *zones, struct op_dns_server **out);

/* ---- The DPDK models (only in builds that found libdpdk) ---- */
struct op_dns_dpdk_config {
    bool pipeline;        /* false: run-to-completion, one queue per worker lcore */
    unsigned mbufs, mbuf_cache, ring_size, rx_desc, tx_desc;
    unsigned tx_retries;  /* tries after a partial tx_burst */
    unsigned tx_backoff_us; /* the longest pause between them (doubling from 1) */
    struct op_dns_poll_config poll;
    /* EAL arguments (without a program name): an AF_XDP vdev without
     * xdp_prog= gets offpath's program, so TCP and ARP reach the kernel */
    int n_eal_args;
    char *const *eal_args;
    const char *xdp_prog; /* that program (the CLI finds it installed); NULL: the build's */
};
OP_API void op_dns_dpdk_config_default(struct op_dns_dpdk_config *dc);
/* Initialises the EAL, the port (the first one), the pool and rings, and
 * launches the worker lcores; answers for cfg->addr:cfg->port. On failure
 * err says why. The op_dns_server_* calls below then work as for sockets. */
OP_API op_status_t op_dns_dpdk_start(const struct op_dns_server_config *cfg,
                                     const struct op_dns_dpdk_config *dc,
                                     struct op_dns_zones *zones, struct op_dns_server **out,
                                     char *err, size_t errlen);

/* Stops the threads (a TCP answer still unsent counts as drop_tcp_closed),
 * closes the sockets, fills final (if not NULL) with the last counters and
 * returns the zone set in use. */
OP_API struct op_dns_zones *op_dns_server_stop(struct op_dns_server *s,
                                               uint64_t final[OP_DNS_C_COUNT_]);

/* ---- the `offpath dns` tool around a server ---- */
struct op_dns_tool_config {
    const char *const *zones; /* zone files, loaded (and reloaded) in this order */
    size_t nzones;
    const struct op_log *log;
    const char *stats_json; /* rewritten with the counters every second; NULL: none */
    bool json;              /* the exit counters as JSON on stdout (else a table) */
};
/* The zones; NULL, with the reason logged, when one does not load. */
OP_API struct op_dns_zones *op_dns_tool_load(const struct op_dns_tool_config *t);
/* SIGINT, SIGTERM and SIGHUP blocked in the calling thread, before the
 * server starts (its threads inherit the mask), so op_dns_tool_serve takes
 * them in turn. */
OP_API void op_dns_tool_block_signals(void);
/* NOTIFY to every secondary, then serve until SIGINT or SIGTERM: SIGHUP
 * reloads every zone (one that fails keeps the old set serving), every
 * second the counters go to the log (info) and the stats file. Stops the
 * server, reports, frees z (or what replaced it): 0 when the counters
 * balance, 1 otherwise. */
OP_API int op_dns_tool_serve(struct op_dns_server *s, const struct op_dns_tool_config *t,
                             struct op_dns_zones *z);

#endif
