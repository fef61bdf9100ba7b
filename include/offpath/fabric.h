/* offpath fabric: starts the switches of a topology on loopback, each a
 * forked process running op_sw_run, waits until each listens, and stops them
 * again, collecting their counters. Used by inc_test and mpirun. */
#ifndef OFFPATH_FABRIC_H
#define OFFPATH_FABRIC_H

#include <stdint.h>

#include "offpath/common.h"
#include "offpath/switch.h"
#include "offpath/topo.h"

struct op_fabric_opts {
    const char *workdir;   /* where their JSON counters go */
    double drop_rate, dup_rate;
    uint32_t delay_us;
    const char *faulty;        /* the one switch (by name) that injects the faults
                                * above, the rest none; NULL: every switch */
    uint16_t window, max_data; /* 0: the switch's default */
    bool udp_batching;         /* the switches' ports (op_io_udp_batching) */
    struct op_pcap *pcap; /* each switch captures into a file of its own in
                           * workdir; op_fabric_stop merges them into this */
    /* Called in switch sw's own process before it opens its port (NULL:
     * none), e.g. to enter the switch's network namespace; a non-OK status
     * (said on stderr by enter) ends that switch, and so its start. */
    op_status_t (*enter)(int sw, void *ctx);
    /* Called after it, with the switch's configuration (NULL: none), e.g.
     * to put the switch on the path of its node's links (rc->path); ctx is
     * enter_ctx. A non-OK status ends that switch. */
    op_status_t (*configure)(int sw, struct op_sw_run_config *rc, void *ctx);
    void *enter_ctx;
};

struct op_fabric;

/* On failure err says which switch did not start; all started are stopped. */
OP_API op_status_t op_fabric_start(const struct op_fabric_opts *o, const struct op_topo *topo,
                                   struct op_fabric **out, char *err, size_t errlen);
/* SIGTERM every switch, wait, add their exit counters into totals (may be
 * NULL), merge their captures (a failure sticks in the writer). */
OP_API void op_fabric_stop(struct op_fabric *f, uint64_t totals[OP_SW_C_COUNT_]);

#endif
