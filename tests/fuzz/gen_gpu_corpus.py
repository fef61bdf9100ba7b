#!/usr/bin/env python3
"""Seeds for fuzz_gpu: queues as device code leaves them (tests/fuzz/fuzz_gpu.c
describes the layout): good writes, a bad opcode, an out-of-range offset, a
bad key, a doorbell ahead of the entries and one far beyond the queue."""
import os
import struct
import sys

REC = struct.Struct("<IIIIQII")


def wqe(ticket, opcode=1, length=256, flags=0, off=0, remote=0x80000000, imm=0, seq=None):
    return REC.pack(ticket + 1 if seq is None else seq, opcode, length, flags, off, remote, imm)


def queue(bell, *entries):
    return struct.pack("<I", bell) + b"".join(entries)


def main(out):
    os.makedirs(out, exist_ok=True)
    seeds = {
        "two_writes": queue(2, wqe(0), wqe(1, off=256, remote=0x80000100)),
        "write_imm": queue(1, wqe(0, opcode=2, imm=77)),
        "bad_opcode": queue(2, wqe(0, opcode=9), wqe(1)),
        "flags_set": queue(1, wqe(0, flags=1)),
        "out_of_range": queue(2, wqe(0, off=8000, length=400), wqe(1, off=2**64 - 8)),
        "bad_rkey": queue(3, wqe(0, remote=0x1234), wqe(1), wqe(2)),
        "remote_past_region": queue(1, wqe(0, remote=0x8000ff80, length=4096)),
        "bell_ahead": queue(3, wqe(0), wqe(1, seq=0)),
        "bell_beyond": queue(0xffffff00, wqe(0)),
        "full_queue": queue(16, *[wqe(t, off=t * 64, length=64, remote=0x80000000 + t * 64)
                                  for t in range(16)]),
        "empty": b"",
    }
    for name, blob in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(blob)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "gpu"))
