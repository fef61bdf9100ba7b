"""The io backend contract (tests/io/io_contract.c) between two processes:
bursts back whole and in order, a flood sent or counted as dropped, flows
that name the peer. Over the udp backend on loopback (IPv4 and IPv6), and
between two network namespaces joined by a veth pair (created and deleted
here): udp to udp over both families, af_xdp to udp, af_xdp to af_xdp; the
XDP program leaves with the process, however it ends."""
import os
import signal
import subprocess
import time

import pytest

from conftest import BIN
import test_xdp

BUILD = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(BIN))))
CONTRACT = os.path.join(BUILD, "tests", "unit", "io_contract")
pytestmark = pytest.mark.skipif(not os.path.exists(CONTRACT), reason="io_contract not built")


def contract(echo_cmd, probe_cmd):
    """The echo in the background, the probe to its end; the probe's output."""
    echo = subprocess.Popen(echo_cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(0.5)  # the echo's socket (or XDP program) is up
        probe = subprocess.run(probe_cmd, capture_output=True, text=True, timeout=60)
        out, _ = echo.communicate(timeout=30)
    finally:
        if echo.poll() is None:
            echo.kill()
            echo.wait()
    assert probe.returncode == 0, probe.stdout + probe.stderr + out
    assert echo.returncode == 0, out
    return probe.stdout


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
def veth():
    if not test_xdp._can_make_namespaces():
        pytest.skip("needs root and network namespaces with veth")
    v = test_xdp.Veth()
    v.up()
    # IPv6 beside IPv4 (no duplicate address detection to wait for)
    v.ip6a, v.ip6b = "fd00:204::1", "fd00:204::2"
    for ns, dev, ip in ((v.a, v.va, v.ip6a), (v.b, v.vb, v.ip6b)):
        test_xdp.sh(test_xdp.IP, "-n", ns, "addr", "add", f"{ip}/64", "dev", dev, "nodad")
    yield v
    v.down()


def in_ns(ns, *cmd):
    return [test_xdp.IP, "netns", "exec", ns, *cmd]


@pytest.mark.parametrize("kind", ["udp4-udp4", "udp6-udp6", "xdp-udp4", "xdp-xdp"])
def test_between_namespaces(veth, kind):
    a_kind, b_kind = kind.split("-")
    spec = {"udp4": lambda dev, ip: f"udp:{ip}:4791", "udp6": lambda dev, ip: f"udp:[{ip}]:4791",
            "xdp": lambda dev, ip: f"xdp:{dev}:{ip}:4791"}
    v6 = a_kind == "udp6"
    ipa, ipb = (veth.ip6a, veth.ip6b) if v6 else (veth.ipa, veth.ipb)
    peer = f"[{ipb}]:4791" if v6 else f"{ipb}:4791"
    out = contract(in_ns(veth.b, CONTRACT, "echo", spec[b_kind](veth.vb, ipb)),
                   in_ns(veth.a, CONTRACT, "probe", spec[a_kind](veth.va, ipa), peer))
    assert "contract ok" in out
    assert not veth.has_xdp(veth.a, veth.va) and not veth.has_xdp(veth.b, veth.vb)


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
