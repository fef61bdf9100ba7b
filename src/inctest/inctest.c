/* inc_test: lays out the emulated cluster, starts the switches and leaders as
 * processes, waits for them with progress output, collects the reports. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "inctest_internal.h"
#include "offpath/fabric.h"
#include "offpath/nstopo.h"
#include "offpath/wire.h"

void op_inctest_config_default(struct op_inctest_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->leaders = 8;
    cfg->tors = 1;
    cfg->spines = -1; /* one SPINE when there are two TORs or more */
    cfg->count = 1024;
    cfg->type = OP_RED_INT32;
    cfg->op = OP_RED_SUM;
    cfg->iters = 100;
    cfg->warmup = 5;
    cfg->port = OP_ROCE_UDP_PORT;
    cfg->net = 10;
    cfg->deadline_ms = 10000;
    cfg->rto_us = 5000;
    cfg->seed = 1;
    cfg->udp_batching = true;
    cfg->workdir = "/tmp";
}

static uint32_t ip4(unsigned a, unsigned b, unsigned c, unsigned d)
{
    return a << 24 | b << 16 | c << 8 | d;
}

static uint32_t leader_ip(const struct op_inctest_config *cfg, int i)
{
    return ip4(127, cfg->net, (unsigned)(i + 1) / 256, (unsigned)(i + 1) % 256);
}

static int write_topology(const struct op_inctest_config *cfg, const char *path)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fprintf(f, "# written by offpath inc_test\n");
    for (int s = 0; s < cfg->spines; s++)
        fprintf(f, "spine s%d 127.%u.0.%d port %u\n", s, cfg->net + 2, s + 1, cfg->port);
    for (int t = 0; t < cfg->tors; t++) {
        char lo[16], hi[16];
        op_format_ipv4(leader_ip(cfg, it_first_leader(cfg, t)), lo);
        op_format_ipv4(leader_ip(cfg, it_first_leader(cfg, t + 1) - 1), hi);
        fprintf(f, "tor t%d 127.%u.0.%d port %u hosts %s-%s", t, cfg->net + 1, t + 1, cfg->port,
                lo, hi);
        for (int s = 0; s < cfg->spines; s++)
            fprintf(f, "%s%d", s ? ",s" : " spines s", s);
        fprintf(f, "\n");
    }
    return fclose(f);
}

/* Layout from a topology file: leaders fill each TOR's host range in order. */
static int layout_from_topo(const struct op_inctest_config *cfg, const struct op_topo *topo,
                            struct it_layout *lay)
{
    int t = 0;
    for (int i = 0; i < topo->n; i++) {
        const struct op_topo_switch *s = &topo->sw[i];
        if (s->spine)
            continue;
        if (t == cfg->tors)
            break;
        int lo = it_first_leader(cfg, t), hi = it_first_leader(cfg, t + 1);
        if ((uint64_t)(hi - lo) + (uint64_t)cfg->first_host > (uint64_t)s->host_hi - s->host_lo + 1)
            return -1;
        for (int l = lo; l < hi; l++)
            lay->leader_ip[l] = s->host_lo + (uint32_t)cfg->first_host + (uint32_t)(l - lo);
        lay->tor_ip[t++] = s->ip;
        lay->port = s->port;
    }
    return t == cfg->tors ? 0 : -1;
}

struct it_run {
    const struct op_inctest_config *cfg;
    char topo_path[512];
    struct op_nstopo *net; /* --topo */
    struct op_topo topo;
    struct op_fabric *fabric;
    pid_t leader_pid[IT_MAX_LEADERS];
    struct it_leader *res;
    size_t res_size;
};

static int start_switches(struct it_run *r)
{
    const struct op_inctest_config *cfg = r->cfg;
    struct op_fabric_opts o = {.workdir = cfg->workdir, .drop_rate = cfg->drop_rate,
                               .dup_rate = cfg->dup_rate, .delay_us = cfg->delay_us,
                               .window = cfg->window, .max_data = cfg->max_data,
                               .pcap = cfg->pcap, .udp_batching = cfg->udp_batching};
    char err[200];
    if (op_fabric_start(&o, &r->topo, &r->fabric, err, sizeof(err)) != OP_OK) {
        fprintf(stderr, "inc_test: %s\n", err);
        return -1;
    }
    return 0;
}

/* --topo: a leader takes the namespace of the host with its address, so
 * its packets leave by that host's link. */
static bool enter_host(const struct op_nstopo *net, uint32_t ip)
{
    char addr[16], ns[64], path[96];
    op_nstopo_ip4(ip, addr);
    int node = op_nstopo_find(net, addr);
    if (node < 0 || net->nodes[node].role != OP_NSTOPO_HOST) {
        fprintf(stderr, "inc_test: no host of the topology has address %s\n", addr);
        return false;
    }
    op_nstopo_netns(net, node, ns, sizeof(ns));
    snprintf(path, sizeof(path), "/run/netns/%s", ns);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    bool ok = fd >= 0 && setns(fd, CLONE_NEWNET) == 0;
    if (!ok)
        fprintf(stderr, "inc_test: cannot enter %s: %s\n", ns, strerror(errno));
    if (fd >= 0)
        close(fd);
    return ok;
}

static void start_leaders(struct it_run *r, const struct it_layout *lay)
{
    for (int l = 0; l < r->cfg->leaders; l++) {
        r->leader_pid[l] = fork();
        if (r->leader_pid[l] == 0) {
            if (r->net != NULL && !enter_host(r->net, lay->leader_ip[l]))
                _exit(1);
            it_leader_main(r->cfg, lay, l, &r->res[l]);
            _exit(0);
        }
    }
}

/* --topo: the switches' fabric file derived from the namespace topology
 * into topo_path; tors from it. */
static int use_net(struct it_run *r, struct op_inctest_config *cfg)
{
    char err[256], text[8192];
    r->net = calloc(1, sizeof *r->net);
    if (r->net == NULL || op_nstopo_load(cfg->topo, r->net, NULL, err, sizeof(err)) != OP_OK ||
        op_nstopo_switches(r->net, text, sizeof(text), err, sizeof(err)) != OP_OK) {
        fprintf(stderr, "inc_test: --topo %s: %s\n", cfg->topo, r->net ? err : "no memory");
        return -1;
    }
    cfg->tors = cfg->spines = 0;
    for (int i = 0; i < r->net->n_nodes; i++) {
        cfg->tors += r->net->nodes[i].role == OP_NSTOPO_TOR;
        cfg->spines += r->net->nodes[i].role == OP_NSTOPO_SPINE;
    }
    snprintf(r->topo_path, sizeof(r->topo_path), "%s/offpath-inctest-%d.topo", cfg->workdir,
             (int)getpid());
    FILE *f = fopen(r->topo_path, "w");
    if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "inc_test: cannot write %s\n", r->topo_path);
        return -1;
    }
    cfg->connect = r->topo_path;
    /* a leader's chunk in one frame of the links' MTU (less IPv4, UDP,
     * BTH, DETH, INC header and ICRC, to 8 bytes), as a fragment would not
     * cross the switches on the path */
    uint32_t fits = (op_nstopo_mtu(r->net) - 28 - OP_INC_PREFIX_LEN - OP_ICRC_LEN) & ~7u;
    if (cfg->max_data == 0)
        cfg->max_data = (uint16_t)(fits < OP_INC_MAX_DATA ? fits : OP_INC_MAX_DATA);
    return 0;
}

static uint64_t iters_done(const struct it_run *r)
{
    uint64_t sum = 0;
    for (int l = 0; l < r->cfg->leaders; l++)
        sum += r->res[l].done_iters;
    return sum;
}

/* Wait for the leaders; a leader making no progress for longer than its own
 * deadline allows is a hang, which is reported, not waited out. */
static void wait_leaders(struct it_run *r)
{
    const struct op_inctest_config *cfg = r->cfg;
    uint64_t stall_ns = (2 * cfg->deadline_ms + 10000) * OP_NS_PER_MS;
    uint64_t last = iters_done(r), last_change = op_now_ns(), last_print = last_change;
    uint64_t total = (uint64_t)cfg->leaders * (cfg->iters + cfg->warmup);
    int left = cfg->leaders;
    while (left > 0) {
        pid_t pid = waitpid(-1, NULL, WNOHANG);
        if (pid > 0) {
            for (int l = 0; l < cfg->leaders; l++)
                if (r->leader_pid[l] == pid) {
                    r->leader_pid[l] = 0;
                    left--;
                }
            continue;
        }
        usleep(20000);
        uint64_t now = op_now_ns(), done = iters_done(r);
        if (done != last) {
            last = done;
            last_change = now;
        }
        if (!cfg->quiet && !cfg->json && now - last_print > 2 * OP_NS_PER_S) {
            fprintf(stderr, "inc_test: %llu/%llu allreduces done\n", (unsigned long long)done,
                    (unsigned long long)total);
            last_print = now;
        }
        if (now - last_change > stall_ns) {
            fprintf(stderr, "inc_test: no progress for %llu s: stopping the leaders\n",
                    (unsigned long long)(stall_ns / OP_NS_PER_S));
            for (int l = 0; l < cfg->leaders; l++)
                if (r->leader_pid[l] > 0)
                    kill(r->leader_pid[l], SIGKILL);
            last_change = now;
        }
    }
}

static int setup(struct it_run *r, struct it_layout *lay)
{
    const struct op_inctest_config *cfg = r->cfg;
    char err[256];
    if (cfg->topo != NULL) {
        /* the fabric file is written: use_net */
    } else if (cfg->connect != NULL) {
        snprintf(r->topo_path, sizeof(r->topo_path), "%s", cfg->connect);
    } else {
        snprintf(r->topo_path, sizeof(r->topo_path), "%s/offpath-inctest-%d.topo", cfg->workdir,
                 (int)getpid());
        if (write_topology(cfg, r->topo_path) != 0) {
            fprintf(stderr, "inc_test: cannot write %s: %s\n", r->topo_path, strerror(errno));
            return -1;
        }
    }
    if (op_topo_load(r->topo_path, &r->topo, err, sizeof(err)) != OP_OK) {
        fprintf(stderr, "inc_test: topology %s\n", err);
        return -1;
    }
    if (layout_from_topo(cfg, &r->topo, lay) != 0) {
        fprintf(stderr, "inc_test: the topology has too few TORs or host addresses for %d "
                        "leaders on %d TORs\n", cfg->leaders, cfg->tors);
        return -1;
    }
    r->res_size = sizeof(struct it_leader) * (size_t)cfg->leaders;
    r->res = mmap(NULL, r->res_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return r->res == MAP_FAILED ? -1 : 0;
}

int op_inctest_run(const struct op_inctest_config *in)
{
    struct op_inctest_config cfg = *in;
    if (cfg.spines < 0)
        cfg.spines = cfg.tors >= 2 ? 1 : 0;
    struct it_run *r = calloc(1, sizeof(*r));
    struct it_layout *lay = calloc(1, sizeof(*lay));
    if (r == NULL || lay == NULL)
        return 2;
    r->cfg = &cfg;
    lay->job_id = (uint32_t)getpid();
    lay->comm_id = (uint32_t)(op_now_ns() ^ cfg.seed);
    int rc = 2;
    uint64_t totals[OP_SW_C_COUNT_] = {0};
    if ((cfg.topo == NULL || use_net(r, &cfg) == 0) && setup(r, lay) == 0 &&
        (cfg.connect != NULL || start_switches(r) == 0)) {
        uint64_t t0 = op_now_ns();
        start_leaders(r, lay);
        wait_leaders(r);
        double wall = (double)(op_now_ns() - t0) / 1e9;
        op_fabric_stop(r->fabric, totals);
        rc = it_report(&cfg, r->res, totals, wall);
    } else {
        op_fabric_stop(r->fabric, NULL);
    }
    if (cfg.connect == NULL || cfg.topo != NULL)
        unlink(r->topo_path);
    free(r->net);
    if (r->res != NULL && r->res != MAP_FAILED)
        munmap(r->res, r->res_size);
    free(lay);
    free(r);
    return rc;
}
