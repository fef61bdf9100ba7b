"""`offpath switch --ports ... --dpdk "EAL ARGS"`: the switch on the path
with DPDK ports (needs root and a build with DPDK). A host, a TOR and a
host (`topo up --no-switches`), then the switch in the TOR's namespace on
one vdev a link (net_af_xdp, net_af_packet): ping and TCP through it,
exact, every frame counted once. A frame forwarded leaves on another
port than the one whose pool lent its mbuf; the PMDs copy it."""
import hashlib
import json
import os
import select
import signal
import subprocess
import sys

import pytest

from conftest import BIN, offpath
from test_dns import dpdk_built
from test_switch_path import assert_ports_balance, tcp_transfer

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces need root")

TOPO = """topo {name}
tor t1 10.77.0.254
host h1 10.77.0.1
host h2 10.77.0.2
link h1 t1 rate 1gbit queue 256kb
link h2 t1 rate 1gbit queue 256kb
"""
_count = [0]


def eal(name, pmd, ifaces):
    vdevs = [f"--vdev=net_{pmd}{i},iface={ifc}" for i, ifc in enumerate(ifaces)]
    return " ".join(["--no-huge", "-m", "256", "--no-pci", "-l", "0", f"--file-prefix={name}",
                     "--log-level=error", *vdevs])


@pytest.fixture
def line(tmp_path):
    """h1 - t1 - h2 under a name of our own; `down` on the way out."""
    if not dpdk_built():
        pytest.skip("this build has no DPDK (libdpdk-dev)")
    _count[0] += 1
    name = f"fwd{os.getpid() % 100000}x{_count[0]}"
    path = tmp_path / f"{name}.topo"
    path.write_text(TOPO.format(name=name))
    r = offpath("topo", "up", str(path), "--no-switches", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        yield str(path), name
    finally:
        offpath("topo", "down", str(path), timeout=60)


def switch(path, name, pmd, ifaces=("h2", "h1"), ready=True):
    """The switch in t1's namespace; with ready, once it says so."""
    r, w = os.pipe()
    sw = subprocess.Popen(
        ["ip", "netns", "exec", f"opt-{name}-t1", BIN, "switch", "--topology", path, "--name",
         "t1", "--ports", "all", "--json", "--ready-fd", str(w), "--dpdk",
         eal(name, pmd, ifaces)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, pass_fds=(w,))
    os.close(w)
    with os.fdopen(r) as f:
        if ready and (not select.select([f], [], [], 30)[0] or f.readline() != "ready\n"):
            sw.kill()
            pytest.fail(f"the switch is not ready: {sw.communicate(timeout=30)}")
    return sw


def stop(sw):
    sw.send_signal(signal.SIGTERM)
    out, err = sw.communicate(timeout=30)
    assert sw.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("pmd", ["af_xdp", "af_packet"])
def test_ping_and_tcp_through_dpdk_ports(line, pmd):
    path, name = line
    if pmd == "af_packet":  # the kernel sees the frames too: it must not forward them
        subprocess.run(["ip", "netns", "exec", f"opt-{name}-t1", "sysctl", "-qw",
                        "net.ipv4.ip_forward=0"], check=True, timeout=30)
    # the vdevs in another order than --ports all's: matched by iface=
    sw = switch(path, name, pmd)
    try:
        r = offpath("topo", "exec", path, "h1", "--", "ping", "-c", "5", "-i", "0.2", "-W", "2",
                    "10.77.0.2", timeout=60)
        assert r.returncode == 0 and " 0% packet loss" in r.stdout, r.stdout + r.stderr
        size = 4 << 20
        n, digest = tcp_transfer(path, "h1", "h2", "10.77.0.2", size)
        assert n == size
        assert digest == hashlib.sha256(bytes(range(256)) * (size // 256)).hexdigest()
        n, _ = tcp_transfer(path, "h2", "h1", "10.77.0.1", 1 << 20)
        assert n == 1 << 20
    finally:
        rep = stop(sw)
    assert_ports_balance(rep)
    h1, h2 = rep["ports"]["h1"], rep["ports"]["h2"]
    assert h1["forwarded"] > size // 1500 and h2["forwarded"] > (1 << 20) // 1500, rep
    # every frame forwarded left (by the other port), besides which the
    # switch sent only its own questions and answers
    own = sum(p["tx_frames"] + p["queue_drops"] - p["forwarded"] for p in (h1, h2))
    asked = h1["neigh_asked"] + h2["neigh_asked"]
    assert asked <= own <= asked + h1["control"] + h2["control"], rep
    assert h1["tx_drops"] == h2["tx_drops"] == 0, rep


def test_dpdk_ports_refused(line):
    path, name = line
    sw = switch(path, name, "af_packet", ifaces=("h1",), ready=False)
    _, err = sw.communicate(timeout=60)
    assert sw.returncode == 2 and "--dpdk" in err and "found 1 ports for the 2" in err, err
    sw = switch(path, name, "af_packet", ifaces=("h1", "h1"), ready=False)
    _, err = sw.communicate(timeout=60)
    assert sw.returncode == 2 and "no DPDK port has iface=h2" in err, err
    r = offpath("switch", "--topology", path, "--name", "t1", "--dpdk", "--no-pci")
    assert r.returncode == 2 and "--dpdk wants --ports" in r.stderr, r.stderr
