"""System tests of MPI_Iallreduce through the switches (liboffpath_mpi under
`offpath mpirun`): tests/mpi/iallreduce_check.c mixes blocking and
nonblocking calls, keeps several requests outstanding on several
communicators, completes them every way MPI offers and compares every result
with an exact reference; and `offpath osu_iallreduce`."""
import os
import re
import subprocess
import time

import pytest

from conftest import BIN, next_net, offpath, run_with_switch_killed

BUILD = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(BIN))))
CHECK = {m: os.path.join(BUILD, "tests", "mpi", f"iallreduce_check_{m}")
         for m in ("openmpi", "mpich")}


def need(mpi):
    if not os.path.exists(CHECK[mpi]):
        pytest.skip(f"{mpi} not built")


def parse(r):
    m = re.search(r"iallreduce_check: (\d+) ranks, (\d+) calls, (\d+) mismatches", r.stdout)
    assert m, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}"
    s = re.search(r"offpath: (\d+) iallreduce calls: (\d+) offloaded, (\d+) fell back(.*)",
                  r.stderr)
    b = re.search(r"offpath: (\d+) allreduce calls: (\d+) offloaded", r.stderr)
    return {"ranks": int(m[1]), "calls": int(m[2]), "mismatches": int(m[3]),
            "icalls": int(s[1]) if s else None, "offloaded": int(s[2]) if s else None,
            "fell_back": int(s[3]) if s else None, "why": s[4] if s else "",
            "blocking_offloaded": int(b[2]) if b else None}


def run_check(*args, mpi="openmpi", rounds=10, max_count=3000, env=None, timeout=300):
    net, port = next_net()
    r = offpath("mpirun", "--mpi", mpi, "--net", net, "--port", port, "--verbose", *args, "--",
                CHECK[mpi], rounds, max_count, timeout=timeout, env=env)
    return r, parse(r)


# per round and communicator: 4 calls the switch can take, 1 with a user op
OFFLOADABLE = 4 / 5


@pytest.mark.parametrize("mode,sockets", [("node", 1), ("socket", 2)])
def test_iallreduce_openmpi_8_ranks_mixed_with_blocking(mode, sockets):
    need("openmpi")
    env = dict(os.environ, OFFPATH_SOCKET_MAX_BYTES="1024")  # large calls by node
    r, res = run_check("--nodes", 4, "--ppn", 2, "--sockets", sockets, "--tors", 2,
                       "--mode", mode, env=env)
    assert r.returncode == 0, r.stderr
    assert res["ranks"] == 8 and res["mismatches"] == 0
    # world, dup and both halves of the split span several nodes
    assert res["icalls"] == res["calls"]
    assert res["offloaded"] == res["calls"] * OFFLOADABLE
    assert res["why"] == f" (unsupported op {res['calls'] // 5})"
    assert res["blocking_offloaded"] == 10  # one blocking call a round, between the posts
    g = re.search(r"groups created (\d+), freed (\d+)", r.stderr)
    assert g and int(g[1]) == int(g[2]) > 0


def test_iallreduce_node_steps_over_mpi_without_shared_memory():
    """3 ranks a node: the node steps of nonblocking calls are the MPI's
    nonblocking reduce and broadcast whatever OFFPATH_SHM says."""
    need("openmpi")
    env = dict(os.environ, OFFPATH_SHM="0")
    r, res = run_check("--nodes", 2, "--ppn", 3, "--tors", 2, rounds=5, env=env)
    assert r.returncode == 0, r.stderr
    assert res["mismatches"] == 0 and res["offloaded"] > 0


def test_iallreduce_mode_off_runs_the_mpi_alone():
    need("openmpi")
    r, res = run_check("--nodes", 2, "--ppn", 2, "--mode", "off", rounds=5)
    assert r.returncode == 0 and res["mismatches"] == 0
    assert res["icalls"] is None  # no library loaded, no summary


def test_iallreduce_mpich_2_ranks_with_allreduce_init():
    """MPICH 4 has MPI_Allreduce_init: each communicator also starts a
    persistent allreduce every round (MPI_Startall), through the switch."""
    need("mpich")
    r, res = run_check("--nodes", 2, "--ppn", 1, "--tors", 2, mpi="mpich", rounds=5)
    assert r.returncode == 0, r.stderr
    assert res["ranks"] == 2 and res["mismatches"] == 0
    assert res["calls"] == 5 * 3 * (5 + 1)  # rounds x communicators x (slots + persistent)
    # world and dup: 4 slots and the persistent one each; the split's halves
    # have one rank each (one node) and fall back
    assert res["offloaded"] == 5 * 2 * (4 + 1)
    assert res["why"] == " (one node 30, unsupported op 10)"


def test_iallreduce_switch_killed_mid_job_every_call_still_right(tmp_path):
    """The switch dies while requests are outstanding: their switch steps hit
    the deadline and recover like blocking calls (some leaders may have had
    the result already); every result is still exact."""
    need("openmpi")
    rc, out, err = run_with_switch_killed(tmp_path, [CHECK["openmpi"], 3000, 300])
    res = parse(subprocess.CompletedProcess([], rc, out, err))
    assert rc == 0, err
    assert res["mismatches"] == 0
    assert res["offloaded"] > 0 and "switch unreachable" in res["why"]


def osu_rows(out):
    return [l.split() for l in out.splitlines() if l and l[0].isdigit()]


def run_osu_iallreduce():
    net, port = next_net()
    r = offpath("mpirun", "--net", net, "--port", port, "--nodes", 2, "--ppn", 1, "--verbose",
                "--", BIN, "osu_iallreduce", "-m", "4:65536", "-i", 20, "-x", 2, "-c",
                timeout=300)
    assert r.returncode == 0, r.stderr
    return r


def test_osu_iallreduce_follows_osu_and_overlaps():
    """OSU's header and rows (overall, compute, pure communication, overlap)
    with -c's Validation column, every result checked; and some overlap:
    one rank a node, so the switch step runs on the progress thread while
    the rank computes. The switch and that thread need CPU while both ranks
    compute on 2 cores: on a machine loaded by other jobs one run can show
    none, so up to three runs."""
    need("openmpi")
    for attempt in range(3):
        r = run_osu_iallreduce()
        lines = r.stdout.splitlines()
        assert "# Overall = Coll. Init + Compute + MPI_Test + MPI_Wait" in lines
        assert "# Datatype: MPI_INT." in lines
        assert ("# Size           Overall(us)       Compute(us)    Pure Comm.(us)"
                "        Overlap(%)        Validation") in lines
        rows = osu_rows(r.stdout)
        assert [int(row[0]) for row in rows] == [4 << k for k in range(15)]
        for row in rows:
            overall, compute, pure, overlap = map(float, row[1:5])
            assert 0 < compute <= overall and pure > 0 and 0 <= overlap <= 100, r.stdout
            assert row[5] == "Pass", r.stdout
        m = re.search(r"(\d+) iallreduce calls: (\d+) offloaded, 0 fell back", r.stderr)
        assert m and int(m[2]) == int(m[1]) > 0, r.stderr
        if max(float(row[4]) for row in rows) > 0:
            return
    pytest.fail(f"no overlap in three runs:\n{r.stdout}")


def test_osu_iallreduce_full_columns_and_test_calls():
    need("openmpi")
    net, port = next_net()
    r = offpath("mpirun", "--net", net, "--port", port, "--nodes", 2, "--ppn", 2, "--tors", 2,
                "--", BIN, "osu_iallreduce", "-m", "8:64", "-i", 10, "-x", 1, "-f", "-t", 3,
                "-T", "mpi_double", "-c", timeout=300)
    assert r.returncode == 0, r.stderr
    assert "# Datatype: MPI_DOUBLE." in r.stdout
    assert re.search(r"Compute\(us\) +Coll\. Init\(us\) +MPI_Test\(us\) +MPI_Wait\(us\) +"
                     r"Pure Comm\.\(us\) +Overlap\(%\) +Validation", r.stdout)
    rows = osu_rows(r.stdout)
    assert [int(row[0]) for row in rows] == [8, 16, 32, 64]
    assert all(len(row) == 9 and row[8] == "Pass" for row in rows)
    assert all(float(row[4]) > 0 for row in rows)  # -t 3: MPI_Test time


def test_osu_iallreduce_bad_flag():
    need("openmpi")
    net, port = next_net()
    r = offpath("mpirun", "--net", net, "--port", port, "--nodes", 2, "--mode", "off", "--",
                BIN, "osu_iallreduce", "-t", "many")
    assert r.returncode != 0 and "-t" in r.stderr
