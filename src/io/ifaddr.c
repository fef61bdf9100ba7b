/* Which interface has an IPv4 address, and its MTU: for the perf tools'
 * banner and for the backends' link MTU. */
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

#include "io_internal.h"

/* Every 127/8 address is on the loopback interface, though only 127.0.0.1
 * is listed there. */
bool op_io_ifname_of(uint32_t ip, char *name, size_t cap)
{
    struct ifaddrs *ifs;
    bool found = false;
    if (getifaddrs(&ifs) != 0)
        return false;
    for (struct ifaddrs *i = ifs; i != NULL && !found; i = i->ifa_next) {
        if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET)
            continue;
        uint32_t a = ntohl(((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr.s_addr);
        bool loop_match = (ip >> 24) == 127 && (i->ifa_flags & IFF_LOOPBACK);
        if (a == ip || loop_match) {
            snprintf(name, cap, "%s", i->ifa_name);
            found = true;
        }
    }
    freeifaddrs(ifs);
    return found;
}

uint32_t io_link_mtu(int fd, const char *ifname)
{
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname);
    return ioctl(fd, SIOCGIFMTU, &ifr) == 0 && ifr.ifr_mtu > 0 ? (uint32_t)ifr.ifr_mtu : 0;
}
