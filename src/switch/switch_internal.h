/* Internal to the switch module: engine state shared by its files. */
#ifndef OFFPATH_SWITCH_INTERNAL_H
#define OFFPATH_SWITCH_INTERNAL_H

#include "offpath/switch.h"
#include "offpath/wire.h"

#define SW_MAX_GROUP_IDS 65536u
#define SW_SPINE_ID_SPAN 2048u
#define SW_MAX_PENDING 256
#define SW_PENDING_TTL_NS (10 * OP_NS_PER_S)
/* A TOR waiting for its spine re-sends its partial at most this often, however
 * many of its children retransmit. */
#define SW_UP_RESEND_GAP_NS (1 * OP_NS_PER_MS)
/* Groups killed lately, remembered so a late contribution hears the kill. */
#define SW_TOMBS 64

/* A communicator as the query names it, before and after it has a group id. */
struct sw_key {
    uint32_t job_id, comm_id, c_id;
};

/* A host (under a TOR) or a TOR (under a SPINE) that contributes to a group. */
struct sw_member {
    uint32_t ip;
    uint16_t port;
    uint32_t rank; /* leader rank; for a TOR child, its index at the spine */
    uint16_t count; /* TOR child at a spine: members below it */
};

enum sw_slot_state { SLOT_EMPTY, SLOT_AGG, SLOT_UP, SLOT_DONE };

struct sw_slot {
    uint32_t seq;
    uint8_t state, op, dtype;
    uint16_t count; /* elements */
    uint16_t n_contrib;
    bool retx_seen; /* a retransmission was part of this round: its timing says nothing */
    bool congested; /* a queue on this round's way marked it: the result says so */
    uint64_t up_sent_ns;
    uint64_t *bitmap;
    uint8_t *acc;     /* host order accumulator */
    uint8_t *result;  /* finished (or partial) result, wire order */
    uint8_t *contrib; /* floats: each child's contribution, by child index */
    /* The previous round's result, kept until every child has moved on
     * (which is when this round completes), for children that retransmit. */
    bool prev_valid;
    uint32_t prev_seq;
    uint8_t prev_op, prev_dtype;
    uint16_t prev_count;
    bool prev_congested;
    uint8_t *prev_result;
};

struct sw_group {
    uint16_t id;
    uint32_t live_idx;
    uint64_t token;
    struct sw_key key;
    bool root;
    uint32_t parent_ip;
    uint16_t parent_port;
    uint16_t index_at_parent;
    uint16_t n_children;
    struct sw_member *children; /* by rank (TOR) or TOR index (SPINE) */
    uint16_t window, max_data, words;
    struct op_inc_ctrl notify; /* what members were told, for re-delivery */
    uint64_t last_ns;
    struct sw_slot *slots;
    size_t mem_size;
    uint8_t *mem;
};

/* A killed group: enough to tell a member that retransmits into it that it
 * is gone (the kill on its way down can be lost like any packet). */
struct sw_tomb {
    uint16_t id, n_children;
    uint64_t token; /* 0: unused */
    struct op_inc_ctrl notify;
};

struct sw_pending {
    bool used;
    struct sw_key key;
    uint64_t expires_ns;
    uint8_t refused; /* nonzero: answer queries with this refusal reason */
    uint32_t master_ip;
    uint16_t n, cap;
    struct sw_member *m;
};

struct op_sw {
    struct op_sw_config cfg;
    struct op_topo topo;
    const struct op_topo_switch *me;
    struct sw_group **by_id;
    struct sw_group **live; /* the n_groups live groups, densely: scans cost what exists */
    uint32_t n_groups;
    uint64_t slot_mem_used;
    uint32_t id_lo, id_hi, next_id;
    struct sw_pending pending[SW_MAX_PENDING];
    struct sw_tomb tombs[SW_TOMBS]; /* a ring, newest at next_tomb - 1 */
    uint32_t next_tomb;
    uint64_t next_sweep_ns;
    struct op_rng rng;
    uint64_t c[OP_SW_C_ENGINE_COUNT_]; /* the port's are the driver's */
    uint8_t scratch[OP_INC_MAX_PKT];
};

/* Who sent a packet, as seen from this switch. */
enum sw_side { SIDE_NONE, SIDE_BELOW, SIDE_ABOVE };

/* switch.c */
void sw_emit(struct op_sw *sw, struct op_txq *out, uint32_t ip, uint16_t port,
             const struct op_inc_hdr *h, const void *payload, size_t len);
enum sw_side sw_side_of(const struct op_sw *sw, uint32_t ip, uint16_t port);
bool sw_is_uplink(const struct op_sw *sw, uint32_t ip);
uint16_t sw_uplink_port(const struct op_sw *sw, uint32_t ip);

/* group.c */
bool sw_key_eq(const struct sw_key *a, const struct sw_key *b);
struct sw_group *sw_group_find_key(const struct op_sw *sw, const struct sw_key *key);
op_status_t sw_group_create(struct op_sw *sw, uint16_t id, uint64_t token, const struct sw_key *key,
                            const struct sw_member *children, uint16_t n, uint16_t window,
                            uint16_t max_data, struct sw_group **out, uint8_t *reason);
void sw_group_free(struct op_sw *sw, struct sw_group *g);
void sw_tomb_add(struct op_sw *sw, const struct sw_group *g);
const struct sw_tomb *sw_tomb_find(const struct op_sw *sw, uint16_t id, uint64_t token);
int sw_group_child(const struct sw_group *g, uint32_t ip, uint16_t port, uint32_t rank);
uint32_t sw_free_groups(const struct op_sw *sw);
int sw_alloc_id(struct op_sw *sw);
struct sw_pending *sw_pending_find(struct op_sw *sw, const struct sw_key *key);
struct sw_pending *sw_pending_get(struct op_sw *sw, const struct sw_key *key, uint64_t now);
void sw_pending_free(struct sw_pending *p);
/* by_port: members known by address and port (a TOR's hosts' leaders);
 * else by rank (a SPINE sees a leader's address through its TOR's port,
 * and a node's leaders share the address). */
int sw_pending_add(struct sw_pending *p, uint32_t ip, uint16_t port, uint32_t rank, bool by_port);
void sw_sweep(struct op_sw *sw, uint64_t now);

/* ctrl.c */
void sw_ctrl_input(struct op_sw *sw, const struct op_pkt *pkt, const struct op_inc_pkt *ip,
                   uint64_t now, struct op_txq *out);
void sw_kill_again(struct op_sw *sw, const struct sw_tomb *t, const struct op_pkt *pkt,
                   const struct op_inc_hdr *h, struct op_txq *out);

/* agg.c */
/* A queue marked it on its way here (FECN), or one below marked its round
 * (the CONGESTED flag). */
static inline bool sw_marked(const struct op_inc_pkt *ip)
{
    return ip->bth.fecn || (ip->hdr.flags & OP_INC_F_CONGESTED);
}
void sw_data_input(struct op_sw *sw, const struct op_pkt *pkt, const struct op_inc_pkt *ip,
                   uint64_t now, struct op_txq *out);

/* op_sw_print_report with a JSON object left open (a driver adds keys). */
void sw_print_report_open(const struct op_sw *sw, const uint64_t *port, FILE *out, bool json);

#endif
