/* The perftest tools' usage text, perftest's own with offpath's additions
 * (GPU buffers, loss, capture, AF_XDP, several clients). */
#include <stdio.h>
#include <string.h>

#include "perf_cli.h"

void perf_help(const struct perf_cli *p)
{
    const struct op_perf_config *c = &p->cfg;
    bool bw = c->test == OP_PERF_BW;
    printf("Usage:\n"
           "  offpath %s            start a server and wait for connection\n"
           "  offpath %s <host>     connect to server at <host>\n\n"
           "%s over offpath's software RoCEv2 (RoCEv2 packets over UDP; the QP socket\n"
           "binds UDP port 4791 when it is free). perftest's flags, defaults and output.\n\n"
           "Options:\n",
           p->tool, p->tool, op_perf_title(c));
    printf("  -p, --port=<port>          listen on/connect to TCP port (default %d)\n"
           "  -d, --ib-dev=<dev>         an interface or IPv4 address for the QPs (default:\n"
           "                             the address the TCP connection uses)\n"
           "  -i, --ib-port=<port>       device port: 1 (the only one)\n"
           "  -s, --size=<size>          message size, K/M suffixes (default %llu)\n"
           "  -a, --all                  sizes 2 to 2^23\n"
           "  -n, --iters=<iters>        iterations, 5..2^32 (default %llu)\n"
           "  -D, --duration=<sec>       run for sec seconds (not with -a)\n"
           "  -f, --margin=<sec>         with -D: seconds left out at each end (default D/4)\n",
           OP_PERF_DEFAULT_PORT, (unsigned long long)c->size, (unsigned long long)c->iters);
    if (bw)
        printf("  -q, --qp=<num>             queue pairs, 1..%d (default 1)\n"
               "  -b, --bidirectional        traffic both ways\n"
               "  -Q, --cq-mod=<n>           signal one completion every n (default 100)\n"
               "  -N, --noPeak               do not compute the peak bandwidth\n"
               "      --run_infinitely       a row every -D seconds (default 5) until SIGINT\n"
               "      --report_gbits         Gb/s instead of MiB/s\n"
               "      --output=bandwidth|message_rate  print only that figure\n",
               OP_PERF_MAX_QPS);
    else
        printf("      --output=latency       print only the typical latency\n");
    if (c->verb == OP_PERF_ATOMIC)
        printf("  -A, --atomic_type=<type>   FETCH_AND_ADD (default) or CMP_AND_SWAP; 8 bytes each\n");
    printf("  -t, --tx-depth=<dep>       send queue depth, 1..15000 (default %u)\n"
           "  -r, --rx-depth=<dep>       receive queue depth (send tests), 1..15000 (default 512)\n"
           "      --use_srq              send tests: every QP's receives from one shared\n"
           "                             receive queue of -r receives\n"
           "  -m, --mtu=<mtu>            256, 512, 1024, 2048 or 4096 (default 4096)\n"
           "  -I, --inline_size=<size>   messages up to size bytes are posted INLINE (copied\n"
           "                             at post), 0..912 (default 0; READ: always 0)\n"
           "  -e, --events               sleep in poll(2) when idle instead of polling\n"
           "                             (send and read tests)\n"
           "  -o, --outs=<num>           READs in flight per QP, 1..255 (read tests;\n"
           "                             default 16)\n"
           "  -c, --connection=<type>    RC, UC or UD (default RC)\n"
           "  -R, --rdma_cm              connect the QPs with CM REQ/REP/RTU on UDP 4791\n"
           "                             (UD QPs: SIDR_REQ/SIDR_REP; the server's address\n"
           "                             must own that port; UDP sockets or --xdp)\n"
           "  -u, --qp-timeout=<n>       4.096 us * 2^n per try, 0..31 (default 14)\n"
           "      --retry_count=<n>      retries before RETRY_EXC_ERR, 0..7 (7 = forever,\n"
           "                             the default)\n"
           "  -x, --gid-index=<index>    shown in the banner; offpath has one RoCEv2 GID per\n"
           "                             address (default 3)\n"
           "      --tclass=<n>           IP traffic class (TOS) of the RoCEv2 packets\n"
           "  -F, --CPU-freq             accepted (offpath times with the monotonic clock)\n"
           "      --out_json             also write a JSON report (every size with -a)\n"
           "      --out_json_file=<file> its file (default perftest_out.json)\n"
           "      --loss=<p>             drop each RoCEv2 packet this side sends with\n"
           "                             probability p (go-back-N recovers it on RC)\n"
           "      --loss_seed=<n>        seed of those drops (default 1)\n"
           "      --xdp                  move the RoCEv2 frames through AF_XDP on -d's\n"
           "                             interface (kernel bypass; root; peers on-link)\n"
           "      --pcap=<file>          write every RoCEv2 packet this side receives and\n"
           "                             sends to file, one Ethernet/IPv4/UDP frame each\n"
           "                             (pcap, ns timestamps)\n"
           "      --log-level=<level>    engine log: error (default), warning, info, debug\n"
           "      --no-progress          no progress lines on stderr\n"
           "      --use_opencl=<p>,<d>   buffers in OpenCL platform p's device d's shared\n"
           "                             virtual memory (fine-grained buffer SVM)\n"
           "      --use_vulkan=<d>       buffers in Vulkan device d's host-coherent memory\n"
           "      --gpu_touch=once|infinite  with --use_opencl or --use_vulkan: the device\n"
           "                             reads every buffer before the test, or pass after\n"
           "                             pass during it\n"
           "      --gpu_memory=auto|device|host  Vulkan: the shared memory in the GPU's own\n"
           "                             memory through its BAR, or in host memory the GPU\n"
           "                             reaches over PCIe (default auto: memory the host\n"
           "                             caches; `offpath gpu list` shows the types)\n"
           "%s"
           "      --clients=<n>          (server) serve n clients at once, each with its own\n"
           "                             QPs; each one's report, then their sum (default 1)\n"
           "  -V, --version              version\n"
           "  -h, --help                 this text\n",
           c->tx_depth,
           c->gpu.threads == 0
               ? ""
               : "      --threads=<n>          work-items of the posting kernel, each posting one\n"
                 "                             write per iteration (default 512; above 256 a\n"
                 "                             multiple of 256); -n is iterations per work-item\n"
                 "      --api=opencl|vulkan    the API that runs the posting kernel (default:\n"
                 "                             the first whose device opens, OpenCL first)\n"
                 "      --device=<n>           that API's device n (OpenCL: of platform 0)\n"
                 "      --mode=thread|batch    every work-item rings the doorbell, or work-item 0\n"
                 "                             of each work-group after a barrier (default batch)\n"
                 "      --slots=<n>            (both sides) the writes cycle over n slots of -s\n"
                 "                             bytes (default one per work-item, up to 16 MiB);\n"
                 "                             1 is ib_write_bw's single buffer\n"
                 "      --inject_fault=rkey|range  (both sides) the device posts with a key\n"
                 "                             not the server's, or past its region: the run\n"
                 "                             checks that the writes complete with\n"
                 "                             REM_ACCESS_ERR and that nothing lands\n"
                 "      --cpu_writes=<n>       (client) the host also posts n writes of the same\n"
                 "                             slots on the same QP, between the device's\n");
}
