/* Addresses of both families: text forms through libc's inet_pton and
 * inet_ntop (pure conversions, no socket), comparison by family. */
#include <arpa/inet.h>
#include <stdio.h>
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

bool op_endpoint_parse(const char *text, struct op_endpoint *out)
{
    char host[OP_ADDR_STRLEN];
    const char *colon = NULL;
    size_t n;
    if (text == NULL)
        return false;
    bool bracketed = text[0] == '[';
    if (bracketed) {
        const char *close = strchr(text, ']');
        if (close == NULL || close[1] != ':')
            return false;
        colon = close + 1;
        text++;
        n = (size_t)(close - text);
    } else {
        colon = strchr(text, ':');
        if (colon == NULL || strchr(colon + 1, ':') != NULL)
            return false; /* an IPv6 address without brackets: where is the port? */
        n = (size_t)(colon - text);
    }
    if (n == 0 || n >= sizeof host)
        return false;
    memcpy(host, text, n);
    host[n] = '\0';
    struct op_addr a;
    uint64_t port;
    if (!op_addr_parse(host, &a) || bracketed != op_addr_is_ipv6(&a) ||
        op_parse_u64(colon + 1, 1, 65535, &port) != OP_OK)
        return false;
    *out = (struct op_endpoint){.addr = a, .port = (uint16_t)port};
    return true;
}

bool op_endpoint_format(const struct op_endpoint *e, char *out, size_t cap)
{
    char host[OP_ADDR_STRLEN];
    bool v6 = op_addr_is_ipv6(&e->addr);
    int n = op_addr_format(&e->addr, host, sizeof host)
                ? snprintf(out, cap, v6 ? "[%s]:%u" : "%s:%u", host, e->port)
                : -1;
    if (n >= 0 && (size_t)n < cap)
        return true;
    if (cap > 0)
        out[0] = '\0';
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
