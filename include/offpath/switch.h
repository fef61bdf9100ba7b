/* offpath software switch: TOR and SPINE roles of the in-network Allreduce.
 * The engine (op_sw_*) is a pure state machine: packets and the time in,
 * packets out through an op_txq. op_sw_run drives it over an io backend. */
#ifndef OFFPATH_SWITCH_H
#define OFFPATH_SWITCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "offpath/common.h"
#include "offpath/io.h"
#include "offpath/topo.h"

/* ---- Engine */
struct op_sw_config {
    const struct op_topo *topo; /* copied */
    int self;                   /* index into topo->sw */
    uint32_t max_groups;        /* groups this switch can hold */
    uint16_t window;            /* slots per group */
    uint16_t max_children;      /* contributors per slot (bitmap width) */
    uint16_t max_data;          /* data bytes per packet */
    uint32_t lease_ms;          /* free a group silent this long */
    uint64_t slot_memory;       /* bytes all groups' slots may use */
    uint16_t sup_ops, sup_types; /* capability bitmaps advertised */
    uint64_t seed;              /* group tokens */
    const struct op_log *log;
};

OP_API void op_sw_config_default(struct op_sw_config *cfg);

/* Counters: one list gives the enum, the text and the JSON names. The
 * engine counts its own; the driver counts its port's (fault layer, io,
 * capture) beside them, and a report shows both, engine's first. */
#define OP_SW_ENGINE_COUNTERS(X)                                                                   \
    X(rx_pkts)                                                                                     \
    X(tx_pkts)                                                                                     \
    X(rx_inc)                                                                                      \
    X(rx_ctrl)                                                                                     \
    X(drop_foreign)                                                                                \
    X(drop_malformed)                                                                              \
    X(drop_icrc)                                                                                   \
    X(drop_unknown_group)                                                                          \
    X(drop_bad_token)                                                                              \
    X(drop_not_member)                                                                             \
    X(drop_mismatch)                                                                               \
    X(drop_stale)                                                                                  \
    X(drop_no_route)                                                                               \
    X(contributions)                                                                               \
    X(duplicates)                                                                                  \
    X(retransmissions)                                                                             \
    X(congestion_seen) /* INC packets that came marked (FECN or the flag), of any fate */        \
    X(chunks_aggregated)                                                                           \
    X(partials_up)                                                                                 \
    X(partials_resent)                                                                             \
    X(results_sent)                                                                                \
    X(results_resent)                                                                              \
    X(queries)                                                                                     \
    X(notifies)                                                                                    \
    X(kills)                                                                                       \
    X(kills_repeated) /* a contribution into a group killed here heard the kill again */          \
    X(refusals)                                                                                    \
    X(groups_created)                                                                              \
    X(groups_freed)                                                                                \
    X(groups_expired)                                                                              \
    X(groups_live)

#define OP_SW_PORT_COUNTERS(X)                                                                     \
    X(injected_drops)                                                                              \
    X(injected_dups)                                                                               \
    X(tx_io_datagrams) /* system-level sends: fewer than tx_pkts when batched */                   \
    X(tx_io_drops)                                                                                 \
    X(captured) /* packets written to --pcap */

#define OP_SW_COUNTERS(X) OP_SW_ENGINE_COUNTERS(X) OP_SW_PORT_COUNTERS(X)

/* One numbering for both: the port's counters follow the engine's, from
 * OP_SW_C_ENGINE_COUNT_ (the PORT_BASE_ step keeps the first one there). */
enum op_sw_counter {
#define OP_SW_ENUM_(n) OP_SW_C_##n,
    OP_SW_ENGINE_COUNTERS(OP_SW_ENUM_)
    OP_SW_C_ENGINE_COUNT_,
    OP_SW_C_PORT_BASE_ = OP_SW_C_ENGINE_COUNT_ - 1,
    OP_SW_PORT_COUNTERS(OP_SW_ENUM_)
#undef OP_SW_ENUM_
        OP_SW_C_COUNT_
};
#define OP_SW_PORT_C_COUNT_ (OP_SW_C_COUNT_ - OP_SW_C_ENGINE_COUNT_)

struct op_sw;

OP_API op_status_t op_sw_create(const struct op_sw_config *cfg, struct op_sw **out);
OP_API void op_sw_destroy(struct op_sw *sw);
/* Handle one received packet (pkt->flow.src is the sender). */
OP_API void op_sw_input(struct op_sw *sw, const struct op_pkt *pkt, uint64_t now_ns,
                        struct op_txq *out);
/* Run timers (leases, stale queries) due at now_ns. */
OP_API void op_sw_timer(struct op_sw *sw, uint64_t now_ns, struct op_txq *out);
OP_API uint64_t op_sw_next_timer(const struct op_sw *sw);
/* The engine's counters (OP_SW_C_ENGINE_COUNT_ values). */
OP_API const uint64_t *op_sw_counters(const struct op_sw *sw);
OP_API const char *op_sw_counter_name(unsigned c); /* any of OP_SW_C_COUNT_ */
OP_API const char *const *op_sw_counter_names(void); /* all OP_SW_C_COUNT_, for printing */
/* Every counter: the engine's, then the port's (OP_SW_PORT_C_COUNT_ values
 * from the driver; NULL: zeros), copied into vals. */
OP_API struct op_counter_set op_sw_counter_set(const struct op_sw *sw, const uint64_t *port,
                                               uint64_t vals[OP_SW_C_COUNT_]);
/* Every counter as text or one JSON object: the engine's, then port's
 * (OP_SW_PORT_C_COUNT_ values from the driver; NULL: zeros). */
OP_API void op_sw_print_report(const struct op_sw *sw, const uint64_t *port, FILE *out, bool json);
/* op_sw_print_report with no port. */
OP_API void op_sw_print_stats(const struct op_sw *sw, FILE *out, bool json);

/* ---- On the path (`offpath switch --ports`): the switch owns frame
 * backends on its links and forwards every frame between them by a static
 * L3 table (one entry an address, as a routed fabric of /32s), answers
 * ARP, NDP and echo for its own address, and hands the INC traffic to it
 * to the engine above. Every frame received is counted once on its port:
 * control, forwarded, to_inc or one drop; every frame sent once on the
 * port it left by. One loop a port, one thread, one wait. */
#define OP_SW_MAX_PORTS 64
#define OP_SW_MAX_PATHS 8 /* equal-cost ports of a route */
#define OP_SW_MAX_ROUTES 256

#define OP_SW_PATH_COUNTERS(X)                                                                     \
    X(rx_frames)                                                                                   \
    X(control)        /* ARP, NDP, echo: answered or taken */                                      \
    X(forwarded)      /* out of another port (or this one) */                                      \
    X(to_inc)         /* INC to our address: to the engine */                                      \
    X(drop_no_route)                                                                               \
    X(drop_no_neigh)  /* the next hop's MAC not known yet (asked) */                               \
    X(drop_ttl)                                                                                    \
    X(drop_local)     /* to our address, neither INC nor control */                                \
    X(drop_other)     /* not IP or ARP, multicast, malformed */                                    \
    X(drop_injected)  /* the link's loss on what comes in (rx_drop_rate), or it down */           \
    X(tx_frames)                                                                                   \
    X(tx_inc)         /* of tx_frames: the engine's packets */                                     \
    X(tx_drops)       /* the backend refused */                                                    \
    X(tx_no_neigh)    /* engine packets for a next hop not known */                                \
    X(neigh_asked)                                                                                 \
    X(queue_drops)    /* the shaped egress queue was full */                                       \
    X(ecn_marked)     /* CE set on the way into the shaped queue (ecn_bytes) */                     \
    X(ecn_seen)       /* INC to our address that came with CE */                                   \
    X(injected_drops) /* the port's loss injector, or the link taken down */                   \
    X(injected_dups)  /* the port's duplication injector */                                      \
    X(rx_ring_lost)   /* af_xdp: lost before we read them (our ring full, the kernel) */

enum op_sw_path_counter {
#define OP_SW_PATH_ENUM_(n) OP_SW_PATH_C_##n,
    OP_SW_PATH_COUNTERS(OP_SW_PATH_ENUM_)
#undef OP_SW_PATH_ENUM_
        OP_SW_PATH_C_COUNT_
};
OP_API const char *op_sw_path_counter_name(unsigned c); /* NULL past the list */

struct op_sw_port_config {
    char name[16];               /* the interface (af_xdp opens it by name) */
    struct op_io *io;            /* a frame backend; NULL: af_xdp on name */
    struct op_addr peer4, peer6; /* the neighbour on this link; any: none */
    /* egress at the link's rate (AF_XDP transmits around the qdisc):
     * 0 for the backend's own pace; queue_bytes held, the rest dropped */
    uint64_t rate_bps;
    uint32_t queue_bytes;
    uint32_t burst_bytes;        /* sent at once; 0: tbf's as topo up sets it */
    /* an ECN-capable frame that finds ecn_bytes queued leaves with CE
     * (DCTCP's step marking at K); 0: none */
    uint32_t ecn_bytes;
    double drop_rate, dup_rate;  /* each frame sent lost, or sent twice */
    double rx_drop_rate;         /* each frame received lost (a host's end cannot) */
    uint32_t delay_us;           /* each frame sent held this long */
    /* the link down (everything sent and received lost) from down_after_ms
     * after start (with down_at_inc: from the down_at_inc-th INC packet the
     * port receives) for down_for_ms; 0: never */
    uint32_t down_after_ms, down_for_ms, down_at_inc;
};

struct op_sw_route {
    struct op_addr dst;              /* a node's address: matched exactly */
    uint8_t n_ports;                 /* 1..OP_SW_MAX_PATHS */
    uint8_t ports[OP_SW_MAX_PATHS];  /* a flow's hash picks one */
};

struct op_sw_path_config {
    struct op_addr own4, own6; /* ours (own6 any: IPv4 only) */
    uint16_t inc_port;         /* UDP port of the fabric */
    struct op_sw_port_config ports[OP_SW_MAX_PORTS];
    int n_ports;
    struct op_sw_route routes[OP_SW_MAX_ROUTES];
    int n_routes;
    bool busy_poll;
    uint64_t seed; /* the loss injectors' */
};

struct op_nstopo;
/* The path of node self of a namespace topology (offpath/nstopo.h): its
 * addresses, a port a link named in list ("all": every link of the node,
 * each interface named after its peer as `offpath topo up` names them;
 * else IF or IF=PEER, comma separated), each with the link's rate and
 * queue, a route to every other node over the ports of its shortest
 * paths, and RoCEv2's port for INC (a fabric on another port sets its own).
 * OP_ERR_INVAL and err naming the fault (an unknown peer, a peer
 * not linked, a route with no port given). */
OP_API op_status_t op_sw_path_from_net(const struct op_nstopo *t, int self, const char *list,
                                       struct op_sw_path_config *c, char *err, size_t errlen);

/* `switch --topology FILE --name NAME --ports LIST`: FILE a namespace
 * topology; the switches' fabric (offpath/topo.h) derived from it into
 * topo with NAME's index in self, and NAME's path into c. err says what
 * is wrong (the file, the name, the ports). */
OP_API op_status_t op_sw_path_load(const char *file, const char *name, const char *list,
                                   struct op_topo *topo, int *self, struct op_sw_path_config *c,
                                   char *err, size_t errlen);
/* The port of c named name; -1 if none. */
OP_API int op_sw_path_port_find(const struct op_sw_path_config *c, const char *name);

struct op_sw_path;
struct op_loop;
/* Takes the ports' backends (closed by op_sw_path_destroy, also on
 * failure); those with io NULL are opened as af_xdp on their name. sw may
 * be NULL: a plain router. */
OP_API op_status_t op_sw_path_create(const struct op_sw_path_config *c, struct op_sw *sw,
                                     const struct op_log *log, struct op_sw_path **out,
                                     char *err, size_t errlen);
OP_API void op_sw_path_destroy(struct op_sw_path *p);
/* One wait over every port, then each serves (op_loop_run_many). */
OP_API int op_sw_path_run_once(struct op_sw_path *p, uint64_t until);
/* The first port's loop: where a driver watches its signal descriptor. */
OP_API struct op_loop *op_sw_path_loop(struct op_sw_path *p);
OP_API int op_sw_path_ports(const struct op_sw_path *p);
OP_API const char *op_sw_path_port_name(const struct op_sw_path *p, int port);
OP_API void op_sw_path_counters(const struct op_sw_path *p, int port,
                                uint64_t out[OP_SW_PATH_C_COUNT_]);
/* Each port's counters: a table with a column a port, or a JSON object of
 * objects ("PORT": {...}). */
OP_API void op_sw_path_print(const struct op_sw_path *p, FILE *out, bool json);

/* ---- Driver: `offpath switch`, and each switch the fabric forks */
struct op_sw_run_config {
    struct op_sw_config sw;
    double drop_rate, dup_rate;
    uint32_t delay_us;
    /* the link to one host down for a while (testing a leader that loses
     * its results): from link_down_after_ms after start, for link_down_for_ms */
    uint32_t link_down_ip, link_down_after_ms, link_down_for_ms;
    const char *stats_json; /* written at exit and on SIGUSR1 */
    bool busy_poll;
    bool json_exit; /* exit counters as JSON on stdout */
    bool udp_batching; /* op_io_udp_batching on its port */
    int ready_fd; /* >= 0: write "ready\n" there once listening, then close it */
    /* >= 0: the counter set (op_sw_counter_set) written there at exit
     * (op_counter_set_write), then closed: a launcher's pipe */
    int counters_fd;
    struct op_pcap *pcap; /* capture what the port receives and sends; NULL: none */
    /* non-NULL: on the path (op_sw_path_create) instead of a UDP socket;
     * faults are then the ports' own (op_sw_port_config) */
    const struct op_sw_path_config *path;
};
/* Runs until SIGINT/SIGTERM; SIGUSR1 prints counters. Returns 0 or an error. */
OP_API op_status_t op_sw_run(const struct op_sw_run_config *cfg);

#endif
