/* `offpath dns` once started: the zones loaded and reloaded, the signal
 * loop (SIGHUP reloads, SIGINT/SIGTERM stop), the counters logged every
 * second and kept in --stats-json, and the exit report. src/cli fills the
 * configuration and starts the model. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "offpath/dns.h"

static void print_json(FILE *out, const uint64_t *c, const struct op_dns_zones *z)
{
    const char *names[OP_DNS_C_COUNT_];
    for (unsigned i = 0; i < OP_DNS_C_COUNT_; i++)
        names[i] = op_dns_counter_name(i);
    fprintf(out, "{\"tool\": \"dns\", \"zones\": %zu, \"records\": %zu, \"balanced\": %s, ",
            op_dns_zones_count(z), op_dns_zones_records(z),
            op_dns_counters_balanced(c) ? "true" : "false");
    op_counters_print(out, names, c, OP_DNS_C_COUNT_, OP_COUNTERS_JSON);
    fprintf(out, "}\n");
}

/* Written beside and renamed over, so a reader never sees half a file. */
static void write_stats(const char *path, const uint64_t *c, const struct op_dns_zones *z)
{
    char tmp[4200];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
        return;
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return;
    print_json(f, c, z);
    if (fclose(f) == 0)
        rename(tmp, path);
}

static void log_stats(const struct op_log *log, const uint64_t *c, const uint64_t *prev)
{
    OP_INFO(log, "qps %llu received %llu sent %llu drops %llu truncated %llu formerr %llu "
            "nxdomain %llu refused %llu",
            (unsigned long long)(c[OP_DNS_C_received] - prev[OP_DNS_C_received]),
            (unsigned long long)c[OP_DNS_C_received],
            (unsigned long long)(c[OP_DNS_C_udp_tx] + c[OP_DNS_C_tcp_tx]),
            (unsigned long long)(c[OP_DNS_C_drop_short] + c[OP_DNS_C_drop_response] +
                                 c[OP_DNS_C_drop_tx] + c[OP_DNS_C_drop_tcp_closed]),
            (unsigned long long)c[OP_DNS_C_truncated],
            (unsigned long long)c[OP_DNS_C_rcode_formerr],
            (unsigned long long)c[OP_DNS_C_rcode_nxdomain],
            (unsigned long long)c[OP_DNS_C_rcode_refused]);
}

struct op_dns_zones *op_dns_tool_load(const struct op_dns_tool_config *t)
{
    const struct op_log *log = t->log;
    struct op_dns_zones *z = NULL;
    struct op_dns_load_err err;
    if (op_dns_zones_load(t->zones, t->nzones, &z, &err) != OP_OK) {
        OP_ERROR(log, "zone load failed: %s", err.msg);
        return NULL;
    }
    return z;
}

static void reload(struct op_dns_server *s, const struct op_dns_tool_config *t,
                   struct op_dns_zones **current)
{
    const struct op_log *log = t->log;
    struct op_dns_zones *z = op_dns_tool_load(t);
    if (z == NULL) {
        op_dns_server_count(s, OP_DNS_C_reload_failed);
        return;
    }
    struct op_dns_zones *old = op_dns_server_reload(s, z);
    *current = z;
    op_dns_server_count(s, OP_DNS_C_reloads);
    OP_INFO(log, "reloaded %zu zones, %zu records", op_dns_zones_count(z),
            op_dns_zones_records(z));
    op_dns_server_notify(s, old, z);
    op_dns_zones_free(old);
}

static void stop_and_reload_signals(sigset_t *sigs)
{
    sigemptyset(sigs);
    sigaddset(sigs, SIGINT);
    sigaddset(sigs, SIGTERM);
    sigaddset(sigs, SIGHUP);
}

void op_dns_tool_block_signals(void)
{
    sigset_t sigs;
    stop_and_reload_signals(&sigs);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* the server's threads inherit it */
}

/* Signals arrive here, in sigtimedwait: no handler, no global state. */
int op_dns_tool_serve(struct op_dns_server *s, const struct op_dns_tool_config *t,
                      struct op_dns_zones *z)
{
    const struct op_log *log = t->log;
    sigset_t sigs;
    stop_and_reload_signals(&sigs);
    /* A primary that starts (often: restarts with edited zones) tells its
     * secondaries at once, as BIND does; they would otherwise wait for
     * their refresh timer, or their retry after failing to reach us. */
    op_dns_server_notify(s, NULL, z);
    uint64_t c[OP_DNS_C_COUNT_] = {0}, prev[OP_DNS_C_COUNT_] = {0};
    for (;;) {
        struct timespec ts = {1, 0};
        int sig = sigtimedwait(&sigs, NULL, &ts);
        if (sig == SIGHUP)
            reload(s, t, &z);
        if (sig == SIGINT || sig == SIGTERM)
            break;
        op_dns_server_counters(s, c);
        if (sig < 0 && errno == EAGAIN) {
            log_stats(log, c, prev);
            memcpy(prev, c, sizeof(c));
        }
        if (t->stats_json != NULL)
            write_stats(t->stats_json, c, z);
    }
    z = op_dns_server_stop(s, c);
    if (t->stats_json != NULL)
        write_stats(t->stats_json, c, z);
    if (t->json) {
        print_json(stdout, c, z);
    } else {
        const char *names[OP_DNS_C_COUNT_];
        for (unsigned i = 0; i < OP_DNS_C_COUNT_; i++)
            names[i] = op_dns_counter_name(i);
        printf("offpath dns: stopped, counters %s:\n",
               op_dns_counters_balanced(c) ? "balanced" : "NOT balanced");
        op_counters_print(stdout, names, c, OP_DNS_C_COUNT_, OP_COUNTERS_TABLE);
    }
    op_dns_zones_free(z);
    return op_dns_counters_balanced(c) ? 0 : 1;
}

