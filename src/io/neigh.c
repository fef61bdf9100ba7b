/* Reading the kernel's IPv4 neighbour table as /proc/net/arp prints it:
 *   IP address       HW type     Flags       HW address            Mask     Device
 *   10.77.0.2        0x1         0x2         8a:1f:22:03:9c:01     *        xa
 * Flags 0x2 (ATF_COM) marks a resolved entry. */
#include <stdio.h>
#include <string.h>

#include "offpath/io.h"

#define ATF_COMPLETE 0x2u

static bool parse_mac(const char *s, uint8_t mac[6])
{
    unsigned b[6];
    char tail;
    if (sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &tail) !=
        6)
        return false;
    for (int i = 0; i < 6; i++)
        mac[i] = (uint8_t)b[i];
    return true;
}

static bool line_matches(const char *line, uint32_t ip, const char *ifname, uint8_t mac[6])
{
    char addr[32], type[16], flags[16], hw[32], mask[32], dev[32];
    unsigned a, b, c, d, f;
    if (sscanf(line, "%31s %15s %15s %31s %31s %31s", addr, type, flags, hw, mask, dev) != 6 ||
        sscanf(addr, "%3u.%3u.%3u.%3u", &a, &b, &c, &d) != 4 || sscanf(flags, "%x", &f) != 1)
        return false;
    if (a > 255 || b > 255 || c > 255 || d > 255 || (a << 24 | b << 16 | c << 8 | d) != ip)
        return false;
    return (f & ATF_COMPLETE) && strcmp(dev, ifname) == 0 && parse_mac(hw, mac);
}

bool op_arp_table_lookup(const char *table, uint32_t ip, const char *ifname, uint8_t mac[6])
{
    char line[256];
    for (const char *p = table; p != NULL && *p != '\0';) {
        const char *nl = strchr(p, '\n');
        size_t n = nl != NULL ? (size_t)(nl - p) : strlen(p);
        if (n < sizeof line) {
            memcpy(line, p, n);
            line[n] = '\0';
            if (line_matches(line, ip, ifname, mac))
                return true;
        }
        p = nl != NULL ? nl + 1 : NULL;
    }
    return false;
}
