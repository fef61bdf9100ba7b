"""-R (--rdma_cm): the QPs connected by CM REQ / REP / RTU MADs to QP 1 on
UDP 4791, as rdma_cm over RoCEv2, instead of the side channel's QP lines.
Real processes; the server on a loopback address of its own (127.0.N.M,
so its port 4791 is not another test's), a capture of the exchange read
back by tshark as InfiniBand CM."""
import os
import re
import shutil
import socket
import subprocess

import pytest

from conftest import BIN, check_ok, counters, run_server_client

_port = [24200]
TSHARK = shutil.which("tshark")


def server_addr():
    _port[0] += 1
    return f"127.0.{100 + os.getpid() % 100}.{_port[0] % 200 + 20}", _port[0]


def run_pair(tool, args, client_args=None, server_args=None, timeout=180):
    addr, p = server_addr()
    base = [BIN, tool, "-p", p, *args]
    return run_server_client(base + list(server_args or []),
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


def test_rdma_cm_mismatch_named():
    server, client = run_pair("ib_write_bw", ["-n", 100], client_args=["-R"])
    assert server[0] == 1 and client[0] == 1
    assert "disagree on -R (--rdma_cm)" in client[2], client[2]


def test_rdma_cm_port_taken_is_named():
    addr, p = server_addr()
    hold = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    hold.bind((addr, 4791))
    try:
        server, client = run_server_client([BIN, "ib_write_bw", "-R", "-p", p],
                                           [BIN, "ib_write_bw", "-R", "-p", p, addr], timeout=60)
    finally:
        hold.close()
    assert server[0] == 1 and f"-R: UDP port 4791 of {addr} is taken" in server[2], server[2]
    assert client[0] == 1


def test_rdma_cm_refused_with_ud():
    r = subprocess.run([BIN, "ib_send_bw", "-R", "-c", "UD"], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 2 and "-R (--rdma_cm): RC QPs" in r.stderr, r.stderr


@pytest.mark.skipif(TSHARK is None, reason="tshark not installed (scripts/bootstrap installs it)")
def test_rdma_cm_capture_dissects_as_infiniband_cm(tmp_path):
    """The client's capture: tshark reads three ConnectRequests carrying the
    client's QPNs and PSNs, three ConnectReplies carrying the server's,
    and three ReadyToUse, before any data."""
    pcap = tmp_path / "cm.pcap"
    server, client = run_pair("ib_write_bw", ["-R", "-q", 3, "-n", 100],
                              client_args=["--pcap", str(pcap)])
    check_ok(client, "client")
    r = subprocess.run([TSHARK, "-r", str(pcap), "-d", "udp.port==4791,infiniband", "-T",
                        "fields", "-E", "separator=/t", "-e", "_ws.col.Info",
                        "-e", "infiniband.cm.req.localqpn", "-e", "infiniband.cm.req.startpsn",
                        "-e", "infiniband.cm.rep.localqpn", "-e", "infiniband.cm.rep.startpsn",
                        "-e", "infiniband.cm.req.pppmtu", "-e", "infiniband.cm.rtu.remotecommid"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = [l.split("\t") for l in r.stdout.splitlines()]
    cm = [row for row in rows if row[0].startswith("CM: ")]
    assert [row[0] for row in cm] == ["CM: ConnectRequest"] * 3 + ["CM: ConnectReply"] * 3 + \
        ["CM: ReadyToUse"] * 3, [row[0] for row in cm]
    assert all(row[0].startswith("CM: ") for row in rows[:9])  # before any data
    c_loc, c_rem = addresses(client[1])
    assert sorted((int(q, 16), int(p, 16)) for _, q, p, *_ in cm[:3]) == sorted(c_loc)
    assert sorted((int(row[3], 16), int(row[4], 16)) for row in cm[3:6]) == sorted(c_rem)
    assert all(int(row[5], 16) == 5 for row in cm[:3])  # 4096-byte path MTU
    assert all(row[6] for row in cm[6:9])
