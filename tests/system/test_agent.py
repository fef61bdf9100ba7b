"""System tests of `offpath dpa_all_to_all` (DOCA's dpa_all_to_all on
offpath's worker threads over RoCEv2): ranks started by the MPI's own
mpirun; every received element is checked by the program, and here the
printed matrices are checked too: the receive matrix must be the send
matrix's all-to-all transpose."""
import os
import re
import subprocess
import pytest
from conftest import BIN

BUILD = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(BIN))))
ROOT_OK = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
LAUNCH = {"openmpi": ["mpirun.openmpi", "--oversubscribe"], "mpich": ["mpirun.mpich"]}


def need(mpi):
    if not os.path.exists(os.path.join(BUILD, "src", "mpi", f"dpa_all_to_all_{mpi}")):
        pytest.skip(f"{mpi} not built")


def a2a(ranks, *args, mpi="openmpi", timeout=240):
    need(mpi)
    return subprocess.run(LAUNCH[mpi] + ["-np", str(ranks), BIN, "dpa_all_to_all", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=ROOT_OK)


def matrix(out, title):
    block = out.split(f"------------{title}----------------------\n", 1)[1]
    rows = {}
    for line in block.splitlines():
        m = re.match(r"Rank (\d+) \|((?: -?\d+ *)*)\|$", line)
        if not m:
            break
        rows[int(m[1])] = [int(v) for v in m[2].split()]
    return rows


def check_transpose(out, ranks, count):
    send, recv = matrix(out, "send buffs"), matrix(out, "recv buffs")
    assert sorted(send) == sorted(recv) == list(range(ranks))
    for r in range(ranks):
        for q in range(ranks):
            assert recv[r][q * count:(q + 1) * count] == send[q][r * count:(r + 1) * count], (r, q)


@pytest.mark.parametrize("ranks,msgsize,threads", [(4, 32, "1,2,4"), (8, 256, "1,3"), (32, 128, "2")])
def test_all_to_all_every_element(ranks, msgsize, threads):
    r = a2a(ranks, "-m", msgsize, "-t", threads, "-n", 3, "-w", 1, "--matrix")
    assert r.returncode == 0, r.stdout + r.stderr
    count = msgsize // 4 // ranks
    # DOCA's line: [13:54:00:848084][3407659][DOCA][INF][dpa_all_to_all_core.c:1749][dpa_a2a] ...
    assert re.search(r"^\[\d\d:\d\d:\d\d:\d{6}\]\[\d+\]\[DOCA\]\[INF\]\[dpa_all_to_all\.c:\d+\]"
                     r"\[dpa_a2a\] " + re.escape(
                         f"Number of processes = {ranks}, message size = {msgsize}, "
                         f"message count = {count}, buffer size = {count * 4 * ranks}"),
                     r.stderr, re.M), r.stderr
    check_transpose(r.stdout, ranks, count)
    rows = re.findall(rf"^{msgsize} +(\d+) +([\d.]+) +([\d.]+) +([\d.]+) +([\d.]+)", r.stdout, re.M)
    assert [int(t) for t, *_ in rows] == [int(t) for t in threads.split(",")]
    for _, avg, lo, hi, mpi in rows:
        assert 0 < float(lo) <= float(avg) <= float(hi) and float(mpi) > 0
    assert "offpath: data check ok" in r.stdout


def test_sizes_not_a_multiple_of_ranks_and_large_chunks():
    """-m 1 MiB over 3 ranks: chunks of many packets, 4 bytes left over (as
    DOCA, a chunk is msgsize / 4 / ranks elements); JSON lines too."""
    r = a2a(3, "-m", "100,1048576", "-t", 2, "-n", 2, "-w", 0, "--json", "--no-matrix")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "message size = 100, message count = 8, buffer size = 96" in r.stderr
    js = re.findall(r'^\{"processes": 3, "msgsize": (\d+), "threads": 2, "runs": 2', r.stdout, re.M)
    assert js == ["100", "1048576"]
    assert "send buffs" not in r.stdout and "offpath: data check ok" in r.stdout


def test_mpich_two_ranks():
    r = a2a(2, "-m", 64, "-n", 2, mpi="mpich")
    assert r.returncode == 0, r.stdout + r.stderr
    check_transpose(r.stdout, 2, 8)
    assert "offpath: data check ok" in r.stdout


@pytest.mark.parametrize("args,needle", [
    (["-m", "30"], "-m (--msgsize)"),
    (["-m", "8"], "-m (--msgsize) 8 is less than 4 bytes for each of the 4 ranks"),
    (["-t", "0"], "-t (--threads)"),
    (["-d", "mlx5_0"], "-d (--devices) mlx5_0: offloading to agent daemons is not available yet"),
    (["--ip", "1.2.3"], "--ip"),
    (["--bogus"], "unknown flag"),
])
def test_bad_flags_name_the_flag(args, needle):
    r = a2a(4, *args, timeout=60)
    assert r.returncode != 0
    assert needle in r.stderr, r.stderr


def test_help():
    r = subprocess.run([BIN, "dpa_all_to_all", "--help"], capture_output=True, text=True,
                       timeout=60, env=ROOT_OK)
    assert r.returncode == 0 and "usage: offpath dpa_all_to_all" in r.stdout


CHECK = {m: os.path.join(BUILD, "tests", "mpi", f"alltoall_check_{m}") for m in ("openmpi", "mpich")}


@pytest.mark.parametrize("mpi,nodes,ppn,threads", [("openmpi", 4, 2, 1), ("openmpi", 3, 1, 3),
                                                    ("mpich", 2, 1, 2)])
def test_unmodified_program_alltoall_by_the_workers(mpi, nodes, ppn, threads):
    """OFFPATH_ALLTOALL=agent: an unmodified MPI program's MPI_Alltoall goes
    through the workers (contiguous types, on COMM_WORLD and a split, back
    to back); a strided type and MPI_IN_PLACE go the MPI's way, and the next
    call is the workers' again. Every element checked by the program."""
    if not os.path.exists(CHECK[mpi]):
        pytest.skip(f"{mpi} not built")
    from conftest import next_net, offpath
    net, port = next_net()
    env = dict(ROOT_OK, OFFPATH_ALLTOALL="agent", OFFPATH_ALLTOALL_THREADS=str(threads),
               OFFPATH_VERBOSE="1")
    rounds = 2
    r = offpath("mpirun", "--mpi", mpi, "--net", net, "--port", port, "--nodes", nodes, "--ppn",
                ppn, "--", CHECK[mpi], rounds, env=env, timeout=300)
    ranks = nodes * ppn
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"alltoall_check: {ranks} ranks, {rounds * 18} calls, 0 mismatches" in r.stdout
    m = re.search(r"offpath: alltoall: (\d+) rank calls, (\d+) by the agent's workers \((\d+) a "
                  r"rank\), (\d+) the MPI's own", r.stderr)
    assert m, r.stderr
    calls, workers, per_rank, own = map(int, m.groups())
    assert calls == ranks * rounds * 18 and per_rank == threads
    assert own == ranks * rounds * 2  # the strided and the in-place call of each round
    assert workers == calls - own
