"""The query mix every DNS bench uses, and a pcap file of it as frames.

QUERIES is bench/dns/run's mix over tests/dns/example.zone: hits, NXDOMAIN,
NODATA, a CNAME chain, a wildcard, a referral, and the DO bit on a quarter.
write_pcap() writes them round-robin as Ethernet/IPv4/UDP frames with EDNS
(1232 bytes, DO where asked, as kxdpgun sends them), each with its own ID
and source port, for DPDK's pcap PMD to replay (bench/dns/replay,
tests/system/test_dns.py)."""
import struct

QUERIES = [  # (name, type, DO)
    ("www.example.test", "A", False), ("web.example.test", "A", False),
    ("example.test", "MX", False), ("mail.example.test", "A", True),
    ("nothere.example.test", "A", False), ("nope.example.test", "AAAA", False),
    ("chain1.example.test", "A", False), ("x.wild.example.test", "TXT", True),
    ("host.sub.example.test", "A", False), ("ns1.example.test", "AAAA", True),
    ("web.example.test", "AAAA", False), ("example.test", "SOA", False),
]
TYPES = {"A": 1, "SOA": 6, "MX": 15, "TXT": 16, "AAAA": 28}


def query(qid, name, qtype, do):
    """A DNS query's bytes: no RD, one question, an OPT record."""
    msg = struct.pack("!6H", qid & 0xffff, 0, 1, 0, 0, 1)
    for label in name.split("."):
        msg += bytes([len(label)]) + label.encode()
    msg += b"\0" + struct.pack("!HH", TYPES[qtype], 1)
    return msg + b"\0" + struct.pack("!HHIH", 41, 1232, 0x8000 if do else 0, 0)


def _checksum(data):
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    s = (s >> 16) + (s & 0xffff)
    return ~(s + (s >> 16)) & 0xffff


def frame(qid, payload, src_ip, dst_ip, src_port, dst_mac, src_mac):
    udp = struct.pack("!4H", src_port, 53, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), qid & 0xffff, 0, 64, 17, 0,
                     bytes(src_ip), bytes(dst_ip))
    ip = ip[:10] + struct.pack("!H", _checksum(ip)) + ip[12:]
    return bytes(dst_mac) + bytes(src_mac) + b"\x08\x00" + ip + udp


def write_pcap(path, count, dst_ip="198.18.0.1", src_ip="198.18.0.2",
               dst_mac="02:70:63:61:70:00", src_mac="02:00:00:00:00:02"):
    """count queries of the mix into path (pcap, microsecond timestamps);
    returns the list of (id, source port, template index) written."""
    dip = [int(x) for x in dst_ip.split(".")]
    sip = [int(x) for x in src_ip.split(".")]
    dmac = bytes.fromhex(dst_mac.replace(":", ""))
    smac = bytes.fromhex(src_mac.replace(":", ""))
    written = []
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for i in range(count):
            t = i % len(QUERIES)
            name, qtype, do = QUERIES[t]
            port = 1024 + i % 60000
            fr = frame(i, query(i, name, qtype, do), sip, dip, port, dmac, smac)
            f.write(struct.pack("<IIII", 0, 0, len(fr), len(fr)) + fr)
            written.append((i & 0xffff, port, t))
    return written


def read_pcap(path):
    """The frames of a pcap file (microsecond or nanosecond format)."""
    out = []
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack("<I", data[:4])[0]
    endian = "<" if magic in (0xa1b2c3d4, 0xa1b23c4d) else ">"
    at = 24
    while at + 16 <= len(data):
        _, _, incl, _ = struct.unpack(endian + "IIII", data[at:at + 16])
        out.append(data[at + 16:at + 16 + incl])
        at += 16 + incl
    return out
