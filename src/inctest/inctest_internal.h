/* Internal to inc_test: layout of the emulated cluster and the per-leader
 * report shared (mmap) between the leader processes and the parent. */
#ifndef OFFPATH_INCTEST_INTERNAL_H
#define OFFPATH_INCTEST_INTERNAL_H

#include "offpath/inctest.h"
#include "offpath/switch.h"

#define IT_MAX_LEADERS 1024
#define IT_MAX_SAMPLES 4096

struct it_layout {
    uint16_t port;
    uint32_t job_id, comm_id;
    uint32_t leader_ip[IT_MAX_LEADERS];
    uint32_t tor_ip[OP_TOPO_MAX_SWITCHES];
};

struct it_leader {
    int32_t status;
    uint8_t reason;
    bool joined;
    uint64_t done_iters, failed_iter;
    uint64_t mismatches, first_bad_iter, first_bad_elem;
    uint64_t hash;
    uint64_t elapsed_ns;
    uint64_t retransmissions, timeouts, dup_results;
    uint64_t congested_results, window_cuts;
    double lat_us[IT_MAX_SAMPLES];
};

/* Leaders are spread over the TORs in contiguous blocks. */
static inline int it_first_leader(const struct op_inctest_config *cfg, int tor)
{
    return (int)((int64_t)tor * cfg->leaders / cfg->tors);
}
static inline int it_tor_of(const struct op_inctest_config *cfg, int rank)
{
    int t = 0;
    while (t + 1 < cfg->tors && it_first_leader(cfg, t + 1) <= rank)
        t++;
    return t;
}

void it_fill(const struct op_inctest_config *cfg, int rank, uint64_t variant, uint8_t *buf);
/* A result checked against the reference, element by element, and hashed
 * into *hash: the mismatches (*first: the first one's index). With it_fill
 * of the next input, a leader's work between its timed calls, which
 * `offpath model` charges to the CPU a call (bench/check_cost times it). */
uint64_t it_check(const struct op_inctest_config *cfg, const uint8_t *recv, const uint8_t *ref,
                  uint64_t *hash, uint64_t *first);
void it_leader_main(const struct op_inctest_config *cfg, const struct it_layout *lay, int rank,
                    struct it_leader *res);

/* report.c */
int it_report(const struct op_inctest_config *cfg, const struct it_leader *res,
              const uint64_t sw_totals[], double wall_s);

#endif
