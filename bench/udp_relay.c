/* udp_relay: the I/O limit of a software switch, for bench/switch_rate.
 *
 * One thread, one socket, no parsing: wait in poll, receive bursts with
 * recvmmsg, send each burst with sendmmsg (every packet back to its sender, or
 * all to a fixed sink) reusing the received buffers and addresses, count.
 * Socket options (4 MiB buffers, DF) and loop shape (poll, then up to 16
 * bursts, each sent before the next is read) are those of `offpath switch`,
 * so what separates the two is the switch's own work.
 *
 * Two ways, matching the switch's two ways of using its socket:
 *   per datagram (default): bursts of 64 datagrams, one packet each;
 *   --batching: the socket takes UDP GRO datagrams whole (up to 16 a read)
 *     and every received datagram's packets (segments of its gso_size, the
 *     last maybe shorter) go back as UDP GSO datagrams, runs to one
 *     destination joined by the rules of src/io/udp.c (one segment size, only
 *     the last segment shorter, at most 64 segments and 65000 bytes). Nothing
 *     is copied: a datagram's bytes are sent by iovec from where they were
 *     received, which no switch that looks at its packets can do, so this is
 *     the strongest plain relay on this kernel.
 * Either way rx_pkts and tx_pkts count RoCEv2 packets (GSO segments), as the
 * switch's counters do, and rx_datagrams/tx_datagrams the system-level units.
 * Counters go to --stats-json as JSON on SIGUSR1 and at exit (SIGINT/SIGTERM). */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/udp.h>
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
#include "offpath/io.h"

#define RELAY_BURST 64
#define RELAY_BURSTS_PER_WAKE 16
#define RELAY_BUF 9216
#define RELAY_SOCKBUF (4 << 20)
#define RELAY_SEND_RETRIES 3
#define RELAY_GRO_MSGS 16          /* whole datagrams per recvmmsg, as src/io/udp.c */
#define RELAY_GRO_BUF 65536
#define RELAY_GSO_MAX_SEGS 64      /* the kernel's UDP_MAX_SEGMENTS */
#define RELAY_GSO_MAX_BYTES 65000  /* src/io/udp.c's bound for a joined run */

struct relay_cfg {
    uint32_t ip, sink_ip;
    uint16_t port, sink_port;
    bool sink, busy, batching;
    const char *stats_json;
    int ready_fd;
};

struct relay {
    const struct relay_cfg *cfg;
    int fd, sigfd;
    struct sockaddr_in sink;
    uint64_t rx_pkts, tx_pkts, tx_drops, rx_datagrams, tx_datagrams, bursts, wakeups;
    struct mmsghdr msgs[RELAY_BURST];
    struct iovec iov[RELAY_BURST];
    struct sockaddr_in addr[RELAY_BURST];
    uint8_t (*buf)[RELAY_BUF];
    int weight[RELAY_BURST]; /* packets in each message sent */
    /* --batching: datagram i of a read is in gro_buf[i]; its packets */
    uint8_t (*gro_buf)[RELAY_GRO_BUF];
    uint32_t seg[RELAY_GRO_MSGS];
    int segs[RELAY_GRO_MSGS];
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } rx_ctrl[RELAY_GRO_MSGS];
    union {
        char buf[OP_IO_GSO_CTRL];
        struct cmsghdr align;
    } tx_ctrl[RELAY_GRO_MSGS];
    struct mmsghdr tx[RELAY_GRO_MSGS]; /* never more messages than datagrams read */
    struct iovec tx_iov[RELAY_GRO_MSGS];
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
            "{\"relay\": \"udp_relay\", \"batching\": %s, \"rx_pkts\": %llu, "
            "\"tx_pkts\": %llu, \"tx_drops\": %llu, \"rx_datagrams\": %llu, "
            "\"tx_datagrams\": %llu, \"bursts\": %llu, \"wakeups\": %llu}\n",
            r->cfg->batching ? "true" : "false", (unsigned long long)r->rx_pkts,
            (unsigned long long)r->tx_pkts, (unsigned long long)r->tx_drops,
            (unsigned long long)r->rx_datagrams, (unsigned long long)r->tx_datagrams,
            (unsigned long long)r->bursts, (unsigned long long)r->wakeups);
    if (fclose(f) == 0)
        rename(tmp, r->cfg->stats_json); /* a reader never sees half a file */
}

static int open_socket(const struct relay_cfg *c)
{
    int size = RELAY_SOCKBUF, off = 0, on = 1, pmtu = IP_PMTUDISC_DO;
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
        (c->batching && setsockopt(fd, SOL_UDP, UDP_GRO, &on, sizeof on) != 0) ||
        bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
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

/* Sends n messages of m, message j carrying weight[j] packets. */
static void send_all(struct relay *r, struct mmsghdr *m, const int *weight, int n)
{
    int j = 0, retries = 0;
    while (j < n) {
        int s = sendmmsg(r->fd, m + j, (unsigned)(n - j), MSG_DONTWAIT);
        if (s > 0) {
            for (int k = j; k < j + s; k++)
                r->tx_pkts += (uint64_t)weight[k];
            r->tx_datagrams += (uint64_t)s;
            j += s;
            retries = 0;
        } else if (s < 0 && errno == EINTR) {
            continue;
        } else if (s < 0 && errno != EAGAIN && errno != ENOBUFS) {
            r->tx_drops += (uint64_t)weight[j++]; /* this destination failed: skip it */
        } else if (retries++ == RELAY_SEND_RETRIES) {
            for (; j < n; j++)
                r->tx_drops += (uint64_t)weight[j];
            return;
        } else {
            struct pollfd p = {.fd = r->fd, .events = POLLOUT};
            (void)poll(&p, 1, 1);
        }
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
        r->weight[i] = 1;
    }
    send_all(r, r->msgs, r->weight, n);
}

static void receive_plain(struct relay *r)
{
    for (int b = 0; b < RELAY_BURSTS_PER_WAKE; b++) {
        prepare_rx(r);
        int n = recvmmsg(r->fd, r->msgs, RELAY_BURST, MSG_DONTWAIT, NULL);
        if (n <= 0)
            return;
        r->rx_pkts += (uint64_t)n;
        r->rx_datagrams += (uint64_t)n;
        r->bursts++;
        send_back(r, n);
        if (n < RELAY_BURST)
            return;
    }
}

/* ---- --batching */

static void prepare_gro_rx(struct relay *r)
{
    for (int i = 0; i < RELAY_GRO_MSGS; i++) {
        r->iov[i] = (struct iovec){.iov_base = r->gro_buf[i], .iov_len = RELAY_GRO_BUF};
        r->msgs[i].msg_hdr = (struct msghdr){.msg_name = &r->addr[i],
                                             .msg_namelen = sizeof r->addr[i],
                                             .msg_iov = &r->iov[i], .msg_iovlen = 1,
                                             .msg_control = r->rx_ctrl[i].buf,
                                             .msg_controllen = sizeof r->rx_ctrl[i].buf};
    }
}

/* The segment size of datagram i (its whole length when GRO joined nothing)
 * and its packet count, as src/io/udp.c cuts it; false if it is unusable. */
static bool cut(struct relay *r, int i)
{
    struct msghdr *mh = &r->msgs[i].msg_hdr;
    uint32_t len = r->msgs[i].msg_len, seg = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c != NULL; c = CMSG_NXTHDR(mh, c)) {
        int gso;
        if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
            memcpy(&gso, CMSG_DATA(c), sizeof gso);
            seg = gso > 0 ? (uint32_t)gso : 0;
        }
    }
    if (seg == 0 || seg > len)
        seg = len;
    r->seg[i] = seg;
    r->segs[i] = seg ? (int)((len + seg - 1) / seg) : 1;
    return !(mh->msg_flags & MSG_TRUNC) && r->segs[i] <= RELAY_GSO_MAX_SEGS;
}

/* Whether datagram j can follow a run (bytes and segments so far, ending
 * with datagram last) inside one GSO datagram. */
static bool joins(const struct relay *r, int last, int j, uint32_t bytes, int segs)
{
    bool last_full = r->seg[last] != 0 && r->msgs[last].msg_len % r->seg[last] == 0;
    return last_full && r->seg[j] == r->seg[last] && segs + r->segs[j] <= RELAY_GSO_MAX_SEGS &&
           bytes + r->msgs[j].msg_len <= RELAY_GSO_MAX_BYTES;
}

static bool same_sender(const struct relay *r, int a, int b)
{
    return r->addr[a].sin_addr.s_addr == r->addr[b].sin_addr.s_addr &&
           r->addr[a].sin_port == r->addr[b].sin_port;
}

/* Message m: datagram `first` and the later untaken ones from its sender
 * while they join (datagrams from others are passed over; each sender's
 * order is kept), as one GSO datagram when it has more than one packet. */
static void gather(struct relay *r, int m, int first, int n, bool *taken, int *slot)
{
    struct iovec *iov = &r->tx_iov[*slot];
    int count = 0, segs = 0, last = first;
    uint32_t bytes = 0;
    for (int j = first; j < n; j++) {
        if (taken[j] || !same_sender(r, j, first))
            continue;
        if (j != first && !joins(r, last, j, bytes, segs))
            break;
        iov[count++] = (struct iovec){.iov_base = r->gro_buf[j], .iov_len = r->msgs[j].msg_len};
        bytes += r->msgs[j].msg_len;
        segs += r->segs[j];
        taken[j] = true;
        last = j;
    }
    *slot += count;
    struct msghdr *mh = &r->tx[m].msg_hdr;
    *mh = (struct msghdr){.msg_name = r->cfg->sink ? &r->sink : &r->addr[first],
                          .msg_namelen = sizeof r->sink, .msg_iov = iov,
                          .msg_iovlen = (size_t)count};
    r->weight[m] = segs;
    if (segs == 1)
        return;
    op_io_udp_gso(mh, r->tx_ctrl[m].buf, (uint16_t)r->seg[first]);
}

static void bounce_batched(struct relay *r, int n)
{
    bool taken[RELAY_GRO_MSGS] = {false};
    int m = 0, slot = 0;
    for (int i = 0; i < n; i++) {
        if (cut(r, i))
            r->rx_pkts += (uint64_t)r->segs[i];
        else
            taken[i] = true; /* truncated: nothing of it goes back */
    }
    for (int first = 0; first < n; first++)
        if (!taken[first])
            gather(r, m++, first, n, taken, &slot);
    send_all(r, r->tx, r->weight, m);
}

static void receive_batched(struct relay *r)
{
    for (int b = 0; b < RELAY_BURSTS_PER_WAKE; b++) {
        prepare_gro_rx(r);
        int n = recvmmsg(r->fd, r->msgs, RELAY_GRO_MSGS, MSG_DONTWAIT, NULL);
        if (n <= 0)
            return;
        r->rx_datagrams += (uint64_t)n;
        r->bursts++;
        bounce_batched(r, n);
        if (n < RELAY_GRO_MSGS)
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
        if (r->cfg->batching)
            receive_batched(r);
        else
            receive_plain(r);
    }
}

static void usage(FILE *out)
{
    fprintf(out, "usage: udp_relay --listen IP --port N [--sink IP:PORT] [--stats-json FILE]\n"
                 "                 [--batching] [--busy-poll] [--ready-fd FD]\n"
                 "Bounces every UDP datagram back to its sender (or to the sink), in bursts:\n"
                 "recvmmsg -> sendmmsg. --batching: UDP GRO datagrams in, their packets out\n"
                 "as UDP GSO datagrams. Counters as JSON on SIGUSR1 and at exit.\n");
}

static bool parse(int argc, char **argv, struct relay_cfg *c)
{
    static const struct option opts[] = {
        {"listen", 1, 0, 'l'}, {"port", 1, 0, 'p'}, {"sink", 1, 0, 's'},
        {"stats-json", 1, 0, 'j'}, {"busy-poll", 0, 0, 'b'}, {"ready-fd", 1, 0, 'r'},
        {"batching", 0, 0, 'g'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
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
        else if (o == 'g')
            c->batching = true;
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
    r.gro_buf = cfg.batching ? calloc(RELAY_GRO_MSGS, RELAY_GRO_BUF) : NULL;
    r.fd = open_socket(&cfg);
    r.sigfd = op_io_signalfd_open();
    if (r.buf == NULL || (cfg.batching && r.gro_buf == NULL) || r.fd < 0 || r.sigfd < 0) {
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
    free(r.gro_buf);
    return 0;
}
