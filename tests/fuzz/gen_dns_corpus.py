#!/usr/bin/env python3
"""Seeds for the DNS fuzz targets: queries of every kind the responder
answers (fuzz_dns_lookup: a first byte 0 for UDP, 1 for TCP, 8 rate limited), messages with
compressed names and the malformed ones the unit tests name (fuzz_dns_msg),
and zone texts (fuzz_dns_zone)."""
import os
import struct
import sys


def name(dotted):
    out = b""
    for label in dotted.strip(".").split("."):
        if label:
            out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def query(qname, qtype, flags=0x0100, edns=None, do=False, qid=0x1234):
    arcount = 1 if edns else 0
    msg = struct.pack(">HHHHHH", qid, flags, 1, 0, 0, arcount) + name(qname)
    msg += struct.pack(">HH", qtype, 1)
    if edns:
        msg += b"\0" + struct.pack(">HHIH", 41, edns, 0x8000 if do else 0, 0)
    return msg


def response_with_pointers():
    """A response: question www.f.test, answer owner a pointer to it, a CNAME
    target compressed to the zone's suffix."""
    msg = struct.pack(">HHHHHH", 1, 0x8400, 1, 1, 0, 0) + name("www.f.test")
    msg += struct.pack(">HH", 5, 1)
    rdata = b"\x01a\xc0\x10"  # a + pointer to "f.test" at 16
    msg += b"\xc0\x0c" + struct.pack(">HHIH", 5, 1, 60, len(rdata)) + rdata
    return msg


LOOKUPS = {
    "a_ns": query("ns.f.test", 1),
    "soa_do": query("f.test", 6, edns=1232, do=True),
    "mx_additional": query("f.test", 15),
    "cname_loop": query("a.f.test", 1),
    "wildcard_cname": query("w.f.test", 16, edns=4096, do=True),
    "wildcard": query("q.wild.f.test", 16),
    "ent": query("y.ent.f.test", 1, edns=512, do=True),
    "nxdomain_do": query("zz.f.test", 1, edns=1232, do=True),
    "referral_do": query("h.sub.f.test", 1, edns=1232, do=True),
    "ds": query("sub.f.test", 43),
    "any": query("f.test", 255),
    "srv": query("srv.f.test", 33),
    "big_trunc": query("big.f.test", 16),
    "refused": query("example.org", 1),
    "notimp": query("f.test", 6, flags=0x2000),
    "dname_loop": query("q.d.f.test", 1),
    "dname_self": query("q.e.f.test", 1, edns=1232, do=True),
    "dname_out": query("a.b.o.f.test", 1),
}


def base_formerr():
    """Two questions: FORMERR, its answer without a question section."""
    q = bytearray(query("f.test", 1))
    q[5] = 2
    return bytes(q)


def main(out_root):
    seeds = {"dns_lookup": {}, "dns_msg": {}, "dns_zone": {}}
    for k, v in LOOKUPS.items():
        seeds["dns_lookup"]["udp_" + k] = b"\0" + v
    seeds["dns_lookup"]["tcp_big"] = b"\1" + query("big.f.test", 16)
    seeds["dns_lookup"]["tcp_axfr"] = b"\5" + query("f.test", 252)
    seeds["dns_lookup"]["tcp_ixfr_nsec3"] = b"\7" + query("f.test", 251)
    # bit 3: the answer through a rate limit (dropped, then slipped)
    seeds["dns_lookup"]["rrl_positive"] = b"\x08" + query("f.test", 15)
    seeds["dns_lookup"]["rrl_nxdomain_v6"] = b"\x08" + query("zz.f.test", 1, edns=1232, qid=0x1335)  # odd first byte: IPv6
    seeds["dns_lookup"]["rrl_formerr"] = b"\x08" + base_formerr()
    badvers = bytearray(query("f.test", 6, edns=1232))
    badvers[-5] = 1  # EDNS version 1
    seeds["dns_lookup"]["udp_badvers"] = b"\0" + bytes(badvers)
    base = query("www.f.test", 1)
    msgs = {
        "query": base,
        "response_pointers": response_with_pointers(),
        "ptr_self": base[:12] + b"\xc0\x0c" + base[-4:],
        "ptr_loop": base[:12] + b"\x01a\xc0\x0c" + base[-4:],
        "label_64": base[:12] + b"\x40" + b"a" * 64 + b"\0" + base[-4:],
        "truncated": base[:20],
        "bad_counts": base[:4] + b"\xff\xff" + base[6:],
        "opt_do": query("f.test", 6, edns=4096, do=True),
    }
    seeds["dns_msg"] = msgs
    for k, v in msgs.items():
        seeds["dns_lookup"]["udp_msg_" + k] = b"\0" + v
    seeds["dns_zone"] = {
        "minimal": b"@ 60 SOA ns hm 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n",
        "types": (b"$TTL 1h\n@ SOA ns hm ( 1 2 3 4 5 )\n@ MX 10 mx\n@ TXT \"a\" \"b\\065\"\n"
                  b"@ CAA 0 issue \"ca.test\"\nx AAAA 2001:db8::1\n_s._udp SRV 1 2 3 x\n"
                  b"p PTR x\nc CNAME x\n*.w A 192.0.2.9\nsub NS ns.sub\nns.sub A 192.0.2.2\n"
                  b"u TYPE65000 \\# 2 abcd\n"),
        "dnssec": (b"@ 60 SOA ns hm 1 2 3 4 5\n@ 60 RRSIG SOA 13 2 60 20300101000000 "
                   b"20200101000000 1 fuzz.test. AAAA\n@ 60 NSEC x.fuzz.test. SOA RRSIG NSEC\n"
                   b"@ 60 DNSKEY 257 3 13 AAAA\n@ 60 DS 1 13 2 00ff\n"),
        "bad_paren": b"@ 60 SOA ns hm ( 1 2 3 4 5\n",
        "bad_label": b"@ 60 SOA ns hm 1 2 3 4 5\n" + b"a" * 70 + b" A 1.2.3.4\n",
        "cname_conflict": b"@ 60 SOA ns hm 1 2 3 4 5\nx A 1.2.3.4\nx CNAME y\n",
    }
    for target, files in seeds.items():
        d = os.path.join(out_root, target)
        os.makedirs(d, exist_ok=True)
        for k, v in files.items():
            with open(os.path.join(d, k), "wb") as f:
                f.write(v)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus"))
