/* The XDP program offpath dns gives DPDK's AF_XDP PMD (its xdp_prog=
 * argument): every frame of the queue goes to the PMD's socket, as with
 * the PMD's own program, except what the kernel must see for TCP (RFC
 * 7766) to be served by a kernel socket beside the DPDK models: TCP over
 * IPv4 and IPv6, ARP replies and IPv6 neighbour advertisements (answers to
 * the kernel's own requests, which it needs before it can send a segment).
 * ARP requests, neighbour solicitations and echo stay with the DPDK models,
 * which answer them. Built with clang -target bpf. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

struct {
    __uint(type, BPF_MAP_TYPE_XSKMAP);
    __uint(max_entries, 64);
    __type(key, int);
    __type(value, int);
} xsks_map SEC(".maps"); /* the name the PMD looks for */

#define ARP_OP_OFF 6 /* within the ARP header */
#define ARP_REPLY 2
#define NH_ICMPV6 58
#define ND_ADVERT 136

static int for_kernel(const unsigned char *l3, const void *end, __u16 proto)
{
    if (proto == bpf_htons(ETH_P_IP)) {
        const struct iphdr *ip = (const void *)l3;
        return (const void *)(ip + 1) <= end && ip->protocol == IPPROTO_TCP;
    }
    if (proto == bpf_htons(ETH_P_IPV6)) {
        const struct ipv6hdr *ip6 = (const void *)l3;
        const unsigned char *icmp = (const unsigned char *)(ip6 + 1);
        if ((const void *)(ip6 + 1) > end)
            return 0;
        return ip6->nexthdr == IPPROTO_TCP ||
               (ip6->nexthdr == NH_ICMPV6 && (const void *)(icmp + 1) <= end &&
                icmp[0] == ND_ADVERT);
    }
    if (proto == bpf_htons(ETH_P_ARP))
        return (const void *)(l3 + ARP_OP_OFF + 2) <= end && l3[ARP_OP_OFF] == 0 &&
               l3[ARP_OP_OFF + 1] == ARP_REPLY;
    return 0;
}

SEC("xdp")
int offpath_dns_xdp(struct xdp_md *ctx)
{
    const void *data = (const void *)(long)ctx->data;
    const void *end = (const void *)(long)ctx->data_end;
    const struct ethhdr *eth = data;
    if ((const void *)(eth + 1) <= end &&
        for_kernel((const unsigned char *)(eth + 1), end, eth->h_proto))
        return XDP_PASS;
    return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
}

char _license[] SEC("license") = "GPL";
