/* udp_relay: the I/O limit of a software switch, for bench/switch_rate.
 *
 * One thread, one socket, no parsing: wait in poll, receive bursts with
 * recvmmsg, send each burst with sendmmsg (every packet back to its sender, or
 * all to a fixed sink) reusing the received buffers and addresses, count.
 * Socket options (4 MiB buffers, DF) and loop shape (poll, then up to 16
 * bursts of 64, each sent before the next is read) are those of
 * `offpath switch`, so what separates the two is the switch's own work.
 * Counters go to --stats-json as JSON on SIGUSR1 and at exit (SIGINT/SIGTERM). */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "offpath/common.h"

#define RELAY_BURST 64
#define RELAY_BURSTS_PER_WAKE 16
#define RELAY_BUF 9216
#define RELAY_SOCKBUF (4 << 20)
#define RELAY_SEND_RETRIES 3

struct relay_cfg {
    uint32_t ip, sink_ip;
    uint16_t port, sink_port;
    bool sink, busy;
    const char *stats_json;
    int ready_fd;
};

struct relay {
    const struct relay_cfg *cfg;
    int fd, sigfd;
    struct sockaddr_in sink;
    uint64_t rx_pkts, tx_pkts, tx_drops, bursts, wakeups;
    struct mmsghdr msgs[RELAY_BURST];
    struct iovec iov[RELAY_BURST];
    struct sockaddr_in addr[RELAY_BURST];
    uint8_t (*buf)[RELAY_BUF];
};

static void write_stats(const struct relay *r)
{
    if (r->cfg->stats_json == NULL)
        return;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", r->cfg->stats_json);
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return;
    fprintf(f,
            "{\"relay\": \"udp_relay\", \"rx_pkts\": %llu, \"tx_pkts\": %llu, \"tx_drops\": %llu, "
            "\"bursts\": %llu, \"wakeups\": %llu}\n",
            (unsigned long long)r->rx_pkts, (unsigned long long)r->tx_pkts,
            (unsigned long long)r->tx_drops, (unsigned long long)r->bursts,
            (unsigned long long)r->wakeups);
    if (fclose(f) == 0)
        rename(tmp, r->cfg->stats_json); /* a reader never sees half a file */
}

static int open_socket(const struct relay_cfg *c)
{
    int size = RELAY_SOCKBUF, off = 0, pmtu = IP_PMTUDISC_DO;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(c->port),
                             .sin_addr.s_addr = htonl(c->ip)};
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) != 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) != 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &off, sizeof off) != 0 ||
        setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) != 0 ||
        bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int open_signals(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR1);
    if (sigprocmask(SIG_BLOCK, &set, NULL) != 0)
        return -1;
    return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

/* Returns true when the relay should stop. */
static bool handle_signals(struct relay *r)
{
    struct signalfd_siginfo si;
    bool stop = false;
    while (read(r->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGUSR1)
            write_stats(r);
        else
            stop = true;
    }
    return stop;
}

static void prepare_rx(struct relay *r)
{
    for (int i = 0; i < RELAY_BURST; i++) {
        r->iov[i] = (struct iovec){.iov_base = r->buf[i], .iov_len = RELAY_BUF};
        r->msgs[i].msg_hdr = (struct msghdr){.msg_name = &r->addr[i],
                                             .msg_namelen = sizeof r->addr[i],
                                             .msg_iov = &r->iov[i], .msg_iovlen = 1};
    }
}

/* The received headers become the send headers: each iovec shrinks to the
 * datagram's length and the name stays the sender (or becomes the sink). */
static void send_back(struct relay *r, int n)
{
    for (int i = 0; i < n; i++) {
        r->iov[i].iov_len = r->msgs[i].msg_len;
        if (r->cfg->sink)
            r->addr[i] = r->sink;
        r->msgs[i].msg_hdr.msg_namelen = sizeof r->addr[i];
    }
    int j = 0, retries = 0;
    while (j < n) {
        int s = sendmmsg(r->fd, r->msgs + j, (unsigned)(n - j), MSG_DONTWAIT);
        if (s > 0) {
            j += s;
            r->tx_pkts += (uint64_t)s;
            retries = 0;
        } else if (s < 0 && errno == EINTR) {
            continue;
        } else if (s < 0 && errno != EAGAIN && errno != ENOBUFS) {
            j++; /* this destination failed: skip it */
            r->tx_drops++;
        } else if (retries++ == RELAY_SEND_RETRIES) {
            r->tx_drops += (uint64_t)(n - j);
            return;
        } else {
            struct pollfd p = {.fd = r->fd, .events = POLLOUT};
            (void)poll(&p, 1, 1);
        }
    }
}

static void receive(struct relay *r)
{
    for (int b = 0; b < RELAY_BURSTS_PER_WAKE; b++) {
        prepare_rx(r);
        int n = recvmmsg(r->fd, r->msgs, RELAY_BURST, MSG_DONTWAIT, NULL);
        if (n <= 0)
            return;
        r->rx_pkts += (uint64_t)n;
        r->bursts++;
        send_back(r, n);
        if (n < RELAY_BURST)
            return;
    }
}

static void loop(struct relay *r)
{
    struct pollfd pfd[2] = {{.fd = r->fd, .events = POLLIN}, {.fd = r->sigfd, .events = POLLIN}};
    for (;;) {
        if (poll(pfd, 2, r->cfg->busy ? 0 : 1000) < 0 && errno != EINTR)
            return;
        r->wakeups++;
        if ((pfd[1].revents & POLLIN) && handle_signals(r))
            return;
        receive(r);
    }
}

static void usage(FILE *out)
{
    fprintf(out, "usage: udp_relay --listen IP --port N [--sink IP:PORT] [--stats-json FILE]\n"
                 "                 [--busy-poll] [--ready-fd FD]\n"
                 "Bounces every UDP datagram back to its sender (or to the sink), in bursts:\n"
                 "recvmmsg -> sendmmsg. Counters as JSON on SIGUSR1 and at exit.\n");
}

static bool parse(int argc, char **argv, struct relay_cfg *c)
{
    static const struct option opts[] = {
        {"listen", 1, 0, 'l'}, {"port", 1, 0, 'p'}, {"sink", 1, 0, 's'},
        {"stats-json", 1, 0, 'j'}, {"busy-poll", 0, 0, 'b'}, {"ready-fd", 1, 0, 'r'},
        {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    uint64_t v;
    int o;
    bool have_ip = false;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (o == 'l' && op_parse_ipv4(optarg, &c->ip, NULL) == OP_OK)
            have_ip = true;
        else if (o == 'p' && op_parse_u64(optarg, 1, 65535, &v) == OP_OK)
            c->port = (uint16_t)v;
        else if (o == 's' && op_parse_ipv4(optarg, &c->sink_ip, &c->sink_port) == OP_OK)
            c->sink = true;
        else if (o == 'j')
            c->stats_json = optarg;
        else if (o == 'b')
            c->busy = true;
        else if (o == 'r' && op_parse_u64(optarg, 0, 65535, &v) == OP_OK)
            c->ready_fd = (int)v;
        else if (o == 'h') {
            usage(stdout);
            exit(0);
        } else {
            fprintf(stderr, "udp_relay: bad or missing value for an option\n");
            return false;
        }
    }
    if (!have_ip || c->port == 0 || optind < argc || (c->sink && c->sink_port == 0)) {
        usage(stderr);
        return false;
    }
    return true;
}

int main(int argc, char **argv)
{
    struct relay_cfg cfg = {.ready_fd = -1};
    if (!parse(argc, argv, &cfg))
        return 2;
    struct relay r = {.cfg = &cfg, .fd = -1, .sigfd = -1};
    r.sink = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(cfg.sink_port),
                                  .sin_addr.s_addr = htonl(cfg.sink_ip)};
    r.buf = calloc(RELAY_BURST, RELAY_BUF);
    r.fd = open_socket(&cfg);
    r.sigfd = open_signals();
    if (r.buf == NULL || r.fd < 0 || r.sigfd < 0) {
        fprintf(stderr, "udp_relay: cannot open: %s\n", strerror(errno));
        return 1;
    }
    if (cfg.ready_fd >= 0) {
        (void)!write(cfg.ready_fd, "ready\n", 6);
        close(cfg.ready_fd);
    }
    loop(&r);
    write_stats(&r);
    printf("udp_relay: rx_pkts %llu tx_pkts %llu tx_drops %llu\n", (unsigned long long)r.rx_pkts,
           (unsigned long long)r.tx_pkts, (unsigned long long)r.tx_drops);
    close(r.fd);
    close(r.sigfd);
    free(r.buf);
    return 0;
}
