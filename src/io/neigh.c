/* Reading the kernel's IPv4 neighbour table as /proc/net/arp prints it:
 *   IP address       HW type     Flags       HW address            Mask     Device
 *   10.77.0.2        0x1         0x2         8a:1f:22:03:9c:01     *        xa
 * Flags 0x2 (ATF_COM) marks a resolved entry. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offpath/io.h"

#define ATF_COMPLETE 0x2u

/* Exactly six two-digit hex groups joined by ':', as the kernel prints. */
static bool parse_mac(const char *s, uint8_t mac[6])
{
    if (strlen(s) != 17)
        return false;
    for (int i = 0; i < 6; i++) {
        int hi = op_hex_digit(s[3 * i]), lo = op_hex_digit(s[3 * i + 1]);
        if (hi < 0 || lo < 0 || (i < 5 && s[3 * i + 2] != ':'))
            return false;
        mac[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

/* A dotted quad of plain decimal octets (no signs, no trailing bytes). */
static bool parse_ipv4_text(const char *s, uint32_t *ip)
{
    uint32_t v = 0;
    for (int part = 0; part < 4; part++) {
        unsigned octet = 0, digits = 0;
        for (; *s >= '0' && *s <= '9' && digits < 4; s++, digits++)
            octet = octet * 10 + (unsigned)(*s - '0');
        if (digits == 0 || digits > 3 || octet > 255 || *s != (part < 3 ? '.' : '\0'))
            return false;
        v = v << 8 | octet;
        s += part < 3;
    }
    *ip = v;
    return true;
}

static bool line_matches(const char *line, uint32_t ip, const char *ifname, uint8_t mac[6])
{
    char addr[32], type[16], flags[16], hw[32], mask[32], dev[32], extra[2];
    uint32_t a;
    char *end;
    if (sscanf(line, "%31s %15s %15s %31s %31s %31s %1s", addr, type, flags, hw, mask, dev,
               extra) != 6 || !parse_ipv4_text(addr, &a) || a != ip ||
        strncmp(flags, "0x", 2) != 0)
        return false;
    unsigned long f = strtoul(flags + 2, &end, 16);
    return *end == '\0' && end != flags + 2 && (f & ATF_COMPLETE) && strcmp(dev, ifname) == 0 &&
           parse_mac(hw, mac);
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
