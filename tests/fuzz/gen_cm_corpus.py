#!/usr/bin/env python3
"""Write the seed corpus of fuzz_cm into tests/fuzz/corpus/cm/: a control
byte (bit 0: the harness seals the ICRC) then a RoCEv2 payload to QP 1 (BTH,
DETH, a CM MAD, 4 ICRC bytes). The MADs are laid out here from the IBTA's
tables with struct, independently of src/wire/cm.c. Run from the
repository root:
    python3 tests/fuzz/gen_cm_corpus.py
"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "cm")
SEAL, TO_ACTIVE, UD, WILDCARD = 1, 2, 4, 8


def frame(mad):
    bth = struct.pack("!BBHI", 0x64, 0, 0xFFFF, 1) + struct.pack("!I", 7)
    deth = struct.pack("!II", 0x80010000, 1)
    return bth + deth + mad + b"\0" * 4


def mad(attr, body, tid=0x1122334455667788):
    hdr = struct.pack("!BBBBHHQHHI", 1, 0x07, 2, 0x03, 0, 0, tid, attr, 0, 0)
    return hdr + body


def req(comm=0x01020304, qpn=0x123, psn=0x456, mtu=3):
    gid_l = bytes(10) + b"\xff\xff" + bytes([127, 0, 0, 1])
    gid_r = bytes(10) + b"\xff\xff" + bytes([127, 0, 0, 2])
    body = struct.pack("!IIQQII", comm, 0, 0x0000000001060000 | 4791, 0x7f0000010200, 0, 0)
    body += struct.pack("!I", qpn << 8 | 16) + struct.pack("!I", 16)
    body += struct.pack("!I", 20 << 3) + struct.pack("!I", psn << 8 | 20 << 3 | 7)
    body += struct.pack("!HBB", 0xFFFF, mtu << 4 | 7, 15 << 4)
    body += struct.pack("!HH", 0xFFFF, 0xFFFF) + gid_l + gid_r
    body += struct.pack("!IBBBB", 0, 0, 64, 0, 14 << 3) + bytes(44) + bytes(range(92))
    assert len(body) == 232
    return mad(0x10, body)


def rep(local=0x0a0b0c0d, remote=0x01020304, qpn=0x222, psn=0x333):
    body = struct.pack("!III", local, remote, 0) + struct.pack("!I", qpn << 8)
    body += struct.pack("!I", 0) + struct.pack("!I", psn << 8)
    body += struct.pack("!BBBB", 16, 16, 15 << 3, 7 << 5) + struct.pack("!Q", 0x7f0000020200)
    body += bytes(196)
    assert len(body) == 232
    return mad(0x13, body)


def short(attr, local, remote, reason=0):
    if attr == 0x12:
        body = struct.pack("!IIHH", local, remote, 0, reason) + bytes(72) + bytes(148)
    else:
        body = struct.pack("!II", local, remote) + bytes(224)
    return mad(attr, body)


def sidr_req(req_id=0x01020304, port=4791, service=0x0000000001110000):
    body = struct.pack("!IHHQ", req_id, 0xFFFF, 0, service | port) + bytes(range(216))
    assert len(body) == 232
    return mad(0x17, body)


def sidr_rep(req_id=0x01020305, status=0, info_len=0, qpn=0x222, qkey=0x11111111):
    body = struct.pack("!IBBHIQI", req_id, status, info_len, 0, qpn << 8,
                       0x0000000001110000 | 4791, qkey)
    body += bytes(72) + bytes(136)
    assert len(body) == 232
    return mad(0x18, body)


SEEDS = {
    "req": bytes([SEAL]) + frame(req()),
    "req_mtu_bad": bytes([SEAL]) + frame(req(mtu=9)),
    "req_qp1": bytes([SEAL]) + frame(req(qpn=1)),
    "rep_unknown": bytes([SEAL | TO_ACTIVE]) + frame(rep()),
    "rtu_unknown": bytes([SEAL]) + frame(short(0x14, 1, 2)),
    "rej": bytes([SEAL | TO_ACTIVE]) + frame(short(0x12, 1, 2, 28)),
    "mra": bytes([SEAL]) + frame(mad(0x11, bytes(232))),
    "wrong_class": bytes([SEAL]) + frame(mad(0x10, bytes(232))[:1] + b"\x81" +
                                         mad(0x10, bytes(232))[2:]),
    "unsealed": bytes([0]) + frame(req()),
    "short": bytes([SEAL]) + frame(req())[:100],
    "long": bytes([SEAL]) + frame(req()) + b"\0" * 8,
    "empty": bytes([SEAL]),
    "sidr_req": bytes([SEAL | UD]) + frame(sidr_req()),
    "sidr_req_other_port": bytes([SEAL | UD]) + frame(sidr_req(port=4792)),
    "sidr_req_tcp_space": bytes([SEAL | UD]) + frame(sidr_req(service=0x0000000001060000)),
    "sidr_req_to_rc": bytes([SEAL]) + frame(sidr_req()),
    "req_to_ud": bytes([SEAL | UD]) + frame(req()),
    "sidr_rep_unknown": bytes([SEAL | TO_ACTIVE | UD]) + frame(sidr_rep()),
    "sidr_rep_no_qp": bytes([SEAL | TO_ACTIVE | UD]) + frame(sidr_rep(status=3, qpn=0)),
    "sidr_rep_bad_status": bytes([SEAL | TO_ACTIVE | UD]) + frame(sidr_rep(status=6)),
    "sidr_rep_long_info": bytes([SEAL | TO_ACTIVE | UD]) + frame(sidr_rep(info_len=73)),
    "sidr_rep_qp1": bytes([SEAL | TO_ACTIVE | UD]) + frame(sidr_rep(qpn=1)),
    "req_on_every_address": bytes([SEAL | WILDCARD]) + frame(req()),
    "req_other_port_on_every_address": bytes([SEAL | WILDCARD]) + frame(req()[:32] + b"\x12\xb8"
                                                                         + req()[34:]),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, blob in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(blob)
    print(f"wrote {len(SEEDS)} seeds to {OUT}")


if __name__ == "__main__":
    main()
