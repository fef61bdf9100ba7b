"""`offpath mpirun --topo`: MPI jobs on a namespace topology (needs root).

Each rank runs in its host's namespace with the host's one address, the
switches in their TORs' and SPINEs' namespaces, MPI's own traffic over TCP
across the same rate-limited links. Every test runs on a topology of its own
name (opt-<name>-*) and checks that none of its namespaces is left."""
import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import BIN, offpath
from nstopo_util import EXAMPLE, Topologies, edit, in_netns, our_netns
from test_mpi import CHECK, children_of, need, parse, recovery

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces need root")

def interleaved(text):
    """two-racks with its hosts listed rack by rack in turn (h1 h5 h2 h6 ...):
    node i is host i of the file, so consecutive nodes sit under different
    TORs and every pair of nodes talks across a SPINE."""
    hosts = [l for l in text.splitlines() if l.startswith("host ")]
    order = [h for pair in zip(hosts[:4], hosts[4:]) for h in pair]
    rest = [l for l in text.splitlines() if not l.startswith("host ")]
    at = next(i for i, l in enumerate(rest) if l.startswith("link "))
    return "\n".join(rest[:at] + order + rest[at:]) + "\n"


@pytest.fixture
def topo(tmp_path):
    """The example under a fresh name; whatever a test leaves is removed by
    that name (and the test checks it had nothing to remove)."""
    made = Topologies(tmp_path, "mt")
    yield made.write(interleaved(open(EXAMPLE).read()))
    made.remove()


def mpirun(path, *args, mpi="openmpi", iters=1, max_count=1000, timeout=240, env=None):
    r = offpath("mpirun", "--topo", path, "--mpi", mpi, "--verbose", *args, "--", CHECK[mpi],
                iters, max_count, timeout=timeout, env=env)
    return r, parse(r)


def switches(err):
    m = re.search(r"(\d+) retransmissions, (\d+) duplicates, (\d+) injected drops; groups "
                  r"created (\d+), freed (\d+)", err)
    assert m, err
    return dict(zip(("retx", "dups", "drops", "created", "freed"), map(int, m.groups())))


def assert_gone(name):
    assert our_netns(name) == [], "namespaces left"
    assert not os.path.exists(f"/run/offpath/topo-{name}.state")


def test_openmpi_16_ranks_node_mode(topo):
    """8 hosts x 2 ranks on two racks, the topology built and removed by the
    job, the switches on the path. The split's odd half has no local rank 0
    on any node, so its leaders use ports of their own: every call goes
    through the switches all the same."""
    need("openmpi")
    path, name = topo
    r, res = mpirun(path, "--ppn", 2)
    assert r.returncode == 0, r.stderr
    assert res["ranks"] == 16 and res["mismatches"] == 0
    assert res["offloaded"] == res["calls"] and res["fell_back"] == 0
    assert res["shm"] and res["shm"][0] == res["shm"][1] > 0
    sw = switches(r.stderr)
    assert sw["created"] == sw["freed"] > 0 and sw["drops"] == 0
    assert_gone(name)
    assert "join failed" not in r.stderr
    # COMM_WORLD, its dup and both halves, each on 2 TORs and a SPINE
    assert sw["created"] == 12


def test_openmpi_socket_mode(topo):
    """Socket mode: a node's two socket leaders share its one address, each
    on ports of its own, in one group (a SPINE counts its members by rank);
    above 1 KiB calls go by node. Every call through the switches."""
    need("openmpi")
    path, name = topo
    env = dict(os.environ, OFFPATH_SOCKET_MAX_BYTES="1024")
    r, res = mpirun(path, "--ppn", 2, "--sockets", 2, "--mode", "socket", "--deadline-ms", 500,
                    env=env)
    assert r.returncode == 0, r.stderr
    assert res["ranks"] == 16 and res["mismatches"] == 0
    wide = re.search(r"socket mode: (\d+) calls above 1024 bytes went by node", r.stderr)
    assert wide and int(wide[1]) > 0 and res["offloaded"] >= int(wide[1])
    sw = switches(r.stderr)
    assert sw["created"] == sw["freed"] > 0
    assert_gone(name)
    assert res["offloaded"] == res["calls"] and res["fell_back"] == 0


def test_mpich_2_ranks_across_racks(topo):
    """MPICH busy-polls: 2 ranks, on hosts under different TORs."""
    need("mpich")
    path, name = topo
    r, res = mpirun(path, "--nodes", 2, mpi="mpich")
    assert r.returncode == 0, r.stderr
    assert res["ranks"] == 2 and res["mismatches"] == 0
    # the split leaves one node in each half: those calls are the MPI's own
    assert res["offloaded"] == res["calls"] * 2 // 3
    assert "one node" in res["why"]
    assert_gone(name)


def sent_bytes(name, node, dev):
    out = subprocess.run(["tc", "-n", f"opt-{name}-{node}", "-s", "qdisc", "show", "dev", dev],
                         capture_output=True, text=True).stdout
    m = re.search(r"Sent (\d+) bytes", out)
    assert m, out
    return int(m[1])


def test_mode_off_on_a_standing_topology(topo):
    """The host baseline: Open MPI's own allreduce over TCP through the same
    links. A topology that is up is used as it is and left standing."""
    need("openmpi")
    path, name = topo
    assert offpath("topo", "up", path, timeout=60).returncode == 0
    before = sent_bytes(name, "h8", "t2")
    r, res = mpirun(path, "--ppn", 2, "--mode", "off")
    assert r.returncode == 0, r.stderr
    assert res["ranks"] == 16 and res["mismatches"] == 0
    assert res["offloaded"] is None  # no library, no summary
    # MPI's TCP left h8 over its link (tbf counts what leaves the interface)
    assert sent_bytes(name, "h8", "t2") - before > 100_000
    assert len(our_netns(name)) == 12  # not this job's to take down
    assert offpath("topo", "down", path, timeout=60).returncode == 0
    assert_gone(name)


def test_one_percent_loss_on_one_link(topo):
    """1% loss on the link between t1 and s1 (`loss 1%` in the file: its two
    switch ends inject it; no netem on this kernel): retransmissions recover
    every result. 8 hosts, a rank each."""
    need("openmpi")
    path, name = topo
    edit(path, "link t1 s1 rate 2gbit queue 512kb", "link t1 s1 rate 2gbit queue 512kb loss 1%")
    r, res = mpirun(path, iters=2)
    assert r.returncode == 0, r.stderr
    assert res["ranks"] == 8 and res["mismatches"] == 0
    assert res["offloaded"] == res["calls"] and res["fell_back"] == 0
    assert "join failed" not in r.stderr
    sw = switches(r.stderr)
    assert sw["drops"] > 0 and sw["retx"] > 0
    # COMM_WORLD and its dup on both TORs and a SPINE; the split's halves
    # (even ranks: h1-h4, odd: h5-h8) each on its rack's TOR and a SPINE
    assert sw["created"] == sw["freed"] == 3 + 3 + 2 + 2
    assert_gone(name)


def test_fault_switch_only_one_injects(topo):
    """--drop-rate with --fault-switch s1: 1% of what s1 sends, on every
    port of it, the other switches clean."""
    need("openmpi")
    path, name = topo
    r, res = mpirun(path, "--drop-rate", 0.01, "--fault-switch", "s1", iters=2)
    assert r.returncode == 0, r.stderr
    assert res["ranks"] == 8 and res["mismatches"] == 0 and res["fell_back"] == 0
    sw = switches(r.stderr)
    assert sw["drops"] > 0 and sw["created"] == sw["freed"] > 0
    assert_gone(name)


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def test_sigterm_takes_the_topology_down(topo):
    """The job stopped by SIGTERM: mpirun stops its ranks, and the
    topology the job built goes down with it."""
    need("openmpi")
    path, name = topo
    p = subprocess.Popen([BIN, "mpirun", "--topo", path, "--mode", "off", "--", "sleep", "60"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(
                comm(c).startswith("mpirun") for c in children_of(p.pid)):
            time.sleep(0.1)
        assert len(our_netns(name)) == 12, "topology not up with mpirun running"
        time.sleep(1)  # its ranks are up
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
        assert p.returncode == 128 + signal.SIGTERM, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert_gone(name)


@pytest.mark.parametrize("args,needle", [
    (["--nodes", "9"], "--nodes 9 is more than the 8 hosts"),
    (["--tors", "2"], "--tors"),
    (["--fault-switch", "s9"], "--fault-switch s9"),
])
def test_bad_parameters(topo, args, needle):
    need("openmpi")  # the library is found before the file is read
    path, name = topo
    r = offpath("mpirun", "--topo", path, *args, "--", "true", timeout=60)
    assert r.returncode == 2 and needle in r.stderr, r.stderr
    assert_gone(name)


def test_malformed_topology_named(tmp_path):
    bad = tmp_path / "bad.topo"
    bad.write_text("topo mtbad\nhost h1 10.0.0.1\nlink h1 t9 rate 1gbit queue 64kb\n")
    r = offpath("mpirun", "--topo", bad, "--", "true")
    assert r.returncode == 2 and "line 3" in r.stderr and "malformed" in r.stderr, r.stderr


def test_topo_rank_outside_mpirun_refused(topo):
    path, _ = topo
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")}
    r = offpath("topo_rank", path, "--", "true", env=env)
    assert r.returncode == 2 and "no rank" in r.stderr
    r = offpath("topo_rank", path, "--", "true", env=dict(env, PMI_RANK="3"))
    assert r.returncode == 1 and "not up" in r.stderr


def test_link_down_for_a_second_mid_job(topo):
    """h3's link (node 4's) down both ways for two seconds mid-job (`down
    inc:300+2000` in the file, the switches' per-port injector): the
    leaders wait it out or settle the calls among themselves, every result
    exact, the summary naming what they did. The outage starts at the
    link's 300th INC packet, so an allreduce meets it: a window in time
    missed them, before the job when the ranks' start outlasted it under
    CI's load, and after or between them (the check's PMPI_Allreduce over
    TCP sat it out in its backoff) 3 times in 8 on an idle machine."""
    need("openmpi")
    path, name = topo
    edit(path, "link h3 t1 rate 1gbit queue 256kb", "link h3 t1 rate 1gbit queue 256kb down inc:300+2000")
    r = offpath("mpirun", "--topo", path, "--deadline-ms", 300, "--verbose", "--",
                CHECK["openmpi"], 40, 1000, timeout=300)
    res = parse(r)
    assert r.returncode == 0, r.stderr
    assert res["ranks"] == 8 and res["mismatches"] == 0
    k = recovery(r.stderr)
    assert k["late"] + k["fetched"] + k["redone"] > 0, r.stderr  # named in the summary
    assert switches(r.stderr)["drops"] > 0
    assert_gone(name)


def test_spine_switches_killed_mid_job(topo):
    """Both SPINEs' switches killed mid-job: their XDP programs go with them,
    so the SPINEs' kernels forward again (MPI's TCP goes on), and the calls
    they aggregated are redone without the switch: every result exact, the
    summary naming it (switch unreachable)."""
    need("openmpi")
    path, name = topo
    job = subprocess.Popen([BIN, "mpirun", "--topo", path, "--deadline-ms", "500", "--verbose",
                            "--", CHECK["openmpi"], "20", "1000"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not os.path.exists(f"/run/netns/opt-{name}-s2"):
            time.sleep(0.1)
        time.sleep(4)
        assert job.poll() is None, "the job ended before the switches were killed"
        killed = [p for s in ("s1", "s2") for p in in_netns(f"opt-{name}-{s}")]
        assert killed
        for p in killed:
            os.kill(p, signal.SIGKILL)
        out, err = job.communicate(timeout=300)
    finally:
        if job.poll() is None:
            job.kill()
            job.communicate()
    res = parse(subprocess.CompletedProcess([], job.returncode, out, err))
    assert job.returncode == 0, err
    assert res["mismatches"] == 0 and res["offloaded"] > 0
    assert "switch unreachable" in res["why"], err
    assert recovery(err)["redone"] > 0, err
    assert_gone(name)


def test_two_jobs_share_the_switches_slot_memory(topo):
    """Two jobs at once on one standing topology whose switches hold 1 MiB
    of slots, about one 64-slot group a TOR (`topo up -- --slot-memory-mb 1
    --window 64`): groups that do not fit are refused and their calls fall
    back, both jobs finish with every result exact (neither starves), the
    switches serve whichever group fits first. The second job's leaders
    take ports of their own (--port)."""
    need("openmpi")
    path, name = topo
    up = offpath("topo", "up", path, "--", "--slot-memory-mb", "1", "--window", "64",
                 timeout=120)
    assert up.returncode == 0, up.stderr
    jobs = [subprocess.Popen([BIN, "mpirun", "--topo", path, *extra, "--verbose", "--",
                              CHECK["openmpi"], "2", "1000"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for extra in ([], ["--port", "5791"])]
    results = []
    for job in jobs:
        out, err = job.communicate(timeout=300)
        assert job.returncode == 0, err
        results.append(parse(subprocess.CompletedProcess([], 0, out, err)))
    for res in results:
        assert res["ranks"] == 8 and res["mismatches"] == 0
    assert sum(res["offloaded"] for res in results) > 0
    assert sum(res["fell_back"] for res in results) > 0
    assert offpath("topo", "down", path, timeout=60).returncode == 0
    refused = 0
    for sw in ("t1", "t2", "s1", "s2"):
        with open(f"/run/offpath/topo-{name}-{sw}.log") as f:
            refused += json.loads(f.read().strip().splitlines()[-1])["refusals"]
    assert refused > 0
    assert_gone(name)
