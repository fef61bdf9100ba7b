"""offpath dns against Knot DNS: the same zones on loopback, hundreds of
queries over UDP and TCP, every answer compared (rcode, flags, EDNS, and
every section as a set of RRsets: order within a section aside, TTLs
included). Then a flood of malformed datagrams during a run changes no
answer and the counters balance; SIGHUP reloads without losing a query.

Knot (knotd) and dnspython come from scripts/bootstrap (Debian's knot and
python3-dnspython); Makefile runs this file with /usr/bin/python3."""
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import time

import pytest

try:
    import dns.edns
    import dns.flags
    import dns.message
    import dns.query
    import dns.rdatatype
    import dns.xfr
except ImportError:  # pragma: no cover - a setup error, not a skip
    pytest.fail("python3-dnspython is missing: run scripts/bootstrap and use /usr/bin/python3",
                pytrace=False)

from conftest import BIN

import sys  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                                "dns"))
import dnsmix  # noqa: E402 (bench/dns's query mix, and pcap files of it)

HERE = os.path.dirname(os.path.abspath(__file__))
ZONES = os.path.join(HERE, "..", "dns")
ZONE_FILES = {"example.test": "example.zone", "second.test": "second.zone",
              "signed.test": "signed.zone.signed", "signed3.test": "signed3.zone.signed",
              "signed3o.test": "signed3o.zone.signed"}
KNOTD = shutil.which("knotd") or "/usr/sbin/knotd"


def free_port(rng=random.Random()):
    """A port of 31000-31999 (this test's range, below the kernel's ephemeral
    ports) free for UDP and TCP now: other work on the machine may use it too."""
    for _ in range(200):
        port = rng.randrange(31000, 32000)
        socks = []
        try:
            for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
                s = socket.socket(socket.AF_INET, kind)
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise AssertionError("no free port in 31000-31999")


def free_ports(n):
    """n distinct free ports (the servers bind with SO_REUSEPORT, so two of
    ours on one port would share it rather than fail)."""
    ports = set()
    while len(ports) < n:
        ports.add(free_port())
    return list(ports)


class _Ports:
    """Knot's and offpath's ports, chosen when first used (not at import:
    the helper mode below runs in a namespace without loopback)."""
    _p = {}

    def __getattr__(self, name):
        while name not in self._p:
            port = free_port()
            if port not in self._p.values():
                self._p[name] = port
        return self._p[name]


PORTS = _Ports()

EXAMPLE_NAMES = [
    "", "ns1", "ns2", "mail", "www", "web", "chain1", "chain2", "chain3", "dangling",
    "external", "loop1", "x.wild", "a.b.wild", "exact.wild", "foo.cwild", "a.b.c.ent",
    "b.c.ent", "c.ent", "_sip._udp", "_sip._tcp", "sip", "ptr", "txtmulti", "escaped",
    "hinfo", "unknown", "sub", "host.sub", "ns1.sub", "other", "x.y.other", "ns.other",
    "inc1", "inc2", "big", "mid", "nothere", "deep.nothere", "WWW", "Foo.Wild",
    "dn", "www.dn", "host.dn", "x.host.dn", "nothere.dn", "a.b.dn", "Host.DN", "area",
    "www.area", "x.out", "out", "host.todeleg", "ns1.todeleg", "a.long", "tosub",
    "tosub2"]
TYPES = ["A", "AAAA", "NS", "SOA", "MX", "TXT", "CNAME", "PTR", "SRV", "CAA", "HINFO", "ANY",
         "DS", "DNAME", "TYPE65000"]
SIGNED_NAMES = ["", "ns1", "mail", "www", "alias", "x.wild", "a.b.wild", "a.b.ent", "b.ent",
                "ent", "secure", "x.secure", "ns.secure", "insecure", "x.insecure",
                "nothere", "zzz", "0", "dn", "host.dn", "nothere.dn", "host.area"]
# Under NSEC3 opt-out (signed3o.test): unsigned delegations with no NSEC3 of
# their own, and an empty non-terminal with only one below it.
OPT_OUT_NAMES = ["insec2", "x.insec2", "optent", "x.optent", "y.x.optent", "nothere.optent"]
SIGNED_TYPES = ["A", "AAAA", "MX", "TXT", "NS", "SOA", "DS", "DNSKEY", "NSEC", "CNAME", "ANY",
                "DNAME"]


def fqdn(label, zone):
    return f"{label}.{zone}." if label else f"{zone}."


NSID = "ns1.offpath-test"  # both servers' identity (RFC 5001)


def knot_conf(tmp, port, zones, sections="", template="    zonefile-load: whole\n",
              zone_opts=""):
    """knotd serving zones ({domain: file}) on 127.0.0.1@port, its state in
    tmp; sections (remote:, acl:) and template and zone_opts lines added."""
    listed = "".join(f"  - domain: {z}\n    file: {f}\n{zone_opts}" for z, f in zones.items())
    return (f"server:\n    listen: 127.0.0.1@{port}\n    rundir: {tmp}\n"
            f"    nsid: \"{NSID}\"\n"
            f"database:\n    storage: {tmp}\n{sections}"
            f"template:\n  - id: default\n    storage: {tmp}\n    zonefile-sync: -1\n"
            f"    journal-content: none\n{template}"
            f"zone:\n{listed}"
            f"log:\n  - target: {tmp}/knot.log\n    any: info\n")


def wait_answers(port, deadline_s=10.0):
    q = dns.message.make_query("example.test.", "SOA")
    end = time.time() + deadline_s
    while time.time() < end:
        try:
            dns.query.udp(q, "127.0.0.1", port=port, timeout=0.2)
            return
        except Exception:
            time.sleep(0.05)
    raise AssertionError(f"nothing answers on port {port}")


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    assert os.path.exists(KNOTD), "knotd missing: run scripts/bootstrap"
    tmp = tmp_path_factory.mktemp("knot")
    conf = tmp / "knot.conf"
    conf.write_text(knot_conf(tmp, PORTS.knot,
                              {z: os.path.join(ZONES, f) for z, f in ZONE_FILES.items()}))
    knot = subprocess.Popen([KNOTD, "-c", str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    args = [BIN, "dns", "--listen", f"127.0.0.1:{PORTS.off}", "--json", "--threads", "2",
            "--nsid", NSID]
    for f in ZONE_FILES.values():
        args += ["--zone", os.path.join(ZONES, f)]
    off = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_answers(PORTS.knot)
        wait_answers(PORTS.off)
        yield off
    finally:
        for p in (off, knot):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def canon(msg):
    """What must be equal: rcode, flags, EDNS and each section as a set."""
    def section(rrsets):
        out = []
        for rrset in rrsets:
            out.append((rrset.name.to_text().lower(), rrset.rdtype, rrset.covers, rrset.ttl,
                        tuple(sorted(rd.to_text().lower() for rd in rrset))))
        return sorted(out)
    return {"rcode": msg.rcode(), "flags": dns.flags.to_text(msg.flags),
            "edns": msg.edns, "payload": msg.payload if msg.edns >= 0 else None,
            "options": sorted((o.otype, o.to_wire()) for o in msg.options),
            "ednsflags": msg.ednsflags, "question": [q.to_text().lower() for q in msg.question],
            "answer": section(msg.answer), "authority": section(msg.authority),
            "additional": section(msg.additional)}


def ask(port, name, rdtype, tcp=False, host="127.0.0.1", **kw):
    q = dns.message.make_query(name, rdtype, **kw)
    q.flags &= ~dns.flags.RD
    if tcp:
        return dns.query.tcp(q, host, port=port, timeout=2)
    return dns.query.udp(q, host, port=port, timeout=2)


def query_set():
    """(name, type, options, tcp): more than 300 of them."""
    out = []
    for label in EXAMPLE_NAMES:
        for t in TYPES:
            out.append((fqdn(label, "example.test"), t, {}, False))
    for label in ["", "ns", "host", "nothere"]:
        for t in ["A", "SOA", "NS", "ANY", "MX"]:
            out.append((fqdn(label, "second.test"), t, {}, False))
    for zone, types, names in (
            ("signed.test", SIGNED_TYPES, SIGNED_NAMES),  # NSEC
            ("signed3.test", SIGNED_TYPES + ["NSEC3PARAM"], SIGNED_NAMES),  # NSEC3
            ("signed3o.test", SIGNED_TYPES + ["NSEC3PARAM"], SIGNED_NAMES + OPT_OUT_NAMES)):
        for label in names:
            for t in types:
                out.append((fqdn(label, zone), t, {"want_dnssec": True}, False))
                out.append((fqdn(label, zone), t, {}, False))
    # Truncation: no EDNS (512), and EDNS payloads below and above each answer.
    for label in ["big", "mid", "", "x.wild"]:
        for size in [None, 512, 700, 1232, 1400, 4096]:
            opts = {} if size is None else {"use_edns": 0, "payload": size}
            out.append((fqdn(label, "example.test"), "TXT", opts, False))
            out.append((fqdn(label, "example.test"), "ANY", opts, False))
    for label in ["nothere", "x.wild", "www", "a.b.wild", "x.secure"]:
        for size in [None, 512, 1232]:
            opts = {"want_dnssec": True} if size is None else \
                {"use_edns": 0, "payload": size, "want_dnssec": True}
            out.append((fqdn(label, "signed.test"), "A", opts, False))
            out.append((fqdn(label, "signed3.test"), "A", opts, False))
    # NSID asked (RFC 5001): alone, beside a truncated answer, and over TCP.
    nsid = [dns.edns.GenericOption(3, b"")]
    for label, t, size in (("www", "A", 1232), ("big", "TXT", 512), ("mid", "TXT", 1232),
                           ("nothere", "A", 4096)):
        out.append((fqdn(label, "example.test"), t, {"use_edns": 0, "payload": size,
                                                     "options": nsid}, False))
    out.append((fqdn("www", "signed.test"), "A", {"want_dnssec": True, "options": nsid}, True))
    # Over TCP: the truncated ones whole, and a sample of the rest.
    for label in ["big", "mid", "www", "chain1", "nothere", "host.sub", "x.wild"]:
        for t in ["TXT", "A", "ANY"]:
            out.append((fqdn(label, "example.test"), t, {}, True))
    for label in ["www", "nothere", "x.wild", "x.secure", "insecure"]:
        out.append((fqdn(label, "signed.test"), "A", {"want_dnssec": True}, True))
        out.append((fqdn(label, "signed3.test"), "A", {"want_dnssec": True}, True))
    # Not ours, and not IN.
    out.append(("www.example.org.", "A", {}, False))
    out.append(("example.", "SOA", {}, False))
    out.append(("test.", "NS", {}, False))
    return out


def compare_all(port_a, port_b, queries):
    diffs = []
    for name, t, opts, tcp in queries:
        a = canon(ask(port_a, name, t, tcp=tcp, **opts))
        b = canon(ask(port_b, name, t, tcp=tcp, **opts))
        if a != b:
            diffs.append((name, t, opts, tcp, a, b))
    return diffs


def test_answers_equal_knot(servers):
    queries = query_set()
    assert len(queries) >= 300
    diffs = compare_all(PORTS.knot, PORTS.off, queries)
    detail = "\n".join(f"{n} {t} {o} tcp={tcp}\n knot: {a}\n ours: {b}"
                       for n, t, o, tcp, a, b in diffs[:int(os.environ.get("DIFFS", 5))])
    assert not diffs, f"{len(diffs)} of {len(queries)} answers differ:\n{detail}"


def test_query_classes_covered(servers):
    """The set reaches every kind of answer the issue lists, on both."""
    seen = set()
    for name, t, opts, tcp in query_set():
        m = ask(PORTS.off, name, t, tcp=tcp, **opts)
        rc = m.rcode()
        types = {r.rdtype for r in m.answer}
        if rc == 3:
            seen.add("nxdomain")
        if rc == 5:
            seen.add("refused")
        if rc == 0 and not m.answer and any(r.rdtype == 6 for r in m.authority):
            seen.add("nodata")
        if m.flags & dns.flags.TC:
            seen.add("truncated")
        if rc == 0 and not (m.flags & dns.flags.AA):
            seen.add("referral")
        if 5 in types and len({r.name for r in m.answer}) > 2:
            seen.add("cname_chain")
        if 46 in types:
            seen.add("rrsig")
        if any(r.rdtype == 47 for r in m.authority):
            seen.add("nsec")
        if any(r.rdtype == 50 for r in m.authority):
            seen.add("nsec3")
        if "wild" in name and m.answer:
            seen.add("wildcard")
        seen.update(dns.rdatatype.to_text(x) for x in types)
    want = {"nxdomain", "refused", "nodata", "truncated", "referral", "cname_chain", "rrsig",
            "nsec", "nsec3", "wildcard", "A", "AAAA", "NS", "SOA", "MX", "TXT", "CNAME", "PTR", "SRV",
            "CAA", "HINFO", "DS", "DNSKEY", "NSEC", "DNAME"}
    assert want <= seen, f"never seen: {sorted(want - seen)}"


def test_dname_substitution_too_long(servers):
    """RFC 6672 section 2.2: a DNAME whose substitution would pass 255
    octets gets YXDOMAIN with the DNAME alone. Not compared with Knot: Knot
    3.2 follows the DNAME's own target instead and answers NXDOMAIN."""
    name = "x" * 63 + ".long.example.test."
    for tcp in (False, True):
        m = ask(PORTS.off, name, "A", tcp=tcp)
        assert m.rcode() == 6  # YXDOMAIN
        assert m.flags & dns.flags.AA
        assert [(r.name.to_text(), r.rdtype) for r in m.answer] == [("long.example.test.", 39)]


def test_ipv6_answers_equal_knot(servers, tmp_path):
    """--listen [::1]:PORT: every fifth query of the set, over UDP and TCP
    on IPv6, answered as Knot answers it on IPv4; [::] takes IPv4 too."""
    for listen, host in (("::1", "::1"), ("::", "127.0.0.1")):
        port = free_port()  # free on 127.0.0.1; ::1 and :: share the kernel's port space
        args = [BIN, "dns", "--listen", f"[{listen}]:{port}", "--nsid", NSID]
        for f in ZONE_FILES.values():
            args += ["--zone", os.path.join(ZONES, f)]
        off = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            end = time.time() + 10
            while True:
                try:
                    ask(port, "example.test.", "SOA", host=host)
                    break
                except Exception:
                    assert time.time() < end and off.poll() is None, off.stderr.read()
                    time.sleep(0.05)
            diffs = []
            for name, t, opts, tcp in query_set()[::5]:
                a = canon(ask(PORTS.knot, name, t, tcp=tcp, **opts))
                b = canon(ask(port, name, t, tcp=tcp, host=host, **opts))
                if a != b:
                    diffs.append((name, t, opts, tcp))
            assert not diffs, f"[{listen}]: {len(diffs)} answers differ, first {diffs[:3]}"
        finally:
            off.send_signal(signal.SIGTERM)
            assert off.wait(timeout=10) == 0


def transfer(port, zone, rdtype="AXFR", serial=0):
    """The records of a zone transfer as sorted text, and the messages it took."""
    records, messages = [], 0
    for m in dns.query.xfr("127.0.0.1", zone, rdtype=rdtype, port=port, timeout=5,
                           relativize=False, serial=serial):
        messages += 1
        for rrset in m.answer:
            records += [(rrset.name.to_text().lower(), rrset.rdtype, rrset.ttl,
                         rd.to_text().lower()) for rd in rrset]
    return sorted(records), messages


def test_zone_transfer_equals_knot(tmp_path):
    """AXFR from offpath --allow-transfer and from Knot (an ACL allowing
    it): the same records for every test zone and for one of 5000 records
    that takes several messages; IXFR answered with the whole zone; a client
    not allowed, and AXFR over UDP, refused; the counters balance."""
    big = tmp_path / "big.zone"
    big.write_text("$ORIGIN big.test.\n$TTL 600\n@ SOA ns hm 7 3600 600 86400 60\n@ NS ns\n"
                   "ns A 192.0.2.1\n" + "".join(
                       f"h{i} A 10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}\n"
                       f"h{i} TXT \"record {i} of the big zone\"\n" for i in range(2500)))
    zones = {z: os.path.join(ZONES, f) for z, f in ZONE_FILES.items()}
    zones["big.test"] = str(big)
    huge = tmp_path / "huge.zone"  # more than the sockets' buffers hold: offpath only
    huge.write_text("$ORIGIN huge.test.\n$TTL 600\n@ SOA ns hm 7 3600 600 86400 60\n@ NS ns\n" +
                    "".join(f"h{i} TXT \"{i:040d}\"\n" for i in range(60000)))
    kport, oport, denied = free_ports(3)
    conf = tmp_path / "knot.conf"
    conf.write_text(knot_conf(
        tmp_path, kport, zones, "acl:\n  - id: xfr\n    address: 127.0.0.1\n    action: transfer\n",
        "    zonefile-load: whole\n    acl: xfr\n"))
    zone_args = [a for f in zones.values() for a in ("--zone", f)]
    procs = [subprocess.Popen([KNOTD, "-c", str(conf)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)]
    for port, extra in ((oport, ["--allow-transfer", "127.0.0.0/8", "--allow-transfer", "::1",
                                 "--zone", str(huge)]),
                        (denied, ["--allow-transfer", "192.0.2.0/24"])):
        procs.append(subprocess.Popen([BIN, "dns", "--listen", f"127.0.0.1:{port}", "--json",
                                       *zone_args, *extra], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    try:
        for port in (kport, oport, denied):
            wait_answers(port)
        for zone in zones:
            theirs, _ = transfer(kport, zone)
            ours, messages = transfer(oport, zone)
            assert ours == theirs, zone
            assert messages >= (3 if zone == "big.test" else 1), (zone, messages)
        whole, _ = transfer(oport, "example.test", "IXFR", serial=1)
        assert whole == transfer(oport, "example.test")[0]
        with pytest.raises(dns.xfr.TransferError):
            transfer(denied, "example.test")
        with pytest.raises(dns.xfr.TransferError):
            transfer(oport, "www.example.test")
        q = dns.message.make_query("example.test.", "AXFR")
        assert dns.query.udp(q, "127.0.0.1", port=oport, timeout=2).rcode() == 5
        # A client that leaves after the first bytes: the transfer is cut short.
        wire = dns.message.make_query("huge.test.", "AXFR").to_wire()
        with socket.socket() as sk:  # a small window: the server cannot send it all at once
            sk.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sk.settimeout(2)
            sk.connect(("127.0.0.1", oport))
            sk.sendall(struct.pack(">H", len(wire)) + wire)
            assert len(sk.recv(100)) > 0
            sk.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        time.sleep(0.3)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        outs = [p.communicate(timeout=10) for p in procs]
    c, d = json.loads(outs[1][0]), json.loads(outs[2][0])
    assert c["xfr_started"] == len(zones) + 3 and c["xfr_messages"] >= 2
    assert c["refused_xfr"] == 2 and c["xfr_aborted"] == 1
    assert d["refused_xfr"] == 1 and d["xfr_started"] == 0
    assert c["balanced"] and d["balanced"]


def test_tcp_connections_capped_and_idle_closed(tmp_path):
    """--tcp-max 2: a third connection is refused (closed at once); the two
    kept are closed after --tcp-idle-ms of silence, one that keeps asking
    is not; the counters say so exactly."""
    port = free_port()
    p = subprocess.Popen([BIN, "dns", "--zone", os.path.join(ZONES, "example.zone"), "--listen",
                          f"127.0.0.1:{port}", "--tcp-max", "2", "--tcp-idle-ms", "400",
                          "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_answers(port)
        conns = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(3)]
        for c in conns:
            c.settimeout(3)
        assert conns[2].recv(10) == b""  # refused: closed without a word
        q = dns.message.make_query("example.test.", "SOA").to_wire()
        for _ in range(4):  # conns[1] keeps asking, 200 ms apart
            conns[1].sendall(struct.pack("!H", len(q)) + q)
            n = struct.unpack("!H", conns[1].recv(2))[0]
            assert len(conns[1].recv(n)) == n
            time.sleep(0.2)
        assert conns[0].recv(10) == b""  # closed for idling meanwhile
        assert conns[1].recv(10) == b""  # idle now too
        for c in conns:
            c.close()
    finally:
        rc, c = stop_json(p)
    assert rc == 0
    assert (c["tcp_conns"], c["tcp_conn_refused"], c["tcp_idle_closed"]) == (2, 1, 2), c
    assert c["tcp_rx"] == c["tcp_tx"] == 4


def test_notify_tells_every_secondary_at_once(tmp_path):
    """Three secondaries where nothing listens, over both families: each is
    tried 3 times 500 ms apart, all at once, so the three give-ups are
    reported about 1.5 s after start (one after another would take 4.5 s);
    the counters say 9 tries, 3 failures."""
    ports = free_ports(4)
    off = subprocess.Popen([BIN, "dns", "--zone", os.path.join(ZONES, "example.zone"),
                            "--listen", f"127.0.0.1:{ports[0]}", "--notify",
                            f"127.0.0.1:{ports[1]}", "--notify", f"[::1]:{ports[2]}",
                            "--notify", f"127.0.0.1:{ports[3]}", "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.time()
    try:
        lines = []
        while len(lines) < 3 and time.time() - t0 < 10:
            line = off.stderr.readline()
            if "no acknowledgement after 3 tries" in line:
                lines.append(time.time() - t0)
        assert len(lines) == 3, lines
        assert lines[-1] < 3.5, f"the secondaries were told one after another: {lines}"
    finally:
        rc, c = stop_json(off)
    assert (c["notify_sent"], c["notify_failed"], c["notify_acked"]) == (9, 3, 0), c


def test_notify_knot_secondary(tmp_path):
    """Knot as the secondary of a zone offpath serves (--allow-transfer),
    started first: its first transfer fails (offpath is not up yet), and
    offpath's NOTIFY at start makes it transfer at once instead of at its
    bootstrap retry; a changed serial and SIGHUP make offpath send NOTIFY
    (--notify) again, Knot acknowledges it and transfers the new zone at
    once (its refresh timer would wait 7200 s), so the new record answers
    from Knot within seconds; a second target where nothing listens is
    tried 3 times each time and reported; an unchanged reload notifies
    nobody."""
    zone = tmp_path / "example.zone"
    text = open(os.path.join(ZONES, "example.zone")).read()
    zone.write_text(text)
    shutil.copy(os.path.join(ZONES, "example.inc"), tmp_path / "example.inc")
    kport, oport, dead = free_ports(3)
    conf = tmp_path / "knot.conf"
    conf.write_text(knot_conf(
        tmp_path, kport, {"example.test": tmp_path / "secondary.zone"},
        f"remote:\n  - id: primary\n    address: 127.0.0.1@{oport}\n"
        "acl:\n  - id: from_primary\n    address: 127.0.0.1\n    action: notify\n",
        "", "    master: primary\n    acl: from_primary\n"))
    knot = subprocess.Popen([KNOTD, "-c", str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    off = None
    try:
        wait_knot_up(kport)
        time.sleep(1)  # its first transfer, from nobody, has failed
        off = subprocess.Popen([BIN, "dns", "--zone", str(zone), "--listen",
                                f"127.0.0.1:{oport}", "--allow-transfer", "127.0.0.1",
                                "--notify", f"127.0.0.1:{kport}", "--notify",
                                f"127.0.0.1:{dead}", "--log-level", "info", "--json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_answers(oport)

        def knot_answer(name, rdtype, deadline_s):
            end = time.time() + deadline_s
            while time.time() < end:
                try:
                    m = ask(kport, name, rdtype)
                    if m.rcode() == 0 and m.answer:
                        return m
                except Exception:
                    pass
                time.sleep(0.1)
            return None

        m = knot_answer("example.test.", "SOA", 6)  # the transfer NOTIFY at start asked for
        assert m is not None and m.answer[0][0].serial == 2026112401
        time.sleep(2)  # the dead target's three tries
        zone.write_text(text.replace("2026112401 ; serial", "2026112402 ; serial") +
                        "notified A 192.0.2.123\n")
        off.send_signal(signal.SIGHUP)
        m = knot_answer("notified.example.test.", "A", 8)
        assert m is not None and m.answer[0][0].address == "192.0.2.123"
        time.sleep(2)  # the dead target's three tries
        off.send_signal(signal.SIGHUP)  # the same serial: nothing to tell
        time.sleep(1)
    finally:
        knot.send_signal(signal.SIGTERM)
        knot.wait(timeout=10)
        if off is not None:
            off.send_signal(signal.SIGTERM)
            out, err = off.communicate(timeout=10)
    c = json.loads(out)
    assert (c["notify_acked"], c["notify_failed"], c["reloads"]) == (2, 2, 2), err
    assert c["notify_sent"] == 2 * (1 + 3) and c["xfr_started"] >= 2 and c["balanced"]
    assert err.count(f"NOTIFY example.test. to 127.0.0.1:{kport}: acknowledged") == 2
    assert err.count(f"NOTIFY example.test. to 127.0.0.1:{dead}: "
                     "no acknowledgement after 3 tries") == 2


def wait_knot_up(port, deadline_s=10.0):
    """Until Knot answers on port (REFUSED or SERVFAIL will do: it is up)."""
    end = time.time() + deadline_s
    while time.time() < end:
        try:
            ask(port, "example.test.", "SOA")
            return
        except Exception:
            time.sleep(0.1)
    raise AssertionError(f"knotd not answering on port {port}")


def malformed_datagrams(rng, n):
    """Hostile bytes: cut queries, pointer loops, forward pointers, bad
    counts, oversized labels, responses, random noise."""
    base = dns.message.make_query("www.example.test.", "A").to_wire()
    out = []
    for i in range(n):
        kind = i % 8
        if kind == 0:
            out.append(base[:rng.randrange(0, len(base))])
        elif kind == 1:
            out.append(base[:12] + b"\xc0\x0c" + base[-4:])  # points at itself
        elif kind == 2:
            out.append(base[:12] + b"\x01a\xc0\x0c" + base[-4:])  # loops back
        elif kind == 3:
            out.append(base[:4] + struct.pack(">H", rng.randrange(2, 65536)) + base[6:])
        elif kind == 4:
            out.append(base[:12] + b"\x40" + b"a" * 64 + b"\x00" + base[-4:])
        elif kind == 5:
            out.append(base[:2] + b"\x80" + base[3:])  # a response
        elif kind == 6:
            out.append(base + b"\x00" * rng.randrange(1, 20))  # trailing bytes
        else:
            out.append(bytes(rng.randrange(256) for _ in range(rng.randrange(0, 80))))
    return out


def test_malformed_flood_changes_no_answer(servers):
    queries = [q for q in query_set() if not q[3]][::3]
    before = [canon(ask(PORTS.off, n, t, **o)) for n, t, o, _ in queries]
    rng = random.Random(15)
    junk = malformed_datagrams(rng, 4000)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setblocking(False)
    start = time.time()
    after = []
    for i, (n, t, o, _) in enumerate(queries):
        for pkt in junk[i * 30:(i + 1) * 30]:
            try:
                s.sendto(pkt, ("127.0.0.1", PORTS.off))
            except BlockingIOError:
                pass
        after.append(canon(ask(PORTS.off, n, t, **o)))
        assert time.time() - start < 60
    s.close()
    assert after == before


def stop_json(proc):
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=20)
    lines = [l for l in out.splitlines() if l.startswith("{")]
    assert lines, f"no JSON report: {out}\n{err}"
    return proc.returncode, json.loads(lines[-1])


def test_counters_balance_after_flood(tmp_path):
    port = free_port()
    args = [BIN, "dns", "--listen", f"127.0.0.1:{port}", "--json", "--threads", "2",
            "--zone", os.path.join(ZONES, "example.zone"),
            "--stats-json", str(tmp_path / "stats.json")]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_answers(port)
        rng = random.Random(7)
        junk = malformed_datagrams(rng, 2000)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for i, pkt in enumerate(junk):
            s.sendto(pkt, ("127.0.0.1", port))
            if i % 50 == 0:
                assert ask(port, "www.example.test.", "A").rcode() == 0
        s.close()
        for _ in range(20):
            ask(port, "big.example.test.", "TXT", tcp=True)
        time.sleep(1.5)  # the stats file is rewritten every second
        stats = json.loads((tmp_path / "stats.json").read_text())
        assert stats["received"] >= 2000
    finally:
        rc, c = stop_json(p)
    assert rc == 0 and c["balanced"] is True
    # 2000 junk + 1 readiness probe + 40 well-formed UDP + 20 TCP queries
    assert c["received"] == c["udp_rx"] + c["tcp_rx"]
    assert c["tcp_rx"] == 20 and c["tcp_tx"] == 20
    assert c["received"] == c["responses"] + c["drop_short"] + c["drop_response"]
    assert c["responses"] == c["udp_tx"] + c["tcp_tx"] + c["drop_tx"] + c["drop_tcp_closed"]
    # 250 of each kind (random noise may add to any of them)
    assert c["drop_response"] >= 250 and c["drop_short"] > 0
    assert c["formerr_ptr_forward"] >= 250 and c["formerr_ptr_loop"] >= 250
    assert c["formerr_label_type"] >= 250 and c["formerr_trailing"] >= 250
    assert c["formerr_qdcount"] >= 250


def test_response_rate_limiting(tmp_path):
    """--rrl-rate 20: 300 queries for one name from one client within a
    second or two get at most 20 whole answers a second; of the rest every
    second one comes back truncated and empty (--rrl-slip 2 by default) and
    the others are dropped, each counted; an error kind has its own bucket,
    TCP is not limited, and the counters balance."""
    port = free_port()
    p = subprocess.Popen([BIN, "dns", "--listen", f"127.0.0.1:{port}", "--json",
                          "--zone", os.path.join(ZONES, "example.zone"), "--rrl-rate", "20"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_answers(port)
        q = dns.message.make_query("www.example.test.", "A")
        whole = slipped = 0
        t0 = time.time()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(0.5)
            for i in range(300):
                q.id = i
                s.sendto(q.to_wire(), ("127.0.0.1", port))
            try:
                while True:
                    m = dns.message.from_wire(s.recv(4096))
                    if m.flags & dns.flags.TC:
                        assert not m.answer and not m.authority and not m.additional
                        slipped += 1
                    else:
                        assert m.answer and m.rcode() == 0
                        whole += 1
            except socket.timeout:
                pass
        seconds = int(time.time() - t0) + 1  # the buckets' seconds it spanned, at most
        assert 20 <= whole <= 20 * (seconds + 1), (whole, seconds)
        nx = ask(port, "nothere.example.test.", "A")  # another kind: its own bucket
        assert nx.rcode() == dns.rcode.NXDOMAIN
        assert ask(port, "www.example.test.", "A", tcp=True).answer  # TCP: not limited
    finally:
        rc, c = stop_json(p)
    assert rc == 0 and c["balanced"] is True, c
    limited = 300 - whole
    # every second one of a second's limited answers: +-1 where a second ends
    assert c["rrl_slipped"] == slipped and abs(slipped - limited / 2) <= 2, (c, slipped)
    assert c["rrl_dropped"] == limited - slipped
    assert c["udp_tx"] >= whole + slipped + 1 + 1  # and the probes, the NXDOMAIN


def test_sighup_reload(tmp_path):
    port = free_port()
    zone = tmp_path / "second.zone"
    shutil.copy(os.path.join(ZONES, "second.zone"), zone)
    p = subprocess.Popen([BIN, "dns", "--listen", f"127.0.0.1:{port}", "--json", "--zone",
                          str(zone)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_answers(port)
        assert ask(port, "new.second.test.", "A").rcode() == 3
        zone.write_text(zone.read_text() + "new.second.test. A 198.51.100.99\n")
        p.send_signal(signal.SIGHUP)
        rcodes = []
        end = time.time() + 10
        while time.time() < end:  # every query answered while the set is swapped
            m = ask(port, "new.second.test.", "A")
            rcodes.append(m.rcode())
            if m.rcode() == 0:
                assert m.answer[0][0].address == "198.51.100.99"
                break
        assert rcodes[-1] == 0
        zone.write_text("this is not a zone\n")
        p.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        assert ask(port, "new.second.test.", "A").rcode() == 0  # the old set still serves
    finally:
        rc, c = stop_json(p)
    assert rc == 0 and c["balanced"] is True
    assert c["reloads"] == 1 and c["reload_failed"] == 1


def has_hugepages():
    with open("/proc/meminfo") as f:
        return any(l.startswith("HugePages_Total:") and int(l.split()[1]) > 0 for l in f)


def test_cli_errors(tmp_path):
    def run(*a):
        return subprocess.run([BIN, "dns", *a], capture_output=True, text=True, timeout=30)
    r = run("--help")
    assert r.returncode == 0 and "--zone FILE" in r.stdout
    z = os.path.join(ZONES, "example.zone")
    for bad in ("127.0.0.1", "[::1]", "[::1]:0", "[zz::1]:53", "[::1]53", "[]:53", "::1:53"):
        r = run("--zone", z, "--listen", bad)
        assert r.returncode == 2 and f"'{bad}' for --listen" in r.stderr, bad
    for second in ("127.0.0.2:53", "[::1]:54"):  # the same family; another port
        r = run("--zone", z, "--listen", "127.0.0.1:53", "--listen", second, "--model", "rtc")
        assert r.returncode == 2 and f"--listen '{second}': a second --listen" in r.stderr
    r = run("--zone", z, "--listen", "127.0.0.1:53", "--listen", "[::1]:53")
    assert r.returncode == 2 and "--model socket serves one address" in r.stderr
    r = run("--zone", z, "--model", "dpdk")
    assert r.returncode == 2 and "'dpdk' for --model" in r.stderr
    r = run("--zone", z, "--", "--no-huge")
    assert r.returncode == 2 and "EAL arguments go with --model rtc|pipeline" in r.stderr
    if not has_hugepages():  # DPDK's EAL says only "Permission denied": we say why
        r = run("--zone", z, "--model", "rtc", "--listen", f"127.0.0.1:{free_port()}")
        assert r.returncode != 0 and "add --no-huge -m 512 to the EAL arguments" in r.stderr
    r = run("--zone", z, "--burst", "0")
    assert r.returncode == 2 and "--burst" in r.stderr
    r = run("--zone", z, "--idle-after-us", "2000000")
    assert r.returncode == 2 and "--idle-after-us" in r.stderr
    r = run("--listen", f"127.0.0.1:{free_port()}")
    assert r.returncode == 2 and "--zone" in r.stderr
    bad = tmp_path / "bad.zone"
    bad.write_text("$ORIGIN bad.test.\n$TTL 60\n@ SOA ns hm 1 2 3 4 5\nwww A 300.1.2.3\n")
    r = run("--zone", str(bad), "--check")
    assert r.returncode == 1 and f"{bad}:4: bad_rdata: A: field 1" in r.stderr
    r = run("--zone", z, "--zone", os.path.join(ZONES, "signed.zone.signed"), "--check")
    assert r.returncode == 0 and "2 zones, 131 records" in r.stdout


# ---- The DPDK models: in network namespaces joined by a veth pair ----
# The server's end is driven by DPDK's AF_XDP PMD (every frame of its queue
# goes to offpath, none to the kernel); the client's end is the kernel's.
# The same UDP queries must get the same answers from socket, rtc and
# pipeline; ARP and ICMP echo are answered; a malformed flood changes no
# answer; the counters balance; an idle server sleeps.
SRV_NS, CLI_NS, SRV_IF, CLI_IF = "ofdt-srv", "ofdt-cli", "ofdtsrv0", "ofdtcli0"
SRV_IP = "198.18.15.1"


def dump_answers(host, port):
    """canon() of every UDP query of the set, as text (run in the client ns)."""
    return [repr(canon(ask_at(host, port, n, t, **o))) for n, t, o, tcp in query_set() if not tcp]


def ask_at(host, port, name, rdtype, tcp=False, **kw):
    q = dns.message.make_query(name, rdtype, **kw)
    q.flags &= ~dns.flags.RD
    if tcp:
        return dns.query.tcp(q, host, port=port, timeout=2)
    return dns.query.udp(q, host, port=port, timeout=2)


def dump_tcp_answers(host, port):
    """canon() of the set's TCP queries; and for each, whether its UDP
    answer (no EDNS) was truncated: RFC 7766's case, asked again over TCP."""
    out = []
    for n, t, o, tcp in query_set():
        if tcp:
            udp_tc = bool(ask_at(host, port, n, t, **o).flags & dns.flags.TC)
            out.append([udp_tc, repr(canon(ask_at(host, port, n, t, tcp=True, **o)))])
    return out


def ping(host, count=3, v6=False):
    """ICMP (v6: ICMPv6) echo through a raw socket: how many of count came
    back. IPv4's checksum is ours to sum; the kernel sums ICMPv6's."""
    family, proto, request, reply = ((socket.AF_INET6, socket.IPPROTO_ICMPV6, 128, 129) if v6
                                     else (socket.AF_INET, socket.IPPROTO_ICMP, 8, 0))
    s = socket.socket(family, socket.SOCK_RAW, proto)
    s.settimeout(1)
    got = 0
    for seq in range(count):
        body = struct.pack(">BBHHH", request, 0, 0, 0x1515, seq) + b"offpath-dns-ping"
        if not v6:
            csum = sum(body[i] << 8 | body[i + 1] for i in range(0, len(body), 2))
            csum = (csum & 0xffff) + (csum >> 16)
            body = body[:2] + struct.pack(">H", ~(csum + (csum >> 16)) & 0xffff) + body[4:]
        s.sendto(body, (host, 0))
        try:
            while True:
                data = s.recv(2048)
                at = 0 if v6 else (data[0] & 0xf) * 4  # IPv4 raw sockets get the IP header
                if data[at] == reply and struct.unpack(">H", data[at + 6:at + 8])[0] == seq:
                    got += 1
                    break
        except socket.timeout:
            pass
    s.close()
    return got


def flood(host, port, n):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for pkt in malformed_datagrams(random.Random(99), n):
        s.sendto(pkt, (host, port))
        time.sleep(0.0002)
    s.close()


def in_client_ns(*args, timeout=120):
    r = subprocess.run(["ip", "netns", "exec", CLI_NS, "/usr/bin/python3", __file__, *args],
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def dpdk_built():
    r = subprocess.run([BIN, "dns", "--zone", os.path.join(ZONES, "second.zone"), "--model",
                        "rtc", "--check"], capture_output=True, text=True, timeout=30)
    return "has no DPDK" not in r.stderr


def need_dpdk():
    if not dpdk_built():
        pytest.skip("this build has no DPDK (libdpdk-dev)")


@pytest.fixture
def veth():
    if os.geteuid() != 0:
        pytest.skip("needs root: network namespaces and AF_XDP")

    def sh(*a):
        subprocess.run(a, check=False, capture_output=True, timeout=30)
    for ns in (SRV_NS, CLI_NS):
        sh("ip", "netns", "del", ns)
    cmds = [("ip", "netns", "add", SRV_NS), ("ip", "netns", "add", CLI_NS),
            # One queue each way: the PMD reads queue 0, and a frame the veth
            # put on another queue would go to the kernel instead.
            ("ip", "link", "add", SRV_IF, "numtxqueues", "1", "numrxqueues", "1", "type", "veth",
             "peer", "name", CLI_IF, "numtxqueues", "1", "numrxqueues", "1"),
            ("ip", "link", "set", SRV_IF, "netns", SRV_NS),
            ("ip", "link", "set", CLI_IF, "netns", CLI_NS),
            ("ip", "-n", SRV_NS, "addr", "add", SRV_IP + "/24", "dev", SRV_IF),
            ("ip", "-n", CLI_NS, "addr", "add", "198.18.15.2/24", "dev", CLI_IF),
            ("ip", "-n", SRV_NS, "link", "set", SRV_IF, "up"),
            ("ip", "-n", CLI_NS, "link", "set", CLI_IF, "up"),
            ("ip", "-n", SRV_NS, "link", "set", "lo", "up")]
    try:
        for c in cmds:
            subprocess.run(c, check=True, capture_output=True, timeout=30)
        yield
    finally:
        for ns in (SRV_NS, CLI_NS):
            sh("ip", "netns", "del", ns)


def start_in_srv(model, port, tmp_path, prefix=(), listen=(SRV_IP,)):
    """The model in the server's namespace, on each address of listen (the
    first decides TCP's family), once it answers (over the first)."""
    args = ["ip", "netns", "exec", SRV_NS, *prefix, BIN, "dns", "--model", model, "--json",
            "--stats-json", str(tmp_path / f"{model}.json"), "--nsid", NSID]
    for a in listen:
        args += ["--listen", f"[{a}]:{port}" if ":" in a else f"{a}:{port}"]
    for f in ZONE_FILES.values():
        args += ["--zone", os.path.join(ZONES, f)]
    if model == "xdp":
        args += ["--xdp-if", SRV_IF]
    elif model != "socket":
        lcores = "0@0,1@1" if model == "rtc" else "0@0,1@1,2@0"
        args += ["--", "--no-huge", "-m", "512", "--no-pci", "--lcores", lcores,
                 f"--vdev=net_af_xdp0,iface={SRV_IF}", f"--file-prefix=ofdt{port}",
                 "--log-level=warning"]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    end = time.time() + 30
    while time.time() < end:
        assert p.poll() is None, p.stderr.read()
        try:
            in_client_ns("--probe", listen[0], str(port), timeout=10)
            return p
        except AssertionError:
            time.sleep(0.3)
    p.kill()
    raise AssertionError(f"{model}: no answer in 30 s")


def thread_policy(pid, name):
    """The scheduling policy (field 41 of stat) of pid's thread called name."""
    for t in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{t}/comm") as f:
            if f.read().strip() != name:
                continue
        with open(f"/proc/{pid}/task/{t}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[38])
    return None


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_share(pid):
    """The share of a core pid uses over 3 s of no load (after 1.5 s for
    the lcores to start sleeping)."""
    time.sleep(1.5)
    before, t0 = cpu_seconds(pid), time.time()
    time.sleep(3)
    return (cpu_seconds(pid) - before) / (time.time() - t0)


def test_polling_models_answer_as_socket(veth, tmp_path):
    port = 53
    answers, tcp, counters = {}, {}, {}
    dpdk = ("rtc", "pipeline") if dpdk_built() else ()  # xdp needs no DPDK
    for model in ("socket", "xdp", *dpdk):
        p = start_in_srv(model, port, tmp_path)
        try:
            # Ask for the MAC now that the model is up: DPDK must answer ARP.
            subprocess.run(["ip", "-n", CLI_NS, "neigh", "flush", "all"], check=True, timeout=30)
            answers[model] = in_client_ns("--dump", SRV_IP, str(port))
            # Truncated over UDP, whole over TCP: through the kernel for DPDK.
            tcp[model] = in_client_ns("--dump-tcp", SRV_IP, str(port))
            if model != "socket":
                assert in_client_ns("--ping", SRV_IP) == 3
                in_client_ns("--flood", SRV_IP, str(port), "2000")
                assert in_client_ns("--dump", SRV_IP, str(port)) == answers[model]
                # 5% of a core for each polling thread: the pipeline has two
                # (its port's lcore and its worker), each waking every ms
                share, pollers = idle_share(p.pid), 2 if model == "pipeline" else 1
                assert share < 0.05 * pollers, \
                    f"{model}: an idle server used {share:.1%} of a core ({pollers} pollers)"
        finally:
            rc, c = stop_json(p)
        counters[model] = c
        assert rc == 0 and c["balanced"] is True, c
    assert len(answers["socket"]) >= 300
    for model in ("xdp", *dpdk):
        assert answers[model] == answers["socket"], model
        assert tcp[model] == tcp["socket"], model
    assert sum(tc for tc, _ in tcp["socket"]) >= 4  # some were truncated over UDP
    assert all("'flags': 'QR AA'" in a or "'flags': 'QR'" in a for _, a in tcp["socket"])
    c = counters["xdp"]  # ARP and ICMP went to the kernel: the frames are the queries
    assert c["formerr_ptr_loop"] >= 250 and c["drop_response"] >= 250
    assert c["tcp_rx"] == c["tcp_tx"] == len(tcp["xdp"]) and c["rt_yields"] == 0
    for model in dpdk:
        c = counters[model]
        assert c["ctl_rx"] >= 4 and c["ctl_tx"] == c["ctl_rx"]  # ARP + 3 echoes
        assert c["frames_rx"] == (c["udp_rx"] + c["ctl_rx"] + c["drop_not_ours"] +
                                  c["drop_frame"] + c["drop_ring_rx"])
        assert c["formerr_ptr_loop"] >= 250 and c["drop_response"] >= 250
        assert c["tcp_rx"] == c["tcp_tx"] == len(tcp[model])
        assert c["rt_yields"] == 0  # the normal policy: no forced sleeps


KXDPGUN = shutil.which("kxdpgun") or "/usr/sbin/kxdpgun"


def kxdpgun(rate, seconds, tmp_path):
    """kxdpgun (Debian's knot package) in the client namespace at a fixed
    rate: (sent, replies). Bounded by -t and the subprocess timeout."""
    qfile = tmp_path / "kx-queries.txt"
    qfile.write_text("www.example.test A\nnothere.example.test A\nx.wild.example.test TXT D\n"
                     "example.test MX\n")
    out = subprocess.run(["ip", "-n", SRV_NS, "link", "show", SRV_IF], capture_output=True,
                         text=True, timeout=30, check=True).stdout
    mac = out.split("link/ether ")[1].split()[0]
    for _ in range(5):  # a previous generator's XDP socket may still be going away
        r = subprocess.run(["ip", "netns", "exec", CLI_NS, KXDPGUN, "-t", str(seconds), "-Q",
                            str(rate), "-I", CLI_IF, "-R", mac, "-i", str(qfile), SRV_IP],
                           capture_output=True, text=True, timeout=seconds + 30)
        if "total queries" in r.stdout:
            break
        time.sleep(1)
    sent = int(r.stdout.split("total queries:")[1].split()[0])
    got = int(r.stdout.split("total replies:")[1].split()[0])
    return sent, got


def test_pipeline_survives_overload(veth, tmp_path):
    """An overload far above what one core answers (the issue's stall: RX
    stopped for good after one, docs/dns.md), then a light load and the
    UDP query set: everything answered, and every frame accounted for."""
    need_dpdk()
    if not os.path.exists(KXDPGUN):
        pytest.skip("kxdpgun missing (Debian's knot package)")
    p = start_in_srv("pipeline", 53, tmp_path)
    try:
        for _ in range(2):
            sent, got = kxdpgun(700000, 2, tmp_path)
            assert sent > 500000  # the generator did overload it
        sent, got = kxdpgun(20000, 2, tmp_path)
        # the stall this guards against answered nothing after the overload;
        # the share answered under a loaded machine is the bench's (85-96 %
        # at load 8-11 for the builds before and after issue 23's third session)
        assert got >= 0.8 * sent, f"after the overload: {got} of {sent} answered"
        subprocess.run(["ip", "-n", CLI_NS, "neigh", "flush", "all"], check=True, timeout=30)
        assert len(in_client_ns("--dump", SRV_IP, "53")) >= 300
    finally:
        rc, c = stop_json(p)
    assert rc == 0 and c["balanced"] is True, c
    assert c["received"] == c["responses"] + c["drop_short"] + c["drop_response"]
    assert c["responses"] == c["udp_tx"] + c["drop_tx"]
    assert c["frames_rx"] == (c["udp_rx"] + c["ctl_rx"] + c["drop_not_ours"] +
                              c["drop_frame"] + c["drop_ring_rx"])
    assert c["udp_rx"] == c["received"] and c["udp_tx"] >= got + 300


def test_rtc_real_time_lcore_yields(veth, tmp_path):
    """Started by chrt -f (SCHED_FIFO, which its lcore inherits), rtc still
    answers as the socket model does, takes its bounded sleeps while busy
    (rt_yields: 800 us every 10 ms by default, so the kernel's real-time
    throttle never takes the CPU from it) and still sleeps when idle."""
    need_dpdk()
    if not os.path.exists(KXDPGUN):
        pytest.skip("kxdpgun missing (Debian's knot package)")
    p = start_in_srv("socket", 53, tmp_path)
    try:
        want = in_client_ns("--dump", SRV_IP, "53")
    finally:
        stop_json(p)
    p = start_in_srv("rtc", 53, tmp_path, prefix=("chrt", "-f", "10"))
    try:
        assert thread_policy(p.pid, "rte-worker-1") == 1  # SCHED_FIFO (ip netns exec, chrt exec)
        subprocess.run(["ip", "-n", CLI_NS, "neigh", "flush", "all"], check=True, timeout=30)
        assert in_client_ns("--dump", SRV_IP, "53") == want
        sent, got = kxdpgun(100000, 3, tmp_path)
        # still answering; how much is the bench's (the generator and the
        # veth's softirqs lose a few % on a loaded machine, either build);
        # rt_yields below is what shows the yields themselves
        assert got >= 0.9 * sent, f"{got} of {sent} answered"
        share = idle_share(p.pid)
        assert share < 0.05, f"an idle real-time lcore used {share:.1%} of a core"
    finally:
        rc, c = stop_json(p)
    assert rc == 0 and c["balanced"] is True, c
    # 3 s busy: ~300 at one per 10 ms; idle, its own sleeps stand for them
    assert c["rt_yields"] >= 150, c["rt_yields"]


SRV_IP6, CLI_IP6 = "2001:db8:15::1", "2001:db8:15::2"


def ipv6_and_socket_answers(port, tmp_path):
    """IPv6 addresses on both ends of the veth, and the socket model's
    answers over IPv4 (UDP, then TCP): what the other models must give."""
    for ns, addr in ((SRV_NS, SRV_IP6), (CLI_NS, CLI_IP6)):
        dev = SRV_IF if ns == SRV_NS else CLI_IF
        subprocess.run(["ip", "-n", ns, "addr", "add", f"{addr}/64", "dev", dev, "nodad"],
                       check=True, timeout=30)
    p = start_in_srv("socket", port, tmp_path)
    try:
        return (in_client_ns("--dump", SRV_IP, str(port)),
                in_client_ns("--dump-tcp", SRV_IP, str(port)))
    finally:
        stop_json(p)


def test_dpdk_models_dual_stack(veth, tmp_path):
    """rtc and pipeline on an IPv4 and an IPv6 address at once (--listen
    twice): the UDP query set asked over IPv6 gets the socket model's
    answers (asked over IPv4); the client's kernel finds the server's MAC
    by neighbour discovery, which the DPDK model answers, and 3 ICMPv6
    echoes come back; TCP goes through the kernel on both families (a
    kernel socket each: the truncated answers are asked again over TCP on
    each); the counters balance, the IPv6 frames counted."""
    need_dpdk()
    port = 53
    want, want_tcp = ipv6_and_socket_answers(port, tmp_path)
    for model, listen in (("rtc", (SRV_IP, SRV_IP6)), ("pipeline", (SRV_IP6, SRV_IP))):
        p = start_in_srv(model, port, tmp_path, listen=listen)
        try:
            subprocess.run(["ip", "-n", CLI_NS, "-6", "neigh", "flush", "all"], check=True,
                           timeout=30)
            assert in_client_ns("--dump", SRV_IP6, str(port)) == want, model
            assert in_client_ns("--dump", SRV_IP, str(port)) == want, model
            assert in_client_ns("--ping6", SRV_IP6) == 3, model
            neigh = subprocess.run(["ip", "-n", CLI_NS, "-6", "neigh", "show", SRV_IP6],
                                   capture_output=True, text=True, timeout=30).stdout
            assert "lladdr" in neigh, neigh  # learnt from our advertisement
            tcp = [in_client_ns("--dump-tcp", a, str(port)) for a in listen]
        finally:
            rc, c = stop_json(p)
        assert rc == 0 and c["balanced"] is True, c
        assert tcp == [want_tcp, want_tcp], model
        assert c["ctl_rx"] >= 1 + 3 and c["ctl_tx"] == c["ctl_rx"]  # NS (or ARP) + echoes
        assert c["udp_rx"] >= 2 * len(want) and c["tcp_rx"] == c["tcp_tx"] == 2 * len(want_tcp)
        assert c["frames_rx"] == (c["udp_rx"] + c["ctl_rx"] + c["drop_not_ours"] +
                                  c["drop_frame"] + c["drop_ring_rx"])


def test_xdp_model_ipv6(veth, tmp_path):
    """--model xdp on an IPv6 address: the UDP query set asked over IPv6
    through the AF_XDP socket gets the socket model's answers (asked over
    IPv4), the truncated ones again over TCP through the kernel; the
    kernel beside it answers neighbour solicitations; counters balance."""
    port = 53
    want, want_tcp = ipv6_and_socket_answers(port, tmp_path)
    p = start_in_srv("xdp", port, tmp_path, listen=(SRV_IP6,))
    try:
        assert in_client_ns("--dump", SRV_IP6, str(port)) == want
        tcp = in_client_ns("--dump-tcp", SRV_IP6, str(port))
    finally:
        rc, c = stop_json(p)
    assert rc == 0 and c["balanced"] is True, c
    assert tcp == want_tcp
    assert c["udp_rx"] >= len(want) and c["tcp_rx"] == c["tcp_tx"] == len(want_tcp)


if __name__ == "__main__":
    import sys
    mode = sys.argv[1]
    if mode == "--dump":
        print(json.dumps(dump_answers(sys.argv[2], int(sys.argv[3]))))
    elif mode == "--dump-tcp":
        print(json.dumps(dump_tcp_answers(sys.argv[2], int(sys.argv[3]))))
    elif mode == "--probe":
        print(json.dumps(ask_at(sys.argv[2], int(sys.argv[3]), "example.test.", "SOA").rcode()))
    elif mode == "--ping":
        print(json.dumps(ping(sys.argv[2])))
    elif mode == "--ping6":
        print(json.dumps(ping(sys.argv[2], v6=True)))
    elif mode == "--flood":
        flood(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        print("null")


def replay_reference(queries):
    """The socket model's answer to each template of the mix (its ID 0)."""
    port = free_port()
    p = subprocess.Popen([BIN, "dns", "--listen", f"127.0.0.1:{port}",
                          "--zone", os.path.join(ZONES, "example.zone")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_answers(port)
        out = []
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(2)
            for name, qtype, do in queries:
                s.sendto(dnsmix.query(0, name, qtype, do), ("127.0.0.1", port))
                out.append(s.recv(4096))
        return out
    finally:
        p.terminate()
        p.wait(timeout=10)


def answers_sent(stats):
    try:
        return json.loads(stats.read_text()).get("udp_tx", 0)
    except (OSError, ValueError):
        return 0


def start_replayed_pipeline(pcap_args, stats):
    """The pipeline on DPDK's pcap PMD (pcap_args: its files), the port's
    lcore on CPU 0 and two workers sharing CPU 1."""
    return subprocess.Popen([BIN, "dns", "--model", "pipeline", "--listen", "198.18.0.1:53",
                             "--zone", os.path.join(ZONES, "example.zone"), "--json",
                             "--stats-json", str(stats), "--log-level", "warning", "--",
                             "--no-huge", "-m", "512", "--no-pci", "--lcores",
                             "0@0,1@0,2@1,3@1", f"--vdev=net_pcap0,{pcap_args}",
                             "--file-prefix=ofdt-replay", "--log-level=warning"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_pipeline_workers_sharing_a_cpu_keep_going(tmp_path):
    """The pipeline's two workers on one CPU under a load that never stops
    (the pcap PMD replaying its file endlessly). With the default ring sync
    a worker preempted halfway through a dequeue made the other spin until
    it was back, a scheduler tick each time: about 16k answers/s within two
    seconds, for good. Relaxed tail sync keeps it at millions
    (bench/dns/replay); the floor here, 100k/s, only catches the collapse."""
    need_dpdk()
    if os.cpu_count() < 2:
        pytest.skip("needs two CPUs")
    rx = str(tmp_path / "queries.pcap")
    dnsmix.write_pcap(rx, 4096)
    stats = tmp_path / "stats.json"
    p = start_replayed_pipeline(f"rx_pcap={rx},infinite_rx=1", stats)
    try:
        time.sleep(4)  # the collapse came within two seconds
        a0, t0 = answers_sent(stats), time.time()
        time.sleep(2)
        a1, t1 = answers_sent(stats), time.time()
    finally:
        rc, c = stop_json(p)
    assert rc == 0 and c["balanced"] is True, c
    assert (a1 - a0) / (t1 - t0) > 100000, f"{a1 - a0} answers in {t1 - t0:.1f} s"


def test_pipeline_replay_workers_sharing_a_cpu(tmp_path):
    """The pipeline with its two workers on one CPU (the port's lcore on
    the other), fed a pcap file of 100000 queries by DPDK's pcap PMD and
    writing its answers to another: every query answered exactly once, each
    answer equal to the socket model's for its query but for the ID, the
    frame sent back to the query's address and port, the counters balanced
    with nothing dropped."""
    need_dpdk()
    if os.cpu_count() < 2:
        pytest.skip("needs two CPUs")
    count = 100000
    rx, tx = str(tmp_path / "queries.pcap"), str(tmp_path / "answers.pcap")
    sent_ids = dnsmix.write_pcap(rx, count)
    stats = tmp_path / "stats.json"
    p = start_replayed_pipeline(f"rx_pcap={rx},tx_pcap={tx}", stats)
    try:
        deadline = time.time() + 60
        done = 0
        while time.time() < deadline and done < count:
            time.sleep(0.1)
            done = answers_sent(stats)
    finally:
        rc, c = stop_json(p)
    assert done == count, f"{done} of {count} answered in 60 s"
    assert rc == 0 and c["balanced"] is True, c
    assert c["received"] == c["udp_tx"] == count and c["frames_rx"] == count, c
    assert all(v == 0 for k, v in c.items() if k.startswith("drop") or k == "tx_ring_full"), c
    ref = replay_reference(dnsmix.QUERIES)
    frames = dnsmix.read_pcap(tx)
    assert len(frames) == count
    want = {(qid, port): t for qid, port, t in sent_ids}  # IDs wrap: with the port, unique
    seen = set()
    for f in frames:
        assert f[26:30] == bytes([198, 18, 0, 1]) and f[30:34] == bytes([198, 18, 0, 2])
        payload = f[42:]
        key = struct.unpack("!H", payload[:2])[0], struct.unpack("!H", f[36:38])[0]
        assert key in want, f"an answer to no query sent: ID and port {key}"
        t = want[key]
        assert payload[2:] == ref[t][2:], f"answer {key} ({dnsmix.QUERIES[t]}) differs"
        seen.add(key)
    assert len(seen) == count
