/* Endpoints to and from the kernel's socket addresses. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "offpath/io.h"

unsigned op_io_sockaddr(const struct op_endpoint *e, struct sockaddr_storage *out)
{
    memset(out, 0, sizeof *out);
    if (op_addr_is_ipv6(&e->addr)) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)out;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(e->port);
        memcpy(&in6->sin6_addr, e->addr.v6, 16);
        return sizeof *in6;
    }
    struct sockaddr_in *in = (struct sockaddr_in *)out;
    in->sin_family = AF_INET;
    in->sin_port = htons(e->port);
    in->sin_addr.s_addr = htonl(e->addr.v4);
    return sizeof *in;
}

bool op_io_endpoint_of(const struct sockaddr *sa, struct op_endpoint *out)
{
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        *out = (struct op_endpoint){.addr = op_addr_ipv6(in6->sin6_addr.s6_addr),
                                    .port = ntohs(in6->sin6_port)};
        return true;
    }
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        *out = (struct op_endpoint){.addr = op_addr_ipv4(ntohl(in->sin_addr.s_addr)),
                                    .port = ntohs(in->sin_port)};
        return true;
    }
    return false;
}
