#!/usr/bin/env python3
"""Write the seed corpus of fuzz_switch into tests/fuzz/corpus/switch/.
Each seed is a sequence of records as tests/fuzz/fuzz_switch.c reads them:
ctl (source, target, flags), a 2-byte length, an INC packet (docs/wire.md)
whose last 4 bytes the harness replaces by the right ICRC. The fabric is
incsim's: s0 over t0 (L0) and t1 (L1, L2), group 1 of communicator 7/1/0.
The found_* files beside the seeds are small inputs the fuzzer found that
reach paths the seeds do not; this script leaves them alone.
Run from the repository root:
    python3 tests/fuzz/gen_switch_corpus.py
"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "switch")
INC_QPN = 0x00C0DE
INC_QKEY = 0x494E4321
INC_TAG = 0x11223344

L0, L1, L2, S0, T0, T1, STRANGER, SPOOF = range(8)          # ctl bits 0-2
TO_T0, TO_T1, TO_S0, TO_L0 = (0 << 3, 1 << 3, 2 << 3, 3 << 3)  # ctl bits 3-4
SEAL, GROUP, TICK = 0x20, 0x40, 0x80
IP = {L0: 0x7F010001, L1: 0x7F010002, L2: 0x7F010003,
      S0: 0x7F030001, T0: 0x7F020001, T1: 0x7F020002}
QUERY, NOTIFY, REFUSE, KILL = 1, 2, 3, 4
SUM, MAX = 0, 3
INT32, INT64, FLOAT64 = 2, 3, 9
JOB = 7


def pad_of(payload_len):
    return (-(36 + payload_len)) & 3


def packet(kind, payload, group=0, token=0, rank=0, flags=0, op=0, dtype=0, seq=0,
           slot=0, count=0):
    pad = pad_of(len(payload))
    bth = struct.pack("!BBHB3sB3s", 0x64, pad << 4, 0xFFFF, 0,
                      INC_QPN.to_bytes(3, "big"), 0, (0).to_bytes(3, "big"))
    deth = struct.pack("!IB3s", INC_QKEY, 0, INC_QPN.to_bytes(3, "big"))
    hdr = struct.pack("!IBBBBHBBIQIHHB3x", INC_TAG, 1, kind, flags, 0, group, op, dtype,
                      rank, token, seq, slot, count, seq & 0xFF)
    return bth + deth + hdr + payload + b"\0" * pad + b"\0\0\0\0"  # ICRC: the harness's


def ctrl(qtype, comm=1, size=3, local=0, src=L0, master=L0, spine=0, fail=0, rank=0, group=0,
         window=0xFFFF, token=0):
    c = struct.pack("!BBBBBxHHHHHIIIIIIIIIIIHHI4x", 1, fail, 1, qtype, 1, 0xFFFF, 0xFFFF,
                    0xFFFF, size, local, comm, 0, 0, 0, spine, 0, JOB, 0, 0, IP[master],
                    IP[src], window, 0xFFFF, 0)
    return packet(2, c, group=group, token=token, rank=rank)


def data(values, seq=0, group=1, token=0, rank=0, flags=0, op=SUM, dtype=INT64, window=32):
    fmt = {INT32: "!%di", INT64: "!%dq", FLOAT64: "!%dd"}[dtype] % len(values)
    return packet(1, struct.pack(fmt, *values), group, token, rank, flags, op, dtype, seq,
                  seq % window, len(values))


def rec(ctl, pkt):
    return bytes([ctl]) + struct.pack("!H", len(pkt)) + pkt


def seeds():
    yield "empty", b""
    # a member's contribution, to the real group (its token gets masked)
    yield "member_data", rec(L0 | TO_T0 | SEAL | GROUP, data([1, 2, 3], rank=0))
    # the real id and token from a stranger, and from L0's address on another port
    yield "stranger_data", (rec(STRANGER | TO_T0 | SEAL | GROUP, data([5] * 4)) +
                            rec(SPOOF | TO_T0 | SEAL | GROUP, data([5] * 4)) +
                            rec(STRANGER | TO_S0 | SEAL | GROUP, data([5] * 4, rank=0)))
    # the members ask again: the TORs re-deliver the notify
    yield "query_again", (rec(L1 | TO_T1 | SEAL, ctrl(QUERY, src=L1, rank=1)) +
                          rec(L0 | TO_T0 | SEAL, ctrl(QUERY, src=L0)) +
                          rec(L0 | TO_T0 | SEAL | TICK, ctrl(NOTIFY, src=L0, spine=IP[S0])))
    # L0 builds a group of its own (communicator 2, group 2), runs two chunks
    # through it (once more: a duplicate), and kills it
    yield "own_group", (rec(L0 | TO_T0 | SEAL, ctrl(QUERY, comm=2, size=1)) +
                        rec(L0 | TO_T0 | SEAL, ctrl(NOTIFY, comm=2, size=1, spine=IP[S0])) +
                        rec(L0 | TO_T0 | SEAL | GROUP, data([9, 9], group=2)) +
                        rec(L0 | TO_T0 | SEAL | GROUP, data([9, 9], group=2, seq=1)) +
                        rec(L0 | TO_T0 | SEAL | GROUP, data([9, 9], group=2, seq=1, flags=2)) +
                        rec(L0 | TO_T0 | SEAL | GROUP, ctrl(KILL, comm=2, size=1, group=2)))
    # L1 and L2 in group 2 (master L1): contributions in both orders, floats too
    yield "own_pair_data", (
        rec(L1 | TO_T1 | SEAL, ctrl(QUERY, comm=2, size=2, src=L1, master=L1)) +
        rec(L2 | TO_T1 | SEAL, ctrl(QUERY, comm=2, size=2, src=L2, master=L1, rank=1)) +
        rec(L1 | TO_T1 | SEAL, ctrl(NOTIFY, comm=2, size=2, src=L1, master=L1, spine=IP[S0])) +
        rec(L1 | TO_T1 | SEAL | GROUP, data([1.0, -2.0], group=2, dtype=FLOAT64)) +
        rec(L2 | TO_T1 | SEAL | GROUP, data([0.5, 4.0], group=2, rank=1, dtype=FLOAT64)) +
        rec(L2 | TO_T1 | SEAL | GROUP, data([3, 1], group=2, rank=1, seq=1, op=MAX, dtype=INT32)) +
        rec(L1 | TO_T1 | SEAL | GROUP, data([3, 1], group=2, seq=1, op=MAX, dtype=INT32)) +
        rec(L1 | TO_T1 | SEAL | GROUP | TICK, data([3, 1], group=2, seq=1, op=MAX, dtype=INT32)))
    # group 2 again: slot 0 reused by seq 32 (window 32), then seq 0 resent
    # (the previous round's result answers it), results from the spine that
    # come twice or disagree
    g2 = (rec(L0 | TO_T0 | SEAL, ctrl(QUERY, comm=2, size=1)) +
          rec(L0 | TO_T0 | SEAL, ctrl(NOTIFY, comm=2, size=1, spine=IP[S0])))
    yield "slot_reuse", (g2 +
                         rec(L0 | TO_T0 | SEAL | GROUP, data([1], group=2)) +
                         rec(L0 | TO_T0 | SEAL | GROUP, data([2], group=2, seq=32)) +
                         rec(L0 | TO_T0 | SEAL | GROUP, data([1], group=2, flags=2)) +
                         rec(S0 | TO_T0 | SEAL | GROUP, data([3], group=2, seq=32, flags=1)) +
                         rec(L0 | TO_T0 | SEAL | GROUP, data([4], group=2, seq=64)))
    yield "result_twice", (g2 +
                           rec(S0 | TO_T0 | SEAL | GROUP, data([5, 6], group=2, flags=1)) +
                           rec(L0 | TO_T0 | SEAL | GROUP, data([5, 6], group=2)) +
                           rec(S0 | TO_T0 | SEAL | GROUP, data([5], group=2, flags=1)) +
                           rec(S0 | TO_T0 | SEAL | GROUP, data([5, 6], group=2, flags=1)) +
                           rec(S0 | TO_T0 | SEAL | GROUP, data([5, 6], group=2, flags=1)))
    # a group t0 got from "the spine" that the spine does not hold: t0 waits for
    # a result (slot 0 up) while L0 retransmits and wrong results come down
    yield "orphan_group", (
        rec(L0 | TO_T0 | SEAL, ctrl(QUERY, comm=8, size=1)) +
        rec(S0 | TO_T0 | SEAL, ctrl(NOTIFY, comm=8, size=1, local=1, group=900, token=0x55)) +
        rec(L0 | TO_T0 | SEAL | GROUP, data([1, 2], group=900)) +
        rec(L0 | TO_T0 | SEAL | GROUP, data([1, 2], group=900, flags=2)) +
        rec(L0 | TO_T0 | SEAL | GROUP | TICK, data([1, 2], group=900, flags=2)) +
        rec(S0 | TO_T0 | SEAL | GROUP, data([1], group=900, flags=1)) +
        rec(S0 | TO_T0 | SEAL | GROUP, data([1, 2], group=900, seq=1, flags=1)) +
        rec(S0 | TO_T0 | SEAL | GROUP, data([7, 7], group=900, flags=1)) +
        rec(S0 | TO_T0 | SEAL | GROUP, ctrl(KILL, comm=8, group=900)))
    # a notify asking for window 0: the spine refuses, and refuses again
    yield "refused", (rec(L0 | TO_T0 | SEAL, ctrl(QUERY, comm=6, size=1)) +
                      rec(L0 | TO_T0 | SEAL, ctrl(NOTIFY, comm=6, size=1, spine=IP[S0], window=0)) +
                      rec(L0 | TO_T0 | SEAL, ctrl(QUERY, comm=6, size=1)) +
                      rec(L0 | TO_T0 | SEAL, ctrl(NOTIFY, comm=6, size=1, spine=IP[S0])))
    # a spine's notify that reuses the leaders' group id at t0 for another
    # communicator: a switch may do that (the allreduce then fails)
    yield "spine_replaces_group", (
        rec(L0 | TO_T0 | SEAL, ctrl(QUERY, comm=5, size=1)) +
        rec(S0 | TO_T0 | SEAL | GROUP, ctrl(NOTIFY, comm=5, size=1, local=1)))
    # L1 and L2 under t1, master L1, communicator 3
    yield "pair_group", (rec(L1 | TO_T1 | SEAL, ctrl(QUERY, comm=3, size=2, src=L1, master=L1)) +
                         rec(L2 | TO_T1 | SEAL, ctrl(QUERY, comm=3, size=2, src=L2, master=L1,
                                                    rank=1)) +
                         rec(L1 | TO_T1 | SEAL, ctrl(NOTIFY, comm=3, size=2, src=L1,
                                                     master=L1, spine=IP[S0])))
    # a kill of the real group with a wrong token, and of one that does not exist
    yield "kill", (rec(L0 | TO_T0 | SEAL | GROUP, ctrl(KILL)) +
                   rec(L0 | TO_T0 | SEAL, ctrl(KILL)) +
                   rec(STRANGER | TO_T0 | SEAL | GROUP, ctrl(KILL)))
    # the switches' own messages: a partial up, a result down, a notify, a refusal
    yield "switch_data", (rec(T0 | TO_S0 | SEAL | GROUP, data([4] * 8, rank=0)) +
                          rec(S0 | TO_T0 | SEAL | GROUP, data([4] * 8, flags=1)) +
                          rec(T1 | TO_S0 | SEAL | GROUP, data([1.5, 2.5], rank=1, dtype=FLOAT64)))
    yield "switch_ctrl", (rec(L0 | TO_T0 | SEAL, ctrl(QUERY, comm=4, size=1)) +
                          rec(S0 | TO_T0 | SEAL, ctrl(REFUSE, comm=4, size=1, fail=2)) +
                          rec(S0 | TO_T0 | SEAL | GROUP, ctrl(NOTIFY, comm=5, size=1, local=1)) +
                          rec(T0 | TO_S0 | SEAL, ctrl(QUERY, comm=1, src=L0)))
    # a retransmission flagged chunk, one with a seq a window ahead, a leader fed directly
    yield "retx_stale", (rec(L2 | TO_T1 | SEAL | GROUP, data([7] * 3, rank=2, flags=2)) +
                         rec(L2 | TO_T1 | SEAL | GROUP, data([7] * 3, rank=2, seq=35)) +
                         rec(T0 | TO_L0 | SEAL | GROUP, data([7] * 3, flags=1)))
    # not INC at all, and INC with the ICRC left wrong
    yield "garbage", (rec(STRANGER | TO_T0, b"\x04\x00\xff\xff" + b"\xab" * 72) +
                      rec(L0 | TO_T0, data([1]) ) +
                      rec(L0 | TO_S0 | SEAL, b"\x64" * 60))


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, blob in seeds():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(blob)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
