/* NOTIFY's I/O (RFC 1996): after a reload, each zone whose SOA serial
 * changed is announced to every --notify secondary over UDP, so it
 * transfers the new zone now instead of at its next SOA refresh. The
 * messages are op_dns_notify_build's; a secondary acknowledges with a
 * NOERROR response of the same id. Bounded: 3 tries 500 ms apart each. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dns_internal.h"
#include "offpath/io.h"

#define TRIES 3
#define WAIT_MS 500

/* Waits up to WAIT_MS for the acknowledgement of id on fd. */
static bool wait_ack(int fd, uint16_t id)
{
    uint8_t buf[OP_DNS_UDP_MIN];
    uint64_t end = op_now_ns() + WAIT_MS * OP_NS_PER_MS;
    for (uint64_t now = op_now_ns(); now < end; now = op_now_ns()) {
        if (op_io_wait_fd(fd, OP_IO_IN, end) <= 0)
            continue;
        ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0 && op_dns_notify_acked(buf, (size_t)n, id))
            return true;
    }
    return false;
}

/* A name in wire form as dotted text, for the log. */
static void name_text(const uint8_t *name, char out[OP_DNS_NAME_MAX * 4 + 2])
{
    size_t o = 0;
    for (; *name != 0; name += 1 + *name) {
        for (uint8_t i = 1; i <= *name; i++) {
            uint8_t ch = name[i];
            o += (size_t)(ch > ' ' && ch < 127 && ch != '.' && ch != '\\'
                              ? snprintf(out + o, 2, "%c", ch)
                              : snprintf(out + o, 5, "\\%03u", ch));
        }
        out[o++] = '.';
    }
    if (o == 0)
        out[o++] = '.';
    out[o] = 0;
}

/* One zone to one secondary: true once acknowledged. */
static bool notify_one(struct op_dns_server *s, const uint8_t *msg, size_t len, uint16_t id,
                       const struct op_endpoint *t)
{
    struct sockaddr_storage sa;
    socklen_t salen = (socklen_t)op_io_sockaddr(t, &sa);
    int fd = socket(sa.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    bool acked = false;
    /* connect: replies from any other address are not taken for the ack */
    if (connect(fd, (struct sockaddr *)&sa, salen) == 0)
        for (int i = 0; i < TRIES && !acked; i++) {
            op_dns_server_count(s, OP_DNS_C_notify_sent);
            acked = send(fd, msg, len, 0) == (ssize_t)len && wait_ack(fd, id);
        }
    close(fd);
    return acked;
}

unsigned op_dns_server_notify(struct op_dns_server *s, const struct op_dns_zones *old,
                              const struct op_dns_zones *now)
{
    uint8_t msg[OP_DNS_UDP_MIN];
    unsigned acked = 0;
    for (size_t z = 0; z < now->n && s->cfg.n_notify > 0; z++) {
        if (!op_dns_zone_changed(old, now, z))
            continue;
        uint16_t id = (uint16_t)(op_now_ns() >> 10);
        size_t len = op_dns_notify_build(now, z, id, msg, sizeof(msg));
        char zone[OP_DNS_NAME_MAX * 4 + 2], to[OP_ENDPOINT_STRLEN];
        name_text(now->z[z].origin, zone);
        for (unsigned t = 0; t < s->cfg.n_notify && len > 0; t++) {
            bool ok = notify_one(s, msg, len, id, &s->cfg.notify[t]);
            op_dns_server_count(s, ok ? OP_DNS_C_notify_acked : OP_DNS_C_notify_failed);
            acked += ok;
            op_endpoint_format(&s->cfg.notify[t], to, sizeof(to));
            if (ok)
                OP_INFO(s->cfg.log, "NOTIFY %s to %s: acknowledged", zone, to);
            else
                OP_WARN(s->cfg.log, "NOTIFY %s to %s: no acknowledgement after %d tries", zone,
                        to, TRIES);
        }
    }
    return acked;
}
