#!/usr/bin/python3
"""An independent RoCEv2 decoder and checker for packet captures.

Reads a pcap (tcpdump -w) with scapy, takes every selected UDP datagram as
RoCEv2 and checks, without any of offpath's C code:

- the BTH: a known RC/UC/UD (or CNP) opcode, TVer 0, reserved bits zero,
  a valid P_Key;
- the extension headers each opcode carries (RETH, AETH, DETH, ImmDt,
  AtomicETH, AtomicAckETH) fit, PadCnt and the payload length agree, pad
  bytes are zero, opcodes without payload carry none;
- the ICRC, computed here with zlib.crc32 from the IBTA rules (8 x 0xff,
  the IP header as captured with TOS/TTL/checksum all ones, the UDP header
  with checksum all ones, BTH byte 4 all ones, the rest as sent);
- per queue pair and direction: request PSNs consecutive mod 2^24 (a READ
  request uses one PSN per response packet); a PSN going back is a
  retransmission (allowed for RC, counted; an error for UC); message
  structure FIRST -> MIDDLE* -> LAST of one kind; FIRST/MIDDLE payloads
  exactly one MTU, all equal; WRITE payloads add up to the RETH length;
- responses: ACK/NAK syndromes valid, the PSN of an ACK inside what the
  requester sent, MSN never going back; a READ response burst starts at a
  READ request's PSN, runs consecutively and carries the request's length.

A UDP datagram may hold several RoCEv2 packets back to back (UDP GSO, as
offpath's io layer sends runs of packets on loopback): all of one size but
the last. The decoder finds that size (the one for which every piece is a
BTH with a valid ICRC) and checks each piece with an IP/UDP header of its
own length.

CLI: /usr/bin/python3 tests/system/roce_decode.py file.pcap [--udp-port N ...]
     [--all-udp] [--mtu M] [--allow-loss] [--quiet]
prints per-opcode counts, flows and errors; exit status 0 when the capture
is clean, 1 on any error, 2 when the file cannot be read.
API: decode_pcap(path, ports=(4791,), all_udp=False, mtu=None) -> Report.
"""
import argparse
import struct
import sys
import zlib
from collections import Counter

from scapy.all import IP, UDP, IPv6, PcapReader, raw  # noqa: F401  (python3-scapy)

ROCE_PORT = 4791
MAX_ERRORS_KEPT = 200

# --------------------------------------------------------------------------
# opcodes

TRANSPORTS = {0x00: "RC", 0x20: "UC", 0x60: "UD"}

# low 5 bits -> (name, kind, position, extension headers, has payload)
# kind: SEND, WRITE, READ, RESP (read response), ACK, ATOMIC
_OPS = {
    0x00: ("SEND_FIRST", "SEND", "FIRST", (), True),
    0x01: ("SEND_MIDDLE", "SEND", "MIDDLE", (), True),
    0x02: ("SEND_LAST", "SEND", "LAST", (), True),
    0x03: ("SEND_LAST_WITH_IMMEDIATE", "SEND", "LAST", ("ImmDt",), True),
    0x04: ("SEND_ONLY", "SEND", "ONLY", (), True),
    0x05: ("SEND_ONLY_WITH_IMMEDIATE", "SEND", "ONLY", ("ImmDt",), True),
    0x06: ("RDMA_WRITE_FIRST", "WRITE", "FIRST", ("RETH",), True),
    0x07: ("RDMA_WRITE_MIDDLE", "WRITE", "MIDDLE", (), True),
    0x08: ("RDMA_WRITE_LAST", "WRITE", "LAST", (), True),
    0x09: ("RDMA_WRITE_LAST_WITH_IMMEDIATE", "WRITE", "LAST", ("ImmDt",), True),
    0x0a: ("RDMA_WRITE_ONLY", "WRITE", "ONLY", ("RETH",), True),
    0x0b: ("RDMA_WRITE_ONLY_WITH_IMMEDIATE", "WRITE", "ONLY", ("RETH", "ImmDt"), True),
    0x0c: ("RDMA_READ_REQUEST", "READ", "ONLY", ("RETH",), False),
    0x0d: ("RDMA_READ_RESPONSE_FIRST", "RESP", "FIRST", ("AETH",), True),
    0x0e: ("RDMA_READ_RESPONSE_MIDDLE", "RESP", "MIDDLE", (), True),
    0x0f: ("RDMA_READ_RESPONSE_LAST", "RESP", "LAST", ("AETH",), True),
    0x10: ("RDMA_READ_RESPONSE_ONLY", "RESP", "ONLY", ("AETH",), True),
    0x11: ("ACKNOWLEDGE", "ACK", "ONLY", ("AETH",), False),
    0x12: ("ATOMIC_ACKNOWLEDGE", "ACK", "ONLY", ("AETH", "AtomicAckETH"), False),
    0x13: ("COMPARE_SWAP", "ATOMIC", "ONLY", ("AtomicETH",), False),
    0x14: ("FETCH_ADD", "ATOMIC", "ONLY", ("AtomicETH",), False),
}
HDR_LEN = {"RETH": 16, "AETH": 4, "DETH": 8, "ImmDt": 4, "AtomicETH": 28, "AtomicAckETH": 8}
CNP_OPCODE = 0x81


def _build_opcodes():
    table = {}
    for base, tr in TRANSPORTS.items():
        for low, (name, kind, pos, hdrs, payload) in _OPS.items():
            if tr == "UC" and low > 0x0b:
                continue  # UC: SEND and WRITE only
            if tr == "UD":
                if low not in (0x04, 0x05):
                    continue  # UD: SEND_ONLY (+IMM), with a DETH
                hdrs = ("DETH",) + hdrs
            table[base + low] = (f"{tr}_{name}", tr, kind, pos, hdrs, payload)
    table[CNP_OPCODE] = ("CNP", "CNP", "CNP", "ONLY", (), False)
    return table


OPCODES = _build_opcodes()


def opcode_name(op):
    return OPCODES[op][0] if op in OPCODES else f"UNKNOWN_0x{op:02x}"


def diff24(a, b):
    """a - b as a signed 24-bit PSN difference."""
    d = (a - b) & 0xffffff
    return d - 0x1000000 if d & 0x800000 else d


# --------------------------------------------------------------------------
# ICRC

def icrc_of(ip_hdr, udp_hdr, roce):
    """ICRC of `roce` (BTH .. pad, without the ICRC) sent under these IP and
    UDP headers (as captured: their length fields must already describe
    this one packet). IBTA A17.8: masked fields set to all ones."""
    ip = bytearray(ip_hdr)
    if ip[0] >> 4 == 4:
        ip[1] = 0xff            # TOS (DSCP + ECN)
        ip[8] = 0xff            # TTL
        ip[10:12] = b"\xff\xff"  # header checksum
    else:
        ip[0] |= 0x0f           # traffic class (high nibble)
        ip[1] = 0xff            # traffic class (low nibble) + flow label
        ip[2:4] = b"\xff\xff"   # flow label
        ip[7] = 0xff            # hop limit
    udp = bytearray(udp_hdr)
    udp[6:8] = b"\xff\xff"      # UDP checksum
    bth = bytearray(roce[:12])
    bth[4] = 0xff               # FECN, BECN, reserved
    crc = zlib.crc32(b"\xff" * 8)
    crc = zlib.crc32(bytes(ip), crc)
    crc = zlib.crc32(bytes(udp), crc)
    crc = zlib.crc32(bytes(bth), crc)
    return zlib.crc32(roce[12:], crc) & 0xffffffff


def headers_for(dg, seg_len):
    """IP and UDP headers of one packet of `seg_len` bytes cut from datagram
    `dg` (the captured headers with their length fields rewritten)."""
    ip = bytearray(dg.ip_hdr)
    if dg.ipver == 4:
        struct.pack_into("!H", ip, 2, len(ip) + 8 + seg_len)
    else:
        struct.pack_into("!H", ip, 4, 8 + seg_len)
    udp = struct.pack("!HHHH", dg.sport, dg.dport, 8 + seg_len, dg.udp_csum)
    return bytes(ip), udp


def icrc_ok(dg, off, seg_len):
    """(ok, wire value, computed value) for the packet at dg.payload[off:off+seg_len]."""
    if seg_len < 16:
        return False, None, None
    seg = dg.payload[off:off + seg_len]
    ip, udp = headers_for(dg, seg_len)
    want = icrc_of(ip, udp, seg[:-4])
    got = struct.unpack("<I", seg[-4:])[0]
    return got == want, got, want


# --------------------------------------------------------------------------
# reading the capture

class Datagram:
    __slots__ = ("frame", "ipver", "ip_hdr", "src", "dst", "sport", "dport", "udp_csum",
                 "payload", "ip_id")

    def endpoint_key(self):
        return (self.src, self.sport, self.dst, self.dport)


def read_datagrams(path, errors):
    """Yields a Datagram for every UDP datagram of the capture (IPv4/IPv6,
    any link type scapy knows). Fragments and truncated frames go to
    `errors`."""
    with PcapReader(path) as rd:
        for frame, pkt in enumerate(rd, 1):
            if IP in pkt:
                ip = pkt[IP]
                if ip.proto != 17:
                    continue
                b = raw(ip)
                ihl = (b[0] & 0x0f) * 4
                total = struct.unpack("!H", b[2:4])[0]
                if ip.flags.MF or ip.frag:
                    errors.append(f"frame {frame}: IPv4 fragment (RoCEv2 must not be fragmented)")
                    continue
                ipver = 4
            elif IPv6 in pkt:
                ip = pkt[IPv6]
                if ip.nh != 17:
                    continue
                b = raw(ip)
                ihl = 40
                total = 40 + struct.unpack("!H", b[4:6])[0]
                ipver = 6
            else:
                continue
            if len(b) < total or total < ihl + 8:
                errors.append(f"frame {frame}: truncated capture ({len(b)} of {total} IP bytes; "
                              "raise tcpdump -s)")
                continue
            dg = Datagram()
            dg.frame = frame
            dg.ipver = ipver
            dg.ip_hdr = b[:ihl]
            dg.src, dg.dst = ip.src, ip.dst
            dg.ip_id = struct.unpack("!H", b[4:6])[0] if ipver == 4 else None
            dg.sport, dg.dport, ulen, dg.udp_csum = struct.unpack("!HHHH", b[ihl:ihl + 8])
            dg.payload = bytes(b[ihl + 8:total])
            if ulen != total - ihl:
                errors.append(f"frame {frame}: UDP length {ulen} disagrees with the IP length "
                              f"({total - ihl})")
            yield dg


def _bth_like(p, off, pkey):
    """Cheap test that a GSO piece could start at `off`."""
    return (p[off] in OPCODES and p[off + 1] & 0x0f == 0
            and p[off + 2] == pkey[0] and p[off + 3] == pkey[1])


def split_datagram(dg):
    """The (offset, length) of each RoCEv2 packet in a datagram: the whole
    payload when its ICRC holds; else the GSO segment size (a multiple of 4,
    every piece starting with a BTH) under which the most pieces validate."""
    p = dg.payload
    n = len(p)
    whole = [(0, n)]
    if n < 16 or icrc_ok(dg, 0, n)[0] or n < 32:
        return whole
    pkey = p[2:4]
    best, best_score = None, 0
    for s in range(16, n, 4):
        if not _bth_like(p, s, pkey):
            continue
        offs = range(0, n, s)
        if any(not _bth_like(p, o, pkey) or n - o < 16 for o in offs[1:]):
            continue
        pieces = [(o, min(s, n - o)) for o in offs]
        score = sum(1 for o, ln in pieces if icrc_ok(dg, o, ln)[0])
        if score > best_score:
            best, best_score = pieces, score
            if score == len(pieces):
                break
    return best if best else whole


# --------------------------------------------------------------------------
# one packet

class Pkt:
    __slots__ = ("dg", "off", "idx", "op", "name", "tr", "kind", "pos", "se", "migreq",
                 "pad", "tver", "pkey", "fbyte", "dqpn", "ackreq", "resv7", "psn",
                 "reth", "aeth", "deth", "imm", "payload_len", "icrc_ok", "icrc_got",
                 "icrc_want", "stream")

    def where(self):
        d = self.dg
        return (f"frame {d.frame}" + (f" pkt {self.idx}" if self.idx else "") +
                f" {d.src}:{d.sport}->{d.dst}:{d.dport} {self.name} QP 0x{self.dqpn:06x} "
                f"PSN 0x{self.psn:06x}")


def parse_packet(dg, off, ln, idx, errors):
    """Decodes and checks the layout of one packet; returns a Pkt, or None
    (with an error) when the opcode is unknown or the headers do not fit."""
    b = dg.payload[off:off + ln]
    if ln < 16:
        errors.append(f"frame {dg.frame}: {ln} bytes, shorter than BTH + ICRC")
        return None
    k = Pkt()
    k.dg, k.off, k.idx = dg, off, idx
    k.op = b[0]
    k.se, k.migreq = b[1] >> 7, (b[1] >> 6) & 1
    k.pad, k.tver = (b[1] >> 4) & 3, b[1] & 0x0f
    k.pkey = struct.unpack("!H", b[2:4])[0]
    k.fbyte = b[4]
    k.dqpn = struct.unpack("!I", b[4:8])[0] & 0xffffff
    k.ackreq, k.resv7 = b[8] >> 7, b[8] & 0x7f
    k.psn = struct.unpack("!I", b[8:12])[0] & 0xffffff
    k.name = opcode_name(k.op)
    k.reth = k.aeth = k.deth = k.imm = None
    k.stream = None
    ok, k.icrc_got, k.icrc_want = icrc_ok(dg, off, ln)
    k.icrc_ok = ok
    if not ok:
        errors.append(f"{k.where()}: ICRC 0x{k.icrc_got:08x} on the wire, "
                      f"0x{k.icrc_want:08x} computed")
    if k.op not in OPCODES:
        errors.append(f"{k.where()}: unknown opcode 0x{k.op:02x}")
        return None
    _name, k.tr, k.kind, k.pos, hdrs, has_payload = OPCODES[k.op]
    if k.tver != 0:
        errors.append(f"{k.where()}: TVer {k.tver}, not 0")
    if k.fbyte & 0x3f:
        errors.append(f"{k.where()}: BTH byte 4 reserved bits 0x{k.fbyte & 0x3f:02x}")
    if k.resv7:
        errors.append(f"{k.where()}: BTH byte 8 reserved bits 0x{k.resv7:02x}")
    if k.pkey & 0x7fff == 0:
        errors.append(f"{k.where()}: invalid P_Key 0x{k.pkey:04x}")
    pos = 12
    for h in hdrs:
        hl = HDR_LEN[h]
        if pos + hl + 4 > ln:
            errors.append(f"{k.where()}: {ln} bytes, too short for its {h}")
            return None
        v = b[pos:pos + hl]
        if h == "RETH":
            k.reth = struct.unpack("!QII", v)
        elif h == "AETH":
            k.aeth = (v[0], struct.unpack("!I", v)[0] & 0xffffff)
        elif h == "DETH":
            k.deth = (struct.unpack("!I", v[:4])[0], struct.unpack("!I", v[4:])[0] & 0xffffff)
            if v[4]:
                errors.append(f"{k.where()}: DETH reserved byte 0x{v[4]:02x}")
        elif h == "ImmDt":
            k.imm = struct.unpack("!I", v)[0]
        pos += hl
    body = ln - pos - 4
    if body % 4:
        errors.append(f"{k.where()}: payload + pad of {body} bytes is not a multiple of 4")
    if k.pad > body:
        errors.append(f"{k.where()}: PadCnt {k.pad} but only {body} bytes after the headers")
        return None
    k.payload_len = body - k.pad
    if any(b[ln - 4 - k.pad:ln - 4]):
        errors.append(f"{k.where()}: pad bytes not zero")
    if k.op == CNP_OPCODE:
        if body != 16:
            errors.append(f"{k.where()}: CNP with {body} bytes after the BTH (16 expected)")
    elif not has_payload and body:
        errors.append(f"{k.where()}: {body} bytes of payload on an opcode that has none")
    elif k.tr == "UD" and k.payload_len > 4096:
        errors.append(f"{k.where()}: UD payload {k.payload_len} > 4096")
    if k.aeth is not None:
        syn = k.aeth[0]
        if not (syn <= 0x3f or 0x60 <= syn <= 0x63):
            errors.append(f"{k.where()}: AETH syndrome 0x{syn:02x} is reserved")
        elif k.kind == "RESP" and syn > 0x1f:
            errors.append(f"{k.where()}: READ response with a NAK syndrome 0x{syn:02x}")
    return k


# --------------------------------------------------------------------------
# PSN and message checks, per queue pair and direction

class ReqStream:
    """Requests (SEND/WRITE/READ/atomic) to one QP from one UDP endpoint."""

    def __init__(self, key, tr, mtu, allow_loss=False):
        self.key, self.tr, self.mtu, self.allow_loss = key, tr, mtu, allow_loss
        self.first = None        # first PSN seen
        self.lo = self.hi = None  # the next PSN expected lies in [lo, hi]
        self.high = None         # one past the highest PSN sent
        self.open = None         # None, "SEND", "WRITE" or "?" (resumed mid-message)
        self.msg_len = None      # RETH length of the open WRITE
        self.msg_bytes = 0
        self.reads = {}          # first PSN -> DMA lengths READ requests asked for there
        self.packets = self.retransmitted = self.go_backs = self.lost = 0
        self.ops = Counter()
        self.mtu_seen = set()
        self.seen = set()        # PSNs (as offsets from first) a request covered

    def span(self, length):
        """(min, max) PSNs a READ of `length` bytes uses."""
        if self.mtu:
            n = max(1, -(-length // self.mtu))
            return n, n
        return max(1, -(-length // 4096)), max(1, -(-length // 256))

    def feed(self, k, err):
        self.packets += 1
        self.ops[k.name] += 1
        if self.first is None:
            self.first, self.lo, self.hi, self.high = k.psn, k.psn, k.psn, k.psn
        if diff24(k.psn, self.high) < 0:
            self.retransmitted += 1
        if diff24(k.psn, self.lo) < 0:
            self.go_backs += 1
            if self.tr == "UC":
                err(f"{k.where()}: UC PSN went back from 0x{self.lo:06x} (UC never retransmits)")
            self.open = "?"
        elif diff24(k.psn, self.hi) > 0:
            # past what was ever sent: lost before the capture point; up to
            # it: the requester goes on where it was after re-sending older
            # packets (a probe re-sends one), which skips nothing
            if diff24(k.psn, self.high) > 0:
                self.lost += 1
                if not self.allow_loss:
                    err(f"{k.where()}: PSN gap: expected 0x{self.lo:06x}"
                        + (f"..0x{self.high:06x}" if self.high != self.lo else "")
                        + f", {diff24(k.psn, self.high)} PSNs missing")
            self.open = "?"
        self.message(k, err)
        used_lo = used_hi = 1
        if k.kind == "READ":
            used_lo, used_hi = self.span(k.reth[2])
            self.reads.setdefault(k.psn, set()).add(k.reth[2])
        base = diff24(k.psn, self.first)
        self.seen.update(range(base, base + used_lo))
        self.lo = (k.psn + used_lo) & 0xffffff
        self.hi = (k.psn + used_hi) & 0xffffff
        if diff24(self.hi, self.high) > 0:
            self.high = self.hi

    def missing(self):
        """PSNs between the first and the highest sent that no request
        packet carried (with loss: lost and never retransmitted)."""
        span = diff24(self.high, self.first) if self.first is not None else 0
        return sum(1 for i in range(span) if i not in self.seen)

    def message(self, k, err):
        mtu = self.mtu
        if k.pos in ("FIRST", "MIDDLE"):
            self.mtu_seen.add(k.payload_len)
            if mtu and k.payload_len != mtu:
                err(f"{k.where()}: {k.payload_len} payload bytes, not one MTU ({mtu})")
        elif mtu and k.payload_len > mtu:
            err(f"{k.where()}: {k.payload_len} payload bytes, more than the MTU ({mtu})")
        if k.pos in ("FIRST", "ONLY"):
            if self.open in ("SEND", "WRITE"):
                err(f"{k.where()}: starts a message while a {self.open} is open")
            self.open = k.kind if k.pos == "FIRST" else None
            self.msg_len = k.reth[2] if (k.kind == "WRITE" and k.reth) else None
            self.msg_bytes = k.payload_len
            if k.kind == "WRITE" and k.pos == "ONLY" and k.payload_len != k.reth[2]:
                err(f"{k.where()}: WRITE_ONLY carries {k.payload_len} bytes, RETH says {k.reth[2]}")
            if k.pos == "FIRST" and k.kind == "WRITE" and mtu and k.reth[2] <= mtu:
                err(f"{k.where()}: WRITE_FIRST of a {k.reth[2]}-byte message (fits one MTU: ONLY)")
            return
        # MIDDLE or LAST
        if self.open is None:
            err(f"{k.where()}: {k.pos} with no message open")
        elif self.open == "?":
            self.open, self.msg_len, self.msg_bytes = k.kind, None, None
        elif self.open != k.kind:
            err(f"{k.where()}: {k.pos} of a {k.kind} inside an open {self.open}")
        if self.msg_bytes is not None:
            self.msg_bytes += k.payload_len
        if k.pos == "LAST":
            if k.payload_len == 0:
                err(f"{k.where()}: LAST with no payload")
            if self.msg_len is not None and self.msg_bytes is not None \
                    and self.msg_bytes != self.msg_len:
                err(f"{k.where()}: WRITE carried {self.msg_bytes} bytes, RETH said {self.msg_len}")
            self.open = None
        elif self.open == k.kind and self.msg_len is not None and self.msg_bytes is not None \
                and self.msg_bytes >= self.msg_len:
            err(f"{k.where()}: MIDDLE reaches {self.msg_bytes} of a {self.msg_len}-byte WRITE")


def _lens(lengths):
    return " or ".join(str(x) for x in sorted(lengths))


class RespStream:
    """ACKs and READ responses from one UDP endpoint to one requester QP."""

    def __init__(self, key, mtu, allow_loss=False):
        self.key, self.mtu, self.allow_loss = key, mtu, allow_loss
        self.packets = self.lost = 0
        self.ops = Counter()
        self.msn = None
        self.burst = None  # [next PSN, READ length, bytes so far]
        self.answered = set()
        self.replays = 0
        self.naks = Counter()

    def feed(self, k, req, err):
        self.packets += 1
        self.ops[k.name] += 1
        if k.aeth is not None:
            syn, msn = k.aeth
            if self.msn is not None and diff24(msn, self.msn) < 0:
                err(f"{k.where()}: MSN went back from 0x{self.msn:06x} to 0x{msn:06x}")
            self.msn = msn if self.msn is None or diff24(msn, self.msn) > 0 else self.msn
            if syn > 0x1f:
                self.naks[{0x60: "PSN sequence error", 0x61: "invalid request",
                           0x62: "remote access error",
                           0x63: "remote operational error"}.get(syn, "RNR")] += 1
        if req is None:
            err(f"{k.where()}: response with no request seen from "
                f"{k.dg.dst}:{k.dg.dport} that it could answer")
            return
        if k.kind == "ACK":
            if diff24(k.psn, req.high) >= 0 or diff24(k.psn, req.first) < -1:
                err(f"{k.where()}: ACK/NAK for a PSN the requester has not sent "
                    f"(sent 0x{req.first:06x}..0x{(req.high - 1) & 0xffffff:06x})")
            return
        mtu = self.mtu
        if k.pos in ("FIRST", "ONLY"):
            if self.burst is not None:
                self.lost += 1
                if not self.allow_loss:
                    err(f"{k.where()}: new READ response while one is open (next PSN "
                        f"0x{self.burst[0]:06x})")
            lengths = req.reads.get(k.psn)
            if lengths is None:
                err(f"{k.where()}: READ response at a PSN no READ request started at")
                self.burst = None
                return
            if k.psn in self.answered:
                self.replays += 1
            self.answered.add(k.psn)
            if k.pos == "ONLY":
                if k.payload_len not in lengths:
                    err(f"{k.where()}: READ_RESPONSE_ONLY of {k.payload_len} bytes for a "
                        f"{_lens(lengths)}-byte READ")
                self.burst = None
            else:
                if mtu and k.payload_len != mtu:
                    err(f"{k.where()}: READ_RESPONSE_FIRST of {k.payload_len} bytes, MTU {mtu}")
                self.burst = [(k.psn + 1) & 0xffffff, set(lengths), k.payload_len]
            return
        if self.burst is None:
            self.lost += 1
            if not self.allow_loss:
                err(f"{k.where()}: READ response {k.pos} with no FIRST before it")
            return
        if k.psn != self.burst[0]:
            self.lost += 1
            if not self.allow_loss or diff24(k.psn, self.burst[0]) < 0:
                err(f"{k.where()}: READ response PSN 0x{k.psn:06x}, expected "
                    f"0x{self.burst[0]:06x}")
            self.burst[2] = None  # bytes unknown from here
        self.burst[0] = (k.psn + 1) & 0xffffff
        if self.burst[2] is not None:
            self.burst[2] += k.payload_len
        if k.pos == "MIDDLE":
            if mtu and k.payload_len != mtu:
                err(f"{k.where()}: READ_RESPONSE_MIDDLE of {k.payload_len} bytes, MTU {mtu}")
            if self.burst[2] is not None and self.burst[2] >= max(self.burst[1]):
                err(f"{k.where()}: READ response MIDDLE reaches {self.burst[2]} of "
                    f"{_lens(self.burst[1])} bytes")
            return
        if self.burst[2] is not None and self.burst[2] not in self.burst[1]:
            err(f"{k.where()}: READ response carried {self.burst[2]} bytes for a "
                f"{_lens(self.burst[1])}-byte READ")
        if mtu and not 0 < k.payload_len <= mtu:
            err(f"{k.where()}: READ_RESPONSE_LAST of {k.payload_len} bytes, MTU {mtu}")
        self.burst = None


# --------------------------------------------------------------------------
# the whole capture

class Report:
    def __init__(self):
        self.datagrams = 0       # selected UDP datagrams
        self.gso_datagrams = 0   # ... holding more than one RoCEv2 packet
        self.skipped = 0         # UDP datagrams not selected (other ports)
        self.packets = 0         # RoCEv2 packets
        self.icrc_ok = 0
        self.counts = Counter()  # opcode name -> packets
        self.errors = []
        self.error_count = 0
        self.retransmitted = 0   # request packets at a PSN sent before
        self.go_backs = 0        # times a request PSN went back
        self.lost = 0            # gaps (allow_loss): packets lost before the capture point
        self.psns_missing = 0    # request PSNs never captured (lost, never retransmitted)
        self.read_replays = 0
        self.naks = Counter()
        self.not_4791 = 0        # packets whose UDP destination port is not 4791
        self.flows = []          # one line per stream
        self.mtus = {}           # connection -> MTU

    @property
    def ok(self):
        return self.error_count == 0

    def error(self, msg):
        self.error_count += 1
        if len(self.errors) < MAX_ERRORS_KEPT:
            self.errors.append(msg)

    def summary(self):
        lines = [f"{self.datagrams} UDP datagrams checked ({self.gso_datagrams} with several "
                 f"packets, GSO), {self.skipped} other UDP datagrams skipped",
                 f"{self.packets} RoCEv2 packets, ICRC valid on {self.icrc_ok}, "
                 f"{self.retransmitted} retransmitted request packets ({self.go_backs} go-backs), "
                 f"{self.read_replays} READ responses replayed, "
                 f"{self.not_4791} to a UDP port other than 4791",
                 f"{self.lost} gaps (lost before the capture point), {self.psns_missing} request "
                 "PSNs never captured",
                 "NAKs: " + (", ".join(f"{k} {v}" for k, v in sorted(self.naks.items()))
                             or "none")]
        lines.append(f"{'opcode':<40} {'packets':>9}")
        for name, n in sorted(self.counts.items(), key=lambda kv: min(
                op for op, v in OPCODES.items() if v[0] == kv[0]) if kv[0] in
                {v[0] for v in OPCODES.values()} else 999):
            lines.append(f"{name:<40} {n:>9}")
        lines += self.flows
        lines.append(f"{self.error_count} errors")
        lines += ["  " + e for e in self.errors]
        if self.error_count > len(self.errors):
            lines.append(f"  ... {self.error_count - len(self.errors)} more")
        return "\n".join(lines)


def _conn(dg):
    a, b = (dg.src, dg.sport), (dg.dst, dg.dport)
    return (a, b) if a <= b else (b, a)


def selector(ports=(ROCE_PORT,), all_udp=False, select=None):
    """The test deciding which UDP datagrams are RoCEv2: `select(dg)` when
    given, else every datagram with all_udp, else those from or to `ports`."""
    if select is not None:
        return select
    if all_udp:
        return lambda dg: True
    ports = set(ports or ())
    return lambda dg: dg.sport in ports or dg.dport in ports


def decode_pcap(path, ports=(ROCE_PORT,), all_udp=False, mtu=None, select=None,
                allow_loss=False):
    """Decodes and checks every RoCEv2 packet of a capture. A datagram is
    taken as RoCEv2 when its source or destination UDP port is in `ports`
    (or always, with all_udp; or when select(datagram) is true, with
    select). `mtu` forces the path MTU; by default each connection's is
    learned from its FIRST/MIDDLE payloads. allow_loss: a PSN gap (a packet
    lost before the capture point, e.g. by a sender's loss injector) is
    counted in Report.lost, not an error; a gap never filled by a
    retransmission still shows in Report.psns_missing."""
    rep = Report()
    errs = []
    take = selector(ports, all_udp, select)
    pkts = []
    for dg in read_datagrams(path, errs):
        if not take(dg):
            rep.skipped += 1
            continue
        rep.datagrams += 1
        pieces = split_datagram(dg)
        if len(pieces) > 1:
            rep.gso_datagrams += 1
        for i, (off, ln) in enumerate(pieces):
            k = parse_packet(dg, off, ln, i if len(pieces) > 1 else 0, errs)
            rep.packets += 1
            if k is None:
                rep.counts["(undecodable)"] += 1
                continue
            rep.icrc_ok += k.icrc_ok
            rep.counts[k.name] += 1
            rep.not_4791 += dg.dport != ROCE_PORT
            pkts.append(k)
    for e in errs:
        rep.error(e)

    # the path MTU of each connection: what its FIRST/MIDDLE packets carry
    sizes = {}
    for k in pkts:
        if k.pos in ("FIRST", "MIDDLE") and k.tr in ("RC", "UC"):
            sizes.setdefault(_conn(k.dg), Counter())[k.payload_len] += 1
    for c, cnt in sizes.items():
        m = mtu or cnt.most_common(1)[0][0]
        if m not in (256, 512, 1024, 2048, 4096):
            rep.error(f"{c[0][0]}:{c[0][1]} <-> {c[1][0]}:{c[1][1]}: FIRST/MIDDLE payloads of "
                      f"{m} bytes, not an IB MTU")
        rep.mtus[c] = m

    reqs, resps, ud = {}, {}, Counter()
    for k in pkts:
        d = k.dg
        key = (d.src, d.sport, d.dst, d.dport, k.dqpn)
        m = rep.mtus.get(_conn(d), mtu)
        if k.tr == "UD":
            ud[(d.src, d.sport, d.dst, d.dport, k.dqpn, k.deth[0], k.deth[1])] += 1
            continue
        if k.tr == "CNP":
            continue
        if k.kind in ("RESP", "ACK"):
            rs = resps.get(key)
            if rs is None:
                rs = resps[key] = RespStream(key, m, allow_loss)
            back = [s for kk, s in reqs.items() if kk[:4] == (d.dst, d.dport, d.src, d.sport)]
            if len(back) > 1:
                back = [s for s in back if s.first is not None
                        and diff24(k.psn, s.first) >= -1 and diff24(k.psn, s.high) < 0]
            rs.feed(k, back[0] if back else None, rep.error)
        else:
            rq = reqs.get(key)
            if rq is None:
                rq = reqs[key] = ReqStream(key, k.tr, m, allow_loss)
            rq.feed(k, rep.error)

    for key, rq in reqs.items():
        if rq.open in ("SEND", "WRITE"):
            rep.error(f"{key[0]}:{key[1]}->{key[2]}:{key[3]} QP 0x{key[4]:06x}: capture ends "
                      f"inside a {rq.open}")
        rep.retransmitted += rq.retransmitted
        rep.go_backs += rq.go_backs
        rep.lost += rq.lost
        if rq.tr == "RC":
            rep.psns_missing += rq.missing()
        last = (rq.high - 1) & 0xffffff
        rep.flows.append(f"requests {key[0]}:{key[1]} -> {key[2]}:{key[3]} QP 0x{key[4]:06x} "
                         f"({rq.tr}, MTU {rq.mtu or '?'}): {rq.packets} packets, PSN "
                         f"0x{rq.first:06x}..0x{last:06x}, {rq.retransmitted} retransmitted")
    for key, rs in resps.items():
        rep.read_replays += rs.replays
        rep.lost += rs.lost
        rep.naks.update(rs.naks)
        rep.flows.append(f"responses {key[0]}:{key[1]} -> {key[2]}:{key[3]} QP 0x{key[4]:06x}: "
                         f"{rs.packets} packets ("
                         + ", ".join(f"{n} {c}" for n, c in sorted(rs.ops.items())) + ")")
    for key, n in sorted(ud.items()):
        rep.flows.append(f"UD {key[0]}:{key[1]} -> {key[2]}:{key[3]} QP 0x{key[4]:06x} "
                         f"Q_Key 0x{key[5]:08x} from QP 0x{key[6]:06x}: {n} packets")
    return rep


# --------------------------------------------------------------------------
# helpers for tests

def corrupt_copy(src, dst, ports=(ROCE_PORT,), all_udp=False, nth=0, from_end=9,
                 select=None):
    """Writes a copy of capture `src` to `dst` with one byte of the payload of
    the nth selected UDP datagram (selected as decode_pcap does) flipped
    (`from_end` bytes before its end: past the ICRC, in the payload, pad or
    last header of its last packet). Returns the frame number changed, or
    None when there was no such datagram."""
    from scapy.all import PcapReader as Rd, PcapWriter
    take = selector(ports, all_udp, select)
    wanted = {dg.frame for dg in read_datagrams(src, []) if take(dg)}
    seen = 0
    changed = None
    with Rd(src) as rd, PcapWriter(dst, sync=True) as wr:
        for frame, pkt in enumerate(rd, 1):
            out = pkt
            layer = pkt[IP] if IP in pkt else (pkt[IPv6] if IPv6 in pkt else None)
            if changed is None and frame in wanted:
                if seen == nth:
                    b = bytearray(raw(pkt))
                    end = len(b) - len(raw(layer)) + (
                        layer.len if IP in pkt else 40 + layer.plen)
                    b[end - from_end] ^= 0x01
                    out = pkt.__class__(bytes(b))
                    out.time = pkt.time
                    changed = frame
                seen += 1
            wr.write(out)
    return changed


def scapy_icrc(dg, off=0, ln=None):
    """The ICRC scapy's contrib RoCE layer computes for one packet of a
    datagram (a cross-check of icrc_of; IPv4 only)."""
    from scapy.contrib.roce import BTH
    ln = len(dg.payload) - off if ln is None else ln
    ip_hdr, udp_hdr = headers_for(dg, ln)
    p = IP(ip_hdr + udp_hdr + dg.payload[off:off + ln])
    p[UDP].remove_payload()
    p = p / BTH(dg.payload[off:off + ln])
    p[BTH].icrc = None
    p[IP].len = len(ip_hdr) + 8 + ln
    return struct.unpack("<I", raw(p)[-4:])[0]


def main(argv=None):
    ap = argparse.ArgumentParser(description="Decode and check the RoCEv2 packets of a capture.")
    ap.add_argument("pcap")
    ap.add_argument("--udp-port", type=int, action="append", default=None,
                    help="take datagrams from or to this UDP port as RoCEv2 (repeatable; "
                         "default 4791)")
    ap.add_argument("--all-udp", action="store_true", help="take every UDP datagram as RoCEv2")
    ap.add_argument("--mtu", type=int, default=None, help="path MTU (default: learned)")
    ap.add_argument("--allow-loss", action="store_true",
                    help="PSN gaps are losses before the capture point (counted), not errors")
    ap.add_argument("--quiet", action="store_true", help="summary line and errors only")
    a = ap.parse_args(argv)
    try:
        rep = decode_pcap(a.pcap, ports=a.udp_port or (ROCE_PORT,), all_udp=a.all_udp,
                          mtu=a.mtu, allow_loss=a.allow_loss)
    except (OSError, ValueError) as e:  # scapy raises Scapy_Exception (a subclass of Exception)
        print(f"roce_decode: {a.pcap}: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001  unreadable pcap
        print(f"roce_decode: {a.pcap}: {e}", file=sys.stderr)
        return 2
    if a.quiet:
        print(f"roce_decode: {a.pcap}: {rep.packets} RoCEv2 packets, {rep.error_count} errors")
        for e in rep.errors:
            print("  " + e)
    else:
        print(f"roce_decode: {a.pcap}")
        print(rep.summary())
    return 0 if rep.ok else 1


if __name__ == "__main__":
    sys.exit(main())
