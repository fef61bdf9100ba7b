"""System tests of liboffpath_mpi through `offpath mpirun`: an unmodified MPI
program (tests/mpi/allreduce_check.c) compares every MPI_Allreduce result with
PMPI_Allreduce's and with an exact reference, on COMM_WORLD, a dup and a split."""
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import BIN, next_net, offpath, run_with_switch_killed

BUILD = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(BIN))))
CHECK = {m: os.path.join(BUILD, "tests", "mpi", f"allreduce_check_{m}") for m in ("openmpi", "mpich")}


def need(mpi):
    if not os.path.exists(CHECK[mpi]):
        pytest.skip(f"{mpi} not built")


def mpirun(*args, mpi="openmpi", iters=1, max_count=1000, timeout=600, env=None):
    net, port = next_net()
    r = offpath("mpirun", "--mpi", mpi, "--net", net, "--port", port, "--verbose", *args, "--",
                CHECK[mpi], iters, max_count, timeout=timeout, env=env)
    return r, parse(r)


@pytest.mark.parametrize("mode", ["off", "node"])
def test_launcher_killed_takes_the_job_with_it(mode):
    """offpath mpirun killed with SIGKILL (as a test's timeout does) leaves no
    MPI job and no switch behind to hold its addresses and ports."""
    need("openmpi")
    net, port = next_net()
    p = subprocess.Popen([BIN, "mpirun", "--mpi", "openmpi", "--net", str(net), "--port",
                          str(port), "--nodes", "2", "--ppn", "1", "--mode", mode, "--",
                          "sleep", "60"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    job = []
    try:
        deadline = time.monotonic() + 20
        while not children_of(p.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)  # its ranks are up
        job = children_of(p.pid)
        assert job, "mpirun never started"
        job += [r for c in job for r in children_of(c)]  # and its ranks
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
        deadline = time.monotonic() + 20
        while any(alive(c) for c in job) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(alive(c) for c in job), f"left running: {job}"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=10)
        for c in job:  # what a failed run left (by PID: they are this test's)
            if alive(c):
                os.kill(c, signal.SIGKILL)


def children_of(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def parse(r):
    m = re.search(r"allreduce_check: (\d+) ranks, (\d+) calls, (\d+) mismatches", r.stdout)
    assert m, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}"
    s = re.search(r"offpath: (\d+) allreduce calls: (\d+) offloaded(?:, (\d+) host path)?, "
                  r"(\d+) fell back(.*)", r.stderr)
    shm = re.search(r"node steps through shared memory in (\d+) of (\d+) communicators", r.stderr)
    return {"ranks": int(m[1]), "calls": int(m[2]), "mismatches": int(m[3]),
            "offloaded": int(s[2]) if s else None, "host_path": int(s[3] or 0) if s else None,
            "fell_back": int(s[4]) if s else None, "why": s[5] if s else "", "shm": (int(shm[1]), int(shm[2])) if shm else None}


@pytest.mark.parametrize("mode,sockets", [("node", 1), ("socket", 2)])
def test_openmpi_16_ranks_8_nodes_2_sockets(mode, sockets):
    need("openmpi")
    # Socket mode: calls above 1 KiB take the node's group (its second level)
    env = dict(os.environ, OFFPATH_SOCKET_MAX_BYTES="1024")
    r, res = mpirun("--nodes", 8, "--ppn", 2, "--sockets", sockets, "--tors", 2, "--mode", mode,
                    env=env)
    assert r.returncode == 0, r.stderr
    assert res["ranks"] == 16 and res["mismatches"] == 0
    # COMM_WORLD, its dup, and both halves of the split span several nodes
    assert res["offloaded"] == res["calls"] and res["fell_back"] == 0
    g = re.search(r"groups created (\d+), freed (\d+)", r.stderr)
    assert g and int(g[1]) == int(g[2]) > 0  # every group left when its communicator was freed
    # 2 ranks a node: their steps go through shared memory (Socket mode: by node)
    assert res["shm"] and res["shm"][0] == res["shm"][1] > 0
    wide = re.search(r"socket mode: (\d+) calls above 1024 bytes went by node", r.stderr)
    assert (int(wide[1]) > 0) if mode == "socket" else wide is None


def test_node_steps_over_mpi_when_shared_memory_is_off():
    need("openmpi")
    env = dict(os.environ, OFFPATH_SHM="0")
    r, res = mpirun("--nodes", 4, "--ppn", 3, "--tors", 2, env=env)
    assert r.returncode == 0, r.stderr
    assert res["mismatches"] == 0 and res["offloaded"] == res["calls"]
    assert res["shm"] and res["shm"][0] == 0 < res["shm"][1]


def test_mpich_2_ranks():
    """MPICH busy-polls: 2 ranks is what makes progress on 2 cores."""
    need("mpich")
    r, res = mpirun("--nodes", 2, "--ppn", 1, "--tors", 2, mpi="mpich")
    assert r.returncode == 0, r.stderr
    assert res["ranks"] == 2 and res["mismatches"] == 0
    # the split puts one rank in each half: those calls have one node and fall back
    assert res["offloaded"] == res["calls"] * 2 // 3
    assert "one node" in res["why"]


@pytest.mark.parametrize("spin_us", [0, 500])
def test_openmpi_under_loss_and_duplication(spin_us):
    """Also with the leaders polling for results before they sleep
    (OFFPATH_SPIN_US): retransmissions and duplicates during the spin."""
    need("openmpi")
    env = dict(os.environ, OFFPATH_SPIN_US=str(spin_us))
    r, res = mpirun("--nodes", 4, "--ppn", 2, "--tors", 2, "--drop-rate", 0.05,
                    "--dup-rate", 0.02, env=env)
    assert r.returncode == 0, r.stderr
    assert res["mismatches"] == 0 and res["offloaded"] == res["calls"]
    m = re.search(r"(\d+) retransmissions, (\d+) duplicates, (\d+) injected drops", r.stderr)
    assert m and int(m[1]) > 0 and int(m[3]) > 0


def test_spin_setting_reaches_every_rank():
    """mpirun forwards OFFPATH_SPIN_US to Open MPI's ranks only when it is
    set: each rank reads it (a bad one is named and ignored by both)."""
    need("openmpi")
    r, res = mpirun("--nodes", 2, "--ppn", 1, env=dict(os.environ, OFFPATH_SPIN_US="abc"))
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("ignoring OFFPATH_SPIN_US=abc") == 2, r.stderr
    env = {k: v for k, v in os.environ.items() if k != "OFFPATH_SPIN_US"}
    r, res = mpirun("--nodes", 2, "--ppn", 1, env=env)
    assert r.returncode == 0 and "OFFPATH_SPIN_US" not in r.stderr, r.stderr
    assert "environment variable" not in r.stderr, r.stderr


def recovery(err):
    m = re.search(r"leaders: (\d+) calls waited for a late peer \(longest (\d+) ms\), (\d+) results "
                  r"taken from a peer, (\d+) calls redone without the switch \(switch unreachable\), "
                  r"(\d+) rejoins of the switch in (\d+) tries", err)
    keys = ("late", "longest_ms", "fetched", "redone", "rejoins", "tries")
    return dict(zip(keys, map(int, m.groups()))) if m else dict.fromkeys(keys, 0)


@pytest.mark.parametrize("restart", [False, True])
def test_switch_killed_mid_job_every_call_still_right(tmp_path, restart):
    """The switch dies mid-job: every leader gives the call up and they redo
    it without the switch (named: switch unreachable). Restarted, the
    communicators rejoin it after a backoff and calls go through it again."""
    need("openmpi")
    rc, out, err = run_with_switch_killed(tmp_path, [CHECK["openmpi"], 200, 1000],
                                          1.5 if restart else None)
    res = parse(subprocess.CompletedProcess([], rc, out, err))
    assert rc == 0, err
    assert res["mismatches"] == 0
    assert res["offloaded"] > 0 and res["fell_back"] > 0
    assert "switch unreachable" in res["why"]
    k = recovery(err)
    assert k["redone"] > 0 and k["tries"] > 0, err
    assert (k["rejoins"] > 0) == restart, err


def test_mode_off_runs_the_mpi_alone():
    need("openmpi")
    r, res = mpirun("--nodes", 2, "--ppn", 2, "--mode", "off")
    assert r.returncode == 0 and res["mismatches"] == 0
    assert res["offloaded"] is None  # no library loaded, no summary


@pytest.mark.parametrize("args,needle", [
    (["--nodes", "0", "--", "true"], "--nodes"),
    (["--mode", "rack", "--", "true"], "--mode"),
    (["--mpi", "lam", "--", "true"], "--mpi"),
    (["--tors", "3", "--nodes", "2", "--", "true"], "--tors"),
    (["--sockets", "2", "--ppn", "1", "--", "true"], "--sockets"),
    (["--nodes", "2"], "no MPI command"),
])
def test_mpirun_bad_flags(args, needle):
    r = offpath("mpirun", *args)
    assert r.returncode == 2 and needle in r.stderr


def test_osu_allreduce_output_follows_osu():
    need("openmpi")
    net, port = next_net()
    r = offpath("mpirun", "--net", net, "--port", port, "--nodes", 2, "--ppn", 2, "--",
                BIN, "osu_allreduce", "-m", "4:64", "-i", 20, "-x", 2, "-f", timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "# Datatype: MPI_INT." in lines
    assert any(l.startswith("# Size       Avg Latency(us)   Min Latency(us)") for l in lines)
    rows = [l.split() for l in lines if l and not l.startswith("#")]
    assert [int(row[0]) for row in rows] == [4, 8, 16, 32, 64]
    for row in rows:
        avg, lo, hi, iters = float(row[1]), float(row[2]), float(row[3]), int(row[4])
        assert 0 < lo <= avg <= hi and iters == 20


def test_osu_allreduce_compare_three_modes_in_one_job():
    need("openmpi")
    net, port = next_net()
    r = offpath("mpirun", "--net", net, "--port", port, "--nodes", 4, "--ppn", 2, "--sockets", 2,
                "--tors", 2, "--verbose", "--", BIN, "osu_allreduce", "-m", "4:256", "-i", 20,
                "-x", 2, "--compare", timeout=300)
    assert r.returncode == 0, r.stderr
    assert "(unavailable" not in r.stdout
    rows = [l.split() for l in r.stdout.splitlines() if l and l[0].isdigit()]
    assert [int(row[0]) for row in rows] == [4, 8, 16, 32, 64, 128, 256]
    for row in rows:
        host, node, sock, udp = map(float, row[1:5])
        assert host > 0 and node > 0 and sock > 0 and udp > 0
        assert all(x.endswith("%") for x in row[5:8])
    # the INC columns really went through the switches, host UDP through hostar
    m = re.search(r"(\d+) allreduce calls: (\d+) offloaded", r.stderr)
    assert m and int(m[2]) > 0
    assert re.search(r"host allreduce: [1-9]\d* leader calls", r.stderr)


def test_osu_allreduce_bad_flag():
    need("openmpi")
    net, port = next_net()
    r = offpath("mpirun", "--net", net, "--port", port, "--nodes", 2, "--mode", "off", "--",
                BIN, "osu_allreduce", "-m", "8:4")
    assert r.returncode != 0 and "-m" in r.stderr


def test_node_and_socket_found_without_emulation(tmp_path):
    """Without OFFPATH_PPN/OFFPATH_SOCKETS a rank's node comes from the MPI
    (ranks sharing memory) and its socket from hwloc: with a two-package
    topology (hwloc's synthetic XML) and ranks bound to alternate cores, even
    ranks sit on package 0 and odd ranks on package 1."""
    need("openmpi")
    fake = tmp_path / "two-packages.xml"
    subprocess.run(["lstopo-no-graphics", "-i", "package:2 numa:1 core:1 pu:1", str(fake)],
                   check=True, capture_output=True)
    lib = os.path.join(BUILD, "src", "mpi", "liboffpath_mpi.so")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = subprocess.run(["mpirun.openmpi", "--oversubscribe", "-np", "4", "--bind-to",
                        "core:overload-allowed", "--map-by", "core",
                        "-x", f"HWLOC_XMLFILE={fake}", "-x", "HWLOC_THISSYSTEM=1",
                        "-x", f"LD_PRELOAD={lib}", "-x", "OFFPATH_VERBOSE=2",
                        CHECK["openmpi"], "1", "10"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    found = dict((int(m[0]), m[1:]) for m in re.findall(
        r"offpath: rank (\d+): node (\d+) \(shared memory\), local rank (\d+), "
        r"socket (\d+) of (\d+) \(hwloc binding\)", r.stderr))
    assert sorted(found) == [0, 1, 2, 3], r.stderr
    for rank, (node, local, socket, sockets) in found.items():
        assert (node, local, sockets) == ("0", str(rank), "2")
        assert socket == str(rank % 2)
    # one node: every call is the MPI's own, and still right
    assert "0 mismatches" in r.stdout


def host_counts(r):
    m = re.search(r"host allreduce: (\d+) leader calls \((\d+) ring\), (\d+) data packets, "
                  r"(\d+) retransmissions, (\d+) duplicates, (\d+) injected drops, (\d+) timeouts",
                  r.stderr)
    assert m, r.stderr
    return dict(zip(("calls", "ring", "packets", "retx", "dups", "drops", "timeouts"),
                    map(int, m.groups())))


def test_host_mode_16_ranks_8_nodes_exact():
    """--mode host: Node mode's leaders allreduce host to host (recursive
    doubling and, above OFFPATH_HOST_RING_BYTES, the ring); no switches."""
    need("openmpi")
    env = dict(os.environ, OFFPATH_HOST_RING_BYTES="4096")
    r, res = mpirun("--nodes", 8, "--ppn", 2, "--mode", "host", env=env)
    assert r.returncode == 0, r.stderr
    assert res["ranks"] == 16 and res["mismatches"] == 0
    # no switch saw these calls: the summary says where they went
    assert res["host_path"] == res["calls"] and res["offloaded"] == 0 and res["fell_back"] == 0
    assert "switches aggregated" not in r.stderr  # none started
    k = host_counts(r)
    assert 0 < k["ring"] < k["calls"] and k["timeouts"] == 0


def test_host_mode_under_loss_and_duplication():
    """Loss and duplication on every packet the leaders send (OFFPATH_DROP_RATE,
    OFFPATH_DUP_RATE through the io fault layer): every result still exact,
    nothing falls back."""
    need("openmpi")
    env = dict(os.environ, OFFPATH_HOST_RING_BYTES="4096")
    r, res = mpirun("--nodes", 8, "--ppn", 2, "--mode", "host", "--drop-rate", 0.05,
                    "--dup-rate", 0.02, env=env)
    assert r.returncode == 0, r.stderr
    assert res["mismatches"] == 0 and res["host_path"] == res["calls"] and res["fell_back"] == 0
    k = host_counts(r)
    assert k["drops"] > 0 and k["retx"] > 0 and k["dups"] > 0 and k["timeouts"] == 0


def test_variables_the_user_set_reach_the_ranks():
    """OFFPATH_VERBOSE and OFFPATH_DEADLINE_MS exported by the user are what
    the ranks see, unless the matching flag is given (then the flag wins)."""
    need("openmpi")
    net, port = next_net()
    env = dict(os.environ, OFFPATH_VERBOSE="2", OFFPATH_DEADLINE_MS="4321")
    r = offpath("mpirun", "--net", net, "--port", port, "--nodes", 2, "--",
                CHECK["openmpi"], 1, 10, env=env)
    assert r.returncode == 0, r.stderr
    assert parse(r)["offloaded"] is not None, "no summary: OFFPATH_VERBOSE was overwritten"
    assert "deadline 4321 ms" in r.stderr, r.stderr
    r = offpath("mpirun", "--net", net, "--port", port, "--nodes", 2, "--deadline-ms", 777,
                "--", CHECK["openmpi"], 1, 10, env=env)
    assert r.returncode == 0, r.stderr
    assert "deadline 777 ms" in r.stderr, r.stderr
    bad = dict(os.environ, OFFPATH_DEADLINE_MS="soon")
    r = offpath("mpirun", "--", "true", env=bad)
    assert r.returncode == 2 and "OFFPATH_DEADLINE_MS=soon" in r.stderr


@pytest.mark.parametrize("mpi,nodes", [("openmpi", 4), ("mpich", 2)])
def test_communicators_never_freed_leave_their_groups_at_finalize(mpi, nodes):
    """A program that never frees its dup and split (mpi4py frees no split):
    MPI_Finalize leaves every group the process still holds."""
    need(mpi)
    net, port = next_net()
    r = offpath("mpirun", "--mpi", mpi, "--net", net, "--port", port, "--nodes", nodes,
                "--tors", 2, "--verbose", "--", CHECK[mpi], 1, 10, "keep")
    assert r.returncode == 0, r.stderr
    assert parse(r)["mismatches"] == 0
    g = re.search(r"groups created (\d+), freed (\d+)", r.stderr)
    assert g and int(g[1]) == int(g[2]) > 0, r.stderr


def descendants(pid):
    out = []
    for c in children_of(pid):
        out += [c] + descendants(c)
    return out


def stopped(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] == "T"
    except OSError:
        return False


def test_leader_stalled_past_the_deadline_is_a_late_peer():
    """A leader stops (SIGSTOP, as a descheduled or debugged process) in the
    middle of a job for 4x the deadline while the others wait in the call:
    the switch is healthy, so they wait for it (counted as a late peer, not a
    fallback), every result is right and every group is left."""
    need("openmpi")
    net, port = next_net()
    p = subprocess.Popen([BIN, "mpirun", "--net", str(net), "--port", str(port), "--nodes", "4",
                          "--tors", "2", "--deadline-ms", "500", "--verbose", "--",
                          CHECK["openmpi"], "2", "1000", "stall"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        victim, deadline = None, time.monotonic() + 60
        while victim is None and time.monotonic() < deadline and p.poll() is None:
            victim = next((d for d in descendants(p.pid) if stopped(d)), None)
            time.sleep(0.05)
        assert victim is not None, "rank 1 never stopped"
        time.sleep(2.0)
        os.kill(victim, signal.SIGCONT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            for d in descendants(p.pid):
                os.kill(d, signal.SIGKILL)
            p.kill()
            p.wait()
    res = parse(subprocess.CompletedProcess([], p.returncode, out, err))
    assert p.returncode == 0, err
    assert res["mismatches"] == 0 and res["fell_back"] == 0, err
    k = recovery(err)
    assert k["late"] >= 1 and k["longest_ms"] >= 1500 and k["redone"] == 0, err
    g = re.search(r"groups created (\d+), freed (\d+)", err)
    assert g and int(g[1]) == int(g[2]) > 0, err


def test_leader_whose_results_are_lost_takes_them_from_a_peer(tmp_path):
    """The TOR's link to one leader goes down for 1.5 s mid-job (--link-down):
    the others finish each call, that leader reaches its deadline with no
    result and takes it from a peer that has it (before, it waited in an
    Allgather the others never joined). Nothing is redone, nothing falls
    back, every result is exact."""
    need("openmpi")
    net, port = next_net()
    topo = tmp_path / "topo"
    topo.write_text(f"tor t0 127.{net + 1}.0.1 port {port} hosts 127.{net}.1.1-127.{net}.4.254\n")
    victim = f"127.{net}.3.1"  # node 2's leader
    sw = subprocess.Popen([BIN, "switch", "--topology", str(topo), "--name", "t0",
                           "--log-level", "error", "--link-down", f"{victim}@2000+1500"],
                          stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        r = offpath("mpirun", "--connect", topo, "--net", net, "--port", port, "--nodes", 4,
                    "--deadline-ms", 300, "--verbose", "--", CHECK["openmpi"], 200, 1000,
                    timeout=300)
    finally:
        sw.kill()
        sw.wait()
    res = parse(r)
    assert r.returncode == 0, r.stderr
    assert res["mismatches"] == 0 and res["fell_back"] == 0, r.stderr
    k = recovery(r.stderr)
    assert k["fetched"] >= 1 and k["redone"] == 0, r.stderr
