#!/usr/bin/env python3
"""Write the seed corpus of fuzz_rdma into tests/fuzz/corpus/rdma/.
Each seed is a sequence of records as tests/fuzz/fuzz_rdma.c reads them:
ctl, a 2-byte length, a RoCEv2 packet (BTH + extension headers + payload +
pad + 4 ICRC bytes the harness may replace). Encoded here from the IBTA
layouts with struct, independently of the C encoders. Run from the
repository root:
    python3 tests/fuzz/gen_rdma_corpus.py
"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "rdma")
TO_B, RC, UD, SEAL, STRANGER, TICK, POST, RETH = 1, 1 << 1, 2 << 1, 8, 16, 32, 64, 128
MTU = 256


def bth(opcode, psn, payload_len, ackreq=False, qpn=0x11):
    pad = (-payload_len) & 3
    return struct.pack("!BBHB3sB3s", opcode, pad << 4, 0xFFFF, 0, qpn.to_bytes(3, "big"),
                       0x80 if ackreq else 0, (psn & 0xFFFFFF).to_bytes(3, "big"))


def pkt(opcode, psn, payload=b"", ext=b"", ackreq=False, qpn=0x11):
    pad = (-len(payload)) & 3
    return bth(opcode, psn, len(payload), ackreq, qpn) + ext + payload + b"\0" * pad + b"\0" * 4


def reth(va, rkey, length):
    return struct.pack("!QII", va, rkey, length)


def aeth(syndrome, msn=0):
    return struct.pack("!B3s", syndrome, msn.to_bytes(3, "big"))


def atomic_eth(va, rkey, swap_add, compare=0):
    return struct.pack("!QIQQ", va, rkey, swap_add, compare)


def deth(qkey, src_qp):
    return struct.pack("!IB3s", qkey, 0, src_qp.to_bytes(3, "big"))


def rec(ctl, p):
    return struct.pack("!BH", ctl, len(p)) + p


def data(n, seed):
    return bytes((i * 31 + seed) & 0xFF for i in range(n))


B_RC = TO_B | RC | SEAL
SEEDS = {
    "write_only": rec(B_RC | RETH, pkt(0x0A, 0, data(100, 1), reth(0, 0, 100), True)),
    "write_three": b"".join([
        rec(B_RC | RETH, pkt(0x06, 0, data(MTU, 2), reth(0x100, 0, 700))),
        rec(B_RC, pkt(0x07, 1, data(MTU, 3))),
        rec(B_RC, pkt(0x09, 2, data(188, 4), struct.pack("!I", 7), True))]),
    "write_bad_rkey": rec(B_RC, pkt(0x0A, 0, data(8, 5), reth(0x1000, 0xDEAD0001, 8), True)),
    "read_request": rec(B_RC | RETH, pkt(0x0C, 0, b"", reth(0x200, 0, 1000))),
    "read_dup": b"".join([rec(B_RC | RETH, pkt(0x0C, 0, b"", reth(0x200, 0, 600))),
                          rec(B_RC | RETH | TICK, pkt(0x0C, 0, b"", reth(0x200, 0, 600)))]),
    "send_only": rec(B_RC, pkt(0x04, 0, data(100, 6), ackreq=True)),
    "send_first_last": b"".join([rec(B_RC, pkt(0x00, 0, data(MTU, 7))),
                                 rec(B_RC, pkt(0x02, 1, data(20, 8), ackreq=True))]),
    "send_too_long": b"".join([rec(B_RC, pkt(0x00 if i == 0 else 0x01, i, data(MTU, i)))
                               for i in range(17)] + [rec(B_RC, pkt(0x02, 17, data(9, 1), ackreq=True))]),
    "out_of_order": b"".join([rec(B_RC | RETH, pkt(0x0A, 5, data(4, 9), reth(0, 0, 4), True)),
                              rec(B_RC | RETH, pkt(0x0A, 0, data(4, 9), reth(0, 0, 4), True))]),
    "bad_sequence": b"".join([rec(B_RC, pkt(0x01, 0, data(MTU, 1))),
                              rec(B_RC, pkt(0x0A, 0, data(4, 1)))]),
    "acks_to_requester": b"".join([
        rec(POST | RC | SEAL, pkt(0x11, 0, ext=aeth(0x1F))),
        rec(RC | SEAL, pkt(0x11, 5, ext=aeth(0x60))),
        rec(RC | SEAL | TICK, pkt(0x11, 3, ext=aeth(0x2E))),
        rec(RC | SEAL, pkt(0x11, 3, ext=aeth(0x62)))]),
    "read_response": b"".join([
        rec(POST | RC | SEAL, pkt(0x11, 2, ext=aeth(0x1F))),
        rec(RC | SEAL, pkt(0x0D, 3, data(MTU, 1), aeth(0x1F))),
        rec(RC | SEAL, pkt(0x0E, 4, data(MTU, 2))),
        rec(RC | SEAL, pkt(0x0F, 5, data(188, 3), aeth(0x1F)))]),
    "atomic_fetch_add": rec(B_RC | RETH, pkt(0x14, 0, ext=atomic_eth(0x10, 0, 5), ackreq=True)),
    "atomic_cmp_swap_dup": b"".join([
        rec(B_RC | RETH, pkt(0x13, 0, ext=atomic_eth(0x20, 0, 9, 0), ackreq=True)),
        rec(B_RC | RETH, pkt(0x13, 0, ext=atomic_eth(0x20, 0, 9, 0), ackreq=True))]),
    "atomic_misaligned": rec(B_RC | RETH,
                             pkt(0x14, 0, ext=atomic_eth(0x0004 << 48, 0, 1), ackreq=True)),
    "atomic_with_payload": rec(B_RC | RETH, pkt(0x14, 0, data(8, 1), atomic_eth(0, 0, 1), True)),
    "atomic_ack_to_requester": b"".join([
        rec(POST | RC | SEAL, pkt(0x11, 2, ext=aeth(0x1F))),
        rec(RC | SEAL, pkt(0x0D, 3, data(MTU, 1), aeth(0x1F))),
        rec(RC | SEAL, pkt(0x12, 6, ext=aeth(0x1F) + struct.pack("!Q", 41))),
        rec(RC | SEAL, pkt(0x12, 6, ext=aeth(0x60) + struct.pack("!Q", 41)))]),
    "ud_send": b"".join([
        rec(TO_B | UD | SEAL, pkt(0x64, 0, data(50, 1), deth(0x11111111, 0x55))),
        rec(TO_B | UD | SEAL, pkt(0x65, 1, data(50, 1), deth(0x22222222, 0x55) + b"\0\0\0\1"))]),
    "uc_opcode_on_rc": rec(B_RC, pkt(0x2A, 0, data(4, 1), reth(0, 0, 4))),
    "stranger": rec(B_RC | STRANGER | RETH, pkt(0x0A, 0, data(4, 1), reth(0, 0, 4), True)),
    "garbage": rec(TO_B | RC, bytes(range(40))) + rec(0, b"\x11") + rec(TO_B, b""),
    "timers": b"".join([rec(POST | TICK, b"")] + [rec(TICK, b"") for _ in range(30)]),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, blob in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(blob)
    print(f"wrote {len(SEEDS)} seeds to {OUT}")


if __name__ == "__main__":
    main()
