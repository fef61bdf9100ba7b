"""System tests of the in-network Allreduce: `offpath switch` and
`offpath inc_test` as real processes on loopback."""
import json
import os
import random
import signal
import socket
import struct
import tempfile
import threading
import time

import pytest

from conftest import (inc_packet, inc_test_json, next_net, offpath, wait_for_file,
                      roce_icrc)

# A representative subset over real processes (every op x type x count runs
# in-process in the unit tests): 2, 8 and 33 leaders, 1 and 2 TORs.
CASES = [
    (2, 1, "int32", "sum", 1000),
    (2, 1, "float64", "prod", 7),
    (8, 1, "float32", "sum", 4096),
    (8, 2, "int64", "bxor", 64),
    (8, 2, "float64", "max", 1000),
    (8, 2, "uint8", "land", 300),
    (33, 1, "int16", "min", 1),
    (33, 2, "float32", "sum", 1000),
    (33, 2, "uint64", "bor", 7),
]


def assert_exact(rep, leaders, iters, warmup):
    assert rep["pass"], rep
    assert rep["mismatches"] == 0
    assert rep["identical"]
    assert rep["failed_leaders"] == 0
    assert rep["allreduces_done"] == leaders * (iters + warmup)


@pytest.mark.parametrize("leaders,tors,dtype,op,count", CASES)
def test_exact_results(leaders, tors, dtype, op, count):
    iters, warmup = 20, 2
    r, rep = inc_test_json("--leaders", leaders, "--tors", tors, "--type", dtype, "--op", op,
                           "--count", count, "--iters", iters, "--warmup", warmup)
    assert r.returncode == 0, r.stderr
    assert_exact(rep, leaders, iters, warmup)
    sw = rep["switch"]
    chunks = -(-count * {"int8": 1, "uint8": 1, "int16": 2, "int32": 4, "float32": 4}.get(
        dtype, 8) // 1024)
    # every chunk of every allreduce (and leave's barrier) was aggregated once
    # per switch of the tree: TORs and, with two TORs, the SPINE.
    switches = tors + (1 if tors > 1 else 0)
    assert sw["chunks_aggregated"] == switches * (chunks * (iters + warmup) + 1)
    assert sw["drop_malformed"] == 0 and sw["drop_icrc"] == 0
    assert sw["groups_created"] == switches and sw["groups_freed"] == switches
    assert sw["groups_live"] == 0


@pytest.mark.parametrize("leaders,tors", [(8, 2), (33, 2)])
def test_exact_under_loss_and_duplication(leaders, tors):
    iters, warmup = 30, 2
    r, rep = inc_test_json("--leaders", leaders, "--tors", tors, "--type", "float32",
                           "--count", 2000, "--iters", iters, "--warmup", warmup,
                           "--drop-rate", 0.05, "--dup-rate", 0.02, "--rto-us", 3000)
    assert r.returncode == 0, r.stderr
    assert_exact(rep, leaders, iters, warmup)
    assert rep["leader_retransmissions"] > 0
    sw = rep["switch"]
    assert sw["injected_drops"] > 0 and sw["injected_dups"] > 0
    assert sw["retransmissions"] > 0 and sw["duplicates"] > 0


def write_topology(path, net, port, hosts):
    with open(path, "w") as f:
        f.write(f"tor t0 127.{net + 1}.0.1 port {port} hosts 127.{net}.0.1-127.{net}.0.{hosts}\n")


def start_tor(procs, tmp_path, hosts):
    """One TOR serving `hosts` addresses on a fresh network; returns the switch
    process, its topology file, its stats file, the network and the port."""
    net, port = next_net()
    topo, stats = tmp_path / "topo", tmp_path / "stats.json"
    write_topology(topo, net, port, hosts)
    sw = start_ready_switch(procs, "--topology", topo, "--name", "t0", "--stats-json", stats)
    return sw, topo, stats, net, port


def start_ready_switch(procs, *args):
    """A switch that has bound its port and owns its signals: a fixed sleep
    lost that race under load (a SIGTERM or SIGUSR1 before its signalfd
    killed it)."""
    r, w = os.pipe()
    sw = procs.start("switch", *args, "--log-level", "error", "--ready-fd", w, pass_fds=(w,))
    os.close(w)
    with os.fdopen(r) as ready:
        assert ready.readline() == "ready\n", "the switch did not start"
    return sw


def test_switch_killed_mid_run_every_leader_times_out(procs, tmp_path):
    sw, topo, stats, net, port = start_tor(procs, tmp_path, 8)
    deadline_ms = 1500
    started = time.monotonic()
    it = procs.start("inc_test", "--connect", topo, "--leaders", 4, "--count", 1000,
                     "--iters", 100000, "--deadline-ms", deadline_ms, "--json", "--quiet")
    time.sleep(1.0)
    assert it.poll() is None, "inc_test ended before the switch was killed"
    sw.kill()
    killed = time.monotonic()
    out, err = it.communicate(timeout=30)
    ended = time.monotonic()
    assert it.returncode == 1
    rep = json.loads(out.strip().splitlines()[-1])
    assert rep["failed_leaders"] == 4
    assert rep["mismatches"] == 0
    assert err.count("failed: timed out") == 4, err
    # each leader's blocked call returns within its deadline (plus scheduling slack)
    assert ended - killed < deadline_ms / 1000 + 2.0
    assert rep["allreduces_done"] > 0 and killed - started > 0.5


def test_hostile_packets_during_run_never_change_results(procs, tmp_path):
    """Garbage, non-INC RoCEv2, wrong tokens and strangers' packets, all with
    valid ICRCs, sent at the TOR while leaders allreduce through it."""
    sw, topo, stats, net, port = start_tor(procs, tmp_path, 200)
    tor = f"127.{net + 1}.0.1"
    it = procs.start("inc_test", "--connect", topo, "--leaders", 6, "--count", 512,
                     "--iters", 300, "--json", "--quiet")
    stop = threading.Event()
    sent = {"n": 0}

    def attack():
        rnd = random.Random(7)
        socks = []
        for host in (f"127.{net}.0.2", f"127.{net}.0.150"):  # a member's address, a stranger's
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setsockopt(socket.IPPROTO_IP, 10, 2)  # IP_MTU_DISCOVER = IP_PMTUDISC_DO
            s.bind((host, port if host.endswith(".150") else 0))
            socks.append((host, s))
        while not stop.is_set() and sent["n"] < 20000:
            host, s = rnd.choice(socks)
            sport = s.getsockname()[1]
            kind = rnd.randrange(3)
            if kind == 0:
                pkt = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 200)))
            else:
                payload = struct.pack("!128i", *([rnd.randrange(-1000, 1000)] * 128))
                pkt = inc_packet(host, tor, sport, port, group=rnd.randrange(1, 4),
                                 token=rnd.getrandbits(64), seq=rnd.randrange(64),
                                 rank=rnd.randrange(6), payload=payload)
                if kind == 2:  # one flipped bit: the ICRC no longer matches
                    pkt = pkt[:30] + bytes([pkt[30] ^ 1]) + pkt[31:]
            s.sendto(pkt, (tor, port))
            sent["n"] += 1
            time.sleep(0.0002)
        for _, s in socks:
            s.close()

    t = threading.Thread(target=attack)
    t.start()
    out, err = it.communicate(timeout=120)
    stop.set()
    t.join()
    sw.send_signal(signal.SIGTERM)
    sw.wait(timeout=10)
    assert it.returncode == 0, err
    rep = json.loads(out.strip().splitlines()[-1])
    assert rep["pass"] and rep["mismatches"] == 0 and rep["identical"]
    st = json.loads(open(stats).read())
    hostile = (st["drop_foreign"] + st["drop_malformed"] + st["drop_icrc"] +
               st["drop_bad_token"] + st["drop_unknown_group"] + st["drop_not_member"])
    assert sent["n"] > 100
    assert hostile >= sent["n"] * 0.9  # the rest may be lost in socket buffers
    assert st["drop_bad_token"] + st["drop_unknown_group"] > 0
    assert st["drop_icrc"] > 0


def test_python_icrc_agrees_with_switch(procs, tmp_path):
    """A packet sealed by this independent Python ICRC passes the switch's
    ICRC check (it is dropped later as an unknown group, not as a bad ICRC)."""
    sw, topo, stats, net, port = start_tor(procs, tmp_path, 4)
    host, tor = f"127.{net}.0.1", f"127.{net + 1}.0.1"
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, 10, 2)
    s.bind((host, port))
    for i in range(10):
        s.sendto(inc_packet(host, tor, port, port, 77, 1234, i, 0, b"\0" * 64), (tor, port))
    s.close()
    time.sleep(0.3)
    sw.send_signal(signal.SIGTERM)
    sw.wait(timeout=10)
    st = json.loads(open(stats).read())
    assert st["drop_icrc"] == 0
    assert st["drop_unknown_group"] == 10


def test_switch_sigusr1_and_exit_counters(procs, tmp_path):
    sw, topo, stats, net, port = start_tor(procs, tmp_path, 4)
    sw.send_signal(signal.SIGUSR1)
    assert wait_for_file(stats)
    first = json.loads(open(stats).read())
    assert first["switch"] == "t0" and first["role"] == "tor" and first["rx_pkts"] == 0
    sw.send_signal(signal.SIGTERM)
    out, err = sw.communicate(timeout=10)
    assert sw.returncode == 0
    assert "rx_pkts" in out and "groups_live" in out


def test_switch_role_flags_without_topology_file(procs):
    net, port = next_net()
    tor = start_ready_switch(procs, "--role", "tor", "--listen", f"127.{net + 1}.0.1", "--port",
                             port, "--hosts", f"127.{net}.0.1-127.{net}.0.9", "--json")
    tor.send_signal(signal.SIGTERM)
    out, _ = tor.communicate(timeout=10)
    assert tor.returncode == 0
    assert json.loads(out.strip().splitlines()[-1])["role"] == "tor"


@pytest.mark.parametrize("args,needle", [
    (["switch", "--window", "0", "--role", "tor"], "--window"),
    (["switch", "--max-data", "1001", "--role", "tor"], "--max-data"),
    (["switch", "--drop-rate", "1.5"], "--drop-rate"),
    (["switch", "--role", "router", "--listen", "127.0.0.1"], "--role"),
    (["switch", "--topology", "/nonexistent", "--name", "x"], "/nonexistent"),
    (["switch"], "--topology"),
    (["inc_test", "--leaders", "0"], "--leaders"),
    (["inc_test", "--type", "int128"], "--type"),
    (["inc_test", "--op", "band", "--type", "float32"], "band"),
    (["inc_test", "--tors", "3", "--leaders", "2"], "--tors"),
    (["inc_test", "--count", "12x"], "--count"),
    (["nosuchtool"], "nosuchtool"),
])
def test_bad_flags_name_the_parameter(args, needle):
    r = offpath(*args)
    assert r.returncode == 2
    assert needle in r.stderr


@pytest.mark.parametrize("tool", ["switch", "inc_test"])
def test_help(tool):
    r = offpath(tool, "--help")
    assert r.returncode == 0 and "usage: offpath " + tool in r.stdout


def test_topology_file_errors_name_the_line(tmp_path):
    topo = tmp_path / "topo"
    topo.write_text("spine s0 127.0.0.1\ntor t0 127.0.0.2 hosts 127.0.1.1-127.0.1.9 spines s9\n")
    r = offpath("switch", "--topology", topo, "--name", "t0")
    assert r.returncode == 2 and "s9" in r.stderr
