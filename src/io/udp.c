/* The udp backend: recvmmsg/sendmmsg on one unconnected, non-blocking socket
 * with DF set. Never connect() it: on an unconnected socket with
 * IP_PMTUDISC_DO Linux sends IPv4 Identification 0, which the ICRC covers.
 * When bound to 0.0.0.0 (or ::) the local address of each datagram comes
 * from IP_PKTINFO (IPV6_PKTINFO), so flow.dst is always the real one. An
 * IPv6 socket is IPv6 only (no v4-mapped peers): a flow has one family.
 *
 * Batching (on by default where the kernel has it): three or more
 * consecutive packets to one destination with one length leave as a single
 * UDP GSO datagram (see gather_batch), and
 * the socket takes such datagrams whole (UDP_GRO) and cuts them into packets
 * here. Each packet keeps its own RoCEv2 headers and ICRC; the kernel's
 * per-datagram work (route, skb, socket locks, wake-up) is paid once for up
 * to UDP_GSO_MAX_SEGS packets. Over IPv4 only to 127/8, where the batch is
 * never split (see batch_keeps_icrc); over IPv6 anywhere; received batches
 * are taken from anyone.
 *
 * Copies: op_io_recv_lent hands the packets of a GRO datagram out where they
 * lie in gro_buf (op_io_recv copies each into the caller's buffer); a
 * packet's ext goes out as an iovec of its own between its headers and
 * trailer, so a payload is copied once, by the kernel, from where the
 * engine keeps it. op_io_recv_placed reads one datagram into iovecs laid
 * out as the caller foresees its packets (headers and trailer into a slot
 * of gro_buf, the payload where it belongs), so the kernel's copy is the
 * only one on the way in too. */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "io_internal.h"

#define UDP_SOCKBUF (4 << 20)
#define UDP_SEND_RETRIES 3    /* waits for room before the rest is dropped */
#define UDP_SEND_WAIT_MS 1
#define UDP_GSO_MAX_SEGS 64       /* the kernel's UDP_MAX_SEGMENTS */
#define UDP_GSO_MAX_BYTES 65000   /* under the 65507-byte IPv4 UDP payload */
#define UDP_GSO_MIN_SEGS 3        /* fewer leave as plain messages (see gather_batch) */
#define UDP_GRO_MSGS 16           /* whole datagrams read per recvmmsg */
#define UDP_GRO_BUF 65536
/* A placed read (op_io_recv_placed) uses gro_buf's first three slots: the
 * datagram's bytes past the packets foreseen, their headers and trailers
 * (UDP_PLACE_SLOT bytes each), and the bytes of a datagram that fell
 * otherwise than foreseen, gathered back in one piece. */
#define UDP_PLACE_SLOT 64
#define UDP_PLACE_IOV (3 * UDP_GSO_MAX_SEGS + 1)
_Static_assert(UDP_GSO_MAX_SEGS * UDP_PLACE_SLOT <= UDP_GRO_BUF && UDP_GRO_MSGS >= 3,
               "a placed read's slots fit gro_buf");

/* A received datagram still being cut into packets. */
struct gro_datagram {
    uint32_t len, seg, off;
    struct op_flow flow;
    uint8_t *base; /* its first byte */
};

/* The packets of a placed read whose bytes fell as foreseen, handed out
 * before the rest of their datagram. */
struct placed {
    struct iovec iov[UDP_PLACE_IOV];
    uint8_t *ext[UDP_GSO_MAX_SEGS];
    uint32_t len[UDP_GSO_MAX_SEGS]; /* payload bytes foreseen for each */
    int n, i;
    uint32_t hdr, trl;
    struct op_flow flow;
};

/* A peer's socket address, of either family. */
union udp_sa {
    struct sockaddr sa;
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
    struct sockaddr_storage ss;
};

struct udp_io {
    struct op_io io;
    int fd;
    int pktinfo; /* bound to INADDR_ANY: read the local address per datagram */
    bool batching; /* GSO out, GRO in */
    bool assume; /* datagrams are taken as from `sender` (op_io_udp_assume_sender) */
    struct op_endpoint sender;
    uint64_t rx_truncated;
    unsigned rx_streak; /* reads in a row that found something */
    struct mmsghdr msgs[OP_IO_BURST];
    struct iovec iov[3 * OP_IO_BURST]; /* a packet with ext takes three */
    union udp_sa addr[OP_IO_BURST];
    int weight[OP_IO_BURST]; /* packets in each message sent */
    union {
        char buf[CMSG_SPACE(sizeof(struct in6_pktinfo)) + CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctrl[OP_IO_BURST];
    uint8_t *gro_buf; /* UDP_GRO_MSGS x UDP_GRO_BUF */
    struct gro_datagram gro[UDP_GRO_MSGS];
    int gro_n, gro_i;
    struct placed pl;
};

static struct udp_io *udp_of(struct op_io *io)
{
    return (struct udp_io *)io;
}

/* The local address (IP_PKTINFO, IPV6_PKTINFO) and the GRO segment size
 * of a datagram. */
static void read_cmsgs(struct msghdr *mh, struct op_addr *dst, uint32_t *seg)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c != NULL; c = CMSG_NXTHDR(mh, c)) {
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
            struct in_pktinfo pi;
            memcpy(&pi, CMSG_DATA(c), sizeof pi);
            *dst = op_addr_ipv4(ntohl(pi.ipi_addr.s_addr));
        } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
            struct in6_pktinfo pi;
            memcpy(&pi, CMSG_DATA(c), sizeof pi);
            *dst = op_addr_ipv6(pi.ipi6_addr.s6_addr);
        } else if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
            int gso;
            memcpy(&gso, CMSG_DATA(c), sizeof gso);
            if (gso > 0)
                *seg = (uint32_t)gso;
        }
    }
}

static void set_rx_msg(struct udp_io *u, int i, void *buf, size_t cap)
{
    struct msghdr *mh = &u->msgs[i].msg_hdr;
    u->iov[i] = (struct iovec){.iov_base = buf, .iov_len = cap};
    *mh = (struct msghdr){.msg_name = u->assume ? NULL : &u->addr[i],
                          .msg_namelen = u->assume ? 0 : sizeof u->addr[i],
                          .msg_iov = &u->iov[i],
                          .msg_iovlen = 1};
    if (u->pktinfo || u->batching) {
        mh->msg_control = u->ctrl[i].buf;
        mh->msg_controllen = sizeof u->ctrl[i].buf;
    }
}

static struct op_flow rx_flow(struct udp_io *u, int i, uint32_t *seg)
{
    struct op_endpoint peer = {.addr.family = u->io.local.family};
    if (u->assume)
        peer = u->sender;
    else
        (void)op_io_endpoint_of(&u->addr[i].sa, &peer);
    struct op_flow f = {.src = peer.addr, .src_port = peer.port, .dst = u->io.local,
                        .dst_port = u->io.local_port};
    read_cmsgs(&u->msgs[i].msg_hdr, &f.dst, seg);
    return f;
}

static int rx_error(void)
{
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNREFUSED)
        return 0;
    return -errno;
}

/* Until two reads in a row found something, the next datagram is most
 * likely a lone request someone is waiting on (a latency test reads one
 * answer per round trip): read it alone. Asking for more would cost one
 * more, empty, receive inside the kernel (about 0.5 us here) before the
 * answer can even be computed. Busy sockets keep finding something and
 * read whole bursts. */
static int rx_batch(const struct udp_io *u, int want)
{
    return u->rx_streak < 2 ? 1 : want;
}

/* One datagram with nothing but its sender to learn: recvfrom, which
 * copies no msghdr and no iovec in (a busy poll makes this call most). */
static ssize_t read_one(struct udp_io *u)
{
    struct msghdr *mh = &u->msgs[0].msg_hdr;
    if (mh->msg_control != NULL)
        return recvmsg(u->fd, mh, MSG_DONTWAIT);
    ssize_t r = recvfrom(u->fd, mh->msg_iov[0].iov_base, mh->msg_iov[0].iov_len,
                         MSG_DONTWAIT | MSG_TRUNC, mh->msg_name, &mh->msg_namelen);
    mh->msg_flags = r > (ssize_t)mh->msg_iov[0].iov_len ? MSG_TRUNC : 0;
    return r > (ssize_t)mh->msg_iov[0].iov_len ? (ssize_t)mh->msg_iov[0].iov_len : r;
}

/* Reads up to n messages set up with set_rx_msg. */
static int read_msgs(struct udp_io *u, int n)
{
    int r = n == 1 ? (int)read_one(u)
                   : recvmmsg(u->fd, u->msgs, (unsigned)n, MSG_DONTWAIT, NULL);
    if (n == 1 && r >= 0) {
        u->msgs[0].msg_len = (unsigned)r;
        r = 1;
    }
    u->rx_streak = r <= 0 ? 0 : u->rx_streak + 1;
    return r;
}

/* Truncated datagrams (larger than OP_IO_BUF_SIZE) are dropped; later packets
 * move down so the caller sees a dense array. */
static int plain_recv(struct udp_io *u, struct op_pkt *pkts, int max)
{
    int n = rx_batch(u, max < OP_IO_BURST ? max : OP_IO_BURST), k = 0;
    for (int i = 0; i < n; i++)
        set_rx_msg(u, i, pkts[i].data, OP_IO_BUF_SIZE);
    int r = read_msgs(u, n);
    if (r < 0)
        return rx_error();
    for (int i = 0; i < r; i++) {
        if (u->msgs[i].msg_hdr.msg_flags & MSG_TRUNC) {
            u->rx_truncated++;
            continue;
        }
        if (k != i)
            memcpy(pkts[k].data, pkts[i].data, u->msgs[i].msg_len);
        uint32_t seg = 0;
        pkts[k].len = u->msgs[i].msg_len;
        pkts[k].ext = NULL;
        pkts[k].flow = rx_flow(u, i, &seg);
        k++;
    }
    return k;
}

/* Reads up to `want` (<= UDP_GRO_MSGS) whole datagrams; cut them with
 * gro_cut. */
static int gro_fill(struct udp_io *u, int want)
{
    int n = rx_batch(u, want);
    for (int i = 0; i < n; i++)
        set_rx_msg(u, i, u->gro_buf + (size_t)i * UDP_GRO_BUF, UDP_GRO_BUF);
    int r = read_msgs(u, n);
    if (r < 0)
        return rx_error();
    for (int i = 0; i < r; i++) {
        struct gro_datagram *d = &u->gro[i];
        d->len = u->msgs[i].msg_len;
        d->seg = 0;
        d->flow = rx_flow(u, i, &d->seg);
        if (d->seg == 0 || d->seg > d->len)
            d->seg = d->len; /* one packet (also an empty one) */
        d->off = 0;
        d->base = u->gro_buf + (size_t)i * UDP_GRO_BUF;
        if (u->msgs[i].msg_hdr.msg_flags & MSG_TRUNC || d->seg > OP_IO_BUF_SIZE) {
            u->rx_truncated++;
            d->off = d->len + 1; /* nothing of it is delivered */
        }
    }
    u->gro_n = r;
    u->gro_i = 0;
    return r;
}

/* Hands out the packets of the datagrams read, copied into the caller's
 * buffers or (lend) pointing into gro_buf; `off` > `len` once the last
 * one (an empty datagram is one empty packet) is out. */
static int gro_cut(struct udp_io *u, struct op_pkt *pkts, int max, bool lend)
{
    int k = 0;
    while (k < max && u->gro_i < u->gro_n) {
        struct gro_datagram *d = &u->gro[u->gro_i];
        if (d->off > d->len) {
            u->gro_i++;
            continue;
        }
        uint32_t take = d->len - d->off < d->seg ? d->len - d->off : d->seg;
        uint8_t *at = d->base + d->off;
        if (lend)
            pkts[k].data = at;
        else
            memcpy(pkts[k].data, at, take);
        pkts[k].len = take;
        pkts[k].ext = NULL;
        pkts[k].flow = d->flow;
        k++;
        d->off += take;
        if (d->off == d->len)
            d->off = d->len + 1;
    }
    return k;
}

/* The iovecs of a placed read: for each packet foreseen, its headers and
 * trailer into a slot of their own and its payload at its place (never
 * past the room), while the datagram's 64 KiB can hold them; then
 * whatever else the datagram has, flat into slot 0. Returns how many
 * iovecs. */
static size_t place_iovecs(struct udp_io *u, const struct op_io_place *pl)
{
    struct placed *q = &u->pl;
    uint8_t *slots = u->gro_buf + UDP_GRO_BUF;
    size_t n = 0, total = 0;
    int k = 0;
    for (; k < UDP_GSO_MAX_SEGS && (size_t)k * pl->payload < pl->room; k++) {
        size_t left = pl->room - (size_t)k * pl->payload;
        uint32_t len = left < pl->payload ? (uint32_t)left : pl->payload;
        if (total + pl->hdr + len + pl->trl > UDP_GRO_BUF)
            break;
        uint8_t *slot = slots + (size_t)k * UDP_PLACE_SLOT;
        q->ext[k] = pl->at + (size_t)k * pl->payload;
        q->len[k] = len;
        q->iov[n++] = (struct iovec){.iov_base = slot, .iov_len = pl->hdr};
        q->iov[n++] = (struct iovec){.iov_base = q->ext[k], .iov_len = len};
        q->iov[n++] = (struct iovec){.iov_base = slot + pl->hdr, .iov_len = pl->trl};
        total += pl->hdr + len + pl->trl;
    }
    q->iov[n++] = (struct iovec){.iov_base = u->gro_buf, .iov_len = UDP_GRO_BUF};
    q->n = k; /* foreseen, for now */
    q->hdr = pl->hdr;
    q->trl = pl->trl;
    return n;
}

/* Bytes [from, from + len) of what the read put into iov, to out. */
static void iov_gather(const struct iovec *iov, size_t from, size_t len, uint8_t *out)
{
    for (; len > 0; iov++) {
        if (from >= iov->iov_len) {
            from -= iov->iov_len;
            continue;
        }
        size_t take = iov->iov_len - from < len ? iov->iov_len - from : len;
        memcpy(out, (const uint8_t *)iov->iov_base + from, take);
        out += take;
        len -= take;
        from = 0;
    }
}

/* The packets foreseen whose bytes fell as foreseen: from the first on,
 * while each segment of the datagram (seg bytes, the last shorter) is as
 * long as the packet foreseen for it. Returns where the rest begins. */
static uint32_t placed_prefix(struct placed *q, uint32_t len, uint32_t seg)
{
    uint32_t off = 0;
    int k = 0;
    while (k < q->n && off < len) {
        uint32_t take = len - off < seg ? len - off : seg;
        if (take != q->hdr + q->len[k] + q->trl)
            break;
        off += take;
        k++;
    }
    q->n = k;
    q->i = 0;
    return off;
}

/* Reads one datagram as place foresees (place_iovecs); its packets that
 * fell otherwise come flat, as gro_fill's, gathered back where the read
 * scattered them. Returns 1, 0 when nothing was there, or -errno. */
static int placed_fill(struct udp_io *u, const struct op_io_place *pl)
{
    struct placed *q = &u->pl;
    set_rx_msg(u, 0, NULL, 0);
    struct msghdr *mh = &u->msgs[0].msg_hdr;
    mh->msg_iov = q->iov;
    mh->msg_iovlen = place_iovecs(u, pl);
    ssize_t r = recvmsg(u->fd, mh, MSG_DONTWAIT);
    u->rx_streak = r < 0 ? 0 : u->rx_streak + 1;
    if (r < 0) {
        q->n = 0;
        return rx_error();
    }
    struct gro_datagram *d = &u->gro[0];
    d->seg = 0;
    d->flow = q->flow = rx_flow(u, 0, &d->seg);
    uint32_t len = (uint32_t)r;
    if (d->seg == 0 || d->seg > len)
        d->seg = len;
    int foreseen = q->n;
    uint32_t off = placed_prefix(q, len, d->seg);
    d->len = len - off;
    d->off = 0;
    d->base = u->gro_buf; /* where the read put what follows the packets foreseen */
    if (q->n < foreseen) {
        d->base = u->gro_buf + 2 * (size_t)UDP_GRO_BUF;
        iov_gather(q->iov, off, d->len, d->base);
    }
    if ((mh->msg_flags & MSG_TRUNC) || d->seg > OP_IO_BUF_SIZE) {
        u->rx_truncated++;
        q->n = 0;
        d->off = d->len + 1; /* nothing of it is delivered */
    }
    u->gro_n = q->n > 0 && off == len ? 0 : 1; /* 0: every packet placed */
    u->gro_i = 0;
    return 1;
}

/* The placed packets (lent: their payloads where the read put them;
 * otherwise flattened into the caller's buffers), then the rest. */
static int placed_cut(struct udp_io *u, struct op_pkt *pkts, int max, bool lend)
{
    struct placed *q = &u->pl;
    uint8_t *slots = u->gro_buf + UDP_GRO_BUF;
    int k = 0;
    for (; k < max && q->i < q->n; k++, q->i++) {
        struct op_pkt *p = &pkts[k];
        const struct op_pkt placed = {.flow = q->flow, .len = q->hdr + q->trl,
                                      .data = slots + (size_t)q->i * UDP_PLACE_SLOT,
                                      .ext = q->ext[q->i], .ext_len = q->len[q->i],
                                      .ext_at = q->hdr};
        if (lend) {
            *p = placed;
            continue;
        }
        p->len = op_pkt_flatten(&placed, p->data, OP_IO_BUF_SIZE);
        p->flow = q->flow;
        p->ext = NULL;
    }
    return k;
}

/* The socket is read only when nothing read before is left: a caller that
 * holds packets goes to work on them at once (a latency test's answer is
 * often followed by the ACK in one datagram, and the ACK is needed before
 * the next post; an empty read before it would cost a system call). */
/* A place the slots can serve: some room, headers and trailer in a slot. */
static bool place_usable(const struct op_io_place *pl)
{
    return pl->at != NULL && pl->room > 0 && pl->payload > 0 &&
           (size_t)pl->hdr + pl->trl <= UDP_PLACE_SLOT;
}

static int gro_recv(struct udp_io *u, struct op_pkt *pkts, int max, bool lend,
                    const struct op_io_place *place)
{
    int k = placed_cut(u, pkts, max, lend);
    k += gro_cut(u, pkts + k, max - k, lend);
    if (k > 0)
        return k;
    /* a place with no room: the datagram after the next may be placed */
    int r = place == NULL       ? gro_fill(u, UDP_GRO_MSGS)
            : place_usable(place) ? placed_fill(u, place)
                                  : gro_fill(u, 1);
    if (r < 0)
        return r;
    k = placed_cut(u, pkts, max, lend);
    return k + gro_cut(u, pkts + k, max - k, lend);
}

/* Lent packets stay valid until the next receive: gro_fill and
 * placed_fill, which overwrite gro_buf, run only once every packet of it
 * is out. */
static int receive(struct op_io *io, struct op_pkt *pkts, int max, bool lend,
                   const struct op_io_place *place)
{
    struct udp_io *u = udp_of(io);
    if (max <= 0)
        return 0;
    int k = u->gro_buf != NULL ? gro_recv(u, pkts, max, lend, place) : plain_recv(u, pkts, max);
    if (k > 0)
        io->c[OP_IO_C_rx_pkts] += (uint64_t)k;
    return k;
}

static int udp_recv(struct op_io *io, struct op_pkt *pkts, int max)
{
    return receive(io, pkts, max, false, NULL);
}

static int udp_recv_lent(struct op_io *io, struct op_pkt *pkts, int max)
{
    return receive(io, pkts, max, true, NULL);
}

static int udp_recv_placed(struct op_io *io, struct op_pkt *pkts, int max,
                           const struct op_io_place *place)
{
    return receive(io, pkts, max, true, place);
}

static bool same_dest(const struct op_pkt *a, const struct op_pkt *b)
{
    return a->flow.dst_port == b->flow.dst_port && op_addr_eq(&a->flow.dst, &b->flow.dst);
}

/* A packet's pieces: its data, or its data around its ext (the kernel
 * gathers them: no copy of ours). Returns how many iovecs it took. */
static int pkt_iov(const struct op_pkt *p, struct iovec *iov)
{
    if (p->ext == NULL) {
        iov[0] = (struct iovec){.iov_base = p->data, .iov_len = p->len};
        return 1;
    }
    uint32_t at = p->ext_at < p->len ? p->ext_at : p->len;
    iov[0] = (struct iovec){.iov_base = p->data, .iov_len = at};
    iov[1] = (struct iovec){.iov_base = (void *)(uintptr_t)p->ext, .iov_len = p->ext_len};
    iov[2] = (struct iovec){.iov_base = p->data + at, .iov_len = p->len - at};
    return 3;
}

/* Message m carries the packets pkts[idx[0..count)], as one GSO datagram
 * of `seg`-byte segments when count > 1; u->iov[*slot..] gets their data. */
static void set_tx_msg(struct udp_io *u, int m, const struct op_pkt *pkts, const int *idx,
                       int count, int *slot)
{
    const struct op_pkt *first = &pkts[idx[0]];
    struct iovec *iov = &u->iov[*slot];
    int pieces = 0;
    for (int j = 0; j < count; j++)
        pieces += pkt_iov(&pkts[idx[j]], iov + pieces);
    *slot += pieces;
    const struct op_endpoint to = {.addr = first->flow.dst, .port = first->flow.dst_port};
    socklen_t alen = op_io_sockaddr(&to, &u->addr[m].ss);
    struct msghdr *mh = &u->msgs[m].msg_hdr;
    *mh = (struct msghdr){.msg_name = &u->addr[m],
                          .msg_namelen = alen,
                          .msg_iov = iov,
                          .msg_iovlen = (size_t)pieces};
    u->weight[m] = count;
    if (count == 1)
        return;
    op_io_udp_gso(mh, u->ctrl[m].buf, (uint16_t)op_pkt_wire_len(first));
}

_Static_assert(CMSG_SPACE(sizeof(uint16_t)) <= OP_IO_GSO_CTRL, "OP_IO_GSO_CTRL holds UDP_SEGMENT");

void op_io_udp_gso(struct msghdr *mh, void *ctrl, uint16_t seg)
{
    mh->msg_control = ctrl;
    mh->msg_controllen = CMSG_SPACE(sizeof seg);
    struct cmsghdr *c = CMSG_FIRSTHDR(mh);
    c->cmsg_level = SOL_UDP;
    c->cmsg_type = UDP_SEGMENT;
    c->cmsg_len = CMSG_LEN(sizeof seg);
    memcpy(CMSG_DATA(c), &seg, sizeof seg);
}

/* The batch that starts at unsent packet `first`: the following unsent
 * packets to its destination, in order, while every segment but the last
 * has the first's size. Packets to other destinations may be passed over
 * (their own order is kept: only per-destination order matters). */
static int gather_batch(const struct op_pkt *pkts, int n, int first, uint64_t *taken, int *idx)
{
    uint32_t seg = op_pkt_wire_len(&pkts[first]), total = seg;
    int count = 1;
    idx[0] = first;
    *taken |= 1ull << first;
    for (int i = first + 1; i < n && count < UDP_GSO_MAX_SEGS; i++) {
        if ((*taken >> i & 1) || !same_dest(&pkts[i], &pkts[first]))
            continue;
        uint32_t len = op_pkt_wire_len(&pkts[i]);
        if (op_pkt_wire_len(&pkts[idx[count - 1]]) != seg || len > seg || len == 0 ||
            total + len > UDP_GSO_MAX_BYTES)
            break;
        total += len;
        idx[count++] = i;
        *taken |= 1ull << i;
    }
    /* A GSO send copies into page fragments that the receiving core frees
     * back to the sender's: for two segments (a latency test's answer and
     * the ACK behind it) that cost 0.3-0.5 us more on loopback than two
     * plain messages in the same sendmmsg; from three on it pays. */
    if (count < UDP_GSO_MIN_SEGS) {
        for (int j = 1; j < count; j++)
            *taken &= ~(1ull << idx[j]);
        count = 1;
    }
    return count;
}

/* A GSO datagram that the kernel (or a NIC) cuts into segments gets IPv4
 * Identifications 0, 1, 2, ... and the ICRC of every segment but the first
 * is then wrong on the wire (RoCEv2's ICRC covers the Identification). On
 * loopback the datagram reaches the receiver whole and is never cut; to
 * anywhere else each packet leaves alone, with Identification 0. IPv6 has
 * no Identification (and the ICRC masks what segmentation writes): a batch
 * may go anywhere. */
static bool batch_keeps_icrc(const struct op_addr *dst)
{
    return op_addr_is_ipv6(dst) || (dst->v4 >> 24) == 127;
}

_Static_assert(OP_IO_BURST <= 64, "udp_prepare_tx marks a burst's packets in one uint64_t");

/* Groups n (<= OP_IO_BURST) packets into messages; returns how many. */
static int udp_prepare_tx(struct udp_io *u, const struct op_pkt *pkts, int n)
{
    uint64_t taken = 0;
    int m = 0, slot = 0, idx[OP_IO_BURST];
    for (int first = 0; first < n; first++) {
        if (taken >> first & 1)
            continue;
        if (pkts[first].flow.dst.family != u->io.local.family) {
            u->io.c[OP_IO_C_tx_drops]++; /* no route from this socket's family */
            continue;
        }
        int count = 1;
        idx[0] = first;
        if (u->batching && batch_keeps_icrc(&pkts[first].flow.dst))
            count = gather_batch(pkts, n, first, &taken, idx);
        set_tx_msg(u, m++, pkts, idx, count, &slot);
    }
    return m;
}

static int wait_writable(int fd)
{
    return op_io_wait_fd(fd, OP_IO_OUT, op_io_deadline_in_ms(UDP_SEND_WAIT_MS));
}

static int weight_of(const struct udp_io *u, int from, int to)
{
    int w = 0;
    for (int j = from; j < to; j++)
        w += u->weight[j];
    return w;
}

/* A destination refused message j. A GSO datagram the kernel cannot take
 * (EINVAL, EIO: no segmentation on this route) turns batching off. */
static void skip_failed(struct udp_io *u, int j)
{
    if ((errno == EINVAL || errno == EIO) && u->weight[j] > 1)
        u->batching = false;
    u->io.c[OP_IO_C_tx_drops] += (uint64_t)u->weight[j];
}

/* One message (a latency test's answer, often) is cheaper with sendmsg,
 * and one plain packet with sendto (no msghdr, no iovec copied in). */
static int send_msgs(struct udp_io *u, int from, int n)
{
    const struct msghdr *mh = &u->msgs[from].msg_hdr;
    if (n > 1)
        return sendmmsg(u->fd, u->msgs + from, (unsigned)n, MSG_DONTWAIT);
    if (mh->msg_control == NULL && mh->msg_iovlen == 1)
        return sendto(u->fd, mh->msg_iov[0].iov_base, mh->msg_iov[0].iov_len, MSG_DONTWAIT,
                      mh->msg_name, mh->msg_namelen) < 0 ? -1 : 1;
    return sendmsg(u->fd, mh, MSG_DONTWAIT) < 0 ? -1 : 1;
}

/* Sends m prepared messages and returns how many packets went out. When the
 * socket stays full, *left is set to the number of packets not attempted
 * (the caller drops them and sends no more). */
static int udp_send_batch(struct udp_io *u, int m, int *left)
{
    int j = 0, sent = 0, retries = 0;

    while (j < m) {
        int r = send_msgs(u, j, m - j);
        if (r > 0) {
            sent += weight_of(u, j, j + r);
            u->io.c[OP_IO_C_tx_datagrams] += (uint64_t)r;
            j += r;
            retries = 0;
        } else if (r < 0 && errno == EINTR) {
            continue;
        } else if (r == 0 || errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
            if (retries++ == UDP_SEND_RETRIES) {
                *left = weight_of(u, j, m);
                break;
            }
            wait_writable(u->fd);
        } else {
            skip_failed(u, j++); /* ECONNREFUSED, EPERM, ...: skip this one */
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
        int m = udp_prepare_tx(u, pkts + i, b);
        sent += udp_send_batch(u, m, &left);
        if (left > 0) {
            io->c[OP_IO_C_tx_drops] += (uint64_t)(n - i - b + left);
            break;
        }
    }
    io->c[OP_IO_C_tx_pkts] += (uint64_t)sent;
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
    free(u->gro_buf);
    free(u);
}

static const struct op_io_ops udp_ops = {
    .name = "udp",
    .recv = udp_recv,
    .recv_lent = udp_recv_lent,
    .recv_placed = udp_recv_placed,
    .takes_ext = true,
    .send = udp_send,
    .fd = udp_fd,
    .deadline = udp_deadline,
    .poll = udp_poll,
    .close = udp_close,
};

/* The kernel then writes no sender address (recvfrom's and recvmsg's
 * move_addr_to_user) and we convert none: both are per-datagram work on a
 * latency test's path between the answer's arrival and the next post. */
void op_io_udp_assume_sender(struct op_io *io, const struct op_endpoint *sender)
{
    struct udp_io *u = udp_of(io);
    if (io->ops != &udp_ops)
        return;
    u->assume = sender != NULL && sender->addr.family == io->local.family;
    if (u->assume)
        u->sender = *sender;
}

void op_io_udp_batching(struct op_io *io, bool on)
{
    struct udp_io *u = udp_of(io);
    int flag = on;

    if (io->ops != &udp_ops)
        return;
    if (on && u->gro_buf == NULL)
        u->gro_buf = malloc((size_t)UDP_GRO_MSGS * UDP_GRO_BUF);
    /* without UDP_GRO the kernel cuts peers' batches for us (slower) */
    on = on && u->gro_buf != NULL &&
         setsockopt(u->fd, SOL_UDP, UDP_GRO, &flag, sizeof flag) == 0;
    if (!on) {
        flag = 0;
        (void)setsockopt(u->fd, SOL_UDP, UDP_GRO, &flag, sizeof flag);
        free(u->gro_buf);
        u->gro_buf = NULL;
        u->gro_n = u->gro_i = 0;
        u->pl.n = u->pl.i = 0;
    }
    u->batching = on;
}

/* SO_*BUFFORCE passes rmem_max/wmem_max when we have CAP_NET_ADMIN; without
 * it the plain option gives what the limits allow. */
static void set_bufsize(int fd, int force_opt, int opt)
{
    int size = UDP_SOCKBUF;

    if (setsockopt(fd, SOL_SOCKET, force_opt, &size, sizeof size) != 0)
        (void)setsockopt(fd, SOL_SOCKET, opt, &size, sizeof size);
}

/* DF set (IPv4: IP_PMTUDISC_DO, which also gives Identification 0; IPv6:
 * never fragmented locally), IPv6 only on an IPv6 socket, the local
 * address of each datagram asked for when bound to the wildcard. */
static int set_family_options(int fd, const struct op_addr *a, int pktinfo)
{
    int on = 1, pmtu = IP_PMTUDISC_DO, pmtu6 = IPV6_PMTUDISC_DO;
    if (!op_addr_is_ipv6(a)) {
        if (setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) != 0)
            return -1;
        return pktinfo ? setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &on, sizeof on) : 0;
    }
    if (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on) != 0 ||
        setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu6, sizeof pmtu6) != 0)
        return -1;
    return pktinfo ? setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &on, sizeof on) : 0;
}

static int udp_socket(const struct op_addr *a, uint16_t port, int pktinfo)
{
    int off = 0;
    struct sockaddr_storage sa;
    const struct op_endpoint at = {.addr = *a, .port = port};
    socklen_t alen = op_io_sockaddr(&at, &sa);
    int fd = socket(sa.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    set_bufsize(fd, SO_RCVBUFFORCE, SO_RCVBUF);
    set_bufsize(fd, SO_SNDBUFFORCE, SO_SNDBUF);
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &off, sizeof off) != 0 ||
        set_family_options(fd, a, pktinfo) != 0 || bind(fd, (struct sockaddr *)&sa, alen) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* The MTU of the interface that has the address: DF datagrams larger than
 * that are refused (EMSGSIZE), so engines must segment below it. 0 when no
 * one interface has it (the wildcard). */
static uint32_t mtu_of_address(int fd, const struct op_addr *a)
{
    char name[IF_NAMESIZE];
    return io_ifname_of_addr(a, name, sizeof name) ? io_link_mtu(fd, name) : 0;
}

op_status_t op_io_udp_open(uint32_t ip, uint16_t port, struct op_io **out)
{
    const struct op_addr a = op_addr_ipv4(ip);
    return op_io_udp_open_addr(&a, port, out);
}

op_status_t op_io_udp_open_addr(const struct op_addr *addr, uint16_t port, struct op_io **out)
{
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    struct op_endpoint bound;

    if (out == NULL || addr == NULL)
        return OP_ERR_INVAL;
    struct udp_io *u = calloc(1, sizeof *u);
    if (u == NULL)
        return OP_ERR_NOMEM;
    u->pktinfo = op_addr_is_any(addr);
    u->fd = udp_socket(addr, port, u->pktinfo);
    if (u->fd < 0 || getsockname(u->fd, (struct sockaddr *)&sa, &len) != 0 ||
        !op_io_endpoint_of((struct sockaddr *)&sa, &bound)) {
        op_status_t st = op_status_from_errno(errno); /* EADDRINUSE is worth seeing */
        if (u->fd >= 0)
            close(u->fd);
        free(u);
        return st;
    }
    u->io.ops = &udp_ops;
    u->io.local = *addr;
    u->io.local_port = bound.port;
    u->io.link_mtu = mtu_of_address(u->fd, addr);
    op_io_udp_batching(&u->io, true); /* the callers turn it off from their config */
    *out = &u->io;
    return OP_OK;
}

op_status_t op_io_udp_adopt(int fd, struct op_io **out)
{
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    struct op_endpoint bound;
    if (out == NULL || fd < 0)
        return OP_ERR_INVAL;
    if (getsockname(fd, (struct sockaddr *)&sa, &len) != 0)
        return op_status_from_errno(errno);
    if (!op_io_endpoint_of((struct sockaddr *)&sa, &bound))
        return OP_ERR_INVAL;
    struct udp_io *u = calloc(1, sizeof *u);
    if (u == NULL)
        return OP_ERR_NOMEM;
    u->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (u->fd < 0) {
        free(u);
        return op_status_from_errno(errno);
    }
    u->io.ops = &udp_ops;
    u->io.local = bound.addr;
    u->io.local_port = bound.port;
    *out = &u->io;
    return OP_OK;
}
