/* offpath wire: addresses and flows of both families, the envelope every
 * packet of ours travels in (offpath/wire.h includes every part;
 * docs/wire.md). */
#ifndef OFFPATH_WIRE_ADDR_H
#define OFFPATH_WIRE_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offpath/common.h"

/* IPv4 is 0 so that a zeroed address or flow is an IPv4 one: most of our
 * paths are IPv4 and build their flows field by field. */
enum op_family {
    OP_AF_IPV4 = 0,
    OP_AF_IPV6 = 1,
};

/* An IP address of either family: the one address type of every module.
 * IPv4 in host order (what hashes, masks and loopback arithmetic want),
 * IPv6 as its 16 bytes in network order. The bytes of v6 an IPv4 address
 * does not use are zero when built by these helpers, so two addresses
 * compare equal bytewise too. No padding: 20 bytes. */
struct op_addr {
    union {
        uint32_t v4;
        uint8_t v6[16];
    };
    uint32_t family; /* enum op_family */
};

/* The UDP envelope of a packet: for RoCEv2 as sent from an ordinary
 * unconnected socket with DF set (IPv4 Identification 0). Both addresses
 * have the flow's family; ports in host order. No padding: 44 bytes. */
struct op_flow {
    struct op_addr src, dst;
    uint16_t src_port, dst_port;
};

/* room for any address's text, NUL included (INET6_ADDRSTRLEN) */
#define OP_ADDR_STRLEN 46

static inline struct op_addr op_addr_ipv4(uint32_t ip)
{
    struct op_addr a = {.family = OP_AF_IPV4};
    a.v4 = ip;
    return a;
}
OP_API struct op_addr op_addr_ipv6(const uint8_t ip6[16]);
static inline bool op_addr_is_ipv6(const struct op_addr *a) { return a->family == OP_AF_IPV6; }
OP_API bool op_addr_eq(const struct op_addr *a, const struct op_addr *b);
/* The unspecified address of the family (0.0.0.0, ::). */
OP_API bool op_addr_is_any(const struct op_addr *a);
/* Dotted quad or RFC 5952 text; false (and "") when cap is too small. */
OP_API bool op_addr_format(const struct op_addr *a, char *out, size_t cap);
/* Either family's text form; false for anything else (a name, a port, a
 * prefix length, spaces). */
OP_API bool op_addr_parse(const char *text, struct op_addr *out);
/* An address and a port (host order): where to listen, whom to notify. */
struct op_endpoint {
    struct op_addr addr;
    uint16_t port;
};
/* room for "[ADDR6]:PORT", NUL included */
#define OP_ENDPOINT_STRLEN (OP_ADDR_STRLEN + 8)
/* ADDR:PORT, or [ADDR6]:PORT with the brackets of URLs (RFC 3986) since an
 * IPv6 address has colons; port 1..65535. False for anything else. */
OP_API bool op_endpoint_parse(const char *text, struct op_endpoint *out);
/* The same forms back; false (and "") when cap is too small. */
OP_API bool op_endpoint_format(const struct op_endpoint *e, char *out, size_t cap);

/* Flows are equal when both ends and both ports are. */
OP_API bool op_flow_eq(const struct op_flow *a, const struct op_flow *b);
/* The flow of the answer: ends and ports swapped. */
OP_API struct op_flow op_flow_reverse(const struct op_flow *f);

#endif
