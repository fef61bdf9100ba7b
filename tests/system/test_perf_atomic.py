"""offpath ib_atomic_bw / ib_atomic_lat: perftest's atomic tools as real
processes on loopback. Each atomic's result is checked (the k-th of a QP
must return k, so one executed twice shifts every later one) and so is the
server's counter (exactly the number of atomics), also under injected loss,
where duplicates are answered from the responder's result cache."""
import json
import shutil
import subprocess

import pytest

from conftest import BIN, check_ok, counters, run_server_client

_port = [23400]
LINE = "-" * 87
BW_HEADER = (" #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]"
             "   MsgRate[Mpps]")
LAT_HEADER = (" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    "
              "t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]")
TSHARK = shutil.which("tshark")


def run_pair(tool, args, client_args=None, timeout=180, cwd=None):
    _port[0] += 1
    server = [BIN, tool, "-p", _port[0], *args]
    return run_server_client(server, server + list(client_args or []) + ["127.0.0.1"],
                             timeout=timeout, cwd=cwd)


def row_after(out, header):
    lines = out.splitlines()
    return lines[lines.index(header) + 1]


def check_line(out):
    return next(l for l in out.splitlines() if l.startswith(" offpath: data check"))


@pytest.mark.parametrize("atype", ["FETCH_AND_ADD", "CMP_AND_SWAP"])
def test_atomic_bw_rows_and_checks(atype, tmp_path):
    n = 2000
    cjson = tmp_path / "c.json"
    server, client = run_pair("ib_atomic_bw", ["-A", atype, "-n", n],
                              ["--out_json_file=" + str(cjson)])
    check_ok(client, "client")
    check_ok(server, "server")
    out = client[1].splitlines()
    assert out[1] == f"                    Atomic {atype} BW Test"
    assert " Outstand reads  : 16" in out and " Max inline data" not in client[1]
    row = row_after(client[1], BW_HEADER)
    size, iters, peak, avg, rate = row.split()
    assert row == " %-7d    %-10d       %-7.2f            %-7.2f\t\t     %-7.6f" % (
        8, n, float(peak), float(avg), float(rate)), row
    assert float(rate) > 0 and float(avg) == pytest.approx(float(rate) * 1e6 * 8 / 2 ** 20,
                                                             rel=0.01, abs=0.01)
    assert row_after(server[1], BW_HEADER) == row  # the server shows the client's figures
    assert check_line(client[1]) == \
        f" offpath: data check ok ({n} atomics returned the value before them)"
    assert check_line(server[1]) == \
        f" offpath: data check ok (each counter at {n}, changed once per atomic)"
    assert counters(server[1])["atomics_executed"] == n
    report = json.loads(cjson.read_text())
    assert report["results"]["MsgSize"] == 8 and report["results"]["n_iterations"] == n
    assert report["test_info"]["test"] == f"Atomic {atype} BW Test"
    assert report["offpath"]["data_check"].startswith("ok")


def test_atomic_bw_loss_many_qps_each_executed_once():
    """-q 4, 5% loss each way: go-back-N resends atomics the responder has
    executed; it answers them from its cache, and every counter still ends
    at exactly -n."""
    n = 1500
    server, client = run_pair("ib_atomic_bw", ["-A", "CMP_AND_SWAP", "-q", 4, "-n", n,
                                               "--loss", 0.05, "-u", 8])
    check_ok(client, "client")
    check_ok(server, "server")
    s, c = counters(server[1]), counters(client[1])
    assert s["atomics_executed"] == 4 * n
    assert s["atomic_replays"] > 0 and s["loss_injected"] + c["loss_injected"] > 0
    assert c["retransmissions"] > 0
    assert f"each counter at {n}, changed once per atomic" in check_line(server[1])
    assert f"({4 * n} atomics returned" in check_line(client[1])
    assert client[1].count(" local address:") == 4


def test_atomic_bw_duration_and_bidirectional():
    server, client = run_pair("ib_atomic_bw", ["-D", 2, "-b"])
    check_ok(client, "client")
    check_ok(server, "server")
    assert "Atomic FETCH_AND_ADD Bidirectional BW Test" in client[1]
    size, iters, peak, avg, rate = row_after(client[1], BW_HEADER).split()
    assert size == "8" and int(iters) > 0 and peak == "0.00" and float(avg) > 0
    # both sides sent: each checked its own results
    assert "atomics returned the value before them" in check_line(server[1])


@pytest.mark.parametrize("atype", ["FETCH_AND_ADD", "CMP_AND_SWAP"])
def test_atomic_lat(atype):
    n = 500
    server, client = run_pair("ib_atomic_lat", ["-A", atype, "-n", n])
    check_ok(client, "client")
    check_ok(server, "server")
    assert f"                    Atomic {atype} Latency Test" in client[1].splitlines()
    row = row_after(client[1], LAT_HEADER)
    vals = [float(v) for v in row.split()[2:]]
    assert row.split()[:2] == ["8", str(n)]
    fmt = (" %-7d %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     "
           "\t%-7.2f\t\t%-7.2f \t\t%-7.2f")
    assert row == fmt % (8, n, *vals), row
    assert 0 < vals[0] <= vals[2] <= vals[1] and vals[2] <= vals[5] <= vals[6]
    assert row_after(server[1], LAT_HEADER) == row
    assert f"each counter at {n}" in check_line(server[1])
    assert f"({n} atomics returned" in check_line(client[1])


def test_atomic_lat_under_loss():
    server, client = run_pair("ib_atomic_lat", ["-n", 300, "--loss", 0.05, "-u", 8])
    check_ok(client, "client")
    check_ok(server, "server")
    assert counters(server[1])["atomics_executed"] == 300


def test_mismatched_atomic_type_fails_on_both_sides():
    server, client = run_pair("ib_atomic_bw", ["-n", 100], ["-A", "CMP_AND_SWAP"])
    assert server[0] == 1 and client[0] == 1
    for side in (server, client):
        assert "disagree on -A (--atomic_type)" in side[2], side[2]


@pytest.mark.parametrize("args,needle", [
    (["ib_atomic_bw", "-s", "16"], "message size cannot be changed for atomic tests"),
    (["ib_atomic_lat", "-a"], "message size cannot be changed"),
    (["ib_atomic_bw", "-c", "UC"], "atomics need RC"),
    (["ib_atomic_bw", "-A", "SWAP"], "-A (--atomic_type): expected FETCH_AND_ADD or CMP_AND_SWAP"),
    (["ib_write_bw", "-A", "CMP_AND_SWAP"], "-A (--atomic_type) is for ib_atomic_bw"),
    (["ib_atomic_bw", "-o", "17"], "-o (--outs) 17: at most 16"),
    (["ib_atomic_bw", "-t", "5000"], "-t (--tx-depth) 5000"),
    (["ib_atomic_bw", "-I", "8"], "-I (--inline_size)"),
])
def test_bad_atomic_flags_are_named(args, needle):
    r = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2
    assert needle in r.stderr, r.stderr


def test_help_names_atomic_type():
    r = subprocess.run([BIN, "ib_atomic_bw", "--help"], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 0 and "--atomic_type" in r.stdout and "CMP_AND_SWAP" in r.stdout


@pytest.mark.skipif(TSHARK is None, reason="tshark not installed (scripts/bootstrap installs it)")
def test_atomic_capture_dissects_in_tshark(tmp_path):
    """The client's --pcap: tshark reads CMP_SWAP requests with their
    AtomicETH (compare k, swap k + 1) and ATOMIC_ACKs whose original
    remote data is k, in order."""
    pcap = tmp_path / "a.pcap"
    n = 50
    server, client = run_pair("ib_atomic_bw", ["-A", "CMP_AND_SWAP", "-n", n, "-t", 4],
                              ["--pcap", str(pcap)])
    check_ok(client, "client")
    r = subprocess.run([TSHARK, "-r", str(pcap), "-d", "udp.port==4791,infiniband", "-T",
                        "fields", "-E", "separator=/t", "-e", "infiniband.bth.opcode",
                        "-e", "infiniband.atomiceth.cmpdt", "-e", "infiniband.atomiceth.swapdt",
                        "-e", "infiniband.atomicacketh.origremdt"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    reqs, acks = [], []
    for line in r.stdout.splitlines():
        op, cmp_, swap, orig = (line.split("\t") + ["", "", "", ""])[:4]
        if int(op) == 0x13:
            reqs.append((int(cmp_, 0), int(swap, 0)))
        elif int(op) == 0x12:
            acks.append(int(orig, 0))
    assert reqs == [(k, k + 1) for k in range(n)]
    assert acks == list(range(n))
