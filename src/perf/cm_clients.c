/* -R with --clients: one CM listener on UDP 4791 (-d's address, or every
 * address) in front of the clients' connections. Each new control REQ
 * for -p's service takes the next client: its thread opens an endpoint of
 * its own (another port: the listener holds 4791) and hands the REQ to
 * that endpoint's CM, whose REP tells the client where the rest goes (its
 * test QPs' REQs or SIDR_REQs, the control QP's lines, the data). The
 * listener keeps answering while the clients run: a REQ for another port
 * is REJected (invalid service ID), a client past the last (no QP
 * available); a client's resent REQ is left to its own CM. What to do
 * with each packet is decided by op_rdma_cm_listener (src/rdma); this
 * file only reads and sends. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "perf_int.h"

int perf_cm_socket(uint32_t ip)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(OP_ROCE_UDP_PORT),
                             .sin_addr.s_addr = htonl(ip)};
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

op_status_t perf_cm_clients_open(const struct op_perf_config *c, struct perf_cm_clients *d,
                                 char *why, size_t len)
{
    memset(d, 0, sizeof(*d));
    d->fd = -1;
    if (c->device != NULL && perf_ip_of_device(c->device, &d->ip) != OP_OK)
        return perf_refuse(why, len, "-d (--ib-dev) %s: not an IPv4 address or an interface "
                                     "with one", c->device);
    if (op_rdma_cm_listener_create(c->tcp_port, c->clients > 1 ? c->clients : 1, &d->l) != OP_OK)
        return perf_refuse(why, len, "-R: cannot set up the CM listener");
    d->fd = perf_cm_socket(d->ip);
    if (d->fd < 0) {
        char a[16];
        op_format_ipv4(d->ip, a);
        return perf_refuse(why, len, "-R: cannot listen on UDP port 4791 of %s (%s)%s",
                           d->ip ? a : "every address", strerror(errno),
                           d->ip ? "" : ": give -d the address to serve on");
    }
    return OP_OK;
}

void perf_cm_clients_close(struct perf_cm_clients *d)
{
    if (d->fd >= 0)
        close(d->fd);
    op_rdma_cm_listener_destroy(d->l);
    memset(d, 0, sizeof(*d));
    d->fd = -1;
}

/* From the address the REQ was sent to, whatever the socket is bound to:
 * the reply's ICRC covers it. Lost, the client's resent REQ gets another. */
static void send_reply(const struct perf_cm_clients *d, const struct op_pkt *reply)
{
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(reply->flow.dst_port),
                             .sin_addr.s_addr = htonl(reply->flow.dst.v4)};
    struct iovec iov = {.iov_base = reply->data, .iov_len = reply->len};
    union {
        char buf[CMSG_SPACE(sizeof(struct in_pktinfo))];
        struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct msghdr mh = {.msg_name = &to, .msg_namelen = sizeof to, .msg_iov = &iov,
                        .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = IPPROTO_IP;
    cm->cmsg_type = IP_PKTINFO;
    cm->cmsg_len = CMSG_LEN(sizeof(struct in_pktinfo));
    struct in_pktinfo pi = {.ipi_spec_dst.s_addr = htonl(reply->flow.src.v4)};
    memcpy(CMSG_DATA(cm), &pi, sizeof pi);
    (void)sendmsg(d->fd, &mh, 0);
}

int perf_cm_clients_poll(struct perf_cm_clients *d, int timeout_ms, struct perf_cm_req *req,
                         uint32_t *client)
{
    const int fds[1] = {d->fd};
    (void)op_io_wait_fds(fds, 1, OP_IO_IN, op_now_ns() + (uint64_t)timeout_ms * OP_NS_PER_MS);
    struct sockaddr_in from;
    socklen_t flen = sizeof from;
    ssize_t n = recvfrom(d->fd, req->data, sizeof req->data, MSG_DONTWAIT | MSG_TRUNC,
                         (struct sockaddr *)&from, &flen);
    if (n < 0)
        return 0;
    uint8_t rbuf[OP_IO_BUF_SIZE];
    struct op_pkt p = {.flow = {.src = op_addr_ipv4(ntohl(from.sin_addr.s_addr)),
                                .dst = op_addr_ipv4(d->ip), .src_port = ntohs(from.sin_port),
                                .dst_port = OP_ROCE_UDP_PORT},
                       .len = (uint32_t)n, .data = req->data},
                  reply = {.data = rbuf};
    if (n > (ssize_t)sizeof req->data)
        p.len = 0; /* too long for a MAD: refused by its length */
    enum op_rdma_cm_verdict v = op_rdma_cm_listener_input(d->l, &p, &reply, client);
    if (v == OP_RDMA_CM_REFUSED)
        send_reply(d, &reply);
    if (v != OP_RDMA_CM_NEW_CLIENT)
        return 0;
    req->flow = p.flow; /* dst: the address it was sent to */
    req->len = p.len;
    return 1;
}
