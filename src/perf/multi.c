/* A server of several clients (--clients N): it accepts N side-channel
 * connections on its one TCP port, then runs each client's test at the
 * same time, each in a thread of its own with its own device, QPs and
 * UDP socket (an engine belongs to one thread; nothing is shared but the
 * read-only config). Each client's report is kept in memory and printed
 * whole, in the order they connected, then what they add up to; so is its
 * --out_json report, and the file holds them all. With -R the clients
 * come through one CM listener on UDP 4791 (cm_clients.c) instead of the
 * TCP port, and each client's test starts as soon as its REQ is in (its
 * control QP must be driven, or the client's keep-alive gives up on it):
 *   {"clients": [<each client's report, as one client's file>],
 *    "together": {"clients": n, "BW_average": .., "MsgRate": ..}} (BW tests) */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf_int.h"

struct client_run {
    struct perf_run r;
    struct perf_cm_req req; /* -R: the REQ that made this client */
    pthread_t thread;
    bool started;
    atomic_bool finished;
    int rc;
    char *text, *json;
    size_t len, json_len;
};

static void *client_main(void *arg)
{
    struct client_run *c = arg;
    c->rc = perf_run_side(&c->r);
    atomic_store(&c->finished, true);
    return NULL;
}

static int accept_all(const struct op_perf_config *cfg, struct client_run *runs, uint32_t n)
{
    char why[256];
    int lfd = -1;
    op_status_t st = perf_oob_listen(cfg->tcp_port, (int)n, &lfd, why, sizeof why);
    for (uint32_t i = 0; st == OP_OK && i < n; i++)
        st = perf_oob_accept_on(lfd, &runs[i].r.oob, why, sizeof why);
    if (lfd >= 0)
        close(lfd);
    if (st != OP_OK)
        fprintf(stderr, " %s\n", why);
    return st == OP_OK ? 0 : 1;
}

static int start_client(const struct op_perf_config *cfg, struct client_run *c)
{
    c->r.cfg = cfg;
    c->r.is_server = true;
    c->r.out = open_memstream(&c->text, &c->len);
    if (cfg->json && (c->r.json_out = open_memstream(&c->json, &c->json_len)) == NULL)
        return 1;
    c->started = c->r.out != NULL && pthread_create(&c->thread, NULL, client_main, c) == 0;
    return c->started ? 0 : 1;
}

static bool all_finished(struct client_run *runs, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (!atomic_load(&runs[i].finished))
            return false;
    return true;
}

/* -R: each new client's REQ starts its run; the listener keeps refusing
 * (another port, one client too many) until every run has ended. */
static int dispatch_all(const struct op_perf_config *cfg, struct client_run *runs, uint32_t n)
{
    struct perf_cm_clients d;
    char why[256];
    if (perf_cm_clients_open(cfg, &d, why, sizeof why) != OP_OK) {
        perf_cm_clients_close(&d);
        fprintf(stderr, " %s\n", why);
        return 1;
    }
    uint32_t started = 0, i;
    int rc = 0, lfd = perf_cm_tcp_refuser(cfg->tcp_port);
    struct perf_cm_req req;
    while (rc == 0 && (started < n || !all_finished(runs, n))) {
        if (perf_cm_clients_poll(&d, 20, &req, &i) == 1) {
            runs[i].req = req;
            runs[i].r.req = &runs[i].req;
            rc = start_client(cfg, &runs[i]);
            started++;
        }
        if (lfd >= 0)
            perf_cm_refuse_tcp(lfd);
    }
    if (lfd >= 0)
        close(lfd);
    perf_cm_clients_close(&d);
    return rc;
}

struct together {
    double bw, rate;
    uint32_t counted;
};

static struct together add_up(const struct client_run *runs, uint32_t n)
{
    struct together t = {0};
    for (uint32_t i = 0; i < n; i++)
        if (runs[i].rc == 0 && runs[i].r.have_result) {
            t.bw += runs[i].r.last_bw.bw_avg;
            t.rate += runs[i].r.last_bw.msg_rate;
            t.counted++;
        }
    return t;
}

static void print_reports(const struct op_perf_config *cfg, FILE *out, struct client_run *runs,
                          uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (cfg->output == OP_PERF_OUT_FULL)
            fprintf(out, " offpath: client %u of %u\n", i + 1, n);
        if (runs[i].text != NULL)
            fwrite(runs[i].text, 1, runs[i].len, out);
    }
    struct together t = add_up(runs, n);
    if (cfg->test == OP_PERF_BW && cfg->output == OP_PERF_OUT_FULL)
        fprintf(out, " offpath: %u clients together: BW average %.2f %s, MsgRate %.6f Mpps\n",
                t.counted, t.bw, cfg->report_gbits ? "Gb/sec" : "MiB/sec", t.rate);
}

/* A client whose run failed before its report has none: null stands in. */
static int write_json(const struct op_perf_config *cfg, const struct client_run *runs, uint32_t n)
{
    FILE *f = fopen(cfg->json_file, "w");
    if (f == NULL) {
        fprintf(stderr, " cannot write --out_json_file %s: %s\n", cfg->json_file, strerror(errno));
        return 1;
    }
    fprintf(f, "{\"clients\": [\n");
    for (uint32_t i = 0; i < n; i++) {
        if (runs[i].json_len > 0)
            fwrite(runs[i].json, 1, runs[i].json_len - 1, f); /* without its last newline */
        else
            fprintf(f, "null");
        fprintf(f, i + 1 < n ? ",\n" : "\n");
    }
    fprintf(f, "]");
    struct together t = add_up(runs, n);
    if (cfg->test == OP_PERF_BW)
        fprintf(f, ",\n\"together\": {\"clients\": %u, \"BW_average\": %.2f, \"MsgRate\": %.6f}",
                t.counted, t.bw, t.rate);
    fprintf(f, "}\n");
    return fclose(f) == 0 ? 0 : 1;
}

int perf_run_clients(const struct op_perf_config *cfg)
{
    FILE *out = cfg->out ? cfg->out : stdout;
    uint32_t n = cfg->clients;
    struct client_run *runs = calloc(n, sizeof(*runs));
    if (runs == NULL)
        return 1;
    for (uint32_t i = 0; i < n; i++)
        runs[i].r.oob.fd = -1;
    if (cfg->output == OP_PERF_OUT_FULL)
        perf_print_waiting(out);
    int rc = cfg->rdma_cm ? dispatch_all(cfg, runs, n) : accept_all(cfg, runs, n);
    for (uint32_t i = 0; rc == 0 && !cfg->rdma_cm && i < n; i++)
        rc = start_client(cfg, &runs[i]);
    for (uint32_t i = 0; i < n; i++) {
        if (runs[i].started)
            pthread_join(runs[i].thread, NULL);
        if (runs[i].r.out != NULL)
            fclose(runs[i].r.out);
        if (runs[i].r.json_out != NULL)
            fclose(runs[i].r.json_out);
        if (runs[i].r.oob.fd >= 0) /* accepted but never run */
            perf_oob_close(&runs[i].r.oob);
        rc = runs[i].rc > rc ? runs[i].rc : rc;
    }
    print_reports(cfg, out, runs, n);
    if (cfg->json && write_json(cfg, runs, n) != 0)
        rc = rc ? rc : 1;
    fflush(out);
    for (uint32_t i = 0; i < n; i++) {
        free(runs[i].text);
        free(runs[i].json);
    }
    free(runs);
    return rc;
}
