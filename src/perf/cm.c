/* -R: everything goes the way rdma_cm goes, with no TCP at all (as
 * perftest's -R, whose data exchange runs over an rdma_cm connection). The
 * client's CM sends a REQ for a control QP to the server's UDP 4791; once
 * it is connected, the test's lines (parameters, barriers, results) travel
 * on it (comm.c); after the parameters agree, the test's QPs are connected
 * by more REQ / REP / RTU MADs to QP 1 (src/rdma/cm.c). Each REQ and REP
 * carries its QP's number, PSN, MTU and limits in the IBTA fields and the
 * buffer's rkey and address in the private data (as an application's
 * rdma_cm conn_param would). CM connection 0 is the control QP, 1 + i the
 * test's QP i. UD QPs are resolved by SIDR_REQ / SIDR_REP instead (as
 * rdma_cm resolves a UD peer): the reply names the server's QPN and Q_Key;
 * a SIDR_REQ names no QP, so the client's QPN and PSN ride in its private
 * data after the buffer's.
 *
 * A server without -d listens on UDP 4791 of every address until the first
 * REQ says which address the client aimed at, then serves on that one (as
 * rdma_cm binds a listener to the device a request came in on). It also
 * answers a client without -R on the TCP port (-p) with a FAIL naming -R;
 * a client whose REQs go unanswered looks there to say why. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "perf_int.h"

#define CM_RETRY_NS (100 * OP_NS_PER_MS)
#define CM_RETRIES 50 /* 5 s without an answer: the peer is not there */
#define COMM_CONN 0
#define WAIT_MS 10
#define SPINS 64

static void put_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static uint64_t get_be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/* What CM connection k (1 + the test QP's index) says of this side. */
static void qp_side(const struct perf_run *r, uint32_t k, struct op_rdma_cm_side *s)
{
    const struct perf_ep *ep = &r->ep;
    const struct perf_qp *q = &ep->qps[k - 1];
    const struct op_perf_config *c = r->cfg;
    /* UC, UD: no READs, atomics or retries: those fields are 0 */
    bool rc = c->type == OP_RDMA_QPT_RC;
    uint8_t rd = !rc ? 0 : perf_client_only(c) ? (uint8_t)c->out_reads : 16;
    uint8_t transport = c->type == OP_RDMA_QPT_UD ? OP_RDMA_CM_UD : c->type == OP_RDMA_QPT_UC;
    *s = (struct op_rdma_cm_side){.qpn = op_rdma_qp_num(q->qp), .psn = q->psn, .mtu = ep->mtu,
                                  .responder_resources = rc ? 16 : 0, .initiator_depth = rd,
                                  .retry_count = rc ? c->retry_cnt : 0, .rnr_retry = rc ? 7 : 0,
                                  .timeout = c->qp_timeout, .transport = transport,
                                  .qkey = PERF_QKEY};
    put_be(s->private_data, op_rdma_mr_rkey(q->mr), 4);
    put_be(s->private_data + 4, (uint64_t)(uintptr_t)q->buf, 8);
    put_be(s->private_data + 12, k - 1, 4);
    put_be(s->private_data + 16, s->qpn, 4);
    put_be(s->private_data + 20, s->psn, 4);
}

static struct op_rdma_cm *cm_of(const struct perf_run *r) { return r->cm; }

/* The endpoint on ip, its control QP (r->oob) and its CM; a server listens
 * on every connection at once: REQs take them in the order they come, the
 * control QP's first (the test's come only after the parameters agree). */
static op_status_t open_side(struct perf_run *r, uint32_t ip, size_t max_size)
{
    /* -p is rdma_cm's port, as perftest's -R: a server on another refuses */
    const struct op_rdma_cm_config cc = {.nconn = r->cfg->qps + 1, .retry_ns = CM_RETRY_NS,
                                         .max_retries = CM_RETRIES,
                                         .service_port = r->cfg->tcp_port};
    /* --xdp: the interface that has the address, CM MADs and all (its UDP
     * 4791 is steered to the AF_XDP socket) */
    char ifname[IF_NAMESIZE + 1];
    if (r->cfg->xdp && !op_io_ifname_of(ip, ifname, sizeof ifname)) {
        char a[16];
        op_format_ipv4(ip, a);
        return perf_refuse(r->why, sizeof r->why, "--xdp: no interface has %s", a);
    }
    op_status_t st = perf_ep_open(&r->ep, r->cfg, ip, r->cfg->xdp ? ifname : NULL, max_size,
                                  r->why, sizeof r->why);
    if (st != OP_OK)
        return st;
    if (r->is_server && r->req == NULL && (r->ep.port != OP_ROCE_UDP_PORT || r->ep.ip != ip)) {
        char a[16];
        op_format_ipv4(ip, a);
        return perf_refuse(r->why, sizeof r->why,
                           "-R: UDP port 4791 of %s is taken (rdma_cm peers find the server "
                           "there)", a);
    }
    if (perf_comm_open(&r->ep, &r->oob.comm) != OP_OK ||
        op_rdma_cm_create(r->ep.dev, &cc, &r->cm) != OP_OK)
        return perf_refuse(r->why, sizeof r->why, "-R: cannot set up the connection manager");
    for (uint32_t k = 0; r->is_server && k < cc.nconn; k++) {
        struct op_rdma_cm_side s;
        if (k == COMM_CONN)
            perf_comm_side(r->oob.comm, &s);
        else
            qp_side(r, k, &s);
        if (op_rdma_cm_listen(r->cm, k, &s) != OP_OK)
            return perf_refuse(r->why, sizeof r->why, "-R: cannot listen for connection %u", k);
    }
    return OP_OK;
}

/* The control QP's peer is known (a server knows it from the REQ), or its
 * CM connection failed (st says why). */
static bool comm_known(struct perf_run *r, op_status_t *st)
{
    enum op_rdma_cm_state s = op_rdma_cm_state(cm_of(r), COMM_CONN);
    *st = s != OP_RDMA_CM_FAILED ? OP_OK
                                 : perf_refuse(r->why, sizeof r->why, "-R: %s",
                                               op_rdma_cm_error(cm_of(r), COMM_CONN));
    return s == OP_RDMA_CM_ESTABLISHED || s == OP_RDMA_CM_FAILED ||
           (r->is_server && s == OP_RDMA_CM_REP_SENT);
}

/* The control QP to RTS: a server's before the RTU, so that the client's
 * first line (sent as soon as our REP is in) finds it ready. */
static op_status_t comm_up(struct perf_run *r)
{
    struct op_rdma_cm_side s;
    uint32_t ip;
    uint16_t port;
    if (op_rdma_cm_peer(cm_of(r), COMM_CONN, &s, &ip, &port) != OP_OK ||
        perf_comm_connect(r->oob.comm, &s, ip, port) != OP_OK)
        return perf_refuse(r->why, sizeof r->why, "-R: cannot bring the control QP up");
    return OP_OK;
}

/* ---- the server */

int perf_cm_tcp_refuser(uint16_t port)
{
    char ignored[256];
    int lfd = -1;
    /* the TCP port only serves to refuse: taken, it refuses nobody */
    if (perf_oob_listen(port, 4, &lfd, ignored, sizeof ignored) == OP_OK)
        (void)fcntl(lfd, F_SETFL, O_NONBLOCK);
    return lfd;
}

void perf_cm_refuse_tcp(int lfd)
{
    struct perf_oob o = {.fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)};
    if (o.fd < 0)
        return;
    (void)perf_oob_send(&o, "FAIL the server runs with -R (rdma_cm, no TCP side channel): "
                            "give the client -R too");
    perf_oob_close(&o);
}

/* Serve on the address the REQ was sent to, and hand it to the
 * endpoint's CM (whose ICRC check knows both addresses). */
static op_status_t take_req(struct perf_run *r, const struct perf_cm_req *req, size_t max_size)
{
    op_status_t st = open_side(r, req->flow.dst.v4, max_size);
    if (st != OP_OK)
        return st;
    const struct op_pkt p = {.flow = req->flow, .len = req->len, .data = (uint8_t *)req->data};
    op_rdma_dev_input(r->ep.dev, &p, op_now_ns(), perf_ep_txq(&r->ep));
    perf_ep_flush(&r->ep);
    return OP_OK;
}

/* -d: the endpoint opens on its address at once; otherwise a listener on
 * every address waits for the first REQ (d). A server of several clients
 * was handed its client's REQ (r->req) and opens where it was sent. */
static op_status_t listen_sockets(struct perf_run *r, int *lfd, struct perf_cm_clients *d,
                                  size_t max_size)
{
    const struct op_perf_config *c = r->cfg;
    if (r->req != NULL)
        return take_req(r, r->req, max_size);
    *lfd = perf_cm_tcp_refuser(c->tcp_port);
    uint32_t ip;
    if (c->device != NULL)
        return perf_ip_of_device(c->device, &ip) != OP_OK
                   ? perf_refuse(r->why, sizeof r->why,
                                 "-d (--ib-dev) %s: not an IPv4 address or an interface with one",
                                 c->device)
                   : open_side(r, ip, max_size);
    return perf_cm_clients_open(c, d, r->why, sizeof r->why);
}

static op_status_t serve(struct perf_run *r, size_t max_size)
{
    int lfd = -1;
    struct perf_cm_clients d = {.fd = -1};
    op_status_t st = listen_sockets(r, &lfd, &d, max_size);
    for (unsigned idle = 0; st == OP_OK;) {
        if (d.fd < 0 && comm_known(r, &st))
            break;
        if (d.fd < 0 && (perf_ep_progress(&r->ep) > 0 || ++idle < SPINS))
            continue;
        idle = 0;
        const int fds[2] = {d.fd >= 0 ? d.fd : op_io_fd(r->ep.io), lfd};
        uint64_t next = d.fd >= 0 ? UINT64_MAX : op_rdma_dev_next_timer(r->ep.dev);
        uint64_t until = op_now_ns() + WAIT_MS * OP_NS_PER_MS;
        (void)op_io_wait_fds(fds, 2, OP_IO_IN, next < until ? next : until);
        if (lfd >= 0)
            perf_cm_refuse_tcp(lfd);
        struct perf_cm_req first;
        uint32_t client;
        if (d.fd >= 0 && perf_cm_clients_poll(&d, 0, &first, &client) == 1) {
            perf_cm_clients_close(&d); /* the endpoint takes 4791 of that address */
            st = take_req(r, &first, max_size);
        }
    }
    if (lfd >= 0)
        close(lfd);
    perf_cm_clients_close(&d);
    return st == OP_OK ? comm_up(r) : st;
}

/* ---- the client */

static op_status_t resolve(struct perf_run *r, uint32_t *ip)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *res = NULL;
    int rc = getaddrinfo(r->cfg->server, NULL, &hints, &res);
    if (rc != 0)
        return perf_refuse(r->why, sizeof r->why, "cannot resolve server '%s': %s",
                           r->cfg->server, gai_strerror(rc));
    *ip = ntohl(((const struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr);
    freeaddrinfo(res);
    return OP_OK;
}

/* The address the kernel would send to the server from (-d's otherwise). */
static op_status_t local_ip(struct perf_run *r, uint32_t server, uint32_t *ip)
{
    if (r->cfg->device != NULL)
        return perf_ip_of_device(r->cfg->device, ip) == OP_OK
                   ? OP_OK
                   : perf_refuse(r->why, sizeof r->why,
                                 "-d (--ib-dev) %s: not an IPv4 address or an interface with one",
                                 r->cfg->device);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(OP_ROCE_UDP_PORT),
                             .sin_addr.s_addr = htonl(server)};
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
              getsockname(fd, (struct sockaddr *)&sa, &len) == 0;
    if (fd >= 0)
        close(fd);
    *ip = ntohl(sa.sin_addr.s_addr);
    return ok ? OP_OK : perf_refuse(r->why, sizeof r->why, "-R: no route to the server");
}

/* The REQs went unanswered: a server without -R waits on the TCP port;
 * it is told why we leave, and so is the user. */
static op_status_t explain_silence(struct perf_run *r, uint32_t server, op_status_t st)
{
    struct perf_oob o = {.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(r->cfg->tcp_port),
                             .sin_addr.s_addr = htonl(server)};
    if (o.fd >= 0 && connect(o.fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
        (void)perf_oob_send(&o, "FAIL the client runs with -R (rdma_cm): give the server -R too");
        char a[16];
        op_format_ipv4(server, a);
        st = perf_refuse(r->why, sizeof r->why,
                         "-R: the server at %s answers on TCP port %u, not over rdma_cm: it runs "
                         "without -R (give both sides -R, or neither)", a, r->cfg->tcp_port);
    }
    perf_oob_close(&o);
    return st;
}

static op_status_t call(struct perf_run *r, size_t max_size)
{
    uint32_t server = 0, ip = 0;
    op_status_t st = resolve(r, &server);
    if (st == OP_OK)
        st = local_ip(r, server, &ip);
    if (st == OP_OK)
        st = open_side(r, ip, max_size);
    if (st != OP_OK)
        return st;
    struct op_rdma_cm_side s;
    perf_comm_side(r->oob.comm, &s);
    struct op_rdma_cm *cm = cm_of(r);
    if (op_rdma_cm_connect(cm, COMM_CONN, &s, server, OP_ROCE_UDP_PORT, op_now_ns(),
                           perf_ep_txq(&r->ep)) != OP_OK)
        return perf_refuse(r->why, sizeof r->why, "-R: cannot connect the control QP");
    perf_ep_flush(&r->ep);
    for (unsigned idle = 0; !comm_known(r, &st);)
        if (perf_ep_progress(&r->ep) == 0 && ++idle % SPINS == 0)
            perf_ep_wait(&r->ep, op_now_ns());
    if (st == OP_OK)
        return comm_up(r);
    /* a REJ is an answer (another -p, no listener left): silence is not */
    return op_rdma_cm_counters(cm)[OP_RDMA_CM_C_cm_rej_recv] ? st : explain_silence(r, server, st);
}

op_status_t perf_cm_meet(struct perf_run *r, size_t max_size)
{
    return r->is_server ? serve(r, max_size) : call(r, max_size);
}

/* ---- the test's QPs, once the parameters agree */

/* Every test connection established (true), or the first failure's cause. */
static bool settled(struct perf_run *r, op_status_t *st)
{
    struct op_rdma_cm *cm = cm_of(r);
    bool all = true;
    *st = OP_OK;
    for (uint32_t k = 1; k <= r->ep.nqp; k++) {
        enum op_rdma_cm_state s = op_rdma_cm_state(cm, k);
        if (s == OP_RDMA_CM_FAILED) {
            *st = perf_refuse(r->why, sizeof r->why, "-R: QP %u: %s", k - 1,
                              op_rdma_cm_error(cm, k));
            return true;
        }
        all = all && s == OP_RDMA_CM_ESTABLISHED;
    }
    return all;
}

/* A UD peer as a CM side: the SIDR_REP's Q_Key must be ours (every UD
 * send carries PERF_QKEY); a server takes the client's QPN from the
 * SIDR_REQ's private data, and either side the peer's PSN. */
static bool ud_peer(struct perf_run *r, struct op_rdma_cm_side *s)
{
    s->psn = (uint32_t)get_be(s->private_data + 20, 4);
    if (r->is_server) {
        s->qpn = (uint32_t)get_be(s->private_data + 16, 4);
        s->mtu = r->ep.mtu; /* a UD QP has no path MTU; -m and the link agree it */
    } else if (s->qkey != PERF_QKEY) {
        (void)perf_refuse(r->why, sizeof r->why, "-R: the SIDR_REP's Q_Key 0x%x is not 0x%x",
                          s->qkey, PERF_QKEY);
        return false;
    }
    return true;
}

/* The peer as exchange_qps would have filled it in. */
static op_status_t take_peers(struct perf_run *r)
{
    struct op_rdma_cm *cm = cm_of(r);
    for (uint32_t k = 1; k <= r->ep.nqp; k++) {
        struct op_rdma_cm_side s;
        struct perf_peer *p = &r->ep.qps[k - 1].peer;
        if (op_rdma_cm_peer(cm, k, &s, &p->ip, &p->port) != OP_OK)
            return perf_refuse(r->why, sizeof r->why, "-R: QP %u is not connected", k - 1);
        if (s.transport == OP_RDMA_CM_UD && !ud_peer(r, &s))
            return OP_ERR_MALFORMED;
        if (s.mtu != r->ep.mtu)
            return perf_refuse(r->why, sizeof r->why,
                               "-R: the REQ's path MTU %u is not this side's %u (-m)", s.mtu,
                               r->ep.mtu);
        p->qpn = s.qpn;
        p->psn = s.psn;
        p->rkey = (uint32_t)get_be(s.private_data, 4);
        p->vaddr = get_be(s.private_data + 4, 8);
    }
    return OP_OK;
}

/* Drive the engine (its CM answers and resends) until every connection
 * settles. The control channel is only peeked at: a FAIL or its end stops
 * the wait, while the peer's next line (it may be done first) stays. */
static op_status_t drive(struct perf_run *r)
{
    op_status_t st;
    for (unsigned turn = 0; !settled(r, &st); turn++) {
        if (perf_ep_progress(&r->ep) > 0 || turn % SPINS != SPINS - 1)
            continue;
        perf_ep_wait(&r->ep, op_now_ns());
        if (perf_oob_peer_failed(&r->oob)) {
            bool got;
            char rest[PERF_LINE_MAX];
            st = perf_poll_tag(r, "FAIL", &got, rest, sizeof rest);
            return st != OP_OK ? st
                               : perf_refuse(r->why, sizeof r->why, "the peer failed: %.200s",
                                             rest);
        }
    }
    return st == OP_OK ? take_peers(r) : st;
}

op_status_t perf_cm_connect_qps(struct perf_run *r)
{
    struct op_rdma_cm *cm = cm_of(r);
    uint32_t server = 0;
    uint16_t port = 0;
    struct op_rdma_cm_side s;
    if (r->is_server)
        return drive(r);
    /* the control QP's CM answered from where the test's requests go too */
    (void)op_rdma_cm_peer(cm, COMM_CONN, &s, &server, &port);
    for (uint32_t k = 1; k <= r->ep.nqp; k++) {
        qp_side(r, k, &s);
        if (op_rdma_cm_connect(cm, k, &s, server, port, op_now_ns(), perf_ep_txq(&r->ep)) != OP_OK)
            return perf_refuse(r->why, sizeof r->why, "-R: cannot connect QP %u", k - 1);
    }
    perf_ep_flush(&r->ep);
    return drive(r);
}
