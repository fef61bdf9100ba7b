"""The perftest-compatible tools (offpath ib_*): server and client as real
processes on loopback, their text and JSON reports parsed and checked."""
import json
import os
import re
import subprocess
import time

import pytest

from conftest import BIN, check_ok, counters, run_server_client

_port = [21000]

BW_TOOLS = ["ib_write_bw", "ib_read_bw", "ib_send_bw"]
LAT_TOOLS = ["ib_write_lat", "ib_read_lat", "ib_send_lat"]
LINE = "-" * 87
BW_HEADER = (" #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]"
             "   MsgRate[Mpps]")
LAT_HEADER = (" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    "
              "t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]")
ALL_SIZES = [2 ** k for k in range(1, 24)]


def next_port():
    _port[0] += 1
    return _port[0]


def run_pair(tool, args, client_args=None, timeout=180, cwd=None):
    """Server then client with the same flags (client_args adds to the
    client's); both must end. Returns (server, client) as (rc, out, err)."""
    port = next_port()
    server = [BIN, tool, "-p", port, *args]
    return run_server_client(server, server + list(client_args or []) + ["127.0.0.1"],
                             timeout=timeout, cwd=cwd)


def rows(out):
    """The result rows: the lines after the header up to the next separator."""
    lines = out.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith(" #bytes"))
    result = []
    for l in lines[start + 1:]:
        if l == LINE:
            break
        result.append(l.split())
    return lines[start], result


@pytest.mark.parametrize("tool", BW_TOOLS + LAT_TOOLS)
def test_all_sizes_text_and_json(tool, tmp_path):
    """-a: one row per size 2..2^23 on both sides, and every size in the
    JSON report (perftest keeps only the last)."""
    iters = 5
    sjson, cjson = tmp_path / "perftest_out.json", tmp_path / "client.json"
    server, client = run_pair(tool, ["-a", "-n", iters, "--out_json"],
                              ["--out_json_file=" + str(cjson)], cwd=tmp_path)
    check_ok(client, "client")
    check_ok(server, "server")
    header, table = rows(client[1])
    assert header == (LAT_HEADER if tool in LAT_TOOLS else BW_HEADER)
    assert [int(r[0]) for r in table] == ALL_SIZES
    assert all(int(r[1]) == iters for r in table)
    assert all(len(r) == (9 if tool in LAT_TOOLS else 5) for r in table)
    report = json.loads(cjson.read_text())
    assert [r["MsgSize"] for r in report["results"]] == ALL_SIZES
    assert all(r["n_iterations"] == iters for r in report["results"])
    assert report["offpath"]["data_check"] == "ok"
    if tool in BW_TOOLS:
        for row, res in zip(table, report["results"]):
            assert float(row[3]) == pytest.approx(res["BW_average"], abs=0.01)
            assert res["MsgRate"] > 0
    else:
        for row, res in zip(table, report["results"]):
            assert float(row[4]) == pytest.approx(res["t_typical"], abs=0.01)
            assert res["t_min"] <= res["t_typical"] <= res["t_max"]
            assert res["t_typical"] <= res["percentile_99"] <= res["percentile_99.9"]
    # the server wrote perftest's default file, with the client's figures
    served = json.loads(sjson.read_text())
    assert [r["MsgSize"] for r in served["results"]] == ALL_SIZES


@pytest.mark.parametrize("tool", BW_TOOLS + LAT_TOOLS)
def test_duration_mode(tool):
    """-D: counts what completed inside the window; latency tests keep their
    percentiles (perftest prints only an average there)."""
    server, client = run_pair(tool, ["-D", 2])
    check_ok(client, "client")
    check_ok(server, "server")
    header, table = rows(client[1])
    assert len(table) == 1
    size = 65536 if tool in BW_TOOLS else 2
    assert int(table[0][0]) == size and int(table[0][1]) > 0
    if tool in BW_TOOLS:
        assert header == BW_HEADER
        assert table[0][2] == "0.00"  # no peak with -D, as perftest
        assert float(table[0][3]) > 0
    else:
        assert header == LAT_HEADER
        vals = [float(v) for v in table[0][2:]]
        assert vals[0] <= vals[2] <= vals[1] and vals[5] <= vals[6]
        raw = client[1].splitlines()[client[1].splitlines().index(LAT_HEADER) + 1]
        fmt = (" %-7d %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     "
               "\t%-7.2f\t\t%-7.2f \t\t%-7.2f")
        assert raw == fmt % (2, int(table[0][1]), *vals), raw


@pytest.mark.parametrize("tool", BW_TOOLS)
def test_loss_bw_completes_with_correct_data(tool):
    """5% of the packets each side sends are dropped: RC recovers (NAKs,
    go-back-N, timeouts) and the bytes that landed are the sender's."""
    server, client = run_pair(tool, ["-n", 200, "-s", 65536, "--loss", 0.05, "-u", 10])
    check_ok(client, "client")
    check_ok(server, "server")
    _, table = rows(client[1])
    assert int(table[0][0]) == 65536 and int(table[0][1]) == 200
    c, s = counters(client[1]), counters(server[1])
    assert c["loss_injected"] + s["loss_injected"] > 0
    assert c["retransmissions"] + s["retransmissions"] > 0


@pytest.mark.parametrize("tool", BW_TOOLS)
def test_bw_sides_sharing_one_core(tool):
    """Both sides on one core, as a loaded machine's scheduler places them:
    each side hands the core to the other by yielding when it has nothing
    to do, and every byte that landed is still the sender's; the side that
    only waits for the peer's DONE (looked for every 64 turns, not at each
    empty one) sees it and ends with the client."""
    port = next_port()
    one_core = ["taskset", "-c", str(min(os.sched_getaffinity(0)))]
    server = one_core + [BIN, tool, "-p", port, "-n", 300, "-s", 1 << 20]
    srv, cli = run_server_client(server, server + ["127.0.0.1"], timeout=120)
    check_ok(cli, "client")
    check_ok(srv, "server")
    _, table = rows(cli[1])
    assert [int(table[0][0]), int(table[0][1])] == [1 << 20, 300]
    assert float(table[0][3]) > 0


def test_bw_beside_a_busy_loop_on_its_core():
    """Both sides and a busy loop of the same session on one core: the
    sides' yields hand the core to the loop for a whole slice, so they stop
    yielding for a while (spin, then sleep); every byte still lands."""
    core = str(min(os.sched_getaffinity(0)))
    hog = subprocess.Popen(["taskset", "-c", core, "timeout", "60", "sh", "-c",
                            "while :; do :; done"])
    try:
        port = next_port()
        cmd = ["taskset", "-c", core, BIN, "ib_write_bw", "-p", port, "-n", 200, "-s", 1 << 20]
        srv, cli = run_server_client(cmd, cmd + ["127.0.0.1"], timeout=120)
    finally:
        hog.terminate()  # timeout passes it on to the loop (a kill would leave the loop)
        hog.wait(timeout=10)
    check_ok(cli, "client")
    check_ok(srv, "server")
    _, table = rows(cli[1])
    assert [int(table[0][0]), int(table[0][1])] == [1 << 20, 200]


@pytest.mark.parametrize("tool", LAT_TOOLS)
def test_loss_latency_completes(tool):
    server, client = run_pair(tool, ["-n", 200, "-s", 1024, "--loss", 0.05, "-u", 8])
    check_ok(client, "client")
    check_ok(server, "server")
    c, s = counters(client[1]), counters(server[1])
    assert c["loss_injected"] + s["loss_injected"] > 0
    assert (c["timeouts"] + s["timeouts"] + c["probes"] + s["probes"] + c["nak_seq_recv"] +
            s["nak_seq_recv"]) > 0


def c_alt_hex(value, width):
    """C's printf("%#0<width>x"): 0x only for non-zero values, zero-padded to width in all."""
    if value == 0:
        return "0" * width
    return "0x" + format(value, "0%dx" % max(width - 2, 1))


def assert_address_line(line):
    """perftest prints the address line with %#04x/%#06x/%#08x/%#016Lx, so a 24-bit PSN
    below 0x100000 takes fewer digits; the line must equal that format of its own fields."""
    fields = re.match(r"^ (local|remote) address: LID (\S+) QPN (\S+) PSN (\S+)"
                      r" RKey (\S+) VAddr (\S+)$", line)
    assert fields, line
    side, lid, qpn, psn, rkey, vaddr = fields.groups()
    nums = [int(v, 16) for v in (lid, qpn, psn, rkey, vaddr)]
    assert nums[0] == 0 and 0 < nums[1] < 1 << 24 and nums[2] < 1 << 24, line
    expect = " %s address: LID %s QPN %s PSN %s RKey %s VAddr %s" % (
        side, c_alt_hex(nums[0], 4), c_alt_hex(nums[1], 6), c_alt_hex(nums[2], 6),
        c_alt_hex(nums[3], 8), c_alt_hex(nums[4], 16))
    assert line == expect, (line, expect)


def test_write_payloads_placed_in_the_region():
    """The server's reads put a WRITE's payloads straight into the region
    (op_io_recv_placed): every packet but each message's first (whose RETH
    says where it goes) is placed, none is moved, and the data checks out."""
    n = 40
    server, client = run_pair("ib_write_bw", ["-n", n, "-s", 1 << 20])
    check_ok(server, "server")
    check_ok(client, "client")
    s, c = counters(server[1]), counters(client[1])
    assert s["pkts_in"] >= n * 256, s
    if c["retransmissions"] == 0:
        assert (s["placed"], s["placed_moved"]) == (s["pkts_in"] - n, 0), repr(s)
    else:  # a resent packet may come as a duplicate, out of sequence, or unforeseen
        assert 0 < s["placed"] < s["pkts_in"], repr(s)


def test_banner_and_addresses_byte_for_byte():
    server, client = run_pair("ib_write_bw", ["-n", 20, "-s", 4096, "-m", 1024])
    check_ok(client, "client")
    out = client[1].splitlines()
    assert out[:13] == [
        LINE,
        "                    RDMA_Write BW Test",
        " Dual-port       : OFF\t\tDevice         : lo",
        " Number of qps   : 1\t\tTransport type : IB",
        " Connection type : RC\t\tUsing SRQ      : OFF",
        " TX depth        : 20",
        " CQ Moderation   : 20",
        " Mtu             : 1024[B]",
        " Link type       : Ethernet",
        " GID index       : 3",
        " Max inline data : 0[B]",
        " rdma_cm QPs\t : OFF",
        " Data ex. method : Ethernet",
    ]
    assert out[13] == LINE
    for line in (out[14], out[16]):
        assert_address_line(line)
    # both ends bind UDP 4791 (RoCEv2's port), so they sit on two loopback addresses
    gid = re.compile(r"^ GID: 00:00:00:00:00:00:00:00:00:00:255:255:127:00:00:\d\d$")
    assert gid.match(out[15]) and gid.match(out[17]) and out[15] != out[17], out[15:18]
    # the server's view is the mirror: its remote QPN is the client's local
    s_out = server[1].splitlines()
    s_local = next(l for l in s_out if l.startswith(" local address"))
    assert s_local.replace(" local ", " remote ") == out[16]
    # perftest's row format: " %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t     %-7.6lf"
    row = out[out.index(BW_HEADER) + 1]
    size, iters, peak, avg, rate = row.split()
    assert row == " %-7d    %-10d       %-7.2f            %-7.2f\t\t     %-7.6f" % (
        4096, 20, float(peak), float(avg), float(rate)), row
    # the server shows the client's figures, as perftest's write/read servers
    assert server[1].splitlines()[server[1].splitlines().index(BW_HEADER) + 1] == row


def test_send_server_measures_its_receives():
    server, client = run_pair("ib_send_bw", ["-n", 300, "-s", 16384])
    check_ok(server, "server")
    s_banner = server[1]
    assert " RX depth        : 300" in s_banner and " TX depth" not in s_banner
    _, table = rows(server[1])
    assert table[0][:3] == ["16384", "300", "0.00"]  # the receiver has no peak


def test_multi_qp_bidirectional():
    server, client = run_pair("ib_write_bw", ["-q", 4, "-b", "-n", 300, "-s", 32768])
    check_ok(client, "client")
    check_ok(server, "server")
    assert "RDMA_Write Bidirectional BW Test" in client[1]
    assert client[1].count(" local address:") == 4
    _, table = rows(client[1])
    assert table[0][:2] == ["32768", "300"]
    c = counters(client[1])
    # 4 QPs x 300 messages x 8 packets each way, plus their ACKs
    assert c["pkts_out"] >= 4 * 300 * 8


# Longer than the probe floor's cap (32 ms), shorter than the 67-ms -u timer.
STOP_S = 0.05


def test_late_receiver_probes_undone():
    """The server stopped (SIGSTOP, by PID) for STOP_S mid-run, as a process
    waiting for a core: the client's probes each resend the oldest packet
    alone, the ACK that comes after SIGCONT covers what was not resent, so
    the probes are undone; nothing was lost and no window went back (every
    resent packet is one duplicate at the server)."""
    port = next_port()
    base = [str(a) for a in [BIN, "ib_write_bw", "-s", 1 << 20, "-n", 8000, "-p", port]]
    server = subprocess.Popen(base, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        client = subprocess.Popen(base + ["127.0.0.1"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        head = ""
        while not head.endswith("MsgRate[Mpps]\n"):  # the table's header: the run starts
            line = client.stdout.readline()
            assert line, "the client ended before its table"
            head += line
        time.sleep(0.1)  # under way: the head is flushed as the run starts; 8000 MiB take 1.3 s or more
        os.kill(server.pid, 19)  # SIGSTOP
        time.sleep(STOP_S)
        os.kill(server.pid, 18)  # SIGCONT
        client.wait(timeout=120)  # its report is small: the pipes never fill
        cout, cerr = head + client.stdout.read(), client.stderr.read()
        sout, serr = server.communicate(timeout=30)
    finally:
        for p in (server, client):
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    check_ok((client.returncode, cout, cerr), "client")
    check_ok((server.returncode, sout, serr), "server")
    c, s = counters(cout), counters(sout)
    assert c["probes"] >= 1 and c["probes_undone"] >= 1, repr(c)  # repr: pytest cuts a dict
    # a probe resends the oldest packet alone; only a timeout (the machine
    # may stall us past the 67-ms timer too) goes back over the window
    assert c["retransmissions"] <= c["probes"] + 128 * c["timeouts"], c
    assert s["duplicates"] == c["retransmissions"], (s, c)


@pytest.mark.parametrize("tool,args", [("ib_send_bw", ["-c", "UD", "-s", 1024]),
                                       ("ib_send_lat", ["-c", "UD"]),
                                       ("ib_write_bw", ["-c", "UC"]),
                                       ("ib_write_lat", ["-c", "UC"])])
def test_unreliable_transports(tool, args):
    server, client = run_pair(tool, ["-n", 500, *args])
    check_ok(client, "client")
    check_ok(server, "server")
    assert f" Connection type : {args[1]}\t\t" in client[1]


@pytest.mark.parametrize("tool,args", [("ib_write_lat", ["-s", 32, "-I", 64]),
                                       ("ib_send_lat", ["-s", 64, "-I", 64]),
                                       ("ib_send_bw", ["-s", 100, "-I", 128, "--loss", 0.05,
                                                       "-u", 8]),
                                       ("ib_write_bw", ["-a", "-I", 256])])
def test_inline_sizes(tool, args):
    """-I as perftest's: messages up to that size are posted INLINE (copied
    at post, resent from the copy under loss); the banner says so and the
    bytes that land are the sender's."""
    server, client = run_pair(tool, ["-n", 200, *args])
    check_ok(client, "client")
    check_ok(server, "server")
    size = args[args.index("-I") + 1]
    assert f" Max inline data : {size}[B]\n" in client[1]


@pytest.mark.parametrize("tool", ["ib_send_lat", "ib_read_lat", "ib_send_bw", "ib_read_bw"])
def test_events_mode(tool):
    """-e: both sides sleep in poll(2) when idle; the results and the data
    check stay right."""
    server, client = run_pair(tool, ["-n", 500, "-e"])
    check_ok(client, "client")
    check_ok(server, "server")


def test_events_mode_sleeps(tmp_path):
    """A latency ping-pong with -e leaves the CPU much of the time (spinning
    takes all of it): the client's CPU time stays well under its wall time."""
    port = next_port()
    args = [BIN, "ib_send_lat", "-p", str(port), "-n", "20000", "-e"]
    server = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    report = tmp_path / "client.out"
    try:
        with open(report, "w") as f:
            start = time.monotonic()
            client = subprocess.Popen(args + ["127.0.0.1"], stdout=f, stderr=subprocess.DEVNULL)
            _, status, usage = os.wait4(client.pid, 0)  # this child's own CPU time
            wall = time.monotonic() - start
        client.returncode = os.waitstatus_to_exitcode(status)
        server.wait(timeout=30)
    finally:
        for p in (server, client):
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    out = report.read_text()
    assert client.returncode == 0 and " offpath: data check ok" in out, out
    cpu = usage.ru_utime + usage.ru_stime
    assert cpu < 0.7 * wall, (cpu, wall)  # 0.45 here; spinning: 0.95-0.99


@pytest.mark.parametrize("tool,outs", [("ib_read_bw", 1), ("ib_read_lat", 4), ("ib_read_bw", None)])
def test_outstanding_reads(tool, outs):
    """-o: READs in flight per QP (verbs' max_rd_atomic), 16 by default as
    perftest shows for a ConnectX NIC; the banner says what the QPs use."""
    server, client = run_pair(tool, ["-n", 300, "-s", 4096] + (["-o", outs] if outs else []))
    check_ok(client, "client")
    check_ok(server, "server")
    assert f" Outstand reads  : {outs or 16}\n" in client[1]


def test_inline_read_shows_none():
    server, client = run_pair("ib_read_lat", ["-n", 100, "-I", 64])
    check_ok(client, "client")
    assert " Max inline data" not in client[1] and " Outstand reads" in client[1]


@pytest.mark.parametrize("tool,flag,expect", [("ib_write_bw", "--output=bandwidth", float),
                                              ("ib_send_bw", "--output=message_rate", float),
                                              ("ib_read_lat", "--output=latency", float)])
def test_output_prints_one_number(tool, flag, expect):
    server, client = run_pair(tool, ["-n", 100, flag])
    assert client[0] == 0, client
    assert re.fullmatch(r"\d+\.\d{6}\n", client[1]), client[1]
    assert expect(client[1]) > 0


def test_report_gbits():
    server, client = run_pair("ib_write_bw", ["-n", 100, "--report_gbits"])
    check_ok(client, "client")
    assert " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]" \
        in client[1]


def test_mismatched_flags_fail_on_both_sides():
    server, client = run_pair("ib_write_bw", ["-n", 100], ["-s", 8])
    assert server[0] == 1 and client[0] == 1
    for side in (server, client):
        assert "disagree on -s (--size)" in side[2], side[2]


@pytest.mark.parametrize("args,needle", [
    (["ib_write_bw", "-s", "3X"], "-s (--size)"),
    (["ib_write_bw", "-x", "1", "-x", "2"], "Duplicated argument: -x"),
    (["ib_write_lat", "-q", "2"], "-q (--qp) is for bandwidth tests only"),
    (["ib_read_bw", "-c", "UD"], "-c UD"),
    (["ib_write_bw", "-a", "-D", "2"], "cannot be used together"),
    (["ib_send_bw", "-m", "1000"], "-m (--mtu)"),
    (["ib_send_bw", "-n", "4"], "-n (--iters)"),
    (["ib_write_bw", "--output=speed"], "--output"),
    (["ib_write_bw", "1.2.3.4", "5.6.7.8"], "unexpected argument"),
    (["ib_send_lat", "-I", "913"], "-I (--inline_size)"),
    (["ib_write_lat", "-e"], "-e (--events): not for RDMA WRITE"),
    (["ib_write_bw", "-o", "4"], "-o (--outs) is for RDMA READ and atomic tests"),
    (["ib_read_bw", "-o", "0"], "-o (--outs)"),
])
def test_bad_flags_are_named(args, needle):
    r = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2
    assert needle in r.stderr, r.stderr


def test_no_server_is_a_clear_error():
    r = subprocess.run([BIN, "ib_write_bw", "-p", str(next_port()), "127.0.0.1"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert "Couldn't connect to 127.0.0.1" in r.stderr


def test_help_lists_perftest_flags():
    r = subprocess.run([BIN, "ib_write_bw", "--help"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0
    for flag in ["--size", "--iters", "--all", "--duration", "--qp", "--bidirectional",
                 "--out_json", "--report_gbits", "--loss", "--tx-depth", "--mtu",
                 "--inline_size"]:
        assert flag in r.stdout
