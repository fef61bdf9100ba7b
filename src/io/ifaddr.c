/* Which interface has an IPv4 address, and its MTU: for the perf tools'
 * banner and for the backends' link MTU. */
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

#include "io_internal.h"

/* The address of an interface's entry, in our type; false for another
 * family (a link-layer entry). */
static bool entry_addr(const struct sockaddr *sa, struct op_addr *out)
{
    struct op_endpoint e;
    if (sa == NULL || !op_io_endpoint_of(sa, &e))
        return false;
    *out = e.addr;
    return true;
}

/* Every 127/8 address is on the loopback interface, though only 127.0.0.1
 * is listed there. */
static bool on_loopback(const struct op_addr *a)
{
    static const uint8_t v6_loopback[16] = {[15] = 1};
    return op_addr_is_ipv6(a) ? memcmp(a->v6, v6_loopback, 16) == 0 : (a->v4 >> 24) == 127;
}

bool io_ifname_of_addr(const struct op_addr *want, char *name, size_t cap)
{
    struct ifaddrs *ifs;
    bool found = false;
    if (getifaddrs(&ifs) != 0)
        return false;
    for (struct ifaddrs *i = ifs; i != NULL && !found; i = i->ifa_next) {
        struct op_addr a;
        if (!entry_addr(i->ifa_addr, &a) || a.family != want->family)
            continue;
        bool loop_match = on_loopback(want) && (i->ifa_flags & IFF_LOOPBACK);
        if (op_addr_eq(&a, want) || loop_match) {
            snprintf(name, cap, "%s", i->ifa_name);
            found = true;
        }
    }
    freeifaddrs(ifs);
    return found;
}

bool op_io_ifname_of(uint32_t ip, char *name, size_t cap)
{
    struct op_addr a = op_addr_ipv4(ip);
    return io_ifname_of_addr(&a, name, cap);
}

uint32_t io_link_mtu(int fd, const char *ifname)
{
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname);
    return ioctl(fd, SIOCGIFMTU, &ifr) == 0 && ifr.ifr_mtu > 0 ? (uint32_t)ifr.ifr_mtu : 0;
}
