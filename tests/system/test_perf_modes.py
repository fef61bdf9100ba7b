"""perftest's run modes beyond one client and one run: --run_infinitely
(a row every interval until SIGINT), --use_srq, and a server that serves
several clients. Real processes on loopback."""
import json
import signal
import subprocess
import time

import pytest

from conftest import BIN, check_ok, counters, kill_leftovers, run_server_client

_port = [23800]
LINE = "-" * 87
BW_HEADER = (" #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]"
             "   MsgRate[Mpps]")


def port():
    _port[0] += 1
    return _port[0]


def table(out):
    lines = out.splitlines()
    start = lines.index(BW_HEADER)
    rows = []
    for l in lines[start + 1:]:
        if l == LINE:
            break
        rows.append(l)
    return rows


def bw_row_ok(row, size):
    f = row.split()
    assert row == " %-7d    %-10d       %-7.2f            %-7.2f\t\t     %-7.6f" % (
        size, int(f[1]), float(f[2]), float(f[3]), float(f[4])), row
    return int(f[1]), float(f[3])


@pytest.mark.parametrize("tool", ["ib_write_bw", "ib_send_bw", "ib_atomic_bw"])
def test_run_infinitely_rows_until_sigint(tool):
    """-D 1 --run_infinitely: a row per second on the client until SIGINT,
    then the run ends cleanly on both sides (exit 0, data checked) with a
    last row for the whole run."""
    p = port()
    size = 8 if tool == "ib_atomic_bw" else 4096
    base = [BIN, tool, "-p", str(p), "--run_infinitely", "-D", "1"] + (
        [] if tool == "ib_atomic_bw" else ["-s", str(size)])
    server = subprocess.Popen(base, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    client = None
    try:
        time.sleep(0.3)
        client = subprocess.Popen(base + ["127.0.0.1"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        rows, lines = 0, []
        end = time.monotonic() + 30
        while rows < 3 and time.monotonic() < end:  # bounded: 3 rows, 30 s
            line = client.stdout.readline()
            if not line:
                break
            lines.append(line)
            rows += line.startswith(f" {size} ")
        assert rows == 3, "".join(lines)
        client.send_signal(signal.SIGINT)
        out, err = client.communicate(timeout=30)
        sout, serr = server.communicate(timeout=30)
    finally:
        for proc in (client, server):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    out = "".join(lines) + out
    check_ok((client.returncode, out, err), "client")
    check_ok((server.returncode, sout, serr), "server")
    got = table(out)
    assert len(got) >= 4, out
    interval = [bw_row_ok(r, size) for r in got[:-1]]
    total_iters, _ = bw_row_ok(got[-1], size)
    assert all(n > 0 and bw > 0 for n, bw in interval)
    # the last row covers the whole run: at least the intervals before it
    assert total_iters >= sum(n for n, _ in interval[:3])


@pytest.mark.parametrize("args,needle", [
    (["ib_write_lat", "--run_infinitely"], "--run_infinitely: for one-way bandwidth tests"),
    (["ib_write_bw", "--run_infinitely", "-b"], "--run_infinitely: for one-way"),
    (["ib_write_bw", "--run_infinitely", "-D", "4", "-f", "1"], "-f (--margin) with --run_infinitely"),
])
def test_bad_mode_flags_are_named(args, needle):
    r = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2
    assert needle in r.stderr, r.stderr


def run_pair(tool, args, client_args=None, timeout=180):
    server = [BIN, tool, "-p", port(), *args]
    return run_server_client(server, server + list(client_args or []) + ["127.0.0.1"],
                             timeout=timeout)


@pytest.mark.parametrize("tool,args", [
    ("ib_send_bw", ["-q", 4, "-n", 1000, "-s", 8192]),
    ("ib_send_bw", ["-q", 3, "-n", 300, "-s", 65536, "-r", 64, "--loss", 0.05, "-u", 8]),
    ("ib_send_bw", ["-c", "UD", "-q", 2, "-n", 500, "-s", 1024]),
    ("ib_send_lat", ["-n", 500]),
])
def test_use_srq(tool, args):
    """--use_srq: the receiving side's QPs take their receives from one SRQ
    (-r of them for all); every QP still gets each of its messages whole
    (the server checks the count per QP and the bytes)."""
    server, client = run_pair(tool, ["--use_srq", *args])
    check_ok(client, "client")
    check_ok(server, "server")
    for side in (server, client):
        assert " Connection type : %s\t\tUsing SRQ      : ON\n" % (
            "UD" if "UD" in args else "RC") in side[1]
    if tool == "ib_send_bw":
        n = args[args.index("-n") + 1]
        f = table(server[1])[0].split()
        assert int(f[1]) == n and float(f[3]) > 0
    if "--loss" in args:
        assert counters(server[1])["loss_injected"] + counters(client[1])["loss_injected"] > 0


def test_use_srq_refused_off_send():
    r = subprocess.run([BIN, "ib_write_bw", "--use_srq"], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 2 and "--use_srq is for send tests" in r.stderr, r.stderr


@pytest.mark.parametrize("tool,args", [("ib_write_bw", ["-n", 1000, "-s", 16384, "-q", 2]),
                                       ("ib_send_bw", ["-n", 500, "-s", 4096, "--use_srq"]),
                                       ("ib_atomic_bw", ["-n", 1000]),
                                       ("ib_read_lat", ["-n", 300])])
def test_server_of_several_clients(tool, args, tmp_path):
    """--clients 3: one server process serves three client processes at the
    same time, each with its own QPs; it prints each one's report, in the
    order they connected, and (BW) what they add up to; --out_json_file holds
    each client's JSON report and the sum."""
    p = port()
    n = 3
    jf = tmp_path / "server.json"
    server = subprocess.Popen([BIN, tool, "-p", str(p), "--clients", str(n), *map(str, args),
                               f"--out_json_file={jf}"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    clients = []
    try:
        for _ in range(n):
            clients.append(subprocess.Popen([BIN, tool, "-p", str(p), *map(str, args),
                                             "127.0.0.1"], stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, text=True))
        results = [c.communicate(timeout=180) for c in clients]
        sout, serr = server.communicate(timeout=60)
    finally:
        kill_leftovers(clients + [server])
    for c, (out, err) in zip(clients, results):
        check_ok((c.returncode, out, err), "client")
    assert server.returncode == 0, serr
    parts = sout.split(" offpath: client ")[1:]
    assert [x.split("\n", 1)[0] for x in parts] == [f"{i} of {n}" for i in range(1, n + 1)]
    for part in parts:
        assert " offpath: data check ok" in part, part
    j = json.loads(jf.read_text())
    assert len(j["clients"]) == n
    for part, cj in zip(parts, j["clients"]):
        assert cj["offpath"]["data_check"].startswith("ok"), cj
        if tool.endswith("_bw"):
            row = table(part)[0].split()
            assert cj["results"]["MsgSize"] == int(row[0])
            assert cj["results"]["BW_average"] == pytest.approx(float(row[3]), abs=0.01)
        else:
            assert cj["results"]["n_iterations"] == 300 and cj["results"]["t_typical"] > 0
    if tool.endswith("_bw"):
        assert j["together"]["clients"] == n
        assert j["together"]["BW_average"] == pytest.approx(
            sum(c["results"]["BW_average"] for c in j["clients"]), abs=0.05)
    else:
        assert "together" not in j
    if tool.endswith("_bw"):
        rows = [table(part)[0].split() for part in parts]
        total = sum(float(r[3]) for r in rows)
        line = next(l for l in sout.splitlines() if "clients together" in l)
        assert line.startswith(f" offpath: {n} clients together: BW average ")
        assert float(line.split("BW average ")[1].split()[0]) == pytest.approx(total, abs=0.02)
        # each client's own row is among the server's (the server shows the
        # client's figures for write and atomic, its receive side for send)
        if tool != "ib_send_bw":
            mine = sorted(table(out)[0] for out, _ in results)
            assert sorted(table(part)[0] for part in parts) == mine


@pytest.mark.parametrize("args,needle", [
    (["ib_write_bw", "--clients", "2", "127.0.0.1"], "--clients is the server's"),
    (["ib_write_bw", "--clients", "2", "--pcap", "x.pcap"], "--clients with --pcap, --xdp or a GPU"),
    (["ib_write_bw", "--clients", "65"], "--clients"),
])
def test_bad_clients_flags(args, needle):
    r = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and needle in r.stderr, r.stderr
