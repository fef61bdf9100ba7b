/* offpath namespace topologies (`offpath topo`): hosts, TORs and SPINEs of a
 * topology file built as network namespaces joined by veth pairs, with a rate
 * and a queue on every link. Not the switches' own fabric description
 * (offpath/topo.h): this one says what to build, that one whom to address.
 *
 * Parsing and planning are pure (text in, commands out); op_nstopo_run does
 * the I/O: it runs ip(8) and tc(8), keeps a state file and enters
 * namespaces. Format: docs/topo.md. */
#ifndef OFFPATH_NSTOPO_H
#define OFFPATH_NSTOPO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"

#define OP_NSTOPO_MAX_NODES 64
#define OP_NSTOPO_MAX_LINKS 128
#define OP_NSTOPO_NAME_MAX 16 /* node names name interfaces: IFNAMSIZ */
#define OP_NSTOPO_TOPO_MAX 24
#define OP_NSTOPO_MAX_PATHS 8 /* equal-cost next hops a route keeps */
#define OP_NSTOPO_MTU_DEFAULT 1500
#define OP_NSTOPO_MTU_MAX 9000 /* jumbo: a switch port gathers a frame of several AF_XDP buffers */
/* The switches' --max-data: INC's largest chunk (OP_INC_MAX_DATA; nstopo
 * sits below wire, test_nstopo holds the two equal). Leaders ask for what
 * their links' MTU allows. */
#define OP_NSTOPO_SWITCH_MAX_DATA 8192

enum op_nstopo_role { OP_NSTOPO_HOST, OP_NSTOPO_TOR, OP_NSTOPO_SPINE };

struct op_nstopo_node {
    char name[OP_NSTOPO_NAME_MAX];
    enum op_nstopo_role role;
    uint32_t ip; /* host order */
    bool has_ip6;
    uint8_t ip6[16];
};

struct op_nstopo_link {
    uint16_t a, b;      /* indices into nodes */
    uint64_t rate_bps;  /* tbf rate, each direction */
    uint32_t queue;     /* tbf limit, bytes */
    /* injected by the switches on the path, at their ends: loss a chance
     * per frame each way, delay_us each way */
    double loss;
    uint32_t delay_us;
    uint32_t down_after_ms, down_for_ms; /* down both ways for a while; 0 for: never */
    /* nonzero: down at the down_at_inc-th INC packet the switch's end of
     * the link receives (down_after_ms 0), not at a time: a job's start
     * takes what it takes, and a job between its allreduces (MPI's own
     * TCP, with its backoff) may well sit out a window in time */
    uint32_t down_at_inc;
};

struct op_nstopo {
    char name[OP_NSTOPO_TOPO_MAX]; /* namespaces are opt-<name>-<node> */
    struct op_nstopo_node nodes[OP_NSTOPO_MAX_NODES];
    struct op_nstopo_link links[OP_NSTOPO_MAX_LINKS];
    int n_nodes, n_links;
    bool ip6; /* every node has an IPv6 address too (all or none do) */
    uint32_t mtu; /* every link's (`mtu N`); 0: the veths' default, 1500 */
};

struct op_nstopo_stats {
    uint32_t lines;     /* lines read, comments and blanks included */
    uint32_t malformed; /* lines refused */
};

/* Parse a topology file's text. Every line is checked; on failure err names
 * the first bad line and why, and stats counts the bad ones. */
OP_API op_status_t op_nstopo_parse(const char *text, struct op_nstopo *t,
                                   struct op_nstopo_stats *stats, char *err, size_t errlen);
OP_API op_status_t op_nstopo_load(const char *path, struct op_nstopo *t,
                                  struct op_nstopo_stats *stats, char *err, size_t errlen);
/* A node by name, IPv4 or IPv6 address; -1 if none. */
OP_API int op_nstopo_find(const struct op_nstopo *t, const char *name_or_ip);
/* A host-order IPv4 address, dotted. */
OP_API void op_nstopo_ip4(uint32_t ip, char out[16]);
/* "opt-<topo>-<node>" into out. */
OP_API void op_nstopo_netns(const struct op_nstopo *t, int node, char *out, size_t len);

/* The commands that build the topology, in order, each an argv for ip(8) or
 * tc(8) (argv[0] is "ip" or "tc"); emit returns false to stop. Returns false
 * when emit stopped it. */
typedef bool (*op_nstopo_emit_fn)(int argc, const char *const *argv, void *ctx);
OP_API bool op_nstopo_plan(const struct op_nstopo *t, op_nstopo_emit_fn emit, void *ctx);
/* The next hops of node u towards node v on shortest paths (none through a
 * host): count, indices into out. */
OP_API int op_nstopo_next_hops(const struct op_nstopo *t, int u, int v,
                               uint16_t out[OP_NSTOPO_MAX_PATHS]);
/* The links' MTU: `mtu N`, or the veths' default. */
OP_API uint32_t op_nstopo_mtu(const struct op_nstopo *t);
/* tbf's burst for a rate: a millisecond's bytes, at least 16 KiB. */
OP_API uint32_t op_nstopo_burst(uint64_t rate_bps);

/* The switches' fabric file (offpath/topo.h's format: a line a SPINE, a
 * line a TOR with its hosts' IPv4 range and its spines) for this topology,
 * into out. OP_ERR_INVAL (err says why) when a TOR's hosts are not a range
 * of their own or a host hangs under no TOR or several. */
OP_API op_status_t op_nstopo_switches(const struct op_nstopo *t, char *out, size_t cap,
                                      char *err, size_t errlen);

enum op_nstopo_action { OP_NSTOPO_UP, OP_NSTOPO_DOWN, OP_NSTOPO_HOSTS, OP_NSTOPO_EXEC,
                        OP_NSTOPO_SWITCHES };

struct op_nstopo_cfg {
    enum op_nstopo_action action;
    const char *file;
    const char *state;      /* NULL: /run/offpath/topo-<name>.state */
    bool json;
    bool verbose;           /* print each command as it runs */
    bool no_switches;       /* up: no switch on the path (the kernel forwards) */
    const char *host;       /* exec: name or address */
    char *const *argv;      /* exec: the command; up: the switches' extra options
                             * (NULL-terminated; NULL: none) */
};

/* The pieces of `up`, `down` and `exec` for a launcher that builds a
 * topology for one job (offpath mpirun --topo). state NULL: the default
 * /run/offpath/topo-<topo>.state. */
OP_API void op_nstopo_state_path(const struct op_nstopo *t, const char *state, char *out,
                                 size_t len);
/* 0 built; 1 failed (said on stderr; what was built is removed). Quiet but
 * for failures unless verbose (then every command). */
OP_API int op_nstopo_up(const struct op_nstopo *t, const char *state, bool verbose);
/* Removes every namespace of the topology and the state file; 0 done. */
OP_API int op_nstopo_down(const struct op_nstopo *t, const char *state);
/* Whether `offpath topo up` started switches on the path in the standing
 * topology (its state file says so): a job then uses them. */
OP_API bool op_nstopo_has_switches(const struct op_nstopo *t, const char *state);
/* Moves the calling process into node's network namespace, as ip netns exec
 * does: a mount namespace of its own with /sys remounted, so tools that read
 * /sys/class/net (UCX, Open MPI's interface lists) see the node's
 * interfaces. err says what failed. */
OP_API op_status_t op_nstopo_enter(const struct op_nstopo *t, int node, char *err,
                                   size_t errlen);

/* Run one action; returns the process exit status (exec: the command's;
 * 2: a bad file or parameter, reported on stderr). */
OP_API int op_nstopo_run(const struct op_nstopo_cfg *cfg);

#endif
