"""offpath raw_ethernet_bw / raw_ethernet_lat: UDP/IPv4 frames through
AF_XDP between two network namespaces joined by a veth pair (made and
deleted here). Needs root (AF_XDP, namespaces); the flag checks do not."""
import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from conftest import BIN

IP = shutil.which("ip") or "/usr/sbin/ip"
LINE = "-" * 87
BW_HEADER = (" #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]"
             "   MsgRate[Mpps]")
LAT_HEADER = (" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    "
              "t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="AF_XDP and namespaces need root")


class Pair:
    """Namespaces a and b, veth va (10.78.N.1) in a and vb (.2) in b."""

    def __init__(self, tag, queues=1):
        self.queues = queues
        self.a, self.b = f"orwa{tag}", f"orwb{tag}"
        self.va, self.vb = f"rwa{tag}", f"rwb{tag}"
        net = tag % 200 + 20
        self.ipa, self.ipb = f"10.78.{net}.1", f"10.78.{net}.2"

    def up(self):
        q = ["numtxqueues", str(self.queues), "numrxqueues", str(self.queues)]
        steps = [["netns", "add", self.a], ["netns", "add", self.b],
                 ["link", "add", self.va, *q, "netns", self.a, "type", "veth", "peer", "name",
                  self.vb, *q, "netns", self.b]]
        for ns, dev, addr in ((self.a, self.va, self.ipa), (self.b, self.vb, self.ipb)):
            steps += [["-n", ns, "addr", "add", f"{addr}/24", "dev", dev],
                      ["-n", ns, "link", "set", dev, "up"]]
        for st in steps:
            subprocess.run([IP, *st], check=True, capture_output=True, timeout=30)
        self.maca, self.macb = self.mac(self.a, self.va), self.mac(self.b, self.vb)

    def mac(self, ns, dev):
        out = subprocess.run([IP, "-n", ns, "-br", "link", "show", dev], capture_output=True,
                             text=True, check=True, timeout=30).stdout
        return out.split()[2]

    def down(self):
        for ns in (self.a, self.b):
            subprocess.run([IP, "netns", "del", ns], capture_output=True, timeout=30)

    def run(self, tool, server_args, client_args, timeout=60):
        srv = subprocess.Popen([IP, "netns", "exec", self.b, BIN, tool, "--server", "-d", self.vb,
                                "-j", self.ipb, *map(str, server_args)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # the server's XDP program is attached once it prints its banner
            first = srv.stdout.readline()
            cli = subprocess.run([IP, "netns", "exec", self.a, BIN, tool, "--client", "-d",
                                  self.va, "-j", self.ipa, "-J", self.ipb, "-E", self.macb,
                                  *map(str, client_args)],
                                 capture_output=True, text=True, timeout=timeout)
            srv.wait(timeout=timeout)  # its report is small: the pipe never fills
            out, err = srv.stdout.read(), srv.stderr.read()
        finally:
            if srv.poll() is None:
                srv.kill()
                srv.wait(timeout=10)
        return (srv.returncode, first + out, err), (cli.returncode, cli.stdout, cli.stderr)


def made_pair(queues=1, tag=0):
    p = Pair((os.getpid() + tag) % 10000, queues)
    try:
        p.up()
    except (subprocess.CalledProcessError, OSError) as e:
        p.down()
        pytest.skip(f"cannot make the veth pair: {e}")
    return p


@pytest.fixture
def pair():
    p = made_pair()
    yield p
    p.down()


@pytest.fixture
def pair4():
    """The veth pair with four queues each way: queue i of one end hands
    its frames to queue i of the other."""
    p = made_pair(4, tag=5000)
    yield p
    p.down()


def row_after(out, header):
    lines = out.splitlines()
    return lines[lines.index(header) + 1]


@needs_root
def test_raw_ethernet_bw_over_af_xdp(pair):
    n = 20000
    server, client = pair.run("raw_ethernet_bw", ["-n", n, "-s", 1024, "-B", pair.macb],
                              ["-n", n, "-s", 1024, "-B", pair.maca])
    assert client[0] == 0, client
    assert server[0] == 0, server
    for out in (client[1], server[1]):
        assert " Connection type : RawEth\t\tUsing SRQ      : OFF" in out
        assert "**raw ethernet header****" in out
    assert f"| {pair.macb.upper():<17}| {pair.maca.upper():<17}|IP" in client[1]
    size, iters, peak, avg, rate = row_after(client[1], BW_HEADER).split()
    assert (size, iters) == ("1024", str(n)) and float(avg) > 0
    got = int(row_after(server[1], BW_HEADER).split()[1])
    good = int(re.search(r"frames_good (\d+), frames_bad 0,", server[1]).group(1))
    assert 0 < got == good <= n  # what came is counted and every payload checked
    assert " offpath: data check ok (%d frames, each payload as sent" % got in server[1]


@needs_root
def test_raw_ethernet_lat_over_af_xdp(pair):
    n = 2000
    server, client = pair.run("raw_ethernet_lat", ["-n", n, "-s", 128], ["-n", n, "-s", 128])
    assert client[0] == 0, client
    assert server[0] == 0, server
    row = row_after(client[1], LAT_HEADER)
    vals = [float(v) for v in row.split()[2:]]
    assert row.split()[:2] == ["128", str(n)]
    assert 0 < vals[0] <= vals[2] <= vals[1] and vals[5] <= vals[6]
    assert f" offpath: data check ok ({n} frames" in client[1]
    assert re.search(r"frames_good (\d+), frames_bad 0", server[1])


@needs_root
def test_out_json_both_tools(pair, tmp_path):
    """--out_json_file: perftest's test_info (this tool's banner), the row's
    figures as printed, and the counters with the receiver's data check."""
    n = 3000
    sj, cj = tmp_path / "srv.json", tmp_path / "cli.json"
    server, client = pair.run("raw_ethernet_bw", ["-n", n, "-s", 512, f"--out_json_file={sj}"],
                              ["-n", n, "-s", 512, "--out_json", f"--out_json_file={cj}"])
    assert client[0] == 0 and server[0] == 0, (client, server)
    c, s = json.loads(cj.read_text()), json.loads(sj.read_text())
    for j in (c, s):
        assert j["test_info"]["test"] == "Send BW Test"
        assert j["test_info"]["Connection type"] == "RawEth"
        assert j["test_info"]["Mtu"] == 512 and j["test_info"]["BW unit"] == "MiB/sec"
    size, iters, peak, avg, rate = row_after(client[1], BW_HEADER).split()
    assert c["results"]["MsgSize"] == 512 and c["results"]["n_iterations"] == n
    assert abs(c["results"]["BW_average"] - float(avg)) < 0.01
    assert "data_check" not in c["offpath"]  # the server checks
    got = int(row_after(server[1], BW_HEADER).split()[1])
    assert s["results"]["n_iterations"] == got == s["offpath"]["frames_good"] > 0
    assert s["offpath"]["frames_bad"] == 0 and s["offpath"]["data_check"] == "ok"

    lj = tmp_path / "lat.json"
    server, client = pair.run("raw_ethernet_lat", ["-n", 500, "-s", 128],
                              ["-n", 500, "-s", 128, f"--out_json_file={lj}"])
    assert client[0] == 0 and server[0] == 0, (client, server)
    j = json.loads(lj.read_text())
    vals = row_after(client[1], LAT_HEADER).split()
    assert j["test_info"]["test"] == "Send Latency Test"
    assert (j["results"]["MsgSize"], j["results"]["n_iterations"]) == (128, 500)
    assert abs(j["results"]["t_typical"] - float(vals[4])) < 0.01
    assert j["offpath"]["frames_good"] == 500 and j["offpath"]["data_check"] == "ok"


def read_rows(proc, want, limit_s):
    """Lines of proc's stdout until `want` rows after the BW header (bounded)."""
    lines, rows, end = [], 0, time.monotonic() + limit_s
    while rows < want and time.monotonic() < end:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if BW_HEADER in lines[:-1] and line.split() and line.split()[0] == "256":
            rows += 1
    return rows, lines


@needs_root
def test_run_infinitely_rows_until_sigint(pair):
    """-D 1 --run_infinitely on both sides: a row a second until SIGINT, then
    a clean end (exit 0) with a whole-run row; the server checked every frame."""
    base = ["raw_ethernet_bw", "-D", "1", "--run_infinitely", "-s", "256"]
    srv = subprocess.Popen([IP, "netns", "exec", pair.b, BIN, *base, "--server", "-d", pair.vb,
                            "-j", pair.ipb], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    cli = None
    try:
        srv.stdout.readline()  # the banner: the XDP program is attached
        cli = subprocess.Popen([IP, "netns", "exec", pair.a, BIN, *base, "--client", "-d",
                                pair.va, "-j", pair.ipa, "-J", pair.ipb, "-E", pair.macb],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        crow, clines = read_rows(cli, 3, 30)
        srow, slines = read_rows(srv, 2, 30)
        assert crow == 3 and srow == 2, (clines, slines)
        for p in (cli, srv):  # `ip netns exec` execs: the pid is offpath's
            p.send_signal(signal.SIGINT)
            p.wait(timeout=20)
        cout, sout = cli.stdout.read(), srv.stdout.read()
        assert cli.returncode == 0 and srv.returncode == 0, (cout, sout, srv.stderr.read())
        for line in clines[-3:]:
            assert float(line.split()[3]) > 0  # every interval's rate
        final = [l for l in sout.splitlines() if l.split() and l.split()[0] == "256"][-1]
        good = int(re.search(r"frames_good (\d+), frames_bad 0,", sout).group(1))
        assert int(final.split()[1]) == good > 0  # the whole run, every frame checked
        assert " offpath: data check ok (%d frames" % good in sout
    finally:
        for p in (cli, srv):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(timeout=10)


@needs_root
def test_wrong_source_mac_is_named(pair):
    r = subprocess.run([IP, "netns", "exec", pair.a, BIN, "raw_ethernet_bw", "--server", "-d",
                        pair.va, "-j", pair.ipa, "-B", "02:00:00:00:00:01"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert f"-B 02:00:00:00:00:01 is not the MAC of {pair.va}" in r.stderr, r.stderr


@needs_root
def test_queues_each_qp_on_its_own(pair4):
    """-q 4: each QP's 1500 frames leave through its own queue, arrive at
    the server's queue of that index, and are counted and checked apart
    (fewer than a queue's 2048 RX frames: none can be lost on the way)."""
    n = 1500
    server, client = pair4.run("raw_ethernet_bw", ["-q", 4, "-n", n], ["-q", 4, "-n", n])
    assert client[0] == 0, client
    assert server[0] == 0, server
    for out in (client[1], server[1]):
        assert " Number of qps   : 4\t\tTransport type : IB" in out
        assert row_after(out, BW_HEADER).split()[:2] == ["1024", str(n)]
    assert " offpath: frames per queue (tx): 1500 1500 1500 1500\n" in client[1]
    assert " offpath: frames_good 6000, frames_bad 0, duplicates 0," in server[1]
    assert " offpath: frames per QP: 1500 1500 1500 1500\n" in server[1]
    assert " offpath: frames per queue (rx): 1500 1500 1500 1500\n" in server[1]
    assert " offpath: data check ok (6000 frames, each payload as sent)\n" in server[1]


@needs_root
def test_queues_differ_is_named(pair4):
    """The server runs -q 4, the client -q 1: three of the server's QPs get
    nothing, and it says which flag differs."""
    server, client = pair4.run("raw_ethernet_bw", ["-q", 4, "-n", 500], ["-n", 500])
    assert client[0] == 0, client
    assert server[0] == 1, server
    assert " offpath: frames per QP: 500 0 0 0\n" in server[1]
    assert " offpath: a QP of this side got no frame: give both sides the same -q (--qp)" \
        in server[1]
    assert "the client and the server disagree on -q (--qp): give both the same" in server[2]


@needs_root
def test_more_queues_than_the_interface_is_named(pair):
    r = subprocess.run([IP, "netns", "exec", pair.b, BIN, "raw_ethernet_bw", "--server", "-d",
                        pair.vb, "-j", pair.ipb, "-q", "4"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 1
    assert f"-d {pair.vb}: cannot drive 4 queues of it through AF_XDP" in r.stderr, r.stderr
    assert "as many queues as -q" in r.stderr


@pytest.mark.parametrize("args,needle", [
    (["raw_ethernet_lat", "--server", "-d", "lo", "-j", "127.0.0.1", "-q", "2"],
     "-q (--qp) is for raw_ethernet_bw"),
    (["raw_ethernet_bw", "--server", "-q", "0"], "-q (--qp)"),
    (["raw_ethernet_bw", "--server", "-q", "65"], "-q (--qp)"),
    (["raw_ethernet_bw", "-d", "lo", "-j", "127.0.0.1"], "--server or --client is needed"),
    (["raw_ethernet_bw", "--client", "-d", "lo", "-j", "127.0.0.1"], "the client needs -J"),
    (["raw_ethernet_bw", "--server", "-d", "lo"], "-d (the interface) and -j"),
    (["raw_ethernet_lat", "--server", "-d", "lo", "-j", "127.0.0.1", "-D", "2"],
     "-D (--duration) is for raw_ethernet_bw"),
    (["raw_ethernet_lat", "--server", "-d", "lo", "-j", "127.0.0.1", "--run_infinitely"],
     "--run_infinitely is for raw_ethernet_bw"),
    (["raw_ethernet_bw", "--server", "-E", "zz"], "invalid MAC 'zz' for -E"),
    (["raw_ethernet_bw", "--server", "-s", "63"], "-s (--size)"),
    (["raw_ethernet_bw", "--server", "-J", "1.2.3"], "invalid IPv4 address '1.2.3' for -J"),
])
def test_bad_flags_are_named(args, needle):
    r = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and needle in r.stderr, r.stderr
