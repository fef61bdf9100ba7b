"""Shared helpers for offpath system tests: real processes on loopback.

Every test gets its own 127.N.x.y network and UDP port so a leftover process
of one test can never answer another. Processes started here are stopped by
PID when the test ends."""
import json
import os
import re
import signal
import subprocess
import time
import zlib
import struct

import pytest

BIN = os.environ.get("OFFPATH_BIN") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build", "src", "cli", "offpath")

_calls = [0]
# Two test runs on one machine (two checkouts) collide on addresses and ports
# unless one of them moves its ports: OFFPATH_TEST_PORT_BASE=41000 does.
_PORT_BASE = int(os.environ.get("OFFPATH_TEST_PORT_BASE", "40000"))
# 127.N networks for tests: N, N+1 and N+2 each, from 100 up to 252, then
# again from 100 (a suite has more tests than 127/8 has such networks).
_NETS = range(100, 253, 3)


def next_net():
    """A 127.N network (N, N+1, N+2 are used) and a port never handed out
    before in this run: a leftover process of an earlier test on the same
    network listens on another port, so it can never answer."""
    k = _calls[0]
    _calls[0] += 1
    return _NETS[k % len(_NETS)], _PORT_BASE + 100 + 4 * k  # +1, +2: a tool's side ports


def offpath(*args, timeout=120, check=False, env=None):
    return subprocess.run([BIN, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, check=check, env=env)


def inc_test_json(*args, timeout=300):
    net, port = next_net()
    r = offpath("inc_test", "--json", "--quiet", "--net", net, "--port", port, *args,
                timeout=timeout)
    lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
    assert lines, f"no JSON report (rc {r.returncode}): {r.stdout}\n{r.stderr}"
    return r, json.loads(lines[-1])


class Procs:
    def __init__(self):
        self.procs = []

    def start(self, *args, **kw):
        p = subprocess.Popen([BIN, *map(str, args)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, **kw)
        self.procs.append(p)
        return p

    def stop_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)


@pytest.fixture
def procs():
    p = Procs()
    yield p
    p.stop_all()


def wait_for_file(path, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            return True
        time.sleep(0.02)
    return False


def ip_bytes(ip):
    return bytes(int(x) for x in ip.split("."))


def roce_icrc(src, dst, sport, dport, roce):
    """ICRC of a RoCEv2 packet sent from an unconnected UDP socket with DF set
    (IPv4 Identification 0), computed independently of the C code from
    the IBTA rules: 8 x 0xff, IP header with TOS/TTL/checksum all ones, UDP
    checksum all ones, BTH byte 4 all ones."""
    total = 20 + 8 + len(roce) + 4
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0xff, total, 0, 0x4000, 0xff, 17, 0xffff,
                     ip_bytes(src), ip_bytes(dst))
    udp = struct.pack("!HHHH", sport, dport, 8 + len(roce) + 4, 0xffff)
    masked = bytearray(roce)
    masked[4] = 0xff
    return zlib.crc32(b"\xff" * 8 + ip + udp + bytes(masked)) & 0xffffffff


def inc_packet(src, dst, sport, dport, group, token, seq, rank, payload, kind=1, flags=0,
               op=0, dtype=2, window=32):
    """An INC data packet as docs/wire.md describes, sealed with a valid ICRC."""
    count = len(payload) // 4 if kind == 1 else 0
    hdr = struct.pack("!IBBBBHBBIQIHHB3x", 0x11223344, 1, kind, flags, 0, group, op, dtype,
                      rank, token, seq, seq % window, count, seq & 0xff)
    body = hdr + payload
    pad = (-len(body)) & 3
    bth = struct.pack("!BBHI", 0x64, pad << 4, 0xffff, 0x00c0de) + struct.pack("!I", 0)
    deth = struct.pack("!II", 0x494e4321, 0x00c0de)
    roce = bth + deth + body + b"\0" * pad
    return roce + struct.pack("<I", roce_icrc(src, dst, sport, dport, roce))


def check_ok(side, what):
    rc, out, err = side
    assert rc == 0, f"{what} exited {rc}\nstdout:\n{out}\nstderr:\n{err}"
    assert " offpath: data check ok" in out, out


def counters(out):
    line = next(l for l in out.splitlines() if l.startswith(" offpath: pkts_out"))
    return {k: int(v) for k, v in re.findall(r"(\w+) (\d+)", line[len(" offpath:"):])}


def kill_leftovers(procs):
    """Whatever of procs still runs (a test that failed midway) is killed."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def run_server_client(server_cmd, client_cmd, timeout=180, cwd=None):
    """Starts the server command, runs the client command to its end, then
    waits for the server (killed, by PID, if it outlives that); returns
    ((rc, out, err) of the server, (rc, out, err) of the client)."""
    server = subprocess.Popen([str(a) for a in server_cmd], cwd=cwd, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        client = subprocess.run([str(a) for a in client_cmd], capture_output=True, text=True,
                                timeout=timeout, cwd=cwd)
        out, err = server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=10)
    return (server.returncode, out, err), (client.returncode, client.stdout, client.stderr)


def run_with_switch_killed(tmp_path, program, restart_after=None):
    """`offpath mpirun --connect` 4 nodes x 2 ranks to one TOR started here,
    running program (a list); the switch is killed 2.5 s in and, with
    restart_after, started again that many seconds later. Returns
    (returncode, stdout, stderr) of the job."""
    net, port = next_net()
    topo = tmp_path / "topo"
    topo.write_text(f"tor t0 127.{net + 1}.0.1 port {port} hosts 127.{net}.1.1-127.{net}.4.254\n")

    def start_switch():
        return subprocess.Popen([BIN, "switch", "--topology", str(topo), "--name", "t0",
                                 "--log-level", "error"], stdout=subprocess.DEVNULL)

    sw = start_switch()
    try:
        time.sleep(0.3)
        job = subprocess.Popen([BIN, "mpirun", "--connect", str(topo), "--net", str(net),
                                "--port", str(port), "--nodes", "4", "--ppn", "2",
                                "--deadline-ms", "1000", "--verbose", "--", *map(str, program)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(2.5)
        assert job.poll() is None, "the job ended before the switch was killed"
        sw.kill()
        sw.wait()
        if restart_after is not None:
            time.sleep(restart_after)
            sw = start_switch()
        out, err = job.communicate(timeout=300)
    finally:
        sw.kill()
        sw.wait()
    return job.returncode, out, err
