"""The io backend contract (tests/io/io_contract.c) between two processes:
bursts back whole and in order, a flood sent or counted as dropped, flows
that name the peer. Over the udp backend on loopback (IPv4 and IPv6), and
between two network namespaces joined by a veth pair (created and deleted
here): udp, af_xdp steering one address (both families, several queues),
af_xdp on the whole port and DPDK queues (net_af_xdp, net_pcap) under
op_io_frames_serve, where nothing but our code answers ARP and neighbour
solicitations; the XDP program leaves with the process, however it ends."""
import os
import re
import select
import signal
import socket
import subprocess
import time

import pytest

from conftest import BIN
import test_xdp

BUILD = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(BIN))))
CONTRACT = os.path.join(BUILD, "tests", "unit", "io_contract")
pytestmark = pytest.mark.skipif(not os.path.exists(CONTRACT), reason="io_contract not built")


def start_echo(cmd):
    """The echo, once it says its backend is open (an EAL takes a second)."""
    echo = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 20
    seen = ""
    while time.time() < deadline and echo.poll() is None:
        if select.select([echo.stdout], [], [], 0.2)[0]:
            line = echo.stdout.readline()
            seen += line
            if line.startswith("echo ready"):
                return echo
    echo.kill()
    rest, _ = echo.communicate()
    raise AssertionError(f"the echo never opened its backend: {seen}{rest}")


def stop(proc):
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def contract(echo_cmd, probe_cmd, echo_out=None):
    """The echo in the background, the probe to its end; the probe's output
    (and the echo's in echo_out, a list)."""
    echo = start_echo(echo_cmd)
    try:
        probe = subprocess.run(probe_cmd, capture_output=True, text=True, timeout=60)
        out, _ = echo.communicate(timeout=30)
    finally:
        stop(echo)
    assert probe.returncode == 0, probe.stdout + probe.stderr + out
    assert echo.returncode == 0, out
    if echo_out is not None:
        echo_out.append(out)
    return probe.stdout


def counter(out, name):
    m = re.search(rf"\b{name}=(\d+)", out)
    assert m, f"no {name} in: {out}"
    return int(m.group(1))


@pytest.mark.parametrize("echo,probe,peer", [
    ("udp:127.0.0.1:{p}", "udp:127.0.0.1:{q}", "127.0.0.1:{p}"),
    ("udp:[::1]:{p}", "udp:[::1]:{q}", "[::1]:{p}"),
])
def test_udp_on_loopback(echo, probe, peer):
    p = 26000 + os.getpid() % 900  # q too stays below the ephemeral ports
    q = p + 1000
    out = contract([CONTRACT, "echo", echo.format(p=p)],
                   [CONTRACT, "probe", probe.format(q=q), peer.format(p=p)])
    assert "contract ok" in out and "4096 back" in out  # loopback loses nothing


@pytest.fixture
def veth(request):
    if not test_xdp._can_make_namespaces():
        pytest.skip("needs root and network namespaces with veth")
    v = test_xdp.Veth()
    v.up(queues=getattr(request, "param", 1))
    # IPv6 beside IPv4 (no duplicate address detection to wait for)
    v.ip6a, v.ip6b = "fd00:204::1", "fd00:204::2"
    for ns, dev, ip in ((v.a, v.va, v.ip6a), (v.b, v.vb, v.ip6b)):
        test_xdp.sh(test_xdp.IP, "-n", ns, "addr", "add", f"{ip}/64", "dev", dev, "nodad")
    yield v
    v.down()


def in_ns(ns, *cmd):
    return [test_xdp.IP, "netns", "exec", ns, *cmd]


SPEC = {
    "udp": lambda dev, ep: f"udp:{ep}",
    "xdp": lambda dev, ep: f"xdp:{dev}:{ep}",
    "xdpall": lambda dev, ep: f"xdpall:{dev}:{ep}",
    "dpdkxdp": lambda dev, ep: f"dpdk:net_af_xdp0,iface={dev}:{ep}",
    "dpdkpcap": lambda dev, ep: f"dpdk:net_pcap0,iface={dev}:{ep}",
    "dpdkpacket": lambda dev, ep: f"dpdk:net_af_packet0,iface={dev}:{ep}",
}


def have_dpdk():
    with open(CONTRACT, "rb") as f:
        return b"rte_eal_init" in f.read()


def endpoint(veth, side, v6):
    ip = (veth.ip6a if side == "a" else veth.ip6b) if v6 else (veth.ipa if side == "a" else veth.ipb)
    return f"[{ip}]:4791" if v6 else f"{ip}:4791"


def run_kind(veth, kind):
    """kind: PROBE-ECHO[-6]; returns (probe's output, echo's output)."""
    parts = kind.split("-")
    v6 = parts[-1] == "6"
    a_kind, b_kind = parts[0], parts[1]
    if "dpdk" in kind and not have_dpdk():
        pytest.skip("io_contract built without DPDK")
    if b_kind in ("dpdkpcap", "dpdkpacket"):
        # libpcap and AF_PACKET leave the kernel's stack on the port: without the address
        # it answers nothing (no ARP, no port unreachable), so what answers is ours
        ip = veth.ip6b + "/64" if v6 else veth.ipb + "/24"
        test_xdp.sh(test_xdp.IP, "-n", veth.b, "addr", "del", ip, "dev", veth.vb)
    echo_out = []
    out = contract(in_ns(veth.b, CONTRACT, "echo", SPEC[b_kind](veth.vb, endpoint(veth, "b", v6))),
                   in_ns(veth.a, CONTRACT, "probe", SPEC[a_kind](veth.va, endpoint(veth, "a", v6)),
                         endpoint(veth, "b", v6)), echo_out)
    assert "contract ok" in out
    assert not veth.has_xdp(veth.a, veth.va) and not veth.has_xdp(veth.b, veth.vb)
    return out, echo_out[0]


@pytest.mark.parametrize("kind", ["udp-udp", "udp-udp-6", "xdp-udp", "xdp-xdp", "xdp-udp-6",
                                  "udp-xdp-6"])
def test_between_namespaces(veth, kind):
    run_kind(veth, kind)


# Whole ports: the peer's kernel must learn our MAC from our own answer
# (the fixture's namespaces are new: no neighbour is known), and a probe
# on a whole port asks for the echo's.
@pytest.mark.parametrize("kind", ["udp-xdpall", "udp-xdpall-6", "xdpall-xdpall",
                                  "xdpall-udp-6", "udp-dpdkxdp", "udp-dpdkxdp-6",
                                  "udp-dpdkpcap", "udp-dpdkpacket-6", "dpdkxdp-udp"])
def test_whole_ports_answer_for_themselves(veth, kind):
    probe, echo = run_kind(veth, kind)
    a_kind, b_kind = kind.split("-")[:2]
    if b_kind != "udp":
        assert counter(echo, "control_replies") >= 1  # our ARP reply / advertisement
    if a_kind != "udp":
        assert counter(probe, "neigh_asked") >= 1 and counter(probe, "tx_held") >= 1
        assert counter(probe, "tx_unresolved") == 0


# A frame engine on the loop (io_contract reflect): the whole port's frames
# through src/loop's frame mode, ARP/NDP answered by the engine, every UDP
# frame sent back in its own buffer; the udp probe's contract holds.
@pytest.mark.parametrize("backend,v6", [("frames", False), ("frames", True),
                                        ("dpdkframes", False)])
def test_frame_engine_on_the_loop(veth, backend, v6):
    if backend == "dpdkframes" and not have_dpdk():
        pytest.skip("io_contract built without DPDK")
    ipb = veth.ip6b if v6 else veth.ipb
    spec = (f"frames:{veth.vb}" if backend == "frames"
            else f"dpdkframes:net_af_xdp0,iface={veth.vb}:{endpoint(veth, 'b', v6)}")
    echo_out = []
    out = contract(in_ns(veth.b, CONTRACT, "reflect", spec, ipb),
                   in_ns(veth.a, CONTRACT, "probe", SPEC["udp"](veth.va, endpoint(veth, "a", v6)),
                         endpoint(veth, "b", v6)), echo_out)
    assert "contract ok" in out
    assert counter(echo_out[0], "answered") >= 1  # the peer's kernel asked us
    assert counter(echo_out[0], "reflected") >= 1 + 7 + 64 + 200
    # a DPDK queue lends its mbufs: every frame goes back out in its own
    # mbuf; af_xdp's frames are copied into the loop's buffers
    want_in_place = counter(echo_out[0], "reflected") if backend == "dpdkframes" else 0
    assert counter(echo_out[0], "in_place") == want_in_place
    assert not veth.has_xdp(veth.b, veth.vb)


MANY_PORTS = """
import socket, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
ok = 0
for p in range(5000, 5000 + n):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((src, p))
    s.settimeout(2)
    s.sendto(b"many queues %d" % p, (dst, 4791))
    try:
        ok += s.recvfrom(100)[0] == b"many queues %d" % p
    except OSError:
        pass
    s.close()
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.sendto(b"\\xff\\xff\\xff\\xff", (dst, 4791))  # the echo's stop
print("back", ok)
"""


def echo_from_many_ports(veth, n=16):
    """n datagrams from n source ports (flows hash to every queue), each
    echoed; the client's run."""
    return subprocess.run(in_ns(veth.a, "python3", "-c", MANY_PORTS, veth.ipa, veth.ipb, str(n)),
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("veth", [2], indirect=True)
@pytest.mark.parametrize("spec", ["xdp:{dev}@2:{ip}:4791", "xdpall:{dev}:{ip}:4791"])
def test_every_queue_is_served(veth, spec):
    echo = start_echo(in_ns(veth.b, CONTRACT, "echo", spec.format(dev=veth.vb, ip=veth.ipb)))
    try:
        r = echo_from_many_ports(veth)
        out, _ = echo.communicate(timeout=30)
    finally:
        stop(echo)
    assert r.stdout.strip() == "back 16", r.stdout + r.stderr + out
    if spec.startswith("xdp:"):
        assert counter(out, "queues") == 2 and counter(out, "xdp_rx_via_kernel") == 0
    assert counter(out, "rx_pkts") == 17  # the 16 and the stop


def test_xdp_program_leaves_with_a_killed_echo(veth):
    echo = subprocess.Popen(in_ns(veth.b, CONTRACT, "echo", f"xdp:{veth.vb}:{veth.ipb}:4791"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 10
        while not veth.has_xdp(veth.b, veth.vb) and time.time() < deadline:
            time.sleep(0.1)
        assert veth.has_xdp(veth.b, veth.vb)
    finally:
        echo.send_signal(signal.SIGKILL)
        echo.wait()
    deadline = time.time() + 10
    while veth.has_xdp(veth.b, veth.vb) and time.time() < deadline:
        time.sleep(0.1)
    assert not veth.has_xdp(veth.b, veth.vb)
