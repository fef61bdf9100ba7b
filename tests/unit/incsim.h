/* In-memory fabric for INC engine tests: switch and leader engines exchange
 * packets through a priority queue in virtual time, with loss, duplication and
 * reordering injected. No sockets, no sleeping. */
#ifndef OFFPATH_TEST_INCSIM_H
#define OFFPATH_TEST_INCSIM_H

#include "offpath/inc.h"
#include "offpath/switch.h"

#define SIM_MAX_NODES 128

struct sim_event {
    uint64_t at;
    uint64_t order;
    struct op_pkt pkt;
};

struct sim {
    struct op_topo topo;
    struct op_sw *sw[OP_TOPO_MAX_SWITCHES];
    int n_sw;
    struct op_inc_eng *leader[SIM_MAX_NODES];
    uint32_t leader_ip[SIM_MAX_NODES];
    int n_leaders;
    struct sim_event *heap;
    size_t heap_n, heap_cap;
    uint64_t now, order;
    double drop, dup;
    uint64_t jitter_ns; /* reordering: each packet delayed by 0..jitter */
    uint32_t dead_ip;   /* packets to or from this address vanish (a dead switch) */
    /* returns true to lose the packet (NULL: none); sees every packet sent */
    bool (*lose)(struct sim *s, const struct op_pkt *p);
    void *lose_ctx;
    struct op_rng rng;
    struct op_pktbuf txbuf;
    struct op_txq q;
    uint64_t delivered, dropped, steps;
};

/* tors: how many TORs; spines: 0 (one TOR as root) or more; leaders spread in
 * contiguous blocks over the TORs. */
struct sim_spec {
    int tors, spines, leaders;
    uint16_t window, max_data;
    uint32_t max_groups, lease_ms;
    double drop, dup;
    uint64_t jitter_ns;
    uint64_t seed;
};

void sim_init(struct sim *s, const struct sim_spec *spec);
void sim_free(struct sim *s);
uint32_t sim_leader_ip(int i);
/* Run until every listed leader finished its operation; returns false when the
 * fabric went quiet with one still running (a hang) or the step cap hit. */
bool sim_run(struct sim *s);
/* All leaders join one communicator (comm_id); returns the common status. */
op_status_t sim_join(struct sim *s, uint32_t comm_id);
/* Put a raw packet on the fabric as if sent from src to dst. */
/* Hand a packet to the engine at its destination address. */
void sim_deliver(struct sim *s, const struct op_pkt *p);
void sim_inject(struct sim *s, const struct op_flow *flow, const uint8_t *data, size_t len);
uint64_t sim_sw_counter(const struct sim *s, int sw, unsigned c);
uint64_t sim_sw_total(const struct sim *s, unsigned c);
uint64_t sim_leader_total(const struct sim *s, unsigned c);
int sim_tor_of_leader(const struct sim *s, int leader);

#endif
