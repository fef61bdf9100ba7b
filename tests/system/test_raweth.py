"""offpath raw_ethernet_bw / raw_ethernet_lat: UDP/IPv4 frames through
AF_XDP between two network namespaces joined by a veth pair (made and
deleted here). Needs root (AF_XDP, namespaces); the flag checks do not."""
import os
import re
import shutil
import subprocess

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

    def __init__(self, tag):
        self.a, self.b = f"orwa{tag}", f"orwb{tag}"
        self.va, self.vb = f"rwa{tag}", f"rwb{tag}"
        net = tag % 200 + 20
        self.ipa, self.ipb = f"10.78.{net}.1", f"10.78.{net}.2"

    def up(self):
        steps = [["netns", "add", self.a], ["netns", "add", self.b],
                 ["link", "add", self.va, "netns", self.a, "type", "veth", "peer", "name",
                  self.vb, "netns", self.b]]
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


@pytest.fixture
def pair():
    p = Pair(os.getpid() % 10000)
    try:
        p.up()
    except (subprocess.CalledProcessError, OSError) as e:
        p.down()
        pytest.skip(f"cannot make the veth pair: {e}")
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
def test_wrong_source_mac_is_named(pair):
    r = subprocess.run([IP, "netns", "exec", pair.a, BIN, "raw_ethernet_bw", "--server", "-d",
                        pair.va, "-j", pair.ipa, "-B", "02:00:00:00:00:01"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert f"-B 02:00:00:00:00:01 is not the MAC of {pair.va}" in r.stderr, r.stderr


@pytest.mark.parametrize("args,needle", [
    (["raw_ethernet_bw", "-d", "lo", "-j", "127.0.0.1"], "--server or --client is needed"),
    (["raw_ethernet_bw", "--client", "-d", "lo", "-j", "127.0.0.1"], "the client needs -J"),
    (["raw_ethernet_bw", "--server", "-d", "lo"], "-d (the interface) and -j"),
    (["raw_ethernet_lat", "--server", "-d", "lo", "-j", "127.0.0.1", "-D", "2"],
     "-D (--duration) is for raw_ethernet_bw"),
    (["raw_ethernet_bw", "--server", "-E", "zz"], "invalid MAC 'zz' for -E"),
    (["raw_ethernet_bw", "--server", "-s", "63"], "-s (--size)"),
    (["raw_ethernet_bw", "--server", "-J", "1.2.3"], "invalid IPv4 address '1.2.3' for -J"),
])
def test_bad_flags_are_named(args, needle):
    r = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and needle in r.stderr, r.stderr
