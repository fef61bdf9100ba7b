/* Endpoints to and from the kernel's socket addresses. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>

#include "offpath/io.h"

/* The kernel's socket addresses are one storage read as several struct
 * types; every access here goes through memcpy, so no compiler (inlining
 * across files at link time) may take a store as one struct type and a
 * load as another for different objects. */
unsigned op_io_sockaddr(const struct op_endpoint *e, struct sockaddr_storage *out)
{
    memset(out, 0, sizeof *out);
    if (op_addr_is_ipv6(&e->addr)) {
        struct sockaddr_in6 in6 = {.sin6_family = AF_INET6, .sin6_port = htons(e->port)};
        memcpy(&in6.sin6_addr, e->addr.v6, 16);
        memcpy(out, &in6, sizeof in6);
        return sizeof in6;
    }
    const struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons(e->port),
                                   .sin_addr.s_addr = htonl(e->addr.v4)};
    memcpy(out, &in, sizeof in);
    return sizeof in;
}

bool op_io_endpoint_of(const struct sockaddr *sa, struct op_endpoint *out)
{
    sa_family_t family;
    memcpy(&family, (const char *)sa + offsetof(struct sockaddr, sa_family), sizeof family);
    if (family == AF_INET6) {
        struct sockaddr_in6 in6;
        memcpy(&in6, sa, sizeof in6);
        *out = (struct op_endpoint){.addr = op_addr_ipv6(in6.sin6_addr.s6_addr),
                                    .port = ntohs(in6.sin6_port)};
        return true;
    }
    if (family == AF_INET) {
        struct sockaddr_in in;
        memcpy(&in, sa, sizeof in);
        *out = (struct op_endpoint){.addr = op_addr_ipv4(ntohl(in.sin_addr.s_addr)),
                                    .port = ntohs(in.sin_port)};
        return true;
    }
    return false;
}
