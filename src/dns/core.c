/* The DNS server's shared core, every model's: worker records and their
 * published counters, the zone set behind hazard pointers (swapped on
 * reload; a thread announces the set it is reading, and the old set is
 * handed back only when no thread announces it), who may transfer zones,
 * stopping and the final counters. The models: the socket model
 * (socket.c), xdp (xdp.c), rtc and pipeline (dpdk.c); TCP is tcp.c's. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dns_internal.h"

void dns_publish(struct dns_worker *w)
{
    for (int i = 0; i < OP_DNS_C_COUNT_; i++)
        atomic_store_explicit(&w->pub[i], w->c[i], memory_order_relaxed);
}

const struct op_dns_zones *dns_zones_enter(struct dns_worker *w)
{
    const struct op_dns_zones *z;
    do {
        z = atomic_load(&w->s->zones);
        atomic_store(&w->hazard, z);
    } while (z != atomic_load(&w->s->zones));
    return z;
}

void dns_zones_leave(struct dns_worker *w) { atomic_store(&w->hazard, NULL); }

/* ---- who may transfer ---- */

static bool prefix_eq(const uint8_t *a, const uint8_t *b, unsigned bits)
{
    unsigned bytes = bits / 8, rest = bits % 8;
    if (memcmp(a, b, bytes) != 0)
        return false;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return rest == 0 || (a[bytes] & mask) == (b[bytes] & mask);
}

bool op_dns_acl_allows(const struct op_dns_acl *acl, unsigned n, const void *sa)
{
    static const uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    const struct sockaddr *s = sa;
    const uint8_t *v4 = NULL, *v6 = NULL;
    if (s->sa_family == AF_INET) {
        v4 = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
    } else if (s->sa_family == AF_INET6) {
        v6 = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
        if (memcmp(v6, v4_mapped, 12) == 0)
            v4 = v6 + 12;
    }
    for (unsigned i = 0; i < n; i++) {
        const uint8_t *peer = acl[i].ipv6 ? v6 : v4;
        if (peer != NULL && prefix_eq(peer, acl[i].addr, acl[i].prefix))
            return true;
    }
    return false;
}

op_status_t op_dns_acl_parse(const char *text, struct op_dns_acl *out)
{
    char addr[INET6_ADDRSTRLEN];
    const char *slash = strchr(text, '/');
    size_t n = slash != NULL ? (size_t)(slash - text) : strlen(text);
    if (n == 0 || n >= sizeof(addr))
        return OP_ERR_INVAL;
    memcpy(addr, text, n);
    addr[n] = 0;
    memset(out, 0, sizeof(*out));
    if (inet_pton(AF_INET, addr, out->addr) == 1)
        out->prefix = 32;
    else if (inet_pton(AF_INET6, addr, out->addr) == 1)
        out->ipv6 = true, out->prefix = 128;
    else
        return OP_ERR_INVAL;
    uint64_t prefix;
    if (slash != NULL) {
        if (op_parse_u64(slash + 1, 0, out->prefix, &prefix) != OP_OK)
            return OP_ERR_INVAL;
        out->prefix = (uint8_t)prefix;
    }
    return OP_OK;
}

void op_dns_server_config_default(struct op_dns_server_config *cfg)
{
    *cfg = (struct op_dns_server_config){
        .addr = 0x7f000001u, .port = 53, .udp_threads = 1, .burst = 64, .tcp_max = 64,
        .tcp_idle_ms = 10000, .udp_max = OP_DNS_UDP_DEFAULT, .rrl_slip = 2, .log = NULL};
}

static void dns_server_free_workers(struct op_dns_server *s)
{
    for (unsigned i = 0; i < s->nw; i++)
        op_dns_rrl_free(s->w[i].rrl);
    free(s->w);
    free(s);
}

struct op_dns_server *dns_server_alloc(const struct op_dns_server_config *cfg,
                                       struct op_dns_zones *zones, unsigned nw)
{
    struct op_dns_server *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->cfg = *cfg;
    s->nw = nw;
    size_t size = (nw * sizeof(struct dns_worker) + 63) / 64 * 64;
    s->w = aligned_alloc(64, size);
    if (s->w == NULL) {
        free(s);
        return NULL;
    }
    memset(s->w, 0, size);
    for (unsigned i = 0; i < nw; i++) {
        s->w[i].s = s;
        s->w[i].fd = -1;
        s->w[i].index = i;
        s->w[i].rrl = cfg->rrl_rate > 0 ? op_dns_rrl_new(cfg->rrl_rate, cfg->rrl_slip) : NULL;
        if (cfg->rrl_rate > 0 && s->w[i].rrl == NULL) {
            dns_server_free_workers(s);
            return NULL;
        }
    }
    atomic_store(&s->zones, zones);
    return s;
}

bool dns_server_stopping(const struct op_dns_server *s)
{
    return atomic_load_explicit(&s->stop, memory_order_relaxed);
}

/* Join the thread (the caller has set stop), close the socket. */
void dns_thread_stop(struct dns_worker *w)
{
    if (w->started)
        pthread_join(w->th, NULL);
    w->started = false;
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
}

struct op_dns_zones *op_dns_server_reload(struct op_dns_server *s, struct op_dns_zones *zones)
{
    struct op_dns_zones *old = atomic_exchange(&s->zones, zones);
    for (unsigned i = 0; i < s->nw; i++) {
        /* A thread holds a set for one burst or one TCP message: short. */
        while (atomic_load(&s->w[i].hazard) == old) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
    return old;
}

void op_dns_server_count(struct op_dns_server *s, enum op_dns_counter c)
{
    if ((unsigned)c < OP_DNS_C_COUNT_)
        atomic_fetch_add_explicit(&s->ctl[c], 1, memory_order_relaxed);
}

void op_dns_server_counters(const struct op_dns_server *s, uint64_t out[OP_DNS_C_COUNT_])
{
    for (int k = 0; k < OP_DNS_C_COUNT_; k++) {
        out[k] = atomic_load_explicit(&s->ctl[k], memory_order_relaxed);
        for (unsigned i = 0; i < s->nw; i++)
            out[k] += atomic_load_explicit(&s->w[i].pub[k], memory_order_relaxed);
    }
    if (s->port_stats != NULL)
        s->port_stats(s, out);
}

struct op_dns_zones *op_dns_server_stop(struct op_dns_server *s, uint64_t final[OP_DNS_C_COUNT_])
{
    atomic_store(&s->stop, true);
    if (final != NULL) /* the device's counters go with the device */
        memset(final, 0, OP_DNS_C_COUNT_ * sizeof(*final));
    if (s->halt != NULL)
        s->halt(s, final);
    struct op_dns_zones *z = atomic_load(&s->zones);
    if (final != NULL) {
        uint64_t port[OP_DNS_C_COUNT_];
        memcpy(port, final, sizeof(port));
        s->port_stats = NULL;
        op_dns_server_counters(s, final);
        for (int k = 0; k < OP_DNS_C_COUNT_; k++)
            final[k] += port[k];
    }
    dns_server_free_workers(s);
    return z;
}
