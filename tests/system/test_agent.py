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
    if not os.path.exists(os.path.join(BUILD, "src", "mpiapps", f"dpa_all_to_all_{mpi}")):
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
    (["-d", "mlx5_0"], "invalid value 'mlx5_0' for -d (--devices)"),
    (["-d", "127.0.0.1:1"], "-d (--devices) needs --key and --peer"),
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


ICHECK = {m: os.path.join(BUILD, "tests", "mpi", f"ialltoall_check_{m}") for m in ("openmpi", "mpich")}


@pytest.mark.parametrize("mpi,nodes,ppn,threads,cpu", [("openmpi", 2, 2, 1, ""),
                                                        ("openmpi", 4, 1, 2, ""),
                                                        ("mpich", 2, 1, 2, "0")])
def test_unmodified_program_ialltoall_by_the_workers(mpi, nodes, ppn, threads, cpu):
    """OFFPATH_ALLTOALL=agent: an unmodified program's MPI_Ialltoall returns
    with the call in the workers' hands; MPI_Wait, polling MPI_Test and
    MPI_Waitall of two (two communicators) complete it, and a blocking
    MPI_Alltoall called before the wait runs after it. Every element
    checked by the program; its overlap line printed (osu_ialltoall's
    measure). OFFPATH_ALLTOALL_CPU pins the workers (CPU 0: one every
    machine has)."""
    if not os.path.exists(ICHECK[mpi]):
        pytest.skip(f"{mpi} not built")
    from conftest import next_net, offpath
    net, port = next_net()
    env = dict(ROOT_OK, OFFPATH_ALLTOALL="agent", OFFPATH_ALLTOALL_THREADS=str(threads),
               OFFPATH_VERBOSE="1", OFFPATH_ALLTOALL_CPU=cpu)
    r = offpath("mpirun", "--mpi", mpi, "--net", net, "--port", port, "--nodes", nodes, "--ppn",
                ppn, "--", ICHECK[mpi], 4096, env=env, timeout=300)
    assert "cannot move" not in r.stderr
    ranks = nodes * ppn
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"ialltoall_check: {ranks} ranks, 24 calls, 0 mismatches" in r.stdout
    assert re.search(r"ialltoall_check: overlap [\d.]+% \(pure [\d.]+ us, compute [\d.]+ us, "
                     r"overall [\d.]+ us, 4096 ints to each rank\)", r.stdout), r.stdout
    m = re.search(r"offpath: alltoall: (\d+) rank calls, (\d+) by the agent's workers \((\d+) a "
                  r"rank\), (\d+) the MPI's own; (\d+) MPI_Ialltoall by the workers", r.stderr)
    assert m, r.stderr
    calls, workers, per_rank, own, nonblocking = map(int, m.groups())
    # a rank: 4 counts x (wait, test, two at once, one before a blocking one), then
    # 20 pure and 20 overlapped calls
    assert calls == workers == ranks * 64 and own == 0 and per_rank == threads
    assert nonblocking == ranks * 60


# ---- offpath allreduce: daemons (the DPU's role) reduce for offloaded clients

import itertools  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402

_ar_ports = itertools.count(24000 + (os.getpid() % 200) * 20, 4)


@pytest.fixture(scope="module")
def ar_keys(tmp_path_factory):
    d = tmp_path_factory.mktemp("arkeys")
    for name in ("daemons", "clients"):
        subprocess.run([BIN, "keygen", str(d / name)], check=True, capture_output=True)
    return d


def job_args(size, dtype, op, batch, batches):
    return ["-s", str(size), "-d", dtype, "-o", op, "-b", str(batch), "-i", str(batches)]


def start(args):
    return subprocess.Popen([BIN, "allreduce", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def stop_all(procs):
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=10)


def run_job(keys, daemons, per_daemon, job, timeout=240, extra_client=None):
    """daemons daemons with per_daemon clients each; returns (daemon outputs,
    client outputs), each (rc, stdout, stderr)."""
    ports = [next(_ar_ports) for _ in range(daemons)]
    addrs = ",".join(f"127.0.0.1:{p}" for p in ports)
    common = ["--timeout", "60", *job]
    procs = []
    try:
        ds = [start(["-r", "daemon", "-t", str(p), "-c", str(per_daemon), "-a", addrs, "--key",
                     str(keys / "daemons.key"), "--peer", str(keys / "clients.pub"), *common])
              for p in ports]
        procs += ds
        if extra_client is not None:
            extra_client(ports[0], procs)
        cs = [start(["-r", "client", "-m", "offloaded", "-a", f"127.0.0.1:{p}", "--key",
                     str(keys / "clients.key"), "--peer", str(keys / "daemons.pub"), *common])
              for p in ports for _ in range(per_daemon)]
        procs += cs
        outs = [p.communicate(timeout=timeout) for p in ds + cs]
        res = [(p.returncode, o, e) for p, (o, e) in zip(ds + cs, outs)]
        return res[:daemons], res[daemons:]
    finally:
        stop_all(procs)


@pytest.mark.parametrize("daemons,per_daemon,size,dtype,op", [
    (2, 2, 1000, "float", "sum"), (2, 2, 3, "int", "prod"), (4, 2, 257, "double", "sum"),
    (4, 2, 64, "byte", "prod"), (1, 3, 1, "float", "prod"), (2, 2, 1 << 20, "float", "sum")])
def test_offloaded_allreduce_results_equal_the_reference(ar_keys, daemons, per_daemon, size,
                                                         dtype, op):
    """4 clients on 2 daemons, 8 on 4, every datatype and both ops, 1 .. 1M
    elements: every client checks every element of every result against
    the reference in the daemons' reduction order; DOCA's metrics printed."""
    batch, batches = (2, 1) if size > 4096 else (4, 3)
    ds, cs = run_job(ar_keys, daemons, per_daemon, job_args(size, dtype, op, batch, batches))
    ops = 1 + (3 + batches) * batch  # the barrier, 3 warm-up batches, the measured ones
    for rc, out, err in ds:
        assert rc == 0, err
        assert f"operations reduced for {per_daemon} clients" in err and f": {ops} operations" in err
    ranks = set()
    for rc, out, err in cs:
        assert rc == 0, out + err
        m = re.search(r"result check: 0 elements wrong \((\d+) results, client (\d+) of (\d+), "
                      r"(\d+) daemons\)", out)
        assert m, out + err
        assert int(m[1]) == ops and int(m[3]) == daemons * per_daemon and int(m[4]) == daemons
        ranks.add(int(m[2]))
        assert (f"Allreduce (offloaded/{op}/{dtype}) and matrix multiplication metrics to "
                f"complete {batches} batches (batch size - {batch}, vector size - {size}):") in out
        assert re.search(r"Computation and communication overlap - [\d.]+%", out)
    assert ranks == set(range(daemons * per_daemon))


def test_mismatched_configuration_refused_with_the_field(ar_keys):
    """A client with another -s is refused with the field named (DOCA's
    handshake); the daemon goes on and serves the right ones."""
    bad = {}

    def wrong_client(port, procs):
        p = start(["-r", "client", "-m", "offloaded", "-a", f"127.0.0.1:{port}", "--key",
                   str(ar_keys / "clients.key"), "--peer", str(ar_keys / "daemons.pub"),
                   "--timeout", "60", *job_args(999, "float", "sum", 2, 1)])
        procs.append(p)
        bad["out"] = p.communicate(timeout=60)
        bad["rc"] = p.returncode

    ds, cs = run_job(ar_keys, 1, 1, job_args(1000, "float", "sum", 2, 1),
                     extra_client=wrong_client)
    assert bad["rc"] != 0
    assert ("the daemon refused this client: vector size (-s): 1000 here, 999 there"
            in bad["out"][1]), bad["out"]
    assert "client refused: configuration mismatch: vector size (-s)" in ds[0][2]
    assert ds[0][0] == 0 and cs[0][0] == 0


def test_daemon_killed_mid_run_clients_fail_in_time(ar_keys):
    port = next(_ar_ports)
    common = ["--timeout", "3", *job_args(100000, "float", "sum", 8, 100000)]
    d = start(["-r", "daemon", "-t", str(port), "-c", "1", "-a", f"127.0.0.1:{port}", "--key",
               str(ar_keys / "daemons.key"), "--peer", str(ar_keys / "clients.pub"), *common])
    c = start(["-r", "client", "-m", "offloaded", "-a", f"127.0.0.1:{port}", "--key",
               str(ar_keys / "clients.key"), "--peer", str(ar_keys / "daemons.pub"), *common])
    try:
        time.sleep(1.5)
        assert c.poll() is None, c.communicate()
        d.send_signal(signal.SIGKILL)
        t0 = time.monotonic()
        out, err = c.communicate(timeout=30)
        assert c.returncode == 1 and time.monotonic() - t0 < 10, (out, err)
        assert "offpath allreduce: client:" in err
    finally:
        stop_all([d, c])


def test_vanished_client_freed_others_told_why(ar_keys):
    """A client killed mid-run: its daemon frees it (logged, counted), and
    tells the client still there why the job cannot finish, at once rather
    than at its timeout."""
    port = next(_ar_ports)
    common = ["--timeout", "30", *job_args(100000, "float", "sum", 8, 100000)]
    d = start(["-r", "daemon", "-t", str(port), "-c", "2", "-a", f"127.0.0.1:{port}", "--key",
               str(ar_keys / "daemons.key"), "--peer", str(ar_keys / "clients.pub"), *common])
    cs = [start(["-r", "client", "-m", "offloaded", "-a", f"127.0.0.1:{port}", "--key",
                 str(ar_keys / "clients.key"), "--peer", str(ar_keys / "daemons.pub"), *common])
          for _ in range(2)]
    try:
        time.sleep(1.5)
        assert all(c.poll() is None for c in cs), [c.communicate() for c in cs]
        cs[1].send_signal(signal.SIGKILL)
        t0 = time.monotonic()
        out, err = cs[0].communicate(timeout=30)
        assert cs[0].returncode == 1 and time.monotonic() - t0 < 5, (out, err)
        assert re.search(r"the daemon ended the job: client \d is gone: the job cannot finish",
                         err), err
        _, derr = d.communicate(timeout=30)
        assert d.returncode == 1 and re.search(r"client \d: gone \(", derr), derr
        assert re.search(r"counters:.* clients_gone=1", derr), derr
    finally:
        stop_all([d, *cs])


def test_fallback_goes_on_non_offloaded_when_the_daemon_dies(ar_keys):
    """-m offloaded --fallback: the daemon killed mid-run, both clients say
    why and start over as a non-offloaded mesh of the --fallback list;
    every result of that run checked, exit 0."""
    port, p0, p1 = next(_ar_ports), next(_ar_ports), next(_ar_ports)
    common = ["--timeout", "10", *job_args(20000, "float", "sum", 8, 600)]
    d = start(["-r", "daemon", "-t", str(port), "-c", "2", "-a", f"127.0.0.1:{port}", "--key",
               str(ar_keys / "daemons.key"), "--peer", str(ar_keys / "clients.pub"), *common])
    cs = [start(["-r", "client", "-m", "offloaded", "-a", f"127.0.0.1:{port}", "--key",
                 str(ar_keys / "clients.key"), "--peer", str(ar_keys / "daemons.pub"), "-t", str(p),
                 "--fallback", f"127.0.0.1:{p0},127.0.0.1:{p1}", *common]) for p in (p0, p1)]
    try:
        time.sleep(1)
        assert all(c.poll() is None for c in cs), [c.communicate() for c in cs]
        d.send_signal(signal.SIGKILL)
        ranks = set()
        for c in cs:
            out, err = c.communicate(timeout=120)
            assert c.returncode == 0, out + err
            assert "offloaded: " in err and "continuing non-offloaded (--fallback)" in err, err
            assert "Allreduce (non-offloaded/sum/float)" in out, out
            m = re.search(r"result check: 0 elements wrong \((\d+) results, client (\d) of 2, "
                          r"reduced among the clients\)", out)
            assert m and int(m[1]) == 1 + (3 + 600) * 8, out
            ranks.add(m[2])
        assert ranks == {"0", "1"}
    finally:
        stop_all([d, *cs])


@pytest.mark.parametrize("args,needle", [
    (["-r", "client", "-m", "non-offloaded"], "a non-offloaded client needs -t (--listen-port)"),
    (["-r", "client", "-m", "fast"], "-m (--mode): offloaded or non-offloaded"),
    (["-r", "client", "-m", "offloaded", "-d", "half"], "-d (--datatype)"),
    (["-r", "daemon", "-t", "1", "-c", "1", "-a", "127.0.0.1:1"], "--key and --peer are needed"),
    (["-r", "daemon", "-c", "1"], "a daemon needs -t (--listen-port) and -c (--num-clients)"),
    (["-r", "boss"], "-r (--role)"),
    (["-s", "100"], "-r (--role) is needed"),
    (["-r", "client", "-m", "offloaded", "-b", "0"], "-b (--batch-size)"),
])
def test_allreduce_bad_flags(args, needle):
    r = subprocess.run([BIN, "allreduce", *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and needle in r.stderr, r.stderr


def run_mesh(keys, n, job, timeout=240, bad_job=None, wait_s=20):
    ports = [next(_ar_ports) for _ in range(n)]
    addrs = ",".join(f"127.0.0.1:{p}" for p in ports)
    procs = []
    try:
        for i, p in enumerate(ports):
            j = bad_job if bad_job is not None and i == n - 1 else job
            procs.append(start(["-r", "client", "-m", "non-offloaded", "-t", str(p), "-a", addrs,
                                "--key", str(keys / "clients.key"), "--peer",
                                str(keys / "clients.pub"), "--timeout", str(wait_s), *j]))
        outs = [p.communicate(timeout=timeout) for p in procs]
        return [(p.returncode, o, e) for p, (o, e) in zip(procs, outs)]
    finally:
        stop_all(procs)


@pytest.mark.parametrize("n,size,dtype,op", [(3, 1000, "float", "sum"), (4, 33, "int", "prod"),
                                             (2, 1, "double", "sum")])
def test_non_offloaded_clients_reduce_among_themselves(ar_keys, n, size, dtype, op):
    """-m non-offloaded: the clients form a full mesh over the secure channel
    and reduce on the host, in rank order; every element checked."""
    batch, batches = 4, 3
    res = run_mesh(ar_keys, n, job_args(size, dtype, op, batch, batches))
    ops = 1 + (3 + batches) * batch
    ranks = set()
    for rc, out, err in res:
        assert rc == 0, out + err
        m = re.search(r"result check: 0 elements wrong \((\d+) results, client (\d+) of (\d+), "
                      r"reduced among the clients\)", out)
        assert m and int(m[1]) == ops and int(m[3]) == n, out + err
        ranks.add(int(m[2]))
        assert f"Allreduce (non-offloaded/{op}/{dtype})" in out
    assert ranks == set(range(n))


def test_non_offloaded_mismatch_refused(ar_keys):
    """The client with another -b is refused by rank 0 with the field named
    (it reports it too), and rank 0, left without its peer, gives up at its
    timeout."""
    res = run_mesh(ar_keys, 2, job_args(100, "float", "sum", 2, 1),
                   bad_job=job_args(100, "float", "sum", 3, 1), timeout=60, wait_s=3)
    assert all(rc != 0 for rc, _, _ in res)
    assert "a client refused: batch size (-b): 2 here, 3 there" in res[0][2], res[0][2]
    assert "client 0 refused this client: batch size (-b): 2 here, 3 there" in res[1][2], res[1][2]


# ---- dpa_all_to_all -d: the all-to-all offloaded to agent daemons

def start_a2a_daemons(keys, n, per, *extra):
    ports = [next(_ar_ports) for _ in range(n)]
    addrs = ",".join(f"127.0.0.1:{p}" for p in ports)
    procs = [subprocess.Popen([BIN, "dpa_all_to_all", "-r", "daemon", "-t", str(p), "-c", str(per),
                               "-a", addrs, "--key", str(keys / "daemons.key"), "--peer",
                               str(keys / "clients.pub"), *map(str, extra)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for p in ports]
    return procs, addrs


def a2a_ranks(keys, ranks, addrs, *args, **kw):
    return a2a(ranks, "-d", addrs, "--key", keys / "clients.key", "--peer", keys / "daemons.pub",
               *args, **kw)


def counters(err):
    """The daemon's last counters line as a dict."""
    lines = re.findall(r"counters:((?: \w+=\d+)+)", err)
    assert lines, err
    return {k: int(v) for k, v in (kv.split("=") for kv in lines[-1].split())}


@pytest.mark.parametrize("ranks,msgsize,threads", [(4, 32, "1,2"), (8, 4096, "2")])
def test_all_to_all_offloaded_to_two_daemons(ar_keys, ranks, msgsize, threads):
    """4 and 8 ranks through 2 daemons: each daemon hosts its ranks' workers,
    the chunks move between daemons as RDMA writes; every received element
    checked (by the program, and the printed matrices here); each daemon
    serves one session a (size, threads) and the show run, then exits."""
    need("openmpi")
    sessions = 1 + len(threads.split(","))
    ds, addrs = start_a2a_daemons(ar_keys, 2, ranks // 2, "--sessions", sessions, "--timeout", 20)
    try:
        r = a2a_ranks(ar_keys, ranks, addrs, "-m", msgsize, "-t", threads, "-n", 3, "-w", 1,
                      "--matrix")
        outs = [d.communicate(timeout=60) for d in ds]
    finally:
        stop_all(ds)
    assert r.returncode == 0, r.stdout + r.stderr
    check_transpose(r.stdout, ranks, msgsize // 4 // ranks)
    assert "offpath: data check ok" in r.stdout
    runs = 1 + (1 + 3) * len(threads.split(","))  # the show run, then warm-up and timed ones
    for d, (out, err) in zip(ds, outs):
        assert d.returncode == 0, err
        n = counters(err)
        assert n["sessions"] == sessions and n["calls"] == runs * ranks // 2, err
        assert n["failed_calls"] == n["malformed"] == n["clients_gone"] == 0, err


def test_all_to_all_daemon_killed_ranks_fail_in_time(ar_keys):
    """A daemon killed mid-run: its ranks lose their channel, the other
    daemon's ranks get its refusal when its RDMA exchange times out; every
    rank ends with the reason, well within the deadline."""
    need("openmpi")
    ds, addrs = start_a2a_daemons(ar_keys, 2, 2, "--timeout", 3)
    try:
        p = subprocess.Popen(LAUNCH["openmpi"] + [
            "-np", "4", BIN, "dpa_all_to_all", "-d", addrs, "--key", str(ar_keys / "clients.key"),
            "--peer", str(ar_keys / "daemons.pub"), "--timeout", "3", "-m", "4096", "-t", "1",
            "-n", "1000000", "-w", "0", "--no-matrix"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ROOT_OK)
        time.sleep(3)
        assert p.poll() is None, p.communicate()
        ds[1].send_signal(signal.SIGKILL)
        t0 = time.monotonic()
        out, err = p.communicate(timeout=60)
        assert p.returncode != 0 and time.monotonic() - t0 < 15, (out, err)
        assert re.search(r"rank \d: (waiting for the daemon|the daemon: all-to-all between the "
                         r"daemons failed)", err), err
    finally:
        stop_all(ds + [p])


def test_all_to_all_vanished_job_freed_next_one_served(ar_keys):
    """A whole MPI job killed mid-run: the daemons count its ranks as gone
    (their resources freed with the session) and serve the next job, every
    element of which is checked."""
    need("openmpi")
    ds, addrs = start_a2a_daemons(ar_keys, 2, 2, "--timeout", 3)
    try:
        p = subprocess.Popen(LAUNCH["openmpi"] + [
            "-np", "4", BIN, "dpa_all_to_all", "-d", addrs, "--key", str(ar_keys / "clients.key"),
            "--peer", str(ar_keys / "daemons.pub"), "-m", "4096", "-t", "1", "-n", "1000000",
            "-w", "0", "--no-matrix"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=ROOT_OK, start_new_session=True)
        time.sleep(3)
        assert p.poll() is None
        os.killpg(p.pid, signal.SIGKILL)  # mpirun and its ranks: the group started here
        p.wait(timeout=30)
        r = a2a_ranks(ar_keys, 4, addrs, "-m", 32, "-t", 1, "-n", 2, "-w", 0, "--matrix",
                      timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        check_transpose(r.stdout, 4, 2)
        assert "offpath: data check ok" in r.stdout
    finally:
        for d in ds:
            d.send_signal(signal.SIGTERM)
        outs = [d.communicate(timeout=30) for d in ds]
    gone = sum(counters(err)["clients_gone"] for _, err in outs)
    assert gone >= 1, outs
    for _, err in outs:
        n = counters(err)
        assert n["sessions"] >= 3 and n["calls"] > 0, err


@pytest.mark.parametrize("args,needle", [
    (["-r", "daemon", "-c", "1"], "a daemon needs -t (--listen-port) and -c (--num-clients)"),
    (["-r", "daemon", "-t", "1", "-c", "1"], "-a (--address) is needed"),
    (["-r", "daemon", "-t", "1", "-c", "1", "-a", "127.0.0.1:1"], "--key and --peer are needed"),
    (["-r", "daemon", "-t", "1", "-c", "65", "-a", "127.0.0.1:1"], "-c (--num-clients)"),
    (["-r", "client"], "-r (--role): daemon (ranks are MPI processes)"),
    (["-r", "daemon", "-t", "1", "-c", "1", "-a", "1.2.3:4:5"], "in -a (--address)"),
])
def test_a2a_daemon_bad_flags(args, needle):
    r = subprocess.run([BIN, "dpa_all_to_all", *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and needle in r.stderr, r.stderr


@pytest.mark.parametrize("ranks,args,needle", [
    (3, ["-m", "48"], "3 ranks do not split evenly over 2 daemons"),
    (2, ["-m", str(32 << 20)], "at most"),
])
def test_offloaded_ranks_refused_with_the_reason(ar_keys, ranks, args, needle):
    """-d: ranks that do not split over the daemons, or a buffer bigger than a
    channel message, are refused before any daemon is reached."""
    r = a2a_ranks(ar_keys, ranks, "127.0.0.1:1,127.0.0.1:3", *args, timeout=60)
    assert r.returncode != 0 and needle in r.stderr, r.stderr
