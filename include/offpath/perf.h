/* offpath perf: perftest-compatible bandwidth and latency tests
 * (ib_{write,read,send}_{bw,lat}) on the software RoCEv2 transport.
 *
 * A test is two processes: a server (no peer address) and a client. They
 * meet over TCP (perftest's port 18515 by default), exchange their QPs'
 * numbers, PSNs, keys, addresses and UDP ports there, and then move data
 * only as RoCEv2 over UDP. The report (banner, headers, rows, JSON) keeps
 * perftest's formats; the functions that format it are pure and public so
 * tests can check them on fixed numbers (docs/rdma.md). */
#ifndef OFFPATH_PERF_H
#define OFFPATH_PERF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "offpath/common.h"
#include "offpath/gpu.h"
#include "offpath/rdma.h"

struct op_pcap;

enum op_perf_verb { OP_PERF_SEND, OP_PERF_WRITE, OP_PERF_READ, OP_PERF_ATOMIC };
enum op_perf_test { OP_PERF_BW, OP_PERF_LAT };
enum op_perf_output { OP_PERF_OUT_FULL, OP_PERF_OUT_BW, OP_PERF_OUT_MSGRATE, OP_PERF_OUT_LAT };

#define OP_PERF_DEFAULT_PORT 18515
#define OP_PERF_ALL_MAX_LOG2 23 /* -a: 2^1 .. 2^23 bytes */
#define OP_PERF_MAX_QPS 16384
#define OP_PERF_NO_PEAK_ITERS 20000 /* above this, peak is not computed (perftest) */
#define OP_PERF_INFINITE_ROW_S 5    /* --run_infinitely without -D: perftest's interval */
#define OP_PERF_ATOMIC_SIZE 8       /* ib_atomic_*: the only message size */
#define OP_PERF_ATOMIC_SLOTS 4096   /* each atomic's result has its own slot: -t at most this */

struct op_perf_config {
    enum op_perf_verb verb;
    enum op_perf_test test;
    const char *server;   /* client: the server's name or address; NULL: be the server */
    uint16_t tcp_port;    /* -p */
    const char *device;   /* -d: an interface name or IPv4 address for the QPs' socket */
    uint64_t size;        /* -s */
    bool all;             /* -a */
    uint64_t iters;       /* -n */
    uint32_t duration_s;  /* -D; 0: iteration mode */
    uint32_t margin_s;    /* -f; with -D (default duration / 4) */
    bool run_infinitely;  /* --run_infinitely: a row every -D seconds (default 5) until SIGINT */
    uint32_t qps;         /* -q */
    uint32_t tx_depth;    /* -t */
    uint32_t rx_depth;    /* -r (with --use_srq: the SRQ's receives, for every QP) */
    bool use_srq;         /* --use_srq: send tests' receives from one shared receive queue */
    uint32_t clients;     /* --clients: a server runs this many clients at once (0, 1: one) */
    bool rdma_cm;         /* -R: QPs connected by CM REQ/REP/RTU on UDP 4791, not TCP lines */
    uint32_t cq_mod;      /* -Q */
    uint32_t inline_size; /* -I: messages up to this size are posted INLINE (0: none) */
    bool use_event;       /* -e: sleep in poll(2) when idle instead of spinning */
    uint32_t out_reads;   /* -o: READs (atomics) in flight per QP at most (max_rd_atomic); 0: 16 */
    bool cmp_swap;        /* -A CMP_AND_SWAP (ib_atomic_*); else FETCH_AND_ADD */
    uint32_t mtu;         /* -m; 0: the largest the link carries (4096 on loopback) */
    enum op_rdma_qp_type type; /* -c */
    uint8_t qp_timeout;   /* -u */
    uint8_t retry_cnt;    /* --retry_count; 7 = forever */
    int gid_index;        /* -x; -1: default (3) */
    int tclass;           /* --tclass; -1: none */
    bool bidirectional;   /* -b */
    bool report_gbits;
    bool no_peak;         /* -N */
    bool json;            /* --out_json */
    const char *json_file;
    enum op_perf_output output;
    double loss;          /* --loss: drop each sent packet with this probability */
    uint64_t loss_seed;
    bool xdp;             /* --xdp: AF_XDP on -d's interface instead of a UDP socket */
    struct op_pcap *pcap; /* --pcap: capture what this side receives and sends; NULL: none */
    bool udp_batching;    /* op_io_udp_batching on its UDP socket (default on) */
    bool progress;        /* progress lines on stderr during long runs */
    FILE *out;            /* the report; NULL: stdout */
    int log_level;        /* engine log (errors with causes) */
    struct {                 /* gpunetio_write_bw: device code posts the client's writes */
        uint32_t threads;    /* --threads work-items; 0: the CPU posts (the ib_* tools) */
        enum op_gpu_mode mode; /* --mode thread|batch */
        unsigned platform, device; /* --use_opencl=<p>,<d>, --use_vulkan=<d>, --device */
        enum op_gpu_api api;  /* --api, or the API of --use_opencl / --use_vulkan */
        bool api_given;       /* gpunetio: else the first API whose device opens */
        bool use_gpu;         /* ib_* tools: QP buffers in the device's shared memory */
        enum op_perf_touch { OP_PERF_TOUCH_NONE, OP_PERF_TOUCH_ONCE, OP_PERF_TOUCH_INFINITE } touch;
        /* --inject_fault: the device posts with a key not the peer's, or to
         * an address past the peer's region; the run then expects the
         * remote access error on the client and nothing written at the server */
        enum op_perf_fault { OP_PERF_FAULT_NONE, OP_PERF_FAULT_RKEY, OP_PERF_FAULT_RANGE } fault;
        uint64_t cpu_writes; /* --cpu_writes: the host posts these too, on the same QP */
        /* --slots: the source and target slots of -s bytes the writes cycle
         * over; 0: one per work-item (up to OP_PERF_GPU_TARGET_MAX bytes) */
        uint32_t slots;
        enum op_gpu_mem mem; /* --gpu_memory: where the shared memory lives */
    } gpu;
};

#define OP_PERF_GPU_DEFAULT_THREADS 512
#define OP_PERF_GPU_DEFAULT_ITERS 10  /* per work-item: 5120 writes with 512 work-items */
#define OP_PERF_GPU_TARGET_MAX (16u << 20) /* bytes of distinct slots a run writes at most */

/* perftest's defaults for a verb and test kind (flags then override). */
OP_API void op_perf_config_defaults(struct op_perf_config *cfg, enum op_perf_verb verb,
                                    enum op_perf_test test);
/* Checks the combination (e.g. -a with -D, UD with RDMA, -q on a latency
 * test); on error writes why, naming the flag, into why and returns
 * OP_ERR_INVAL. Also applies perftest's adjustments (tx depth <= iters...). */
OP_API op_status_t op_perf_config_check(struct op_perf_config *cfg, char *why, size_t why_len);
/* Runs the test; returns the process exit status (0 success). */
OP_API int op_perf_run(const struct op_perf_config *cfg);

/* ---- results and their formatting (pure) */
struct op_perf_bw_result {
    uint64_t size, iters;
    double bw_peak, bw_avg; /* MiB/s, or Gb/s with report_gbits */
    double msg_rate;        /* Mpps */
};

struct op_perf_lat_result {
    uint64_t size, iters;
    double t_min, t_max, t_typical, t_avg, t_stdev, p99, p999; /* usec */
};

/* BW from per-message post and completion times (ns), perftest's way:
 * average over [first post, last completion], peak as the best average
 * interval over any run of completions (unless no_peak). */
OP_API void op_perf_bw_compute(const uint64_t *posted, const uint64_t *completed, uint64_t n,
                               uint64_t size, uint32_t cq_mod, bool no_peak, bool gbits,
                               struct op_perf_bw_result *out);
/* size x count bytes over ns: average BW (MiB/s or Gb/s) and Mpps; no peak. */
OP_API void op_perf_bw_rate(uint64_t size, uint64_t count, uint64_t ns, bool gbits,
                            struct op_perf_bw_result *out);
/* Latency from ping-pong post times: n timestamps give n-1 round trips;
 * the two largest are dropped; rtt_factor 2 for send/write, 1 for read.
 * Stdev in floating point; percentiles sorted[ceil(p*n)]. */
OP_API op_status_t op_perf_lat_compute(const uint64_t *stamps, uint64_t n, unsigned rtt_factor,
                                       uint64_t size, struct op_perf_lat_result *out);

struct op_perf_banner {
    const char *device;
    uint32_t mtu;
    uint32_t out_reads;
    int gid_index;
    bool is_server;
};
OP_API void op_perf_print_banner(FILE *f, const struct op_perf_config *cfg,
                                 const struct op_perf_banner *b);
OP_API const char *op_perf_title(const struct op_perf_config *cfg); /* "RDMA_Write BW Test" */

struct op_perf_addr {
    uint32_t qpn, psn, rkey;
    uint64_t vaddr;
    uint32_t ip; /* the GID is ::ffff:ip */
};
OP_API void op_perf_print_addr(FILE *f, const struct op_perf_config *cfg, const char *side,
                               const struct op_perf_addr *a);
OP_API void op_perf_print_header(FILE *f, const struct op_perf_config *cfg);
OP_API void op_perf_print_bw(FILE *f, const struct op_perf_config *cfg,
                             const struct op_perf_bw_result *r);
OP_API void op_perf_print_lat(FILE *f, const struct op_perf_config *cfg,
                              const struct op_perf_lat_result *r);
/* The JSON report (--out_json): perftest's test_info and results (an object,
 * or with -a a list with every size), plus offpath's counters. */
struct op_perf_json {
    const struct op_perf_banner *banner;
    const struct op_perf_bw_result *bw;   /* BW tests: n of them */
    const struct op_perf_lat_result *lat; /* latency tests */
    size_t n;
    const char *const *counter_names; /* n_counters names and values (op_counters_print) */
    const uint64_t *counter_vals;
    int n_counters;
    const char *data_check; /* "ok", "failed: ...", or NULL when not checked */
    /* when set, writes the "test_info" member instead of the IB tools' one
     * (raw_ethernet_*: their own banner's fields) */
    void (*test_info)(FILE *f, const void *ctx);
    const void *test_info_ctx;
};
OP_API void op_perf_write_json(FILE *f, const struct op_perf_config *cfg,
                               const struct op_perf_json *j);
/* ---- raw_ethernet_bw / raw_ethernet_lat (raweth.c): UDP/IPv4 frames of
 * -s bytes straight through AF_XDP on -d's interface, no RDMA and no side
 * channel (as perftest's raw Ethernet tools: the MACs, IPs and ports are
 * given). BW: the client sends, the server receives and checks every
 * payload. Latency: the server echoes each frame, the client times it. */
#define OP_PERF_RAWETH_MIN 64      /* frame bytes: headers, a magic and a sequence number */
#define OP_PERF_RAWETH_HDR 42      /* Ethernet + IPv4 + UDP */
#define OP_PERF_RAWETH_MAX_QPS 64  /* -q: an AF_XDP endpoint's queues at most */
#define OP_PERF_RAWETH_QP_SHIFT 40 /* a payload's sequence number: QP above, frame below */
struct op_perf_raweth_config {
    enum op_perf_test test;
    bool server;            /* --server; else --client */
    const char *ifname;     /* -d */
    uint8_t src_mac[6], dst_mac[6];
    bool have_src_mac, have_dst_mac; /* -B (checked against the interface), -E */
    uint32_t src_ip, dst_ip;     /* -j, -J */
    uint16_t src_port, dst_port; /* -k, -K */
    uint32_t size;          /* -s: frame bytes without the FCS */
    uint64_t iters;         /* -n: frames of each QP */
    uint32_t qps;           /* -q (BW): QP i sends on, and is received at, queue i; 0: 1 */
    uint32_t duration_s;    /* -D (BW) */
    bool run_infinitely;    /* BW: a row every -D s until SIGINT */
    bool json;              /* --out_json */
    const char *json_file;  /* --out_json_file (default perftest_out.json) */
    enum op_perf_output output;
    bool report_gbits;
    FILE *out;              /* NULL: stdout */
    int log_level;
};
OP_API int op_perf_raweth_run(const struct op_perf_raweth_config *cfg);
/* Frame seq's payload (pure): a magic, seq, then bytes that depend on both. */
OP_API void op_perf_raweth_fill(uint8_t *payload, size_t len, uint64_t seq);
/* Is this a payload op_perf_raweth_fill wrote? Its seq if so. */
OP_API bool op_perf_raweth_check(const uint8_t *payload, size_t len, uint64_t *seq);

#define OP_PERF_LINE                                                                               \
    "---------------------------------------------------------------------------------------\n"

#endif
