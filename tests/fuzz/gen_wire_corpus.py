#!/usr/bin/env python3
"""Write the seed corpus of fuzz_wire into tests/fuzz/corpus/wire/.
An independent Python encoding of docs/wire.md (struct + zlib), so the seeds
also cross-check the C encoder. Run from the repository root:
    python3 tests/fuzz/gen_wire_corpus.py
"""
import os
import struct
import zlib

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "wire")
INC_QPN = 0x00C0DE
INC_QKEY = 0x494E4321
INC_TAG = 0x11223344
FLOW = (0x7F000001, 0x7F000002, 0xC000, 4791)  # src ip, dst ip, src port, dst port


def pad_of(payload_len):
    return (-(36 + payload_len)) & 3


def bth_deth(psn, pad):
    bth = struct.pack("!BBHB3sB3s", 0x64, pad << 4, 0xFFFF, 0,
                      INC_QPN.to_bytes(3, "big"), 0, psn.to_bytes(3, "big"))
    deth = struct.pack("!IB3s", INC_QKEY, 0, INC_QPN.to_bytes(3, "big"))
    return bth + deth


def inc_hdr(kind, flags, reason, group, op, dtype, rank, token, seq, slot, count):
    return struct.pack("!IBBBBHBBIQIHHB3x", INC_TAG, 1, kind, flags, reason, group, op,
                       dtype, rank, token, seq, slot, count, seq & 0xFF)


def ctrl(qnh, master, fail=0):
    return struct.pack("!BBBBBxHHHHHIIIIIIIIIIIHHI4x", 0, fail, master, qnh, 1, 0x3FF, 0x3FF,
                       4096, 16, 4, 0xA5A5, 8, 3, 0x0A000001, 0x0A000002, 0x0A000003, 77, 0,
                       5, 0x7F000002, 0x7F000001, 64, 32, 30000)


def icrc(roce, flow=FLOW):
    """The ICRC (little-endian) of a RoCEv2 UDP payload sent on flow, masked
    as the IBTA's RoCEv2 annex says."""
    src, dst, sport, dport = flow
    ip = struct.pack("!BBHHHBBHII", 0x45, 0xFF, 20 + 8 + len(roce) + 4, 0, 0x4000, 0xFF, 17,
                     0xFFFF, src, dst)
    udp = struct.pack("!HHHH", sport, dport, 8 + len(roce) + 4, 0xFFFF)
    masked = roce[:4] + b"\xff" + roce[5:]
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + ip + udp + masked))


def packet(hdr, payload, psn=0x000123):
    pad = pad_of(len(payload))
    roce = bth_deth(psn, pad) + hdr + payload + b"\0" * pad
    return roce + icrc(roce)


def ipv4_frame(roce):
    src, dst, sport, dport = FLOW
    ip = struct.pack("!BBHHHBBHII", 0x45, 0, 20 + 8 + len(roce), 0, 0x4000, 64, 17, 0, src, dst)
    return ip + struct.pack("!HHHH", sport, dport, 8 + len(roce), 0) + roce


def seeds():
    data = packet(inc_hdr(1, 0, 0, 7, 0, 2, 3, 0xDEADBEEF, 0x101, 1, 3),
                  struct.pack("!3i", 1, -2, 3))
    yield "data_sum_int32", data
    yield "data_max_uint8_pad", packet(inc_hdr(1, 1, 0, 7, 3, 4, 0, 9, 0x2FF, 2, 5),
                                       bytes([1, 2, 3, 4, 5]))
    yield "data_float64_retx", packet(inc_hdr(1, 2, 0, 65535, 1, 9, 12, 1, 0, 0, 2),
                                      struct.pack("!2d", 1.5, -0.25))
    yield "ctrl_query", packet(inc_hdr(2, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0), ctrl(0x01, 1))
    yield "ctrl_refuse", packet(inc_hdr(2, 0, 2, 0, 0, 0, 0, 0, 2, 0, 0), ctrl(0x23, 2, 2))
    yield "data_truncated", data[:len(data) - 7]
    yield "inc_hdr_only", data[20:56]
    yield "ipv4_frame_inc", ipv4_frame(data)
    yield "garbage", bytes((i * 37 + 11) & 0xFF for i in range(97))
    yield "empty", b""


def write_seeds(out, named_blobs):
    os.makedirs(out, exist_ok=True)
    for name, blob in named_blobs:
        with open(os.path.join(out, name), "wb") as f:
            f.write(blob)


if __name__ == "__main__":
    write_seeds(OUT, seeds())
