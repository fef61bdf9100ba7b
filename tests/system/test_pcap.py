"""--pcap (issue 11): the tools write every RoCEv2 packet they receive and
send as its own Ethernet/IPv4/UDP frame, so a capture is right with
batching on (the default), where a capture of lo holds UDP GSO datagrams of
several RoCEv2 packets.

Every frame is checked twice, independently of offpath's C code: tshark
must dissect it as InfiniBand (RoCEv2) with the ICRC field at the frame's
end, and the ICRC (conftest.roce_icrc, zlib) over the frame's IPv4 and UDP
headers and the whole UDP payload taken as one packet must match it: a
frame holding two packets fails that. The number of frames must equal what
the tools counted."""
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import time

import pytest

from conftest import BIN, inc_packet, next_net, offpath, roce_icrc, run_server_client

TSHARK = shutil.which("tshark")
needs_tshark = pytest.mark.skipif(TSHARK is None,
                                  reason="tshark not installed (scripts/bootstrap installs it)")

PCAP_MAGIC_NS = 0xa1b23c4d
LINKTYPE_ETHERNET = 1


def batching_on():
    """The environment of a default run: batching (UDP GSO/GRO) on."""
    env = dict(os.environ)
    env.pop("OFFPATH_UDP_BATCHING", None)
    return env


def read_pcap(path):
    """[(timestamp ns, frame bytes)] of a nanosecond pcap of Ethernet frames."""
    with open(path, "rb") as f:
        data = f.read()
    magic, _, _, _, _, snaplen, linktype = struct.unpack_from("<IHHiIII", data, 0)
    assert magic == PCAP_MAGIC_NS, hex(magic)
    assert linktype == LINKTYPE_ETHERNET and snaplen >= 42 + 9216
    frames, off = [], 24
    while off < len(data):
        sec, nsec, caplen, origlen = struct.unpack_from("<IIII", data, off)
        assert caplen == origlen and nsec < 10 ** 9
        frames.append((sec * 10 ** 9 + nsec, data[off + 16:off + 16 + caplen]))
        off += 16 + caplen
    assert off == len(data), "the file ends inside a record"
    return frames


def ip_text(b):
    return ".".join(str(x) for x in b)


def check_frame(n, frame):
    """Frame n is one RoCEv2 packet: Ethernet/IPv4 (ID 0, DF)/UDP, then a
    payload whose last 4 bytes are the ICRC of all that comes before."""
    assert frame[12:14] == b"\x08\x00", f"frame {n}: not IPv4"
    ip = frame[14:34]
    assert ip[0] == 0x45 and ip[9] == 17, f"frame {n}: not IPv4/UDP without options"
    total, ident, frag = struct.unpack_from("!HHH", ip, 2)
    assert ident == 0 and frag == 0x4000, f"frame {n}: IPv4 ID {ident} flags {frag:#x}"
    assert total == len(frame) - 14, f"frame {n}: IPv4 length {total} in a {len(frame)}-byte frame"
    sport, dport, ulen = struct.unpack_from("!HHH", frame, 34)
    assert ulen == total - 20
    roce = frame[42:]
    want = roce_icrc(ip_text(ip[12:16]), ip_text(ip[16:20]), sport, dport, roce[:-4])
    got = struct.unpack("<I", roce[-4:])[0]
    assert got == want, f"frame {n}: ICRC {got:#010x}, the packet's is {want:#010x}"


def tshark_rows(path, port):
    """(protocols, BTH opcode, ICRC) per frame as tshark dissects it, the
    fabric's UDP port decoded as RoCEv2 (InfiniBand over UDP)."""
    r = subprocess.run([TSHARK, "-r", path, "-d", f"udp.port=={port},infiniband", "-T", "fields",
                        "-E", "separator=/t", "-e", "frame.protocols",
                        "-e", "infiniband.bth.opcode", "-e", "infiniband.invariant.crc"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return [line.split("\t") for line in r.stdout.splitlines()]


def check_capture(path, port):
    """Every frame a RoCEv2 packet with a valid ICRC, as tshark sees it too;
    returns the frames."""
    frames = read_pcap(path)
    rows = tshark_rows(path, port)
    assert len(rows) == len(frames)
    for n, ((_, frame), (protos, opcode, crc)) in enumerate(zip(frames, rows), 1):
        check_frame(n, frame)
        assert ":udp:infiniband" in protos and opcode != "", f"frame {n}: {protos}"
        # tshark shows the ICRC's 4 bytes as one big-endian number
        assert int(crc, 16).to_bytes(4, "big") == frame[-4:], \
            f"frame {n}: tshark reads ICRC {crc}, not the frame's last 4 bytes"
    assert [t for t, _ in frames] == sorted(t for t, _ in frames), "not in time order"
    return frames


def wire_packets(sw):
    """What the switches' sockets received and sent: engine output less
    injected drops, plus injected duplicates, less what the socket refused."""
    return (sw["rx_pkts"] + sw["tx_pkts"] - sw["injected_drops"] + sw["injected_dups"]
            - sw["tx_io_drops"])


@needs_tshark
@pytest.mark.parametrize("tors", [1, 2])
def test_inc_test_capture_is_roce_frame_by_frame(tmp_path, tors):
    """Batching on, loss and duplication: every frame one RoCEv2 packet with
    a valid ICRC, as many as the switches handled (two TORs and a SPINE: the
    switches' captures merged in time order)."""
    net, port = next_net()
    pcap = tmp_path / "f.pcap"
    r = subprocess.run([BIN, "inc_test", "--json", "--quiet", "--net", str(net), "--port",
                        str(port), "--leaders", "8", "--tors", str(tors), "--iters", "30",
                        "--count", "2000", "--drop-rate", "0.02", "--dup-rate", "0.02",
                        "--pcap", str(pcap)],
                       capture_output=True, text=True, timeout=300, env=batching_on())
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads(r.stdout.strip().splitlines()[-1])
    sw = rep["switch"]
    assert sw["injected_drops"] > 0 or sw["injected_dups"] > 0
    frames = check_capture(str(pcap), port)
    assert len(frames) == sw["captured"] == wire_packets(sw)
    # data packets of 2000 x 4 bytes in 1024-byte chunks: several per burst,
    # the runs batching joins into one datagram on lo
    assert max(len(f) for _, f in frames) > 1024


@needs_tshark
@pytest.mark.parametrize("conn", ["RC", "UC"])
def test_ib_write_lat_capture(tmp_path, conn):
    """ib_write_lat -s 2 builds every WRITE after its first from the last
    one's headers (PSN and AckReq patched, the ICRC gone on from the shared
    bytes) and takes the peer's as the guessed next one: each captured frame
    is still one RoCEv2 packet that tshark dissects and whose ICRC zlib
    confirms, n WRITE_ONLYs each way with PSNs one apart, and the data checks."""
    _, tcp_port = next_net()
    pcap = tmp_path / "c.pcap"
    n = 300
    cmd = [BIN, "ib_write_lat", "-p", tcp_port, "-n", n, "-s", 2, "-c", conn]
    server, client = run_server_client(cmd, cmd + ["--pcap", pcap, "127.0.0.1"])
    assert server[0] == 0 and client[0] == 0, f"{server}\n{client}"
    assert " offpath: data check ok" in client[1] and " offpath: data check ok" in server[1]
    line = next(l for l in client[1].splitlines() if l.startswith(" offpath: pkts_out"))
    c = {k: int(v) for k, v in (kv.split() for kv in line[len(" offpath:"):].split(","))}
    frames = check_capture(str(pcap), 4791)
    assert len(frames) == c["captured"] == c["pkts_out"] + c["pkts_in"]
    write_only = 0x0a | (0x20 if conn == "UC" else 0)
    for src in ("127.0.0.1", "127.0.0.2"):
        psns = [int.from_bytes(f[42 + 9:42 + 12], "big") for _, f in frames
                if f[42] == write_only and ip_text(f[26:30]) == src]
        # RC may resend (a probe on a loaded machine): the PSNs sent are n
        # in a row all the same, each resend one sent before
        seen = [psns[0]]
        for p in psns[1:]:
            assert (p - seen[-1]) % (1 << 24) == 1 or p in seen, (src, p, seen[-3:])
            if p not in seen:
                seen.append(p)
        assert len(seen) == n and (conn == "RC" or len(psns) == n), (src, len(psns))


@needs_tshark
def test_ib_write_bw_capture(tmp_path):
    """A client's capture holds what it sent and received, one RoCEv2 packet
    per frame, as many as its QP counted."""
    _, tcp_port = next_net()
    pcap = tmp_path / "c.pcap"
    cmd = [BIN, "ib_write_bw", "-p", tcp_port, "-n", 50, "-s", 65536, "--no-progress"]
    server, client = run_server_client(cmd, cmd + ["--pcap", pcap, "127.0.0.1"])
    assert server[0] == 0 and client[0] == 0, f"{server}\n{client}"
    line = next(l for l in client[1].splitlines() if l.startswith(" offpath: pkts_out"))
    c = {k: int(v) for k, v in (kv.split() for kv in line[len(" offpath:"):].split(","))}
    frames = check_capture(str(pcap), 4791)
    assert len(frames) == c["captured"] == c["pkts_out"] + c["pkts_in"]


@needs_tshark
def test_switch_capture_written_on_sigint(tmp_path):
    """offpath switch --pcap: what it received, written out when SIGINT stops it."""
    net, port = next_net()
    host, tor = f"127.{net}.0.1", f"127.{net + 1}.0.1"
    pcap = tmp_path / "s.pcap"
    sw = subprocess.Popen([BIN, "switch", "--role", "tor", "--listen", tor, "--port", str(port),
                           "--hosts", f"127.{net}.0.1-127.{net}.0.4", "--json", "--log-level",
                           "error", "--pcap", str(pcap)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.3)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.IPPROTO_IP, 10, 2)  # IP_MTU_DISCOVER = IP_PMTUDISC_DO: ID 0
        s.bind((host, port))
        for i in range(10):
            s.sendto(inc_packet(host, tor, port, port, 77, 1234, i, 0, b"\0" * 64), (tor, port))
        s.close()
        time.sleep(0.3)
        sw.send_signal(signal.SIGINT)
        out, err = sw.communicate(timeout=10)
    finally:
        if sw.poll() is None:
            sw.kill()
            sw.wait(timeout=10)
    assert sw.returncode == 0, err
    st = json.loads(out.strip().splitlines()[-1])
    frames = check_capture(str(pcap), port)
    assert len(frames) == st["captured"] == st["rx_pkts"] + st["tx_pkts"] == 10


@pytest.mark.parametrize("args", [
    ["switch", "--role", "tor", "--listen", "127.0.0.1", "--hosts", "127.0.0.2-127.0.0.3"],
    ["inc_test"],
    ["ib_write_bw"],
])
def test_unwritable_pcap_names_the_flag(args):
    r = offpath(*args, "--pcap", "/nonexistent/dir/f.pcap", timeout=30)
    assert r.returncode == 2
    assert "--pcap" in r.stderr and "/nonexistent/dir/f.pcap" in r.stderr, r.stderr
    assert "No such file or directory" in r.stderr


def test_inc_test_pcap_with_connect_is_refused(tmp_path):
    r = offpath("inc_test", "--connect", tmp_path / "topo", "--pcap", tmp_path / "f.pcap")
    assert r.returncode == 2 and "--pcap" in r.stderr and "--connect" in r.stderr
    assert not (tmp_path / "f.pcap").exists()
