"""offpath secure_channel and keygen as real processes: every transport,
sizes 1 B .. 64 KiB, DOCA's flags, JSON file and log levels, and attacks on
the channel (wrong key, flipped bit, replay, reorder, truncation, injection,
a stalled or vanished peer) through a TCP proxy this test controls.

Ports 30000-30999 only: below the kernel's ephemeral range (32768-60999),
so a connection's own port never takes one between our check and the
listen. Every process is stopped by PID (the procs fixture)."""
import itertools
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time

import pytest

from conftest import BIN, offpath

_ports = itertools.count(30100 + (os.getpid() % 50) * 12)
HS = 50  # bytes of each handshake message


def next_port():
    """The next port of ours that nothing holds now (an ephemeral port of
    a test before can still hold one)."""
    while True:
        port = next(_ports)
        assert port < 31000
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    d = tmp_path_factory.mktemp("keys")
    for name in ("agent", "host", "mallory"):
        r = offpath("keygen", d / name)
        assert r.returncode == 0, r.stderr
    return d


def endpoint(kind, tmp_path):
    if kind == "unix":
        return f"unix:{tmp_path}/ch.sock"
    if kind == "shm":
        return f"shm:pytest-{os.getpid()}-{next_port()}"
    return f"tcp:127.0.0.1:{next_port()}"


def start(procs, *args):
    return procs.start("secure_channel", *args)


def finish(p, timeout=60):
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err


def run_pair(procs, keys, tmp_path, ep, n, size, agent_extra=(), host_extra=(),
             host_ep=None, host_key="host", timeout=60):
    aj, hj = tmp_path / "agent.json", tmp_path / "host.json"
    for f in (aj, hj):
        if f.exists():
            f.unlink()
    a = start(procs, "-s", size, "-n", n, "-p", ep, "-r", "any", "--key", keys / "agent.key",
              "--peer", keys / "host.pub", "--json-out", aj, *agent_extra)
    h = start(procs, "-s", size, "-n", n, "-p", host_ep or ep, "--key", keys / f"{host_key}.key",
              "--peer", keys / "agent.pub", "--json-out", hj, *host_extra)
    ra, rh = finish(a, timeout), finish(h, timeout)
    load = lambda f: json.loads(f.read_text()) if f.exists() else None
    return ra, rh, load(aj), load(hj)


RECORD_MAX, BATCH_BYTES = 16384, 65536


def per_record(size):
    return max(1, RECORD_MAX // (size + 4))


def records_for(n, size):
    return -(-n // per_record(size))


def writes_for(n, size):
    full_record = per_record(size) * (size + 4) + 20
    return -(-records_for(n, size) // -(-BATCH_BYTES // full_record))


def assert_clean(res, n, size, peer_n=None, peer_size=None):
    peer_n, peer_size = peer_n or n, peer_size or size
    assert res["ok"] is True
    assert res["sent"] == n and res["received"] == peer_n
    assert res["peer_num_msgs"] == peer_n and res["peer_msg_size"] == peer_size
    # One frame per message plus the {num_msgs, msg_size} header, both ways.
    assert res["tx"]["frames_sealed"] == n + 1
    assert res["tx"]["bytes_sealed"] == n * size + 16
    # Batching: the header goes alone; the messages go in batch records of
    # up to 16 KiB of plaintext (each message behind 4 length bytes), one
    # AEAD call each; sealed records leave once 64 KiB are buffered and the
    # last one at once (a lone message is never held back).
    assert res["tx"]["records_sealed"] == 1 + records_for(n, size)
    assert res["tx"]["writes"] == 1 + writes_for(n, size)
    rx = res["rx"]
    assert rx["frames_opened"] == peer_n + 1
    assert rx["bytes_opened"] == peer_n * peer_size + 16
    assert rx["records_opened"] == 1 + records_for(peer_n, peer_size)
    assert rx["auth_failed"] + rx["bad_length"] + rx["truncated"] + rx["handshake_failed"] == 0


CASES = [(1, 1), (10, 256), (1000, 4096), (100000, 64), (20, 65536)]


@pytest.mark.parametrize("kind", ["unix", "tcp", "shm"])
@pytest.mark.parametrize("n,size", CASES, ids=[f"{n}x{s}" for n, s in CASES])
def test_transport_sizes(procs, keys, tmp_path, kind, n, size):
    extra = ("--max-msg-size", 65536) if size > 65535 else ()
    (rca, outa, erra), (rch, outh, errh), ja, jh = run_pair(
        procs, keys, tmp_path, endpoint(kind, tmp_path), n, size, extra, extra)
    assert rca == 0, outa + erra
    assert rch == 0, outh + errh
    assert_clean(ja, n, size)
    assert_clean(jh, n, size)
    assert ja["transport"] == kind and ja["role"] == "agent" and jh["role"] == "host"
    assert ja["cipher"] == jh["cipher"] and ja["cipher"] in ("aes256gcm", "xchacha20poly1305")
    assert "Started Listening, waiting for new connection" in outa
    assert "Connection to DPU was established successfully" in outh
    for out in (outa, outh):
        assert f"Send thread exiting, total amount of messages sent successfully: {n}" in out
        assert (f"Receive thread exiting, total amount of messages received successfully: {n}"
                in out)
        assert re.search(rf"Producer sent {n} messages in approximately [0-9.]+ milliseconds", out)
        assert re.search(rf"Consumer received {n} messages in approximately [0-9.]+ milliseconds",
                         out)
        assert re.search(r"SEND START TIME: [0-9.]+ seconds", out)
        assert re.search(r"receive end at: [0-9.]+ seconds", out)
        assert re.search(r"Average time per message: send [0-9.]+ us, receive [0-9.]+ us", out)


REKEY_BYTES = 1 << 30  # OP_CHAN_REKEY_BYTES


def test_rekeys_at_the_default_interval(procs, keys, tmp_path):
    """1.2 GB each way crosses the 1 GiB a key lasts: both sides move to a
    new key after the same frame (nothing is sent for it), every byte still
    arrives intact, and each side counts as many new keys as its peer."""
    n, size = 20000, 60000  # each message is a record of its own
    (rca, outa, _), (rch, outh, _), ja, jh = run_pair(
        procs, keys, tmp_path, endpoint("shm", tmp_path), n, size, timeout=120)
    assert (rca, rch) == (0, 0), outa + outh
    header = 16 + 20  # the {num_msgs, msg_size} frame
    batched = (n - 1) * (4 + 4 + size + 16)  # frame header, length, message, tag
    last = 4 + size + 16  # the last goes at once in a single-message frame
    want = (header + batched + last) // REKEY_BYTES
    assert want == 1
    for res, peer in ((ja, jh), (jh, ja)):
        assert res["ok"] is True and res["received"] == n
        assert res["tx"]["tx_rekeys"] == want
        assert peer["rx"]["rx_rekeys"] == want
        assert res["rx"]["auth_failed"] == 0


@pytest.mark.parametrize("kind", ["unix", "shm"])
def test_largest_messages(procs, keys, tmp_path, kind):
    """--max-msg-size's upper end: 16 MiB messages (larger than the shm ring)."""
    big = 16 << 20
    extra = ("--max-msg-size", big)
    (rca, outa, _), (rch, outh, _), ja, jh = run_pair(
        procs, keys, tmp_path, endpoint(kind, tmp_path), 2, big, extra, extra)
    assert (rca, rch) == (0, 0), outa + outh
    assert_clean(ja, 2, big)
    assert_clean(jh, 2, big)


def test_both_ciphers(procs, keys, tmp_path):
    for cipher in ("xchacha20poly1305", "aes256gcm"):
        extra = ("--cipher", cipher)
        (rca, outa, _), (rch, outh, _), ja, jh = run_pair(
            procs, keys, tmp_path, endpoint("unix", tmp_path), 100, 300, extra, extra)
        assert (rca, rch) == (0, 0), outa + outh
        assert ja["cipher"] == jh["cipher"] == cipher
        assert_clean(ja, 100, 300)


def test_mismatched_num_msgs(procs, keys, tmp_path):
    """As the seed's runs show (agent -n 100, host -n 200: the agent received
    200, the host 100): each side sends its own -n and receives what the
    peer announced."""
    ep = endpoint("tcp", tmp_path)
    (rca, outa, _), (rch, outh, _), ja, jh = run_pair(
        procs, keys, tmp_path, ep, 100, 256, host_extra=("-n", 200))
    assert (rca, rch) == (0, 0), outa + outh
    assert ja["sent"] == 100 and ja["received"] == 200
    assert jh["sent"] == 200 and jh["received"] == 100
    assert "total amount of messages received successfully: 200" in outa
    assert "total amount of messages sent successfully: 200" in outh
    assert re.search(r"\]\[DOCA\]\[WRN\]\[secure_channel\.c:\d+\]\[secure_channel\] The peer's -n/-s "
                     r"\(200 x 256 B\) differ from ours \(100 x 256 B\)", outa), outa


def test_mismatched_msg_size(procs, keys, tmp_path):
    """Sizes may differ too: each side checks the peer's announced size."""
    (rca, outa, _), (rch, outh, _), ja, jh = run_pair(
        procs, keys, tmp_path, endpoint("shm", tmp_path), 30, 100, host_extra=("-s", 3000))
    assert (rca, rch) == (0, 0), outa + outh
    assert_clean(ja, 30, 100, peer_n=30, peer_size=3000)
    assert_clean(jh, 30, 3000, peer_n=30, peer_size=100)


def test_keys_from_json(procs, keys, tmp_path):
    """--key, --peer and -r in the JSON file, as the flags."""
    ep = endpoint("unix", tmp_path)
    cfg = lambda me, peer, agent: json.dumps({
        "doca_general_flags": {"log-level": 50},
        "doca_program_flags": dict({"msg-size": 64, "num-msgs": 5, "pci-addr": ep,
                                    "key": str(keys / f"{me}.key"),
                                    "peer": str(keys / f"{peer}.pub")},
                                   **({"rep-pci": "any"} if agent else {}))})
    (tmp_path / "a.json").write_text(cfg("agent", "host", True))
    (tmp_path / "h.json").write_text(cfg("host", "agent", False))
    a = start(procs, "-j", tmp_path / "a.json")
    h = start(procs, "-j", tmp_path / "h.json")
    (rca, outa, _), (rch, outh, _) = finish(a), finish(h)
    assert (rca, rch) == (0, 0), outa + outh
    assert "Started Listening, waiting for new connection" in outa
    assert "total amount of messages received successfully: 5" in outh


SEED_JSON = """{
    "doca_general_flags": {
        // -l - Set the (numeric) log level for the program <10=DISABLE, 20=CRITICAL, 30=ERROR, 40=WARNING, 50=INFO, 60=DEBUG>
        "log-level": %d
    },
    "doca_program_flags": {
        // -s - message size in bytes
        "msg-size": %d,
        // -n - number of messages to send
        "num-msgs": 10,
        // -p - commm channel doca device pci address
        "pci-addr": "%s",
    }
}
"""


def test_seed_json_file(procs, keys, tmp_path):
    ep = endpoint("unix", tmp_path)
    f = tmp_path / "sc_params.json"
    f.write_text(SEED_JSON % (70, 512, ep))
    keyargs = ("--key", keys / "agent.key", "--peer", keys / "host.pub")
    a = start(procs, "--json", f, "-r", "any", *keyargs)
    h = start(procs, "-j", f, "--key", keys / "host.key", "--peer", keys / "agent.pub")
    (rca, outa, _), (rch, outh, _) = finish(a), finish(h)
    assert (rca, rch) == (0, 0), outa + outh
    for out in (outa, outh):
        assert "Will send 10 messages of size 512 bytes" in out
        assert [int(x) for x in re.findall(r"\[TRC\]\[[\w.]+:\d+\]\[secure_channel\] message sent: (\d+)", out)] == list(range(10))
        assert ([int(x) for x in re.findall(r"\[TRC\]\[[\w.]+:\d+\]\[secure_channel\] message received: (\d+)", out)]
                == list(range(10)))


@pytest.mark.parametrize("level", [30, 10])
def test_seed_json_msg_size_error(keys, tmp_path, level):
    """The seed's error runs: msg-size 10000 above DOCA 2.x's limit (here
    --max-msg-size 4080 plays DOCA 2.x's CC_MAX_MSG_SIZE)."""
    f = tmp_path / "sc_params.json"
    f.write_text(SEED_JSON % (level, 10000, "unix:/tmp/never.sock"))
    r = offpath("secure_channel", "--json", f, "--max-msg-size", 4080, "--key",
                keys / "host.key", "--peer", keys / "agent.pub")
    assert r.returncode == 2
    line = 'Encountered an error [Invalid input] while handling param "msg-size"'
    assert re.search(r"\]\[DOCA\]\[ERR\]\[channel_cmd\.c:\d+\]\[secure_channel\] " + re.escape(line),
                     r.stdout) and line in r.stderr
    assert "Usage: offpath secure_channel [DOCA Flags] [Program Flags]" in r.stderr
    app_line = "Received message size is not supported"
    assert (app_line in r.stdout) == (level >= 30)
    assert ("Failed to parse application input: Invalid input" in r.stdout) == (level >= 30)


def test_log_levels(procs, keys, tmp_path):
    """10 and 30: nothing on a clean run (DOCA prints nothing either); 50:
    the INFO lines; 70: one TRACE line per message each way."""
    n = 20
    for level in (10, 30, 50, 70):
        extra = ("-l", level)
        (rca, outa, _), (rch, outh, _), _, _ = run_pair(
            procs, keys, tmp_path, endpoint("shm", tmp_path), n, 64, extra, extra)
        assert (rca, rch) == (0, 0)
        for out in (outa, outh):
            if level <= 30:
                assert out == ""
                continue
            assert "Send thread exiting, total amount of messages sent successfully: 20" in out
            assert len(re.findall(r"\[TRC\]\[[\w.]+:\d+\]\[secure_channel\] message sent: \d+", out)) == (n if level == 70 else 0)
            assert (len(re.findall(r"\[TRC\]\[[\w.]+:\d+\]\[secure_channel\] message received: \d+", out))
                    == (n if level == 70 else 0))
            assert "[DBG]" not in out or level >= 60


def test_param_errors(keys, tmp_path):
    keyargs = ("--key", keys / "host.key", "--peer", keys / "agent.pub")
    cases = [
        (("-s", 65536, "-n", 1, "-p", "shm:x"), "msg-size"),
        (("-s", 0, "-n", 1, "-p", "shm:x"), "msg-size"),
        (("-s", 1, "-n", 0, "-p", "shm:x"), "num-msgs"),
        (("-s", 1, "-n", 1, "-p", "0000:03:00.0"), "pci-addr"),
        (("-s", 1, "-n", 1, "-p", "shm:x", "-l", 99), "log-level"),
        (("-s", 1, "-n", 1, "-p", "unix:/tmp/x", "-r", "10.0.0.1"), "rep-pci"),
        (("-s", 1, "-n", 1, "-p", "shm:x", "--cipher", "rot13"), "cipher"),
        (("-s", 1, "-n", 1), "pci-addr"),
        (("-n", 1, "-p", "shm:x"), "msg-size"),
    ]
    for args, param in cases:
        r = offpath("secure_channel", *args, *keyargs)
        assert r.returncode == 2, (args, r.stdout)
        assert f'Encountered an error [Invalid input] while handling param "{param}"' in r.stderr
    assert offpath("secure_channel", "--help").returncode == 0
    assert "--max-msg-size" in offpath("secure_channel", "--help").stdout


def test_bad_json_and_keys(keys, tmp_path):
    f = tmp_path / "bad.json"
    f.write_text('{\n  "doca_program_flags": {\n    "msg-size": 256\n    "num-msgs": 1\n  }\n}\n')
    r = offpath("secure_channel", "-j", f)
    assert r.returncode == 2
    assert re.search(r"bad\.json: line 4, column \d+: ", r.stdout)
    assert 'while handling param "json"' in r.stderr
    base = ("-s", 1, "-n", 1, "-p", "shm:x")
    r = offpath("secure_channel", *base, "--key", tmp_path / "none.key", "--peer",
                keys / "agent.pub")
    assert r.returncode == 2 and "No such file or directory" in r.stdout
    assert 'while handling param "key"' in r.stderr
    loose = tmp_path / "loose.key"
    loose.write_text((keys / "host.key").read_text())
    loose.chmod(0o644)
    r = offpath("secure_channel", *base, "--key", loose, "--peer", keys / "agent.pub")
    assert r.returncode == 2 and "readable by group or others" in r.stdout
    r = offpath("secure_channel", *base, "--key", keys / "host.key", "--peer", keys / "host.key")
    assert r.returncode == 2 and "is not a public key file" in r.stdout
    assert 'while handling param "peer"' in r.stderr


def test_keygen(tmp_path):
    r = offpath("keygen", tmp_path / "k")
    assert r.returncode == 0
    assert oct((tmp_path / "k.key").stat().st_mode & 0o777) == "0o600"
    assert re.fullmatch(r"offpath-x25519-public [0-9a-f]{64}\n", (tmp_path / "k.pub").read_text())
    assert re.fullmatch(r"offpath-x25519-secret [0-9a-f]{64}\n", (tmp_path / "k.key").read_text())
    r = offpath("keygen", tmp_path / "k")
    assert r.returncode == 1 and "File exists" in r.stderr
    assert offpath("keygen").returncode == 2
    assert offpath("keygen", "--help").returncode == 0


@pytest.mark.parametrize("kind", ["unix", "tcp", "shm"])
def test_wrong_key_refused(procs, keys, tmp_path, kind):
    (rca, outa, _), (rch, outh, _), ja, jh = run_pair(
        procs, keys, tmp_path, endpoint(kind, tmp_path), 10, 64, ("--timeout", 5),
        ("--timeout", 5), host_key="mallory")
    assert rca == 1 and rch == 1
    assert ("handshake refused: the peer does not hold the pinned key" in outa
            and "(handshake_failed 1, handshake_malformed 0)" in outa)
    assert "did the agent refuse our key?" in outh
    assert ja is None and jh is None  # no session, no message


# ---- a proxy that tampers with the host -> agent stream ----

class Proxy:
    """Listens on port, connects to the agent's port; forwards both ways. The
    host -> agent stream is cut into frames after the handshake message and
    `tamper(frames)` may rewrite the list of frames (bytes) before they go.
    Frame 0 is the {num_msgs, msg_size} header (a single-message frame), then
    batch records (two 8000-byte messages each in test_tampered_stream_refused:
    frame k holds messages 2k-2 and 2k-1)."""

    def __init__(self, port, agent_port, mode, at=6):
        self.mode, self.at, self.agent_port = mode, at, agent_port
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", port))
        self.ls.listen(1)
        self.ls.settimeout(20)
        self.captured = bytearray()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        try:
            h, _ = self.ls.accept()
        except OSError:
            return
        deadline = time.monotonic() + 10
        while True:  # the agent may still be starting
            try:
                a = socket.create_connection(("127.0.0.1", self.agent_port), timeout=20)
                break
            except OSError:
                if time.monotonic() > deadline:
                    h.close()
                    return
                time.sleep(0.02)
        threading.Thread(target=self.pump_back, args=(a, h), daemon=True).start()
        if self.mode == "pass":  # raw bytes: no frame parsing (plaintext has no handshake)
            self.pump_back(h, a)
        else:
            self.pump_forward(h, a)

    def pump_back(self, a, h):
        try:
            while (d := a.recv(65536)):
                self.captured += d
                h.sendall(d)
        except OSError:
            pass
        try:
            h.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def frames(self, h):
        buf = b""
        def need(k):
            nonlocal buf
            while len(buf) < k:
                d = h.recv(65536)
                if not d:
                    return False
                self.captured += d
                buf += d
            return True
        if not need(HS):
            return
        yield buf[:HS]
        buf = buf[HS:]
        while need(4):
            (ln,) = struct.unpack(">I", buf[:4])
            ln &= 0x7fffffff  # the batch-record flag
            if not need(4 + ln):
                return
            yield buf[:4 + ln]
            buf = buf[4 + ln:]

    def pump_forward(self, h, a):
        k = -1  # the handshake message
        held = None
        try:
            for f in self.frames(h):
                out = [f]
                if k == self.at:
                    out = self.tamper(f)
                    if out is None:  # truncation: half a frame, then the end
                        a.sendall(f[:len(f) // 2])
                        break
                    if self.mode == "reorder":
                        held, out = f, []
                elif k == self.at + 1 and held is not None:
                    out = [f, held]
                for x in out:
                    a.sendall(x)
                k += 1
        except OSError:
            pass
        try:
            a.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def tamper(self, f):
        if self.mode == "flip":
            b = bytearray(f)
            b[len(b) // 2] ^= 0x10
            return [bytes(b)]
        if self.mode == "replay":
            return [f, f]
        if self.mode == "inject":
            body = os.urandom(len(f) - 4)
            return [f[:4] + body, f]
        if self.mode == "truncate":
            return None
        return [f]  # pass (and reorder, handled by the caller)

    def close(self):
        self.ls.close()


ATTACKS = {"flip": "auth_failed", "replay": "auth_failed", "reorder": "auth_failed",
           "inject": "auth_failed", "truncate": "truncated"}


@pytest.mark.parametrize("mode", list(ATTACKS))
def test_tampered_stream_refused(procs, keys, tmp_path, mode):
    agent_port, proxy_port = next_port(), next_port()
    px = Proxy(proxy_port, agent_port, mode, at=6)
    n = 50
    assert per_record(8000) == 2
    try:
        (rca, outa, _), (rch, outh, _), ja, jh = run_pair(
            procs, keys, tmp_path, f"tcp:127.0.0.1:{agent_port}", n, 8000, ("--timeout", 5),
            ("--timeout", 5), host_ep=f"tcp:127.0.0.1:{proxy_port}")
    finally:
        px.close()
    assert rca == 1, outa
    assert ja is not None and ja["ok"] is False
    # Messages 0..9 (records 1..5) arrived intact and in order (and 10, 11
    # too when only record 6's second copy was the attack); nothing of the
    # attacked record or after it.
    delivered = 12 if mode == "replay" else 10
    assert ja["received"] == delivered
    assert ja["rx"]["frames_opened"] == delivered + 1
    assert ja["rx"][ATTACKS[mode]] == 1
    others = {k: v for k, v in ja["rx"].items()
              if k not in ("frames_opened", "bytes_opened", "records_opened", "reads",
                           ATTACKS[mode])}
    assert set(others.values()) == {0}
    assert "Message was not received" in outa
    assert "Session failed; receive counters:" in outa
    # The host received the agent's messages untouched (or stopped when the agent left).
    assert jh is not None and jh["rx"]["auth_failed"] == 0


def test_capture_holds_no_plaintext(procs, keys, tmp_path):
    """The proxy sees exactly the TCP payload; message i is bytes (i + j) & 0xff,
    so any 24-byte ascending run would be plaintext. The plaintext baseline
    proves the detector finds it."""
    for plaintext in (False, True):
        agent_port, proxy_port = next_port(), next_port()
        px = Proxy(proxy_port, agent_port, "pass", at=-10)
        extra = ("--insecure-plaintext",) if plaintext else ()
        try:
            (rca, outa, _), (rch, outh, _), ja, _ = run_pair(
                procs, keys, tmp_path, f"tcp:127.0.0.1:{agent_port}", 200, 256, extra, extra,
                host_ep=f"tcp:127.0.0.1:{proxy_port}")
        finally:
            px.close()
        assert (rca, rch) == (0, 0), outa + outh
        assert len(px.captured) > 2 * 200 * 256
        assert ascending_run(bytes(px.captured)) == plaintext


def ascending_run(data, length=24):
    """Message i is bytes (i + j) & 0xff: a 24-byte ascending run is plaintext."""
    run = 1
    for x, y in zip(data, data[1:]):
        run = run + 1 if y == (x + 1) & 0xff else 1
        if run >= length:
            return True
    return False


def tcp_payloads(pcap):
    """The TCP payload bytes of a little-endian Ethernet pcap, in order."""
    magic, = struct.unpack("<I", pcap[:4])
    assert magic == 0xa1b2c3d4 and struct.unpack("<I", pcap[20:24])[0] == 1  # DLT_EN10MB
    at, out = 24, []
    while at + 16 <= len(pcap):
        incl, = struct.unpack("<I", pcap[at + 8:at + 12])
        frame = pcap[at + 16:at + 16 + incl]
        at += 16 + incl
        if len(frame) < 34 or frame[12:14] != b"\x08\x00" or frame[23] != 6:
            continue
        ip = 14 + (frame[14] & 0x0f) * 4
        total = struct.unpack(">H", frame[16:18])[0]
        tcp_len = (frame[ip + 12] >> 4) * 4
        out.append(frame[ip + tcp_len:14 + total])
    return b"".join(out)


@pytest.mark.skipif(shutil.which("tcpdump") is None or os.geteuid() != 0,
                    reason="needs tcpdump and root")
def test_tcpdump_capture_holds_no_plaintext(procs, keys, tmp_path):
    """The same with a real capture of the loopback interface (tcpdump): the
    TCP payloads of an encrypted run hold no plaintext; the plaintext run's
    do (so the check can fail)."""
    for plaintext in (False, True):
        port = next_port()
        pcap = tmp_path / f"run{int(plaintext)}.pcap"
        dump = subprocess.Popen(["tcpdump", "-i", "lo", "-U", "-n", "--immediate-mode", "-w",
                                 str(pcap), f"tcp port {port}"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        try:
            assert "listening on" in dump.stderr.readline()
            extra = ("--insecure-plaintext",) if plaintext else ()
            (rca, outa, _), (rch, outh, _), _, _ = run_pair(
                procs, keys, tmp_path, f"tcp:127.0.0.1:{port}", 200, 256, extra, extra)
            assert (rca, rch) == (0, 0), outa + outh
            time.sleep(0.2)
        finally:
            dump.send_signal(signal.SIGINT)
            dump.wait(timeout=10)
        payload = tcp_payloads(pcap.read_bytes())
        assert len(payload) > 2 * 200 * 256
        assert ascending_run(payload) == plaintext


def test_stalled_peer_times_out(procs, keys, tmp_path):
    """A peer that connects and says nothing: the agent gives up at --timeout."""
    port = next_port()
    a = start(procs, "-s", 64, "-n", 10, "-p", f"tcp:127.0.0.1:{port}", "-r", "any", "--key",
              keys / "agent.key", "--peer", keys / "host.pub", "--timeout", 1)
    deadline = time.monotonic() + 5
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", port))
            break
        except OSError:
            assert time.monotonic() < deadline
            time.sleep(0.02)
    t0 = time.monotonic()
    rc, out, _ = finish(a, timeout=10)
    took = time.monotonic() - t0
    s.close()
    assert rc == 1
    assert "nothing from the peer before the timeout (stalled?)" in out
    assert took < 3


@pytest.mark.parametrize("kind", ["shm", "tcp"])
def test_vanished_peer_detected(procs, keys, tmp_path, kind):
    """The host is killed mid-run: the agent reports it within its timeout."""
    ep = endpoint(kind, tmp_path)
    n = 100000000
    a = start(procs, "-s", 64, "-n", 1000, "-p", ep, "-r", "any", "--key", keys / "agent.key",
              "--peer", keys / "host.pub", "--timeout", 3)
    h = start(procs, "-s", 64, "-n", n, "-p", ep, "--key", keys / "host.key", "--peer",
              keys / "agent.pub")
    time.sleep(1.0)
    assert h.poll() is None and a.poll() is None
    t0 = time.monotonic()
    h.send_signal(signal.SIGKILL)
    h.wait(timeout=10)
    rc, out, _ = finish(a, timeout=10)
    assert rc == 1
    assert time.monotonic() - t0 < 5
    assert re.search(r"Message was not received: (the peer process is gone|the peer closed "
                     r"the connection|the stream ended inside a frame)", out), out
    assert "Receive thread exiting, total amount of messages received successfully:" in out
