"""-R (--rdma_cm): no TCP. A control QP and then the test's QPs connected by
CM REQ / REP / RTU MADs to QP 1 on UDP 4791, as rdma_cm over RoCEv2; the
test's lines (parameters, barriers, results) travel as SENDs on the
control QP, as perftest's -R exchanges its data over rdma_cm. Real
processes; the server on a loopback address of its own (127.0.N.M, given
as -d so its port 4791 is not another test's), a capture of the exchange
read back by tshark as InfiniBand CM."""
import os
import re
import shutil
import socket
import subprocess
import threading
import time

import pytest

from conftest import BIN, check_ok, counters, kill_leftovers, run_server_client
from test_raweth import IP, made_pair, needs_root

_port = [24200]
TSHARK = shutil.which("tshark")


def server_addr():
    _port[0] += 1
    return f"127.0.{100 + os.getpid() % 100}.{_port[0] % 200 + 20}", _port[0]


def run_pair(tool, args, client_args=None, server_args=None, timeout=180):
    addr, p = server_addr()
    base = [BIN, tool, "-p", p, *args]
    return run_server_client(base + ["-d", addr] + list(server_args or []),
                             base + list(client_args or []) + [addr], timeout=timeout)


def addresses(out):
    """(QPN, PSN) of each local and remote address line, in order."""
    lines = re.findall(r"^ (local|remote) address: LID \S+ QPN (\S+) PSN (\S+)", out, re.M)
    loc = [(int(q, 16), int(p, 16)) for side, q, p in lines if side == "local"]
    rem = [(int(q, 16), int(p, 16)) for side, q, p in lines if side == "remote"]
    return loc, rem


@pytest.mark.parametrize("tool,args", [("ib_write_bw", ["-q", 3, "-n", 1000]),
                                       ("ib_send_bw", ["-n", 500]),
                                       ("ib_read_lat", ["-n", 300]),
                                       ("ib_atomic_bw", ["-q", 2, "-n", 500])])
def test_rdma_cm_connects_and_runs(tool, args):
    server, client = run_pair(tool, ["-R", *args])
    check_ok(client, "client")
    check_ok(server, "server")
    for side in (server, client):
        assert " rdma_cm QPs\t : ON\n" in side[1] and " Data ex. method : rdma_cm\n" in side[1]
    c_loc, c_rem = addresses(client[1])
    s_loc, s_rem = addresses(server[1])
    # each side learned exactly what the other has, through the REQ and REP
    assert sorted(c_rem) == sorted(s_loc) and sorted(s_rem) == sorted(c_loc)


def test_rdma_cm_survives_loss():
    """30% of each side's packets dropped, the CM MADs too: REQs and REPs
    are sent again, duplicates answered; the test then runs as usual."""
    server, client = run_pair("ib_send_bw", ["-R", "-q", 3, "-n", 200, "--loss", 0.3,
                                             "--loss_seed", 1, "-u", 8])
    check_ok(client, "client")
    check_ok(server, "server")
    c, s = counters(client[1]), counters(server[1])
    assert c["cm_resent"] + s["cm_resent"] + c["cm_duplicates"] + s["cm_duplicates"] > 0


class TcpCounter:
    """A TCP listener on port p that counts the connections made to it."""
    def __init__(self, port):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("0.0.0.0", port))
        self.sock.listen(8)
        self.sock.settimeout(0.1)
        self.accepted, self.stop = 0, False
        self.thread = threading.Thread(target=self._run)
        self.thread.start()

    def _run(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
                self.accepted += 1
                conn.close()
            except socket.timeout:
                pass

    def close(self):
        self.stop = True
        self.thread.join()
        self.sock.close()


def test_rdma_cm_uses_no_tcp():
    """The TCP port (-p) held by a listener of the test: neither side
    connects to it, and the test runs with its lines on the control QP."""
    addr, p = server_addr()
    tcp = TcpCounter(p)
    try:
        base = [BIN, "ib_send_lat", "-R", "-p", p, "-n", 200]
        server, client = run_server_client(base + ["-d", addr], base + [addr], timeout=60)
    finally:
        tcp.close()
    check_ok(client, "client")
    check_ok(server, "server")
    assert tcp.accepted == 0
    assert re.search(r"^ 2 +200 ", client[1], re.M), client[1]


def test_rdma_cm_server_without_d_serves_the_address_asked():
    """No -d: the server listens on UDP 4791 of every address until the
    first REQ, then serves on the address that REQ was sent to."""
    addr, p = server_addr()
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.bind(("0.0.0.0", 4791))
    except OSError:
        pytest.skip("UDP 4791 is held on some address (another process): the wildcard "
                    "listen cannot be tried now")
    finally:
        probe.close()
    base = [BIN, "ib_write_bw", "-R", "-p", p, "-n", 300, "-q", 2]
    server = subprocess.Popen([str(a) for a in base], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        # on one host the server goes first: a client on 4791 of an address
        # would keep it from listening on every address
        time.sleep(0.5)
        c = subprocess.run([str(a) for a in base + [addr]], capture_output=True, text=True,
                           timeout=60)
        out, err = server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=10)
    server, client = (server.returncode, out, err), (c.returncode, c.stdout, c.stderr)
    if server[0] != 0 and "of every address" in server[2]:
        pytest.skip("UDP 4791 was taken between the probe and the server: " + server[2])
    check_ok(client, "client")
    check_ok(server, "server")
    gid = "GID: 00:00:00:00:00:00:00:00:00:00:255:255:" + ":".join(
        f"{int(x):02d}" for x in addr.split("."))
    s_lines = server[1].splitlines()
    # the server's own address lines show the address the client aimed at
    assert [s_lines[i + 1].strip() for i, l in enumerate(s_lines)
            if l.startswith(" local address:")] == [gid] * 2


def refused_then_served(wrong_client, expected, settle=0.0):
    """An -R server on -p p: wrong_client(addr, p) (its flags) leaves with
    exit 1 and expected in its stderr, taking nothing; the server then
    serves an -R client with its -p, both sides checked."""
    addr, p = server_addr()
    server = subprocess.Popen([str(a) for a in [BIN, "ib_write_bw", "-R", "-d", addr, "-p", p,
                                                "-n", 100]],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(settle)
        wrong = subprocess.run([str(a) for a in [BIN, "ib_write_bw", *wrong_client(addr, p)]],
                               capture_output=True, text=True, timeout=30)
        assert wrong.returncode == 1
        assert expected in wrong.stderr, wrong.stderr
        client = subprocess.run([str(a) for a in [BIN, "ib_write_bw", "-R", "-p", p, "-n", 100,
                                                  addr]],
                                capture_output=True, text=True, timeout=60)
        out, err = server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=10)
    check_ok((client.returncode, client.stdout, client.stderr), "client")
    check_ok((server.returncode, out, err), "server")


def test_rdma_cm_server_refuses_a_client_without_R():
    """A client without -R reaches the -R server's TCP port: it is told to
    add -R and leaves; the server keeps waiting and then serves an -R client."""
    # its TCP port listens before this client's 5-s retries run out
    refused_then_served(lambda addr, p: ["-p", p, "-n", 100, addr],
                        "the peer failed: the server runs with -R (rdma_cm, no TCP side "
                        "channel): give the client -R too", settle=0.3)


def test_rdma_cm_port_is_the_service_id():
    """-p is rdma_cm's port: a REQ for another is REJected (invalid service
    ID) and takes nothing; the server then serves the client with its -p."""
    refused_then_served(lambda addr, p: ["-R", "-p", p + 1, "-n", 100, addr],
                        "-R: the peer rejected the connection (REJ reason 8: invalid service "
                        "ID, no one listens on that port)")


def test_rdma_cm_client_names_a_server_without_R():
    """The -R client's REQs go unanswered (5 s); it finds the server on the
    TCP port, tells it why it leaves, and says so itself."""
    addr, p = server_addr()
    server, client = run_server_client([BIN, "ib_write_bw", "-p", p, "-n", 100],
                                       [BIN, "ib_write_bw", "-R", "-p", p, "-n", 100, addr],
                                       timeout=60)
    assert client[0] == 1 and server[0] == 1
    assert f"-R: the server at {addr} answers on TCP port {p}, not over rdma_cm: it runs " \
           "without -R (give both sides -R, or neither)" in client[2], client[2]
    assert "the peer failed: the client runs with -R (rdma_cm): give the server -R too" \
        in server[2], server[2]


def test_rdma_cm_mismatch_named():
    """Both with -R, disagreeing on -q: named over the control QP."""
    server, client = run_pair("ib_write_bw", ["-R", "-n", 100], client_args=["-q", 2])
    assert server[0] == 1 and client[0] == 1
    assert "disagree on -q (--qp)" in client[2], client[2]
    assert "disagree on -q (--qp)" in server[2], server[2]


def test_rdma_cm_port_taken_is_named():
    addr, p = server_addr()
    hold = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    hold.bind((addr, 4791))
    try:
        with_d = subprocess.run([str(a) for a in [BIN, "ib_write_bw", "-R", "-p", p, "-d", addr]],
                                capture_output=True, text=True, timeout=30)
        without = subprocess.run([str(a) for a in [BIN, "ib_write_bw", "-R", "-p", p]],
                                 capture_output=True, text=True, timeout=30)
    finally:
        hold.close()
    assert with_d.returncode == 1
    assert f"-R: UDP port 4791 of {addr} is taken" in with_d.stderr, with_d.stderr
    assert without.returncode == 1
    assert "-R: cannot listen on UDP port 4791 of every address (Address already in use): " \
           "give -d the address to serve on" in without.stderr, without.stderr


def reports(server_out, n):
    """The server's report of each client, in the order they came."""
    parts = re.split(r"^ offpath: client \d+ of \d+\n", server_out, flags=re.M)
    assert len(parts) == n + 1, server_out
    return parts[1:]


@pytest.mark.parametrize("tool,args,n", [("ib_write_bw", ["-q", 2, "-D", 3], 3),
                                         ("ib_send_bw", ["-c", "UD", "-q", 2, "-n", 500], 2)])
def test_rdma_cm_serves_several_clients(tool, args, n):
    """--clients N with -R: one CM listener on UDP 4791 hands each client's
    control REQ to a connection of its own, which answers from another
    port (where the client's test QPs connect, or resolve by SIDR for UD);
    every client's rows and data check, the server's N reports (each the
    addresses its client saw) and their sum. While they run, a client too
    many is REJected (no QP available), one for another -p (invalid service
    ID), and one without -R is told on the TCP port to add it; none
    disturbs the others."""
    addr, p = server_addr()
    base = [BIN, tool, "-R", "-p", p, *args]
    server = subprocess.Popen([str(a) for a in base + ["--clients", n, "-d", addr]],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    clients = []
    try:
        time.sleep(0.3)
        clients = [subprocess.Popen([str(a) for a in base + [addr]], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True) for _ in range(n)]
        if "-D" in args:  # they run 3 s: ask while they do, all three at once
            time.sleep(0.8)
            probes = [[*base, addr], [BIN, tool, "-R", "-p", p + 1, *args, addr],
                      [BIN, tool, "-p", p, "-q", 2, "-n", 100, addr]]
            procs = [subprocess.Popen([str(a) for a in cmd], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True) for cmd in probes]
            clients += procs  # killed at the end if a check below fails
            (_, extra), (_, other), (_, plain) = [q.communicate(timeout=30) for q in procs]
            assert [q.returncode for q in procs] == [1, 1, 1], (extra, other, plain)
            assert "-R: the peer rejected the connection (REJ reason 1: no QP available)" \
                in extra, extra
            assert "REJ reason 8: invalid service ID" in other, other
            assert "the server runs with -R (rdma_cm, no TCP side channel): give the client " \
                "-R too" in plain, plain
            clients = clients[:n]
        outs = [c.communicate(timeout=60) for c in clients]
        sout, serr = server.communicate(timeout=60)
    finally:
        kill_leftovers(clients + [server])
    assert server.returncode == 0, serr
    for c, (out, err) in zip(clients, outs):
        check_ok((c.returncode, out, err), "client")
    parts = reports(sout, n)
    seen = []
    for part in parts:
        assert " offpath: data check ok" in part and " rdma_cm QPs\t : ON\n" in part, part
        s_loc, s_rem = addresses(part)
        assert len(s_loc) == 2
        match = [i for i, (out, _) in enumerate(outs)
                 if sorted(addresses(out)[1]) == sorted(s_loc)
                 and sorted(addresses(out)[0]) == sorted(s_rem)]
        assert len(match) == 1, (part, outs)
        seen += match
        assert "Waiting for client" not in part
    assert sorted(seen) == list(range(n))
    for out, _ in outs:
        row = result_row(out, 4096 if "UD" in args else 65536)
        assert len(row) == 5 and float(row[3]) > 0, row
        if "-n" in args:
            assert int(row[1]) == 500
    line = next(l for l in sout.splitlines() if "clients together" in l)
    assert line.startswith(f" offpath: {n} clients together: BW average "), line


def checked_pair(server, client, conn):
    """Both sides ended well on conn QPs through rdma_cm, each knowing the
    other's addresses; the client's (local, remote) (QPN, PSN) lists."""
    check_ok(client, "client")
    check_ok(server, "server")
    for side in (server, client):
        assert f" Connection type : {conn}" in side[1], side[1]
        assert " rdma_cm QPs\t : ON\n" in side[1]
    c_loc, c_rem = addresses(client[1])
    s_loc, s_rem = addresses(server[1])
    assert sorted(c_rem) == sorted(s_loc) and sorted(s_rem) == sorted(c_loc)
    return c_loc, c_rem


def result_row(out, size):
    """The row of perftest's table for size (#bytes first)."""
    return next(l.split() for l in out.splitlines() if l.split()[:1] == [str(size)])


@pytest.mark.parametrize("tool,args,lat", [("ib_write_bw", ["-q", 2, "-s", 4096, "-n", 300], False),
                                           ("ib_send_lat", ["-s", 64, "-n", 500], True),
                                           ("ib_write_lat", ["-s", 2, "-n", 500], True)])
def test_rdma_cm_with_uc(tool, args, lat, tmp_path):
    """-R -c UC: the test QPs are UC, connected by REQs whose transport
    service type is UC (tshark reads it: 1), the control QP RC (0); the rows
    are perftest's and the data checks out."""
    pcap = tmp_path / "uc.pcap"
    server, client = run_pair(tool, ["-R", "-c", "UC", *args], client_args=["--pcap", str(pcap)])
    c_loc, _ = checked_pair(server, client, "UC")
    size, iters = args[args.index("-s") + 1], args[args.index("-n") + 1]
    row = result_row(client[1], size)
    assert len(row) == (9 if lat else 5) and int(row[1]) == iters, row
    assert float(row[4 if lat else 3]) > 0
    if not lat:  # UC: what the server counted arrived, none of it twice
        assert counters(server[1])["duplicates"] == 0
    if TSHARK is None:
        return
    r = subprocess.run([TSHARK, "-r", str(pcap), "-d", "udp.port==4791,infiniband", "-Y",
                        "infiniband.cm.req.transpsvctype", "-T", "fields", "-e",
                        "infiniband.cm.req.localqpn", "-e", "infiniband.cm.req.transpsvctype"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    types = {int(q, 16): int(t, 0) for q, t in (l.split("\t") for l in r.stdout.splitlines())}
    assert {types[q] for q, _ in c_loc} == {1}, types  # the test QPs: UC
    assert sorted(t for q, t in types.items() if q not in dict(c_loc)) == [0], types


def sidr_mads(pcap):
    """(Info, MAD data bytes) of each SIDR MAD in the capture, a resent
    copy once."""
    r = subprocess.run([TSHARK, "-r", str(pcap), "-d", "udp.port==4791,infiniband", "-Y",
                        "infiniband.mad.attributeid == 0x0017 || "
                        "infiniband.mad.attributeid == 0x0018",
                        "-T", "fields", "-E", "separator=/t", "-e", "_ws.col.Info",
                        "-e", "infiniband.mad.data"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = []
    for line in r.stdout.splitlines():
        info, data = line.split("\t")
        row = (info, bytes.fromhex(data.replace(":", "")))
        if row not in out:
            out.append(row)
    return out


@pytest.mark.parametrize("tool,args,lat", [("ib_send_bw", ["-q", 2, "-n", 600], False),
                                           ("ib_send_lat", ["-s", 64, "-n", 500], True)])
def test_rdma_cm_with_ud(tool, args, lat, tmp_path):
    """-R -c UD: the control QP is connected by REQ/REP/RTU, the UD QPs
    resolved by SIDR_REQ / SIDR_REP as rdma_cm resolves a UD peer: tshark
    names them InfiniBand CM ServiceIDResReq / ServiceIDResReqResp; each
    reply says status 0 with the server's QPN and the Q_Key, each request
    rdma_cm's UDP port space and -p; the rows are perftest's and the data
    checks out."""
    pcap = tmp_path / "ud.pcap"
    addr, p = server_addr()
    base = [BIN, tool, "-p", p, "-R", "-c", "UD", *args]
    server, client = run_server_client(base + ["-d", addr],
                                       base + ["--pcap", str(pcap), addr], timeout=120)
    c_loc, c_rem = checked_pair(server, client, "UD")
    nqp = args[args.index("-q") + 1] if "-q" in args else 1
    assert len(c_loc) == nqp
    row = result_row(client[1], 64 if lat else 4096)
    assert len(row) == (9 if lat else 5) and int(row[1]) == args[args.index("-n") + 1], row
    if TSHARK is None:
        return
    mads = sidr_mads(pcap)
    reqs = [d for info, d in mads if info == "CM: ServiceIDResReq"]
    reps = [d for info, d in mads if info == "CM: ServiceIDResReqResp"]
    assert len(reqs) == nqp and len(reps) == nqp, [info for info, _ in mads]
    service = 0x0000000001110000 | p  # RDMA_PS_UDP | port
    assert all(int.from_bytes(d[8:16], "big") == service for d in reqs)
    assert {d[0:4] for d in reqs} == {d[0:4] for d in reps}  # request IDs answered
    for d in reps:
        assert d[4] == 0 and d[5] == 0  # status: QP valid, no additional information
        assert int.from_bytes(d[12:20], "big") == service
        assert int.from_bytes(d[20:24], "big") == 0x11111111  # perftest's UD Q_Key
    assert sorted(int.from_bytes(d[8:11], "big") for d in reps) == sorted(q for q, _ in c_rem)


@pytest.mark.skipif(TSHARK is None, reason="tshark not installed (scripts/bootstrap installs it)")
def test_rdma_cm_capture_dissects_as_infiniband_cm(tmp_path):
    """The client's capture: tshark reads the control QP's ConnectRequest,
    ConnectReply and ReadyToUse first, then the parameters as an RC SEND on
    that QP, then three ConnectRequests carrying the client's test QPNs and
    PSNs, three ConnectReplies carrying the server's and three ReadyToUse,
    all before any data."""
    pcap = tmp_path / "cm.pcap"
    server, client = run_pair("ib_write_bw", ["-R", "-q", 3, "-n", 100],
                              client_args=["--pcap", str(pcap)])
    check_ok(client, "client")
    r = subprocess.run([TSHARK, "-r", str(pcap), "-d", "udp.port==4791,infiniband", "-T",
                        "fields", "-E", "separator=/t", "-e", "_ws.col.Info",
                        "-e", "infiniband.cm.req.localqpn", "-e", "infiniband.cm.req.startpsn",
                        "-e", "infiniband.cm.rep.localqpn", "-e", "infiniband.cm.rep.startpsn",
                        "-e", "infiniband.cm.req.pppmtu", "-e", "infiniband.cm.rtu.remotecommid",
                        "-e", "infiniband.bth.destqp", "-e", "data.data"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = [l.split("\t") for l in r.stdout.splitlines()]
    # a MAD sent again (the client may start before the server listens) counts once
    cm, seen = [], set()
    for row in rows:
        key = (row[0], row[1], row[3], row[6])
        if row[0].startswith("CM: ") and key not in seen:
            seen.add(key)
            cm.append(row)
    assert [row[0] for row in cm] == ["CM: ConnectRequest", "CM: ConnectReply", "CM: ReadyToUse"] \
        + ["CM: ConnectRequest"] * 3 + ["CM: ConnectReply"] * 3 + ["CM: ReadyToUse"] * 3, \
        [row[0] for row in cm]
    assert all(row[0].startswith("CM: ") for row in rows[:rows.index(cm[2]) + 1])
    control_qpn = int(cm[0][1], 16)
    first_data = next(i for i, row in enumerate(rows) if "RDMA Write" in row[0])
    assert rows.index(cm[-1]) < first_data
    # each side's parameters: a SEND to the other's control QP, before the test's REQs
    server_control = int(cm[1][3], 16)
    params = [(i, int(row[7], 16)) for i, row in enumerate(rows)
              if row[0].startswith("RC Send Only")
              and bytes.fromhex(row[8] or "").startswith(b"PARAMS ")]
    assert len(params) >= 2 and {qp for _, qp in params} == {control_qpn, server_control}, params
    first = {}
    for i, qp in params:  # a copy resent by a probe may come later: the first counts
        first.setdefault(qp, i)
    assert all(i < rows.index(cm[3]) for i in first.values()), rows[:12]
    c_loc, c_rem = addresses(client[1])
    assert control_qpn not in [q for q, _ in c_loc]
    assert sorted((int(q, 16), int(p, 16)) for _, q, p, *_ in cm[3:6]) == sorted(c_loc)
    assert sorted((int(row[3], 16), int(row[4], 16)) for row in cm[6:9]) == sorted(c_rem)
    assert all(int(row[5], 16) == 5 for row in [cm[0]] + cm[3:6])  # 4096-byte path MTU
    assert all(row[6] for row in cm[9:12])


def test_rdma_cm_killed_client_ends_the_server():
    """A killed client closes nothing: the server's empty keep-alive SEND on
    the control QP goes unacknowledged for 5 s and it ends, saying so."""
    addr, p = server_addr()
    base = [BIN, "ib_write_bw", "-R", "-p", p, "-D", 30]
    server = subprocess.Popen([str(a) for a in base + ["-d", addr]], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    client = subprocess.Popen([str(a) for a in base + [addr]], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(2)
        assert client.poll() is None and server.poll() is None
        client.kill()
        client.communicate(timeout=10)
        start = time.monotonic()
        out, err = server.communicate(timeout=20)
        waited = time.monotonic() - start
    finally:
        for proc in (client, server):
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    assert server.returncode == 1
    assert "the peer closed the side channel (Connection timed out)" in err, err
    assert 4 < waited < 12, waited


@pytest.fixture
def veth():
    p = made_pair(tag=7000)
    yield p
    p.down()


@needs_root
@pytest.mark.parametrize("tool,args", [("ib_write_bw", ["-q", 2, "-s", 65536, "-n", 400]),
                                       ("ib_write_bw", ["-c", "UC", "-s", 65536, "-n", 400]),
                                       ("ib_send_bw", ["-c", "UD", "-q", 2, "-s", 1024, "-n", 400]),
                                       ("ib_write_lat", ["-s", 2, "-n", 300])])
def test_rdma_cm_over_xdp(veth, tool, args):
    """-R --xdp across a veth pair: the CM MADs (SIDR for UD), the control
    QP and the test QPs all on the AF_XDP endpoint of -d's interface; rows
    and data check."""
    p = _port[0] = _port[0] + 1
    base = [BIN, tool, "-R", "--xdp", "-p", p, *args]
    server, client = run_server_client(
        [IP, "netns", "exec", veth.b] + base + ["-d", veth.vb],
        [IP, "netns", "exec", veth.a] + base + ["-d", veth.va, veth.ipb], timeout=120)
    check_ok(client, "client")
    check_ok(server, "server")
    for side in (server, client):
        assert " rdma_cm QPs\t : ON\n" in side[1] and " Data ex. method : rdma_cm\n" in side[1]
        assert counters(side[1])["xdp_native"] in (0, 1)  # the AF_XDP path reported
    c_loc, c_rem = addresses(client[1])
    s_loc, s_rem = addresses(server[1])
    assert sorted(c_rem) == sorted(s_loc) and sorted(s_rem) == sorted(c_loc)
    size, iters = args[args.index("-s") + 1], args[args.index("-n") + 1]
    row = result_row(client[1], size)
    assert len(row) == (9 if tool.endswith("lat") else 5) and int(row[1]) == iters, row
    got = counters(server[1])
    # through the AF_XDP ring but for REQs that came before its program was attached
    assert got["xdp_rx_via_kernel"] <= 3, got
    # at least a packet per message (UC and UD may lose some), none the client did not send
    lossy = "UC" in args or "UD" in args
    assert iters * (0 if lossy else 1) < got["pkts_in"] <= counters(client[1])["pkts_out"]
