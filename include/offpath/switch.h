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
};
/* Runs until SIGINT/SIGTERM; SIGUSR1 prints counters. Returns 0 or an error. */
OP_API op_status_t op_sw_run(const struct op_sw_run_config *cfg);

#endif
