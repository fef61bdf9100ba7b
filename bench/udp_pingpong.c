/* udp_pingpong: the UDP floor under `offpath ib_*_lat`, for bench/rdma.
 *
 * Two processes on loopback (this one and a forked echo child), each with an
 * unconnected UDP socket on 127.0.0.1 that sends with sendto and DF set, as
 * offpath's RoCEv2 driver does. The parent sends -s bytes, waits for the
 * echo, -n times after a warm-up, and reports one-way latency = RTT / 2 as
 * perftest does: min, max, typical (median), average, stdev, 99% and 99.9%
 * (the two largest samples dropped, as perftest drops them).
 *
 * Waiting: --busy (default) polls with MSG_DONTWAIT and yields the CPU every
 * 64 empty polls (a spin that never yields starves the kernel's network work
 * on a 2-core machine); --block sleeps in recv. Every loop is bounded: -n at
 * most 10^7, --time-limit seconds in all (default 30), one second per reply
 * before the ping is sent again, at most 10 such timeouts. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PP_MAX_SIZE 65000
#define PP_MAX_ITERS 10000000ULL
#define PP_WARMUP 1000ULL
#define PP_REPLY_TIMEOUT_NS 1000000000ULL
#define PP_MAX_TIMEOUTS 10
#define PP_YIELD_EVERY 64

struct pp_side {
    char netns[512]; /* empty: the current namespace */
    struct in_addr ip;
};

struct pp_cfg {
    struct pp_side side[2]; /* the pinger's, the echo's */
    size_t size;
    uint64_t iters;
    bool busy, json;
    double time_limit_s;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Sockets stay in the network namespace they were made in: with --netns
 * each side's socket is made inside its namespace (setns), bound to its
 * address; without, both on 127.0.0.1. */
static int enter_netns(const char *name)
{
    char path[300];
    snprintf(path, sizeof path, "/run/netns/%s", name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int r = setns(fd, CLONE_NEWNET);
    close(fd);
    return r;
}

static int open_socket(struct sockaddr_in *bound, const struct pp_side *side)
{
    if (side->netns[0] != '\0' && enter_netns(side->netns) != 0)
        return -1;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int pmtu = IP_PMTUDISC_DO;
    socklen_t len = sizeof *bound;
    if (fd < 0)
        return -1;
    (void)setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
    memset(bound, 0, sizeof *bound);
    bound->sin_family = AF_INET;
    bound->sin_addr = side->ip;
    if (bind(fd, (struct sockaddr *)bound, sizeof *bound) != 0 ||
        getsockname(fd, (struct sockaddr *)bound, &len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One datagram into buf, waiting until deadline (busy or blocking). Returns
 * its length, or -1 at the deadline or on an error. */
static ssize_t recv_until(int fd, void *buf, size_t cap, bool busy, uint64_t deadline)
{
    unsigned empty = 0;
    for (;;) {
        ssize_t n = recv(fd, buf, cap, busy ? MSG_DONTWAIT : 0);
        if (n >= 0)
            return n;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return -1;
        if (now_ns() >= deadline)
            return -1;
        if (busy && ++empty % PP_YIELD_EVERY == 0)
            sched_yield();
    }
}

/* The echo child: sends every datagram back to the parent until a
 * zero-length one, the time limit or the parent's death. */
static int echo(int fd, const struct sockaddr_in *peer, const struct pp_cfg *c, uint64_t end)
{
    static uint8_t buf[PP_MAX_SIZE];
    (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
    for (;;) {
        ssize_t n = recv_until(fd, buf, sizeof buf, c->busy, end);
        if (n <= 0)
            return n == 0 ? 0 : 1;
        if (sendto(fd, buf, (size_t)n, 0, (const struct sockaddr *)peer, sizeof *peer) != n)
            return 1;
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static double pct(const uint64_t *s, uint64_t n, double p)
{
    uint64_t i = (uint64_t)ceil(p * (double)n);
    return (double)s[i >= n ? n - 1 : i] / 1000.0;
}

/* rtt: n round trips in ns; prints one-way figures in usec. */
static void report(const struct pp_cfg *c, uint64_t *rtt, uint64_t n, unsigned timeouts)
{
    for (uint64_t i = 0; i < n; i++)
        rtt[i] /= 2; /* one way, as perftest reports it */
    qsort(rtt, n, sizeof *rtt, cmp_u64);
    uint64_t m = n > 2 ? n - 2 : n; /* perftest drops the two largest */
    double sum = 0, sq = 0;
    for (uint64_t i = 0; i < m; i++)
        sum += (double)rtt[i] / 1000.0;
    double avg = sum / (double)m;
    for (uint64_t i = 0; i < m; i++) {
        double d = (double)rtt[i] / 1000.0 - avg;
        sq += d * d;
    }
    double sd = sqrt(sq / (double)m), tmin = (double)rtt[0] / 1000.0;
    double tmax = (double)rtt[m - 1] / 1000.0, typ = (double)rtt[m / 2] / 1000.0;
    if (c->json) {
        printf("{\"tool\": \"udp_pingpong\", \"mode\": \"%s\", \"MsgSize\": %zu, "
               "\"n_iterations\": %llu, \"t_min\": %.3f, \"t_max\": %.3f, \"t_typical\": %.3f, "
               "\"t_avg\": %.3f, \"t_stdev\": %.3f, \"percentile_99\": %.3f, "
               "\"percentile_99.9\": %.3f, \"timeouts\": %u}\n",
               c->busy ? "busy" : "block", c->size, (unsigned long long)n, tmin, tmax, typ, avg,
               sd, pct(rtt, m, 0.99), pct(rtt, m, 0.999), timeouts);
        return;
    }
    printf("# udp_pingpong: UDP %s, %s wait, one-way = RTT/2\n",
           c->side[0].netns[0] ? "between namespaces" : "on loopback",
           c->busy ? "busy-poll" : "blocking");
    printf(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]"
           "    t_stdev[usec]   99%% percentile[usec]   99.9%% percentile[usec]\n");
    printf(" %-7zu %-10llu     %-7.2f        %-7.2f      %-7.2f          %-7.2f        %-7.2f"
           "          %-7.2f                %-7.2f\n",
           c->size, (unsigned long long)n, tmin, tmax, typ, avg, sd, pct(rtt, m, 0.99),
           pct(rtt, m, 0.999));
    if (timeouts)
        printf("# %u replies timed out and were asked again\n", timeouts);
}

/* The parent's loop: warm-up, then c->iters timed round trips. Returns the
 * number measured (fewer when the time limit came first), or -1. */
static int64_t ping(int fd, const struct sockaddr_in *peer, const struct pp_cfg *c, uint64_t end,
                    uint64_t *rtt, unsigned *timeouts)
{
    static uint8_t out[PP_MAX_SIZE], in[PP_MAX_SIZE];
    memset(out, 0xa5, c->size);
    uint64_t total = PP_WARMUP + c->iters, done = 0;
    for (uint64_t i = 0; i < total; i++) {
        uint64_t t0 = now_ns();
        if (t0 >= end)
            break;
        ssize_t n = -1;
        for (unsigned tries = 0; n != (ssize_t)c->size; tries++) {
            if (tries > PP_MAX_TIMEOUTS || *timeouts > PP_MAX_TIMEOUTS)
                return -1;
            if (tries > 0)
                (*timeouts)++;
            if (sendto(fd, out, c->size, 0, (const struct sockaddr *)peer, sizeof *peer) !=
                (ssize_t)c->size)
                return -1;
            uint64_t dl = now_ns() + PP_REPLY_TIMEOUT_NS;
            n = recv_until(fd, in, sizeof in, c->busy, dl < end ? dl : end);
            if (n < 0 && now_ns() >= end)
                return (int64_t)done;
        }
        uint64_t t1 = now_ns();
        if (i >= PP_WARMUP)
            rtt[done++] = t1 - t0;
    }
    return (int64_t)done;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: udp_pingpong [-s BYTES] [-n ITERS] [--busy|--block] [--json] "
               "[--time-limit SECONDS] [--netns NS_A:IP_A,NS_B:IP_B]\n"
               "UDP ping-pong between two processes on 127.0.0.1 (or, with --netns, between\n"
               "sockets made in two network namespaces on those addresses); prints one-way\n"
               "latency (RTT/2) as perftest's ib_*_lat do. Defaults: -s 2 -n 10000 --busy, 30 s.\n");
}

/* "NS_A:IP_A,NS_B:IP_B" */
static int parse_netns(const char *arg, struct pp_cfg *c)
{
    char a[2][256], ip[2][32];
    if (sscanf(arg, "%255[^:]:%31[^,],%255[^:]:%31s", a[0], ip[0], a[1], ip[1]) != 4)
        return -1;
    for (int i = 0; i < 2; i++) {
        if (inet_pton(AF_INET, ip[i], &c->side[i].ip) != 1 || strchr(a[i], '/') != NULL)
            return -1;
        snprintf(c->side[i].netns, sizeof c->side[i].netns, "%s", a[i]);
    }
    return 0;
}

static int parse(int argc, char **argv, struct pp_cfg *c)
{
    static const struct option opts[] = {
        {"size", required_argument, NULL, 's'}, {"iters", required_argument, NULL, 'n'},
        {"busy", no_argument, NULL, 'b'},       {"block", no_argument, NULL, 'B'},
        {"json", no_argument, NULL, 'j'},       {"time-limit", required_argument, NULL, 't'},
        {"netns", required_argument, NULL, 'N'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    *c = (struct pp_cfg){.size = 2, .iters = 10000, .busy = true, .time_limit_s = 30};
    c->side[0].ip.s_addr = c->side[1].ip.s_addr = htonl(INADDR_LOOPBACK);
    int o;
    char *e;
    while ((o = getopt_long(argc, argv, "s:n:h", opts, NULL)) != -1) {
        switch (o) {
        case 's':
            c->size = strtoul(optarg, &e, 10);
            if (*e || c->size < 1 || c->size > PP_MAX_SIZE)
                return fprintf(stderr, "udp_pingpong: -s must be 1..%d\n", PP_MAX_SIZE), 2;
            break;
        case 'n':
            c->iters = strtoull(optarg, &e, 10);
            if (*e || c->iters < 3 || c->iters > PP_MAX_ITERS)
                return fprintf(stderr, "udp_pingpong: -n must be 3..%llu\n", PP_MAX_ITERS), 2;
            break;
        case 'b': c->busy = true; break;
        case 'B': c->busy = false; break;
        case 'j': c->json = true; break;
        case 't':
            c->time_limit_s = strtod(optarg, &e);
            if (*e || !(c->time_limit_s > 0 && c->time_limit_s <= 3600))
                return fprintf(stderr, "udp_pingpong: --time-limit must be in (0, 3600]\n"), 2;
            break;
        case 'N':
            if (parse_netns(optarg, c) != 0)
                return fprintf(stderr, "udp_pingpong: --netns expects NS_A:IP_A,NS_B:IP_B\n"), 2;
            break;
        case 'h': usage(stdout); return -1;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc)
        return usage(stderr), 2;
    return 0;
}

int main(int argc, char **argv)
{
    struct pp_cfg c;
    int rc = parse(argc, argv, &c);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    struct sockaddr_in a, b;
    int fa = open_socket(&a, &c.side[0]), fb = open_socket(&b, &c.side[1]);
    uint64_t *rtt = calloc(c.iters, sizeof *rtt);
    if (fa < 0 || fb < 0 || rtt == NULL) {
        perror("udp_pingpong: setup");
        return 1;
    }
    if (!c.busy) { /* a blocking recv wakes up to check the deadline */
        struct timeval tv = {.tv_sec = 0, .tv_usec = 100000};
        (void)setsockopt(fa, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        (void)setsockopt(fb, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    uint64_t end = now_ns() + (uint64_t)(c.time_limit_s * 1e9);
    fflush(stdout);
    pid_t child = fork();
    if (child < 0) {
        perror("udp_pingpong: fork");
        return 1;
    }
    if (child == 0) {
        close(fa);
        _exit(echo(fb, &a, &c, end + 2000000000ULL));
    }
    close(fb);
    unsigned timeouts = 0;
    int64_t n = ping(fa, &b, &c, end, rtt, &timeouts);
    (void)sendto(fa, "", 0, 0, (const struct sockaddr *)&b, sizeof b); /* stop the echo */
    int st = 0;
    uint64_t wait_end = now_ns() + 3000000000ULL;
    while (waitpid(child, &st, WNOHANG) == 0) {
        if (now_ns() >= wait_end) {
            kill(child, SIGKILL);
            (void)waitpid(child, &st, 0);
            break;
        }
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    if (n < 3) {
        fprintf(stderr, "udp_pingpong: %s after %lld round trips\n",
                n < 0 ? "no reply (or a send failed)" : "time limit", (long long)n);
        return 1;
    }
    report(&c, rtt, (uint64_t)n, timeouts);
    free(rtt);
    close(fa);
    return 0;
}
