#!/usr/bin/env python3
"""Write the seed corpus of fuzz_switch_path into tests/fuzz/corpus/switch_path/.
An input is records of a port byte, a 16-bit little-endian length and a
frame; the path's own address is 10.0.0.254 (fd00::fe), the neighbours on
ports 0..2 are 10.0.0.1..3, and 10.0.0.99 lies behind ports 1 and 2 (see
fuzz_switch_path.c). Frames are built here from RFC 826, 791, 768, 8200 and
4861 (struct), independently of src/wire.
Run from the repository root:
    python3 tests/fuzz/gen_switch_path_corpus.py
"""
import os
import struct

from gen_wire_corpus import write_seeds

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "switch_path")
OWN, FAR = 0x0A0000FE, 0x0A000063
OWN6 = bytes.fromhex("fd0000000000000000000000000000fe")
PEER6 = bytes.fromhex("fd000000000000000000000000000001")


def peer(i):
    return 0x0A000001 + i


def port_mac(i):
    return bytes([2, 0, 0, 0, 0, 0xA0 + i])


def peer_mac(i):
    return bytes([2, 0, 0, 0, 0, 0xB0 + i])


def checksum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def arp_request(port, target):
    body = struct.pack("!HHBBH6sI6sI", 1, 0x0800, 6, 4, 1, peer_mac(port), peer(port), bytes(6),
                       target)
    return b"\xff" * 6 + peer_mac(port) + b"\x08\x06" + body


def udp4(port, src, dst, sport, dport, payload, ttl=64):
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    hdr = struct.pack("!BBHHHBBHII", 0x45, 0, 20 + len(udp), 0, 0x4000, ttl, 17, 0, src, dst)
    hdr = hdr[:10] + struct.pack("!H", checksum(hdr)) + hdr[12:]
    return port_mac(port) + peer_mac(port) + b"\x08\x00" + hdr + udp


def ndp_solicit(target):
    group = bytes.fromhex("ff0200000000000000000001ff") + target[13:]
    ns = struct.pack("!BBHI", 135, 0, 0, 0) + target + b"\x01\x01" + peer_mac(0)
    pseudo = PEER6 + group + struct.pack("!IxxxB", len(ns), 58)
    ns = ns[:2] + struct.pack("!H", checksum(pseudo + ns)) + ns[4:]
    ip = struct.pack("!IHBB", 6 << 28, len(ns), 58, 255) + PEER6 + group
    return b"\x33\x33\xff" + target[13:] + peer_mac(0) + b"\x86\xdd" + ip + ns


def record(port, frame):
    return bytes([port]) + struct.pack("<H", len(frame)) + frame


def learn_all():
    return b"".join(record(p, arp_request(p, OWN)) for p in range(3))


def seeds():
    bth = struct.pack("!BBHII", 0x04, 0, 0xFFFF, 0x000123, 0x8000ABCD) + bytes(32) + bytes(4)
    yield "arp_for_us", record(0, arp_request(0, OWN))
    yield "forward", learn_all() + record(0, udp4(0, peer(0), peer(1), 1000, 2000, b"hello"))
    yield "forward_ecmp", learn_all() + b"".join(
        record(0, udp4(0, peer(0), FAR, 49152 + k, 4791, bth)) for k in range(8))
    yield "ttl_one", learn_all() + record(1, udp4(1, peer(1), peer(2), 1, 2, b"x", ttl=1))
    yield "inc_to_us", record(2, udp4(2, peer(2), OWN, 49152, 4791, bth))
    yield "no_route", record(0, udp4(0, peer(0), 0x0B000001, 1, 2, b"nowhere"))
    yield "ndp_for_us", record(0, ndp_solicit(OWN6))
    yield "shaped_burst", learn_all() + b"".join(
        record(0, udp4(0, peer(0), peer(2), 7, 8, bytes(1400))) for _ in range(40))
    yield "truncated", record(1, udp4(1, peer(1), peer(0), 1, 2, b"abc")[:30])
    yield "empty", b""


if __name__ == "__main__":
    write_seeds(OUT, seeds())
