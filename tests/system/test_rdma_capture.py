"""Capture check of the RoCEv2 traffic offpath puts on the wire (issue 4).

tcpdump records the UDP traffic on loopback while real processes run
(`offpath ib_write_bw|ib_read_bw|ib_send_bw` pairs, and the INC switch with
its leaders); roce_decode.py, an independent decoder (scapy to read the
capture, zlib for the ICRC, none of offpath's C code) checks every packet:
opcode and headers, pad and length, ICRC, PSNs per QP and direction.

Each capture runs in a fresh network namespace (`unshare -n`) so that the
capture holds only this test's packets (the machine is shared; other tests
and benchmarks use loopback too). Where namespaces are not available the
capture is taken on the host's loopback and the test picks its own flows
(127.0.0.1 <-> 127.0.0.1 for the ib_* tools, the fabric's port for INC)."""
import os
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys

import pytest

from conftest import BIN, next_net

sys.path.insert(0, os.path.dirname(__file__))
try:
    import roce_decode as rd
    HAVE_SCAPY = True
except ImportError:  # python3-scapy missing
    HAVE_SCAPY = False

TCPDUMP = shutil.which("tcpdump") or ("/usr/bin/tcpdump" if os.path.exists("/usr/bin/tcpdump")
                                      else None)

needs_scapy = pytest.mark.skipif(not HAVE_SCAPY,
                                 reason="python3-scapy not installed (scripts/bootstrap installs it)")
needs_capture = pytest.mark.skipif(
    not (HAVE_SCAPY and TCPDUMP and os.geteuid() == 0),
    reason="needs tcpdump, python3-scapy (scripts/bootstrap installs both) and root to capture")


def _can_unshare():
    try:
        return subprocess.run(["unshare", "-n", "true"], capture_output=True,
                              timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


# OFFPATH_CAPTURE_NETNS=0 forces the host-namespace fallback.
NETNS = os.environ.get("OFFPATH_CAPTURE_NETNS", "1") != "0" and _can_unshare()


def tool_exists(tool):
    r = subprocess.run([BIN, tool, "--help"], capture_output=True, text=True, timeout=30)
    return not ("unknown tool" in r.stderr or "unknown tool" in r.stdout)


# A bash script: tcpdump on lo, then the workload, then tcpdump stopped by
# PID once the capture file stops growing. Every wait is bounded.
SCRIPT = r"""
set -u
cd "$DIR"
[ "$NETNS" = 1 ] && ip link set lo up
"$TCPDUMP" -i lo --immediate-mode -B 131072 -U -Z root -s 65600 -w cap.pcap udp 2>tcpdump.err & TD=$!
SRV=
cleanup() { [ -n "$SRV" ] && kill -9 $SRV 2>/dev/null; kill $TD 2>/dev/null; }
trap cleanup EXIT
for i in $(seq 250); do grep -q listening tcpdump.err && break; sleep 0.02; done
%(workload)s
prev=-1
for i in $(seq 40); do
    s=$(stat -c %%s cap.pcap 2>/dev/null || echo 0)
    [ "$s" = "$prev" ] && break
    prev=$s; sleep 0.15
done
kill -INT $TD; wait $TD
"""

# server in the background (until its TCP port listens), client, server's
# exit status; 60 s bound on each side.
PAIR = r"""
nice -n 10 timeout 60 "$BIN" %(server)s >server.out 2>server.err & SRV=$!
for i in $(seq 500); do
    ss -ltn "sport = :$PORT" | grep -q LISTEN && break
    kill -0 $SRV 2>/dev/null || break
    sleep 0.02
done
nice -n 10 timeout 60 "$BIN" %(client)s >client.out 2>client.err; echo $? >client.rc
for i in $(seq 500); do kill -0 $SRV 2>/dev/null || break; sleep 0.02; done
kill -9 $SRV 2>/dev/null; wait $SRV; echo $? >server.rc; SRV=
"""


def run_captured(tmp_path, workload, port=0, timeout=180):
    """Runs `workload` (bash, with $BIN and $PORT) under tcpdump; returns the
    pcap path and the tcpdump summary."""
    env = dict(os.environ, DIR=str(tmp_path), TCPDUMP=TCPDUMP, BIN=os.path.abspath(BIN),
               PORT=str(port), NETNS="1" if NETNS else "0")
    cmd = (["unshare", "-n"] if NETNS else []) + ["bash", "-c", SCRIPT % {"workload": workload}]
    # its own session: on a timeout the whole group (tcpdump, tools) is killed
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        _out, stderr = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise
    err = (tmp_path / "tcpdump.err").read_text() if (tmp_path / "tcpdump.err").exists() else ""
    assert (tmp_path / "cap.pcap").exists(), f"no capture: {stderr}\n{err}"
    assert re.search(r"^0 packets dropped by kernel", err, re.M), f"tcpdump dropped packets: {err}"
    return tmp_path / "cap.pcap", err


def roce_pairs(pcap, want):
    """Host-namespace fallback: the UDP port pairs whose datagrams satisfy
    `want` and validate as RoCEv2 at least once (the capture then also holds
    other tests' traffic)."""
    pairs = set()
    for dg in rd.read_datagrams(str(pcap), []):
        if want(dg) and len(dg.payload) >= 16 and any(
                rd.icrc_ok(dg, off, ln)[0] for off, ln in rd.split_datagram(dg)):
            pairs.add(frozenset(((dg.src, dg.sport), (dg.dst, dg.dport))))
    return pairs


def decode(pcap, want=lambda dg: True):
    """Decodes the capture: every UDP datagram in a namespace, else the RoCEv2
    flows that `want` picks. Returns the report and the selector used."""
    if NETNS:
        select = lambda dg: True  # noqa: E731
    else:
        pairs = roce_pairs(pcap, want)
        select = lambda dg: frozenset(((dg.src, dg.sport), (dg.dst, dg.dport))) in pairs  # noqa: E731
    return rd.decode_pcap(str(pcap), select=select), select


def assert_corruption_caught(pcap, tmp_path, rep, select, nth=3):
    """One flipped payload byte in a copy must fail the ICRC check, and only
    that packet's."""
    bad = tmp_path / "corrupt.pcap"
    frame = rd.corrupt_copy(str(pcap), str(bad), select=select, nth=nth)
    assert frame is not None
    rep2 = rd.decode_pcap(str(bad), select=select)
    icrc_errs = [e for e in rep2.errors if "ICRC" in e]
    assert len(icrc_errs) == 1 and f"frame {frame} " in icrc_errs[0], rep2.summary()
    assert rep2.icrc_ok == rep.icrc_ok - 1, rep2.summary()


# ---------------------------------------------------------------------------
# the decoder itself, on packets scapy builds (its contrib RoCE layer seals
# the ICRC, so this also checks roce_decode's ICRC against scapy's)

def _rc_packets(mtu=256, psn0=0xfffffa, qa=0x11, qb=0x12, retransmit=True, probe=False):
    """An RC conversation A (127.0.0.1:50000) <-> B (127.0.0.1:4791): a
    3-packet WRITE, a 2-packet SEND (its MIDDLE+LAST retransmitted), a READ
    of 2.5 MTU with its response, ACKs; PSNs wrap past 2^24. probe: then the
    SEND's first packet once more, and a WRITE at the next new PSN."""
    from scapy.all import IP, UDP, Ether, Raw
    from scapy.contrib.roce import BTH
    A, B = ("127.0.0.1", 50000), ("127.0.0.1", 4791)
    pkts = []

    def add(frm, to, op, psn, dqpn, ext=b"", payload=b"", ackreq=0):
        pad = (-len(payload)) & 3
        p = (Ether() / IP(src=frm[0], dst=to[0], flags="DF", id=0) /
             UDP(sport=frm[1], dport=to[1]) /
             BTH(opcode=op, padcount=pad, dqpn=dqpn, psn=psn & 0xffffff, ackreq=ackreq) /
             Raw(ext + payload + b"\0" * pad))
        pkts.append(Ether(bytes(p)))

    reth = lambda ln: struct.pack("!QII", 0x7f0000001000, 0x1234abcd, ln)  # noqa: E731
    aeth = lambda msn: struct.pack("!I", msn)  # noqa: E731  (syndrome 0: ACK)
    psn = psn0
    # WRITE of 2 MTU + 10 bytes
    add(A, B, 0x06, psn, qb, reth(2 * mtu + 10), b"w" * mtu)
    add(A, B, 0x07, psn + 1, qb, b"", b"w" * mtu)
    add(A, B, 0x08, psn + 2, qb, b"", b"w" * 10, ackreq=1)
    add(B, A, 0x11, psn + 2, qa, aeth(1))
    psn += 3
    # SEND of MTU + 3 bytes; MIDDLE.. retransmitted from the LAST
    add(A, B, 0x00, psn, qb, b"", b"s" * mtu)
    add(A, B, 0x02, psn + 1, qb, b"", b"s" * 3, ackreq=1)
    if retransmit:
        add(A, B, 0x02, psn + 1, qb, b"", b"s" * 3, ackreq=1)
    add(B, A, 0x11, psn + 1, qa, aeth(2))
    psn += 2
    # READ of 2.5 MTU: 3 response packets
    add(A, B, 0x0c, psn, qb, reth(2 * mtu + mtu // 2), ackreq=1)
    add(B, A, 0x0d, psn, qa, aeth(3), b"r" * mtu)
    add(B, A, 0x0e, psn + 1, qa, b"", b"r" * mtu)
    add(B, A, 0x0f, psn + 2, qa, aeth(3), b"r" * (mtu // 2))
    psn += 3
    # a WRITE_ONLY of 5 bytes (pad 3) and its ACK
    add(A, B, 0x0a, psn, qb, reth(5), b"12345", ackreq=1)
    add(B, A, 0x11, psn, qa, aeth(4))
    if probe:  # an old packet probes the responder, then the requester goes on
        add(A, B, 0x00, psn - 5, qb, b"", b"s" * mtu)
        add(A, B, 0x0a, psn + 1, qb, reth(5), b"67890", ackreq=1)
        add(B, A, 0x11, psn + 1, qa, aeth(5))
    return pkts


@needs_scapy
def test_decoder_takes_a_probe_then_new_psns(tmp_path):
    """A requester that re-sends one old packet (a tail-loss probe) and then
    sends the next new PSN skipped nothing: no gap, one retransmission."""
    pkts = _rc_packets(retransmit=False, probe=True)
    rep = rd.decode_pcap(_write(tmp_path, "probe.pcap", pkts))
    assert rep.ok and rep.lost == 0 and rep.psns_missing == 0, rep.summary()
    assert rep.retransmitted == 1 and rep.go_backs == 1, rep.summary()


def _write(tmp_path, name, pkts):
    from scapy.all import wrpcap
    path = tmp_path / name
    wrpcap(str(path), pkts)
    return str(path)


@needs_scapy
def test_decoder_on_scapy_built_rc(tmp_path):
    pkts = _rc_packets()
    rep = rd.decode_pcap(_write(tmp_path, "rc.pcap", pkts))
    assert rep.ok, rep.summary()
    assert rep.packets == len(pkts) == rep.icrc_ok
    assert rep.retransmitted == 1 and rep.go_backs == 1
    for name, n in [("RC_RDMA_WRITE_FIRST", 1), ("RC_RDMA_WRITE_MIDDLE", 1),
                    ("RC_RDMA_WRITE_LAST", 1), ("RC_SEND_FIRST", 1), ("RC_SEND_LAST", 2),
                    ("RC_RDMA_READ_REQUEST", 1), ("RC_RDMA_READ_RESPONSE_FIRST", 1),
                    ("RC_RDMA_READ_RESPONSE_MIDDLE", 1), ("RC_RDMA_READ_RESPONSE_LAST", 1),
                    ("RC_RDMA_WRITE_ONLY", 1), ("RC_ACKNOWLEDGE", 3)]:
        assert rep.counts[name] == n, (name, rep.summary())
    # our opcode names are scapy's
    from scapy.contrib import roce
    for op, v in rd.OPCODES.items():
        assert roce._bth_opcodes[op] == v[0]
    # our ICRC is scapy's on every packet
    for dg in rd.read_datagrams(_write(tmp_path, "rc2.pcap", pkts), []):
        assert rd.scapy_icrc(dg) == struct.unpack("<I", dg.payload[-4:])[0]


def _mutated(tmp_path, name, pkts, i, fn):
    """A copy of pkts with packet i's RoCE bytes changed by fn, ICRC resealed
    by scapy (so only the change itself is wrong)."""
    from scapy.all import UDP, Ether
    from scapy.contrib.roce import BTH
    out = list(pkts)
    p = Ether(bytes(pkts[i]))
    b = bytearray(bytes(p[UDP].payload))
    fn(b)
    p[UDP].remove_payload()
    p[UDP].len = None
    p[UDP].chksum = None
    from scapy.all import IP
    p[IP].len = None
    p[IP].chksum = None
    bth = BTH(bytes(b))
    bth.icrc = None
    out[i] = Ether(bytes(p / bth))
    return _write(tmp_path, name, out)


def _set_psn(b, psn):
    b[9:12] = (psn & 0xffffff).to_bytes(3, "big")


@needs_scapy
@pytest.mark.parametrize("case,needle", [
    ("gap", "PSN gap"),
    ("opcode", "unknown opcode"),
    ("sequence", "with no message open"),
    ("mtu", "not one MTU"),
    ("pad", "pad bytes not zero"),
    ("ack_unsent", "ACK/NAK for a PSN the requester has not sent"),
    ("read_len", "READ response carried"),
    ("reth_len", "WRITE carried"),
    ("icrc", "ICRC"),
    ("tver", "TVer"),
])
def test_decoder_finds_each_fault(tmp_path, case, needle):
    pkts = _rc_packets(retransmit=False)
    psn0 = 0xfffffa
    mut = {
        "gap": (4, lambda b: _set_psn(b, psn0 + 4)),        # SEND_FIRST one PSN late
        "opcode": (0, lambda b: b.__setitem__(0, 0x15)),     # RC opcode 0x15 does not exist
        "sequence": (4, lambda b: b.__setitem__(0, 0x01)),   # SEND_MIDDLE opening a message
        "mtu": (1, lambda b: b.__setitem__(slice(12, 16), b"")),  # MIDDLE 4 bytes short
        "pad": (11, lambda b: b.__setitem__(-5, 0x55)),      # WRITE_ONLY: a pad byte set
        "ack_unsent": (3, lambda b: _set_psn(b, psn0 + 40)),
        "read_len": (10, lambda b: b.__setitem__(slice(16, 20), b"")),  # LAST short
        "reth_len": (0, lambda b: b.__setitem__(slice(24, 28), struct.pack("!I", 600))),
        "tver": (2, lambda b: b.__setitem__(1, b[1] | 0x01)),
    }
    if case == "icrc":
        from scapy.all import raw
        bad = bytearray(raw(pkts[5]))
        bad[-6] ^= 0x20
        from scapy.all import Ether
        pkts[5] = Ether(bytes(bad))
        path = _write(tmp_path, "icrc.pcap", pkts)
    else:
        i, fn = mut[case]
        path = _mutated(tmp_path, f"{case}.pcap", pkts, i, fn)
    rep = rd.decode_pcap(path)
    assert not rep.ok
    assert any(needle in e for e in rep.errors), rep.summary()
    if case == "gap":  # as a loss before the capture point: counted, and the hole shows
        rep = rd.decode_pcap(path, allow_loss=True)
        assert rep.ok and rep.lost == 1 and rep.psns_missing == 1, rep.summary()


@needs_scapy
def test_decoder_cli(tmp_path):
    path = _write(tmp_path, "rc.pcap", _rc_packets())
    r = subprocess.run([sys.executable, rd.__file__, path], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "RC_RDMA_READ_RESPONSE_MIDDLE" in r.stdout and "0 errors" in r.stdout
    bad = tmp_path / "bad.pcap"
    assert rd.corrupt_copy(path, str(bad)) is not None
    r = subprocess.run([sys.executable, rd.__file__, str(bad), "--udp-port", "4791"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "ICRC" in r.stdout, r.stdout
    r = subprocess.run([sys.executable, rd.__file__, str(tmp_path / "none.pcap")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2


# ---------------------------------------------------------------------------
# INC traffic: the switches and leaders of inc_test (UD SEND_ONLY, GSO runs)

@needs_capture
def test_inc_traffic_is_valid_rocev2(tmp_path):
    net, port = next_net()
    work = (f'timeout 120 "$BIN" inc_test --leaders 4 --tors 2 --count 3000 --type int32 '
            f'--iters 5 --warmup 1 --quiet --drop-rate 0.02 --dup-rate 0.01 '
            f'--net {net} --port {port} >inc.out 2>inc.err; echo $? >inc.rc')
    pcap, _ = run_captured(tmp_path, work, port)
    assert (tmp_path / "inc.rc").read_text().strip() == "0", (tmp_path / "inc.out").read_text()
    rep, select = decode(pcap, lambda dg: port in (dg.sport, dg.dport))
    assert rep.ok, rep.summary()
    assert rep.packets > 100 and rep.icrc_ok == rep.packets
    assert set(rep.counts) == {"UD_SEND_ONLY"}, rep.summary()
    assert_corruption_caught(pcap, tmp_path, rep, select)


# ---------------------------------------------------------------------------
# the perftest-compatible tools

# tool, opcodes that must appear
IB_CASES = [
    ("ib_write_bw", ["RC_RDMA_WRITE_FIRST", "RC_RDMA_WRITE_MIDDLE", "RC_RDMA_WRITE_LAST",
                     "RC_ACKNOWLEDGE"]),
    ("ib_read_bw", ["RC_RDMA_READ_REQUEST", "RC_RDMA_READ_RESPONSE_FIRST",
                    "RC_RDMA_READ_RESPONSE_MIDDLE", "RC_RDMA_READ_RESPONSE_LAST"]),
    ("ib_send_bw", ["RC_SEND_FIRST", "RC_SEND_MIDDLE", "RC_SEND_LAST", "RC_ACKNOWLEDGE"]),
]

_port = [18600]


def run_pair(tmp_path, tool, flags):
    """An offpath ib_* server + client on loopback under tcpdump; returns the
    capture's path. Skips when the binary has no such tool."""
    if not tool_exists(tool):
        pytest.skip(f"offpath {tool}: tool not found in {BIN} (not built yet)")
    _port[0] += 1
    port = _port[0] + os.getpid() % 1000
    args = f"{tool} {flags} -p {port}"
    work = PAIR % {"server": args, "client": args + " 127.0.0.1"}
    pcap, _ = run_captured(tmp_path, work, port)
    out = {n: (tmp_path / n).read_text()[-3000:] for n in
           ("client.out", "client.err", "server.out", "server.err")}
    assert (tmp_path / "client.rc").read_text().strip() == "0", out
    assert (tmp_path / "server.rc").read_text().strip() == "0", out
    return pcap


def on_lo(dg):
    return dg.src == dg.dst == "127.0.0.1"


@needs_capture
@pytest.mark.parametrize("tool,expect", IB_CASES)
def test_ib_tool_traffic_is_valid_rocev2(tmp_path, tool, expect):
    pcap = run_pair(tmp_path, tool, "-n 50 -s 8192 -m 1024")
    rep, select = decode(pcap, on_lo)
    assert rep.ok, rep.summary()
    assert rep.packets == rep.icrc_ok and rep.packets >= 50 * 8
    missing = [op for op in expect if rep.counts[op] == 0]
    assert not missing, f"missing {missing}\n{rep.summary()}"
    assert all(m == 1024 for m in rep.mtus.values()), rep.mtus
    assert rep.psns_missing == 0, rep.summary()
    assert_corruption_caught(pcap, tmp_path, rep, select, nth=rep.datagrams // 3)


@needs_capture
@pytest.mark.parametrize("tool", ["ib_write_bw", "ib_read_bw", "ib_send_bw"])
def test_ib_tool_go_back_n_on_the_wire(tmp_path, tool):
    """--loss drops packets before they reach the wire: the capture shows the
    gaps, the retransmissions (PSNs going back), and every PSN eventually
    sent; everything else must still validate."""
    pcap = run_pair(tmp_path, tool, "-n 100 -s 8192 -m 1024 --loss 0.02")
    if NETNS:
        rep = rd.decode_pcap(str(pcap), all_udp=True, allow_loss=True)
    else:
        pairs = roce_pairs(pcap, on_lo)
        rep = rd.decode_pcap(str(pcap), allow_loss=True, select=lambda dg: frozenset(
            ((dg.src, dg.sport), (dg.dst, dg.dport))) in pairs)
    assert rep.ok, rep.summary()
    assert rep.lost > 0 and rep.retransmitted > 0 and rep.go_backs > 0, rep.summary()
    assert rep.psns_missing == 0, rep.summary()


@needs_capture
def test_ib_read_bw_one_request_per_read(tmp_path):
    """docs/rdma.md: a READ asks for what the window has room for 'in parts
    of at least half a window (or what is left)'; an 8-PSN READ under a
    128-PSN window is therefore one request."""
    pcap = run_pair(tmp_path, "ib_read_bw", "-n 50 -s 8192 -m 1024")
    rep, _ = decode(pcap, on_lo)
    assert rep.ok, rep.summary()
    assert rep.counts["RC_RDMA_READ_REQUEST"] == 50, rep.summary()
    assert rep.counts["RC_RDMA_READ_RESPONSE_ONLY"] == 0, rep.summary()


def test_decode_cli_help():
    """The CLI runs under the system python (it is documented that way)."""
    if not HAVE_SCAPY:
        pytest.skip("python3-scapy not installed (scripts/bootstrap installs it)")
    r = subprocess.run(["/usr/bin/python3", os.path.join(os.path.dirname(__file__),
                                                         "roce_decode.py"), "--help"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "--udp-port" in r.stdout, shlex.quote(r.stderr)
