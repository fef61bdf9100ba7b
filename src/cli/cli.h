/* The offpath command line: one entry point per tool, shared flag helpers. */
#ifndef OFFPATH_CLI_H
#define OFFPATH_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"

int cli_switch(int argc, char **argv);
int cli_inc_test(int argc, char **argv);
int cli_mpirun(int argc, char **argv);
int cli_osu_allreduce(int argc, char **argv);
int cli_osu_iallreduce(int argc, char **argv);
int cli_dpa_all_to_all(int argc, char **argv);
int cli_allreduce(int argc, char **argv);
/* dpa_all_to_all -r daemon: the agent daemon, run by offpath itself */
bool cli_a2a_is_daemon(int argc, char **argv);
int cli_a2a_daemon(int argc, char **argv);
int cli_ib_write_bw(int argc, char **argv);
int cli_gpunetio_write_bw(int argc, char **argv);
int cli_ib_read_bw(int argc, char **argv);
int cli_ib_send_bw(int argc, char **argv);
int cli_ib_write_lat(int argc, char **argv);
int cli_ib_read_lat(int argc, char **argv);
int cli_ib_atomic_bw(int argc, char **argv);
int cli_ib_atomic_lat(int argc, char **argv);
int cli_raw_ethernet_bw(int argc, char **argv);
int cli_raw_ethernet_lat(int argc, char **argv);
int cli_ib_send_lat(int argc, char **argv);
int cli_secure_channel(int argc, char **argv);
int cli_keygen(int argc, char **argv);
int cli_dns(int argc, char **argv);
int cli_gpu(int argc, char **argv);
int cli_model(int argc, char **argv);
int cli_topo(int argc, char **argv);
int cli_topo_rank(int argc, char **argv);

/* Flag value parsers: on a bad value they print an error naming the flag and
 * return false; the tool then exits with status 2. */
bool cli_u64(const char *tool, const char *flag, const char *val, uint64_t min, uint64_t max,
             uint64_t *out);
bool cli_rate(const char *tool, const char *flag, const char *val, double *out);
/* Numeric flags as a table: the option, its name for errors, its range
 * (pow2: a power of 2 too) and the unsigned integer field of 1, 2, 4 or 8
 * bytes it fills (an int of a non-negative range too), as an offset into
 * the tool's flag struct. */
struct cli_num {
    int opt;
    const char *flag;
    uint64_t min, max;
    bool pow2;
    size_t off, size;
};
#define CLI_NUM(opt, flag, type, field, min, max, pow2)                                           \
    {opt, flag, min, max, pow2, offsetof(type, field), sizeof(((type *)0)->field)}
/* The value of opt's table entry into base; *known false when opt has none
 * (nothing done); false on a bad value (reported). */
bool cli_num_set(const char *tool, const struct cli_num *t, size_t n, int opt, const char *val,
                 void *base, bool *known);
void cli_bad(const char *tool, const char *fmt, ...) OP_PRINTF(2, 3);

struct op_chan_keypair;
struct op_agent_daemon_net;
/* Flags the agent's tools share: -t, -c, -a, --key, --peer, --ip,
 * --timeout, -l. */
struct cli_agent_flags {
    const char *addresses, *key, *peer;
    uint64_t listen_port, clients, timeout_s;
    uint32_t ip;
    int log_level;
};
#define CLI_AGENT_DEFAULTS {.ip = 0x7f000001u, .timeout_s = 30, .log_level = OP_LOG_INFO}
enum { CLI_AGENT_OPT_KEY = 256, CLI_AGENT_OPT_PEER, CLI_AGENT_OPT_IP, CLI_AGENT_OPT_TIMEOUT,
       CLI_AGENT_OPT_NEXT /* a tool's own long options from here */ };
/* One of them applied (*known; false: not one of them); false on a bad
 * value, reported. */
bool cli_agent_flag(const char *tool, int opt, const char *v, struct cli_agent_flags *f,
                    bool *known);
/* A daemon's place, peers and keys from them: 0, or 2 (reported). */
int cli_agent_daemon_net(const char *tool, const struct cli_agent_flags *f, uint16_t default_port,
                         struct op_agent_daemon_net *net);
/* The agent's tools (allreduce, dpa_all_to_all): --key (this side's secret)
 * and --peer (the other side's public key), both needed; false, reported,
 * when either is missing or unreadable. */
bool cli_agent_keys(const char *tool, const char *key, const char *peer,
                    struct op_chan_keypair *kp, uint8_t *peer_pub);
/* "IP[:PORT],..." into ip/port (default_port where none), at most max;
 * false, reported naming flag, on a bad item; true with *n == 0 if empty. */
bool cli_agent_addresses(const char *tool, const char *flag, const char *text,
                         uint16_t default_port, uint32_t max, uint32_t *ip, uint16_t *port,
                         uint32_t *n);

struct option;
/* The getopt_long loop every tool runs: help_opt prints help (returns 0),
 * set applies one flag (false: a bad value, already reported: returns 2).
 * Returns -1 when all flags were applied; optind is then the first operand. */
int cli_flags(int argc, char **argv, const char *shortopts, const struct option *opts,
              int help_opt, void (*help)(void), bool (*set)(int opt, const char *val, void *cfg),
              void *cfg);
struct op_pcap;
/* --pcap FILE: create it (NULL path: no capture, *out NULL); false, reported
 * with the flag and the system's reason, when it cannot be written. */
bool cli_pcap_open(const char *tool, const char *path, struct op_pcap **out);
/* Close it (the tools count its packets in their reports); false, reported,
 * when a write failed on the way. NULL w: nothing to do. */
bool cli_pcap_close(const char *tool, const char *path, struct op_pcap *w);
/* OFFPATH_UDP_BATCHING=0 turns UDP batching off in every tool (switches,
 * leaders, perftest): a deployment knob, like DPDK's EAL arguments, so no
 * tool has a flag of its own for it; liboffpath_mpi reads it in src/mpi/env.c. */
bool cli_udp_batching(void);
/* This binary's path, to start switches (or NULL after reporting why). */
const char *cli_self_exe(const char *tool);
/* Files beside the binary (src/cli/paths.c): an MPI program such as
 * osu_allreduce_openmpi, a data file such as "data/seed_tables.csv" (under
 * share/offpath when installed, the source tree otherwise), the DNS XDP
 * object (NULL: none in this build or not found). False: not found. */
bool cli_mpiapp_path(const char *self, const char *program, char *out, size_t len);
bool cli_data_path(const char *self, const char *name, char *out, size_t len);
const char *cli_dns_xdp_prog(const char *self, char *out, size_t len);
/* `offpath --paths`: each of them and where it was found (or not). */
int cli_paths(void);

#endif
