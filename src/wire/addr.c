/* Addresses of both families: text forms through libc's inet_pton and
 * inet_ntop (pure conversions, no socket), comparison by family. */
#include <arpa/inet.h>
#include <string.h>

#include "offpath/wire.h"

struct op_addr op_addr_ipv6(const uint8_t ip6[16])
{
    struct op_addr a = {.family = OP_AF_IPV6};
    memcpy(a.v6, ip6, sizeof a.v6);
    return a;
}

bool op_addr_eq(const struct op_addr *a, const struct op_addr *b)
{
    if (a->family != b->family)
        return false;
    return a->family == OP_AF_IPV6 ? memcmp(a->v6, b->v6, sizeof a->v6) == 0 : a->v4 == b->v4;
}

bool op_addr_is_any(const struct op_addr *a)
{
    static const uint8_t zero[16];
    return a->family == OP_AF_IPV6 ? memcmp(a->v6, zero, sizeof zero) == 0 : a->v4 == 0;
}

bool op_addr_format(const struct op_addr *a, char *out, size_t cap)
{
    uint32_t be = htonl(a->v4);
    const void *src = a->family == OP_AF_IPV6 ? (const void *)a->v6 : (const void *)&be;
    int af = a->family == OP_AF_IPV6 ? AF_INET6 : AF_INET;
    if (cap > 0 && inet_ntop(af, src, out, (socklen_t)(cap > 0x7fffffff ? 0x7fffffff : cap)))
        return true;
    if (cap > 0)
        out[0] = '\0';
    return false;
}

bool op_addr_parse(const char *text, struct op_addr *out)
{
    struct in_addr v4;
    uint8_t v6[16];
    if (text == NULL)
        return false;
    if (inet_pton(AF_INET, text, &v4) == 1) {
        *out = op_addr_ipv4(ntohl(v4.s_addr));
        return true;
    }
    if (strchr(text, ':') != NULL && inet_pton(AF_INET6, text, v6) == 1) {
        *out = op_addr_ipv6(v6);
        return true;
    }
    return false;
}

bool op_flow_eq(const struct op_flow *a, const struct op_flow *b)
{
    return a->src_port == b->src_port && a->dst_port == b->dst_port &&
           op_addr_eq(&a->src, &b->src) && op_addr_eq(&a->dst, &b->dst);
}

struct op_flow op_flow_reverse(const struct op_flow *f)
{
    return (struct op_flow){.src = f->dst, .dst = f->src, .src_port = f->dst_port,
                            .dst_port = f->src_port};
}
