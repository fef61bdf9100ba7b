/* The udp backend: recvmmsg/sendmmsg on one unconnected, non-blocking socket
 * with DF set. Never connect() it: on an unconnected socket with
 * IP_PMTUDISC_DO Linux sends IPv4 Identification 0, which the ICRC covers.
 * When bound to 0.0.0.0 the local address of each datagram comes from
 * IP_PKTINFO, so flow.dst_ip is always the real one. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "offpath/io.h"

#define UDP_SOCKBUF (4 << 20)
#define UDP_SEND_RETRIES 3    /* waits for room before the rest is dropped */
#define UDP_SEND_WAIT_MS 1

struct udp_io {
    struct op_io io;
    int fd;
    int pktinfo; /* bound to INADDR_ANY: read the local address per datagram */
    uint64_t rx_truncated;
    struct mmsghdr msgs[OP_IO_BURST];
    struct iovec iov[OP_IO_BURST];
    struct sockaddr_in addr[OP_IO_BURST];
    union {
        char buf[CMSG_SPACE(sizeof(struct in_pktinfo))];
        struct cmsghdr align;
    } ctrl[OP_IO_BURST];
};

static struct udp_io *udp_of(struct op_io *io)
{
    return (struct udp_io *)io;
}

static uint32_t pktinfo_dst(struct msghdr *mh, uint32_t fallback)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c != NULL; c = CMSG_NXTHDR(mh, c)) {
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
            struct in_pktinfo pi;
            memcpy(&pi, CMSG_DATA(c), sizeof pi);
            return ntohl(pi.ipi_addr.s_addr);
        }
    }
    return fallback;
}

static void udp_prepare_rx(struct udp_io *u, struct op_pkt *pkts, int n)
{
    for (int i = 0; i < n; i++) {
        struct msghdr *mh = &u->msgs[i].msg_hdr;
        u->iov[i] = (struct iovec){.iov_base = pkts[i].data, .iov_len = OP_IO_BUF_SIZE};
        *mh = (struct msghdr){.msg_name = &u->addr[i],
                              .msg_namelen = sizeof u->addr[i],
                              .msg_iov = &u->iov[i],
                              .msg_iovlen = 1};
        if (u->pktinfo) {
            mh->msg_control = u->ctrl[i].buf;
            mh->msg_controllen = sizeof u->ctrl[i].buf;
        }
    }
}

/* Truncated datagrams (larger than OP_IO_BUF_SIZE) are dropped; later packets
 * move down so the caller sees a dense array. */
static int udp_recv(struct op_io *io, struct op_pkt *pkts, int max)
{
    struct udp_io *u = udp_of(io);
    int n = max < OP_IO_BURST ? max : OP_IO_BURST, k = 0;

    if (n <= 0)
        return 0;
    udp_prepare_rx(u, pkts, n);
    int r = recvmmsg(u->fd, u->msgs, (unsigned)n, MSG_DONTWAIT, NULL);
    if (r < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNREFUSED)
            return 0;
        return -errno;
    }
    for (int i = 0; i < r; i++) {
        struct msghdr *mh = &u->msgs[i].msg_hdr;
        if (mh->msg_flags & MSG_TRUNC) {
            u->rx_truncated++;
            continue;
        }
        if (k != i)
            memcpy(pkts[k].data, pkts[i].data, u->msgs[i].msg_len);
        pkts[k].len = u->msgs[i].msg_len;
        pkts[k].flow.src_ip = ntohl(u->addr[i].sin_addr.s_addr);
        pkts[k].flow.src_port = ntohs(u->addr[i].sin_port);
        pkts[k].flow.dst_ip = u->pktinfo ? pktinfo_dst(mh, io->local_ip) : io->local_ip;
        pkts[k].flow.dst_port = io->local_port;
        k++;
    }
    io->rx_pkts += (uint64_t)k;
    return k;
}

static void udp_prepare_tx(struct udp_io *u, const struct op_pkt *pkts, int n)
{
    for (int i = 0; i < n; i++) {
        u->addr[i] = (struct sockaddr_in){.sin_family = AF_INET,
                                          .sin_port = htons(pkts[i].flow.dst_port),
                                          .sin_addr.s_addr = htonl(pkts[i].flow.dst_ip)};
        u->iov[i] = (struct iovec){.iov_base = pkts[i].data, .iov_len = pkts[i].len};
        u->msgs[i].msg_hdr = (struct msghdr){.msg_name = &u->addr[i],
                                             .msg_namelen = sizeof u->addr[i],
                                             .msg_iov = &u->iov[i],
                                             .msg_iovlen = 1};
    }
}

static int wait_writable(int fd)
{
    struct pollfd pfd = {.fd = fd, .events = POLLOUT};

    return poll(&pfd, 1, UDP_SEND_WAIT_MS);
}

/* Sends one batch (n <= OP_IO_BURST) and returns how many went out. When the
 * socket stays full, *left is set to the number not attempted (the caller
 * drops them and sends no more); packets a destination refused are skipped. */
static int udp_send_batch(struct udp_io *u, int n, int *left)
{
    int j = 0, sent = 0, retries = 0;

    while (j < n) {
        int r = sendmmsg(u->fd, u->msgs + j, (unsigned)(n - j), MSG_DONTWAIT);
        if (r > 0) {
            j += r;
            sent += r;
            retries = 0;
        } else if (r < 0 && errno == EINTR) {
            continue;
        } else if (r == 0 || errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
            if (retries++ == UDP_SEND_RETRIES) {
                *left = n - j;
                break;
            }
            wait_writable(u->fd);
        } else {
            j++; /* this destination failed (ECONNREFUSED, EPERM, ...): skip it */
            u->io.tx_drops++;
        }
    }
    return sent;
}

static int udp_send(struct op_io *io, const struct op_pkt *pkts, int n)
{
    struct udp_io *u = udp_of(io);
    int sent = 0, left = 0;

    for (int i = 0; i < n; i += OP_IO_BURST) {
        int b = n - i < OP_IO_BURST ? n - i : OP_IO_BURST;
        udp_prepare_tx(u, pkts + i, b);
        sent += udp_send_batch(u, b, &left);
        if (left > 0) {
            io->tx_drops += (uint64_t)(n - i - b + left);
            break;
        }
    }
    io->tx_pkts += (uint64_t)sent;
    return sent;
}

static int udp_fd(const struct op_io *io)
{
    return ((const struct udp_io *)io)->fd;
}

static uint64_t udp_deadline(const struct op_io *io)
{
    (void)io;
    return UINT64_MAX;
}

static void udp_poll(struct op_io *io, uint64_t now_ns)
{
    (void)io;
    (void)now_ns;
}

static void udp_close(struct op_io *io)
{
    struct udp_io *u = udp_of(io);

    close(u->fd);
    free(u);
}

static const struct op_io_ops udp_ops = {
    .name = "udp",
    .recv = udp_recv,
    .send = udp_send,
    .fd = udp_fd,
    .deadline = udp_deadline,
    .poll = udp_poll,
    .close = udp_close,
};

/* SO_*BUFFORCE passes rmem_max/wmem_max when we have CAP_NET_ADMIN; without
 * it the plain option gives what the limits allow. */
static void set_bufsize(int fd, int force_opt, int opt)
{
    int size = UDP_SOCKBUF;

    if (setsockopt(fd, SOL_SOCKET, force_opt, &size, sizeof size) != 0)
        (void)setsockopt(fd, SOL_SOCKET, opt, &size, sizeof size);
}

static int udp_socket(uint32_t ip, uint16_t port, int pktinfo)
{
    int off = 0, on = 1, pmtu = IP_PMTUDISC_DO;
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(ip)};
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    set_bufsize(fd, SO_RCVBUFFORCE, SO_RCVBUF);
    set_bufsize(fd, SO_SNDBUFFORCE, SO_SNDBUF);
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &off, sizeof off) != 0 ||
        setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) != 0 ||
        (pktinfo && setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &on, sizeof on) != 0) ||
        bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

op_status_t op_io_udp_open(uint32_t ip, uint16_t port, struct op_io **out)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;

    if (out == NULL)
        return OP_ERR_INVAL;
    struct udp_io *u = calloc(1, sizeof *u);
    if (u == NULL)
        return OP_ERR_NOMEM;
    u->pktinfo = ip == INADDR_ANY;
    u->fd = udp_socket(ip, port, u->pktinfo);
    if (u->fd < 0 || getsockname(u->fd, (struct sockaddr *)&sa, &len) != 0) {
        if (u->fd >= 0)
            close(u->fd);
        free(u);
        return OP_ERR_IO;
    }
    u->io.ops = &udp_ops;
    u->io.local_ip = ip;
    u->io.local_port = ntohs(sa.sin_port);
    *out = &u->io;
    return OP_OK;
}
