#!/usr/bin/env python3
"""Write the seed corpus of fuzz_frame into tests/fuzz/corpus/frame/.
Frames are encoded here from RFC 791/768, 8200, 4861 and 4443 (struct),
independently of src/wire/frame.c and frame6.c, and the ARP tables are
/proc/net/arp as Linux prints it.
Run from the repository root:
    python3 tests/fuzz/gen_frame_corpus.py
"""
import os
import struct

from gen_wire_corpus import icrc, write_seeds

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "frame")
SRC_MAC = bytes.fromhex("8a1f22039c01")
DST_MAC = bytes.fromhex("8a1f22039c02")
FLOW = (0x0A4D0001, 0x0A4D0002, 0xC123, 4791)  # src ip, dst ip, src port, dst port


def ip_checksum(header):
    s = sum(struct.unpack("!%dH" % (len(header) // 2), header))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ipv4(payload_len, options=b"", frag=0x4000, proto=17):
    src, dst = FLOW[0], FLOW[1]
    ihl = 5 + len(options) // 4
    hdr = struct.pack("!BBHHHBBHII", 0x40 | ihl, 0, ihl * 4 + payload_len, 0, frag, 64, proto,
                      0, src, dst) + options
    return hdr[:10] + struct.pack("!H", ip_checksum(hdr)) + hdr[12:]


def frame(payload, options=b"", frag=0x4000, proto=17, ethertype=0x0800):
    udp = struct.pack("!HHHH", FLOW[2], FLOW[3], 8 + len(payload), 0)
    eth = DST_MAC + SRC_MAC + struct.pack("!H", ethertype)
    return eth + ipv4(len(udp) + len(payload), options, frag, proto) + udp + payload


def roce_send_only():
    """A RoCEv2 RC SEND_ONLY with its ICRC (masked as the IBTA annex says)."""
    bth = struct.pack("!BBHI I", 0x04, 0, 0xFFFF, 0x000123, 0x8000ABCD)
    roce = bth + bytes((i * 29 + 3) & 0xFF for i in range(64))
    return roce + icrc(roce, FLOW)


ARP_HEADER = ("IP address       HW type     Flags       HW address            Mask     Device\n")
ARP_TABLE = (ARP_HEADER +
             "192.168.1.1      0x1         0x2         52:54:00:12:35:02     *        eth0\n"
             "10.77.0.3        0x1         0x0         00:00:00:00:00:00     *        xa\n"
             "10.77.0.2        0x1         0x2         8a:1f:22:03:9c:01     *        xa\n")


OUR_IP6 = bytes.fromhex("20010db8000000000000000000000001")  # fuzz_frame's address
THEIR_IP6 = bytes.fromhex("20010db8000000000000000000000002")


def ipv6_packet(next_header, body, src=THEIR_IP6, dst=OUR_IP6, hops=64, csum_at=None):
    """Ethernet + IPv6 + body; the upper-layer checksum (RFC 8200 8.1) at
    csum_at within body when given."""
    if csum_at is not None:
        pseudo = src + dst + struct.pack("!IxxxB", len(body), next_header)
        data = pseudo + body + (b"\0" if len(body) % 2 else b"")
        c = ip_checksum(data)
        body = body[:csum_at] + struct.pack("!H", c) + body[csum_at + 2:]
    ip = struct.pack("!IHBB", 6 << 28, len(body), next_header, hops) + src + dst
    return DST_MAC + SRC_MAC + b"\x86\xdd" + ip + body


def ipv6_seeds():
    query = b"\x12\x34\0\0\0\x01" + bytes(6) + b"\x07example\x04test\0\0\x06\0\x01"
    udp = struct.pack("!HHHH", 40000, 53, 8 + len(query), 0) + query
    yield "udp6_query", ipv6_packet(17, udp, csum_at=6)
    yield "udp6_zero_checksum", ipv6_packet(17, udp)
    yield "udp6_fragment", ipv6_packet(44, bytes(8) + udp)
    group = bytes.fromhex("ff0200000000000000000001ff000001")
    ns = struct.pack("!BBHI", 135, 0, 0, 0) + OUR_IP6 + b"\x01\x01" + SRC_MAC
    yield "ndp_solicit", ipv6_packet(58, ns, dst=group, hops=255, csum_at=2)
    yield "ndp_solicit_dad", ipv6_packet(58, ns[:24], src=bytes(16), dst=group, hops=255,
                                         csum_at=2)
    yield "ndp_solicit_hops_64", ipv6_packet(58, ns, dst=group, hops=64, csum_at=2)
    echo = struct.pack("!BBHHH", 128, 0, 0, 0x1515, 7) + b"ping"
    yield "icmp6_echo", ipv6_packet(58, echo, csum_at=2)


def seeds():
    good = frame(roce_send_only())
    yield "udp_roce", good
    yield "udp_padded", frame(b"\x01\x02") + b"\0" * 14
    yield "udp_ip_options", frame(b"abcdefgh", options=b"\x01\x01\x01\x00")
    yield "fragment", frame(b"abcdefgh", frag=0x2000)
    yield "tcp", frame(b"abcdefgh", proto=6)
    vlan = DST_MAC + SRC_MAC + b"\x81\x00\x00\x05" + good[12:]
    yield "vlan", vlan
    yield "arp_frame", DST_MAC + SRC_MAC + b"\x08\x06" + bytes(28)
    yield "truncated", good[:38]
    yield "arp_table", ARP_TABLE.encode()
    yield "arp_table_no_newline", ARP_TABLE.rstrip("\n").encode()
    yield "arp_long_line", ("10.77.0.2 0x1 0x2 8a:1f:22:03:9c:01 * xa" + " " * 260 + "\n").encode()
    yield "empty", b""
    yield from ipv6_seeds()


if __name__ == "__main__":
    write_seeds(OUT, seeds())
