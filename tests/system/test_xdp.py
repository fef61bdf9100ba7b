"""offpath's AF_XDP backend (`--xdp`) between two network namespaces joined
by a veth pair, which the tests create and delete themselves (root only;
skipped elsewhere).

The six ib_* tools move correct data over it, with and without loss; an
AF_XDP client talks to a UDP-socket server, whose kernel then checks our
Ethernet/IPv4/UDP headers and whose capture an independent decoder checks
as RoCEv2; the XDP program leaves with the process, even one killed by
SIGKILL."""
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import BIN, check_ok, counters, run_server_client

sys.path.insert(0, os.path.dirname(__file__))
try:
    import roce_decode as rd
    HAVE_SCAPY = True
except ImportError:
    HAVE_SCAPY = False

IP = shutil.which("ip") or "/usr/sbin/ip"
TCPDUMP = shutil.which("tcpdump") or "/usr/bin/tcpdump"
_seq = itertools.count(1)
_port = itertools.count(23000 + os.getpid() % 1000)


def sh(*args, check=True, timeout=30):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, check=check)


class Veth:
    """Namespaces a and b, interfaces va (10.204.K.1) and vb (10.204.K.2)."""

    def __init__(self):
        k = next(_seq)
        tag = f"{os.getpid() % 100000}x{k}"
        self.a, self.b = f"opxa{tag}", f"opxb{tag}"
        self.va, self.vb = f"xa{tag}", f"xb{tag}"
        net = 10 + (os.getpid() + k) % 240
        self.ipa, self.ipb = f"10.204.{net}.1", f"10.204.{net}.2"

    def up(self, queues=1):
        sh(IP, "netns", "add", self.a)
        sh(IP, "netns", "add", self.b)
        q = ["numtxqueues", str(queues), "numrxqueues", str(queues)]
        sh(IP, "link", "add", self.va, *q, "netns", self.a, "type", "veth", "peer", "name",
           self.vb, *q, "netns", self.b)
        for ns, dev, ip in ((self.a, self.va, self.ipa), (self.b, self.vb, self.ipb)):
            sh(IP, "-n", ns, "addr", "add", f"{ip}/24", "dev", dev)
            sh(IP, "-n", ns, "link", "set", dev, "up")
            sh(IP, "-n", ns, "link", "set", "lo", "up")

    def down(self):
        for ns in (self.a, self.b):
            sh(IP, "netns", "del", ns, check=False)

    def has_xdp(self, ns, dev):
        return "xdp" in sh(IP, "-n", ns, "-d", "link", "show", "dev", dev).stdout


def _can_make_namespaces():
    if os.geteuid() != 0 or not os.path.exists(IP):
        return False
    v = Veth()
    try:
        v.up()
        return True
    except (subprocess.CalledProcessError, OSError, subprocess.TimeoutExpired):
        return False
    finally:
        v.down()


pytestmark = pytest.mark.skipif(not _can_make_namespaces(),
                                reason="needs root and network namespaces with veth")


@pytest.fixture
def veth():
    v = Veth()
    v.up()
    yield v
    v.down()


def in_ns(ns, *args):
    return [IP, "netns", "exec", ns, BIN, *map(str, args)]


def run_pair(v, tool, args, server_xdp=True, client_xdp=True, timeout=120):
    """Server in b, client in a; returns ((rc, out, err), (rc, out, err))."""
    port = next(_port)
    common = [tool, "-p", port, *args]
    return run_server_client(in_ns(v.b, *common, "-d", v.vb, *(["--xdp"] * server_xdp)),
                             in_ns(v.a, *common, "-d", v.va, *(["--xdp"] * client_xdp), v.ipb),
                             timeout=timeout)


TOOLS = [("ib_write_bw", "-s 65536 -n 200"), ("ib_read_bw", "-s 65536 -n 200"),
         ("ib_send_bw", "-s 65536 -n 200"), ("ib_write_lat", "-s 64 -n 2000"),
         ("ib_read_lat", "-s 64 -n 2000"), ("ib_send_lat", "-s 64 -n 2000")]


@pytest.mark.parametrize("tool,args", TOOLS)
def test_tools_over_af_xdp(veth, tool, args):
    server, client = run_pair(veth, tool, args.split())
    check_ok(server, "server")
    check_ok(client, "client")
    for _rc, out, _err in (server, client):
        assert " Mtu             : 1024[B]" in out  # the largest a 1500-byte link carries
        c = counters(out)
        assert c["drop_icrc"] == 0 and c["loss_injected"] == 0, c
    assert not veth.has_xdp(veth.a, veth.va) and not veth.has_xdp(veth.b, veth.vb)


@pytest.mark.parametrize("tool", ["ib_write_bw", "ib_read_bw", "ib_send_bw"])
def test_af_xdp_under_loss(veth, tool):
    server, client = run_pair(veth, tool, ["-s", "65536", "-n", "100", "--loss", "0.05"])
    check_ok(server, "server")
    check_ok(client, "client")
    both = [counters(side[1]) for side in (server, client)]
    # READ's lost responses are resent by the client's request going back
    assert sum(c["retransmissions"] for c in both) > 0, both
    assert all(c["loss_injected"] > 0 for c in both), both


@pytest.mark.skipif(not (HAVE_SCAPY and os.path.exists(TCPDUMP)),
                    reason="needs python3-scapy and tcpdump (scripts/bootstrap)")
@pytest.mark.parametrize("xdp_side", ["client", "server"])
def test_af_xdp_frames_are_valid_rocev2_to_a_socket_peer(veth, tmp_path, xdp_side):
    """The other side uses a UDP socket: its kernel accepts our frames only
    with right IPv4 and UDP headers, its engine checks their ICRC, and
    tcpdump on its interface (no XDP there) records both directions for the
    decoder. This also caught the socket side's UDP GSO batches, which a
    kernel cutting them numbers 0, 1, 2... in the IPv4 Identification that
    the ICRC covers: batches now go only to 127/8."""
    ns, dev = (veth.b, veth.vb) if xdp_side == "client" else (veth.a, veth.va)
    pcap = tmp_path / "cap.pcap"
    cap = subprocess.Popen([IP, "netns", "exec", ns, TCPDUMP, "-i", dev, "-n", "-U",
                            "--immediate-mode", "-B", "32768", "-w", str(pcap), "udp", "port",
                            "4791"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 10
        while not pcap.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        server, client = run_pair(veth, "ib_write_bw", ["-s", "8192", "-n", "50"],
                                  server_xdp=xdp_side == "server",
                                  client_xdp=xdp_side == "client")
    finally:
        time.sleep(0.3)
        cap.send_signal(signal.SIGINT)
        _out, err = cap.communicate(timeout=10)
    assert re.search(r"^0 packets dropped by kernel", err, re.M), err
    check_ok(server, "server")
    check_ok(client, "client")
    assert counters(server[1])["drop_icrc"] == 0 and counters(client[1])["drop_icrc"] == 0
    rep = rd.decode_pcap(str(pcap))
    assert rep.ok, rep.summary() + repr((counters(server[1]), counters(client[1])))
    assert rep.packets == rep.icrc_ok and rep.packets >= 50 * 8, rep.summary()
    assert rep.counts["RC_RDMA_WRITE_FIRST"] >= 50 and rep.psns_missing == 0, rep.summary()
    assert all(m == 1024 for m in rep.mtus.values()), rep.mtus


def test_program_leaves_with_a_killed_process(veth):
    port = next(_port)
    args = ["ib_write_bw", "-p", port, "-D", "20", "-s", "4096", "--xdp"]
    server = subprocess.Popen(in_ns(veth.b, *args, "-d", veth.vb), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    client = subprocess.Popen(in_ns(veth.a, *args, "-d", veth.va, veth.ipb),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (veth.has_xdp(veth.a, veth.va)
                                                   and veth.has_xdp(veth.b, veth.vb)):
            time.sleep(0.1)
        assert veth.has_xdp(veth.a, veth.va) and veth.has_xdp(veth.b, veth.vb)
    finally:
        for p in (client, server):
            p.send_signal(signal.SIGKILL)  # `ip netns exec` execs: this is offpath
            p.wait(timeout=10)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (veth.has_xdp(veth.a, veth.va)
                                           or veth.has_xdp(veth.b, veth.vb)):
        time.sleep(0.1)
    assert not veth.has_xdp(veth.a, veth.va) and not veth.has_xdp(veth.b, veth.vb)


def test_unresolved_peer_goes_through_the_kernel_first(veth):
    """The side channel runs over a second veth pair, so when the QPs start
    neither side has the other's RoCEv2 address in its neighbour table: the
    first packets leave through the UDP socket (the kernel resolves the
    address on the way) and the rest through the ring."""
    tag = veth.va[2:]
    ca, cb = f"ya{tag}", f"yb{tag}"
    side_a, side_b = veth.ipa.replace("10.204.", "10.206."), veth.ipb.replace("10.204.", "10.206.")
    sh(IP, "link", "add", ca, "netns", veth.a, "type", "veth", "peer", "name", cb, "netns", veth.b)
    for ns, dev, ip in ((veth.a, ca, side_a), (veth.b, cb, side_b)):
        sh(IP, "-n", ns, "addr", "add", f"{ip}/24", "dev", dev)
        sh(IP, "-n", ns, "link", "set", dev, "up")
    port = next(_port)
    common = ["ib_write_bw", "-p", port, "-s", "4096", "-n", "200", "--xdp"]
    server, client = run_server_client(in_ns(veth.b, *common, "-d", veth.vb),
                                       in_ns(veth.a, *common, "-d", veth.va, side_b), timeout=60)
    check_ok(client, "client")
    check_ok(server, "server")
    c = counters(client[1])
    assert c["xdp_tx_via_kernel"] >= 1 and c["pkts_out"] > c["xdp_tx_via_kernel"], c
    s = counters(server[1])
    assert s["xdp_rx_refused"] == 0 and s["drop_icrc"] == 0, s


def test_mtu_beyond_the_link_is_refused(veth):
    server, client = run_pair(veth, "ib_write_bw", ["-s", "4096", "-n", "10", "-m", "4096"])
    for rc, _out, err in (server, client):
        assert rc == 1
    assert "-m (--mtu) 4096: the link's MTU is 1500, which carries at most 1024" in client[2]


def test_xdp_needs_an_interface():
    r = subprocess.run([BIN, "ib_write_bw", "--xdp"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2
    assert "--xdp needs -d (--ib-dev)" in r.stderr
