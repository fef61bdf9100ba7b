/* `offpath inc_test`: load and correctness tool for the in-network Allreduce.
 * Starts a TOR/SPINE topology of switch processes on loopback (or
 * uses one already running), runs N leader processes, each on its own
 * loopback address, checks every result element by element against a
 * reference computed locally in the switches' reduction order, checks that
 * all leaders got identical bytes, and reports throughput and latency. */
#ifndef OFFPATH_INCTEST_H
#define OFFPATH_INCTEST_H

#include <stdbool.h>
#include <stdint.h>

#include "offpath/common.h"

struct op_pcap;

struct op_inctest_config {
    int leaders, tors, spines;
    uint64_t count;
    unsigned type, op;
    uint64_t iters, warmup;
    double drop_rate, dup_rate;
    uint32_t delay_us;
    uint16_t window, max_data;
    uint16_t port;
    uint8_t net; /* addresses are 127.<net>.x.y, 127.<net+1>.0.t, 127.<net+2>.0.s */
    uint64_t deadline_ms;
    uint64_t rto_us;
    uint64_t seed;
    const char *connect;  /* topology file of running switches: start none */
    /* a namespace topology that is up (`offpath topo up`): its switches
     * are used (tors: its TORs), each leader runs in the namespace of the
     * host whose address it takes */
    const char *topo;
    /* each TOR's leaders take its hosts from this one on (0: the first):
     * a second job on other hosts of the same TORs and SPINEs */
    int first_host;
    const char *workdir;  /* where topology and stats files go */
    struct op_pcap *pcap; /* what the switches it starts receive and send; NULL: none */
    bool udp_batching;    /* switches' and leaders' ports (op_io_udp_batching) */
    bool json;
    bool quiet;
};

OP_API void op_inctest_config_default(struct op_inctest_config *cfg);
/* Returns 0 when every result matched and no leader failed, 1 otherwise,
 * 2 when the test could not be set up. */
OP_API int op_inctest_run(const struct op_inctest_config *cfg);

#endif
