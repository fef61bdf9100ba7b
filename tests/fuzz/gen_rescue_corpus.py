#!/usr/bin/env python3
"""Seeds for fuzz_rescue: one message of each type, as the leaders send them
(docs/wire.md section 12), plus a truncated and a trailing-byte variant."""
import os
import struct
import sys

HDR = struct.Struct(">4sBBBBIIIQQIII")


def msg(mtype, state, seq, completed, offset=0, total=0, data=b""):
    return HDR.pack(b"OPRS", 1, mtype, state, 0, 1234, 0xBEEF, 7, seq, completed, offset,
                    total, len(data)) + data


def main(out):
    os.makedirs(out, exist_ok=True)
    seeds = {
        "status_req_gave_up": msg(1, 2, 5, 4),
        "status_in_call": msg(2, 1, 6, 5, total=4096),
        "fetch_req": msg(3, 2, 5, 4, offset=8192),
        "data_chunk": msg(4, 0, 5, 5, offset=2, total=10, data=bytes(range(5))),
        "data_not_held": msg(4, 3, 5, 0),
        "truncated": msg(2, 1, 6, 5)[:30],
        "trailing": msg(1, 0, 1, 0) + b"\0",
    }
    for name, blob in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(blob)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "rescue"))
