"""offpath installed (meson install into a temporary prefix outside the
build and source folders) and run as a user runs it, from another folder:
every tool's --help and manual page, the links named after the original
tools, one short real run of the cheap tools, and the C API compiled and
linked through pkg-config. Every file the installed programs touch is
traced (strace): none may be in the build or source folder."""
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import BIN, next_net

SRC = Path(__file__).resolve().parents[2]
BUILD = Path(BIN).resolve().parents[2]  # BUILD/src/cli/offpath
# the tools that have a link named after the original (src/cli/meson.build)
LINKED = ["ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_write_lat", "ib_read_lat", "ib_send_lat",
          "ib_atomic_bw", "ib_atomic_lat", "raw_ethernet_bw", "raw_ethernet_lat", "osu_allreduce",
          "osu_iallreduce", "secure_channel", "allreduce", "dpa_all_to_all", "gpunetio_write_bw"]
# UDP/TCP ports of this file: below the ephemeral range, clear of the others'
_port = [26600 + (os.getpid() % 50) * 8]


def next_port():
    _port[0] += 1
    return _port[0]


def tools_of(help_text):
    """The tool names of `offpath --help` (the lines under "tools:")."""
    return re.findall(r"^  (\w+) ", help_text.split("tools:", 1)[1], re.M)


def strace_works():
    try:
        return subprocess.run(["strace", "-f", "--seccomp-bpf", "-qq", "-e", "trace=%file",
                               "-o", "/dev/null", "true"], capture_output=True,
                              timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


class Prefix:
    def __init__(self, tmp):
        opts = {o["name"]: o["value"] for o in json.loads(subprocess.run(
            ["meson", "introspect", str(BUILD), "--buildoptions"], capture_output=True, text=True,
            check=True).stdout)}
        self.tmp = tmp
        self.root = Path(tmp + opts["prefix"])
        self.bindir = self.root / opts["bindir"]
        self.libdir = self.root / opts["libdir"]
        self.links = self.root / opts["libexecdir"] / "offpath" / "bin"
        self.man1 = self.root / opts["mandir"] / "man1"
        self.share = self.root / opts["datadir"] / "offpath"
        self.offpath = self.bindir / "offpath"
        self.work = Path(tmp) / "work"  # the user's folder: the tools run here
        self.work.mkdir()
        self.traces = Path(tmp) / "traces"
        self.traces.mkdir()
        # nothing of the checkout on the PATH (Open MPI looks its programs up there)
        path = [p for p in os.environ.get("PATH", "").split(":") if p and not self.in_checkout(p)]
        # nor in the environment: PWD too is the user's folder (Open MPI stats it)
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("OFFPATH_") and str(SRC) not in v and str(BUILD) not in v}
        self.env.update(PATH=":".join(path), PWD=str(self.work))

    @staticmethod
    def in_checkout(path):
        p = os.path.realpath(path)
        return any(p == str(d) or p.startswith(str(d) + "/") for d in (SRC, BUILD))

    def argv(self, name, argv):
        return ["strace", "-f", "--seccomp-bpf", "-qq", "-e", "trace=%file,execve", "-o",
                str(self.traces / name)] + [str(a) for a in argv]

    def run(self, name, *argv, timeout=60, env=None):
        return subprocess.run(self.argv(name, argv), capture_output=True, text=True,
                              timeout=timeout, cwd=self.work, env=env or self.env)

    def start(self, name, *argv):
        return subprocess.Popen(self.argv(name, argv), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=self.work, env=self.env)

    def calls(self, name):
        """The traced run's lines, each call whole: with -f, a call another
        process interrupted comes as 'PID x(... <unfinished ...>' and later
        'PID <... x resumed>...'; joined here."""
        pending, out = {}, []
        for line in (self.traces / name).read_text(errors="replace").splitlines():
            pid, _, rest = line.partition(" ")
            if rest.endswith("<unfinished ...>"):
                pending[pid] = line[:-len("<unfinished ...>")]
            elif rest.startswith("<... ") and pid in pending:
                out.append(pending.pop(pid) + rest.split("resumed>", 1)[-1])
            else:
                out.append(line)
        return out

    def touched(self, name):
        """The paths of the checkout that traced run touched (none is right)."""
        bad = []
        for line in (self.traces / name).read_text(errors="replace").splitlines():
            for p in re.findall(r'"(/[^"]*)"', line):
                if self.in_checkout(p):
                    bad.append(line)
        return bad


@pytest.fixture(scope="module")
def inst():
    if not (BUILD / "meson-info").is_dir():
        pytest.skip(f"{BIN} is not in a meson build folder")
    tmp = tempfile.mkdtemp(prefix="offpath-install-", dir="/tmp")
    try:
        assert not Prefix.in_checkout(tmp)
        assert strace_works(), "strace cannot trace here (scripts/bootstrap installs it)"
        r = subprocess.run(["meson", "install", "-C", str(BUILD), "--no-rebuild", "--quiet",
                            "--destdir", tmp], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        yield Prefix(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def finish(p, timeout=60):
    try:
        out, err = p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=10)
    return p.returncode, out, err


def test_layout_links_and_manual_pages(inst):
    """bin holds offpath alone (nothing shadows perftest or DOCA on the
    PATH); the original tools' names are links to it in a folder of their
    own; every tool of --help has its manual page."""
    assert sorted(p.name for p in inst.bindir.iterdir()) == ["offpath"]
    assert sorted(p.name for p in inst.links.iterdir()) == sorted(LINKED)
    for t in LINKED:
        assert (inst.links / t).is_symlink()
        assert (inst.links / t).resolve() == inst.offpath.resolve(), t
    assert (inst.share / "examples" / "two-racks.topo").read_text() == \
        (SRC / "examples" / "two-racks.topo").read_text()
    tools = tools_of(inst.run("help", inst.offpath, "--help").stdout)
    assert len(tools) >= 25 and set(LINKED) <= set(tools)
    pages = ["offpath.1"] + [f"offpath-{t}.1" for t in tools]
    assert sorted(p.name for p in inst.man1.iterdir()) == sorted(pages)
    for page in pages:
        text = (inst.man1 / page).read_text()
        assert text.count(".TH ") == 1 and ".SH NAME" in text, page
    page = (inst.man1 / "offpath-ib_write_bw.1").read_text()
    assert '.TH OFFPATH-IB_WRITE_BW "1"' in page
    assert "offpath-ib_write_bw \\- perftest RDMA WRITE bandwidth over software RoCEv2" in page


def test_paths_all_in_the_prefix(inst):
    """What `offpath --paths` finds beside the build's binary, the
    installed one finds in its prefix (the MPI libraries and programs, the
    model's script and tables, the DNS XDP object)."""
    def paths(out):
        return dict(re.match(r"(\S+)\s+(.*)", l).groups() for l in out.splitlines())
    built = paths(subprocess.run([BIN, "--paths"], capture_output=True, text=True).stdout)
    r = inst.run("paths", inst.offpath, "--paths")
    assert r.returncode == 0, r.stderr
    installed = paths(r.stdout)
    assert set(installed) == set(built)
    assert {"liboffpath_mpi.so", "scripts/model_plot.py", "data/seed_tables.csv"} <= set(built)
    for what, where in built.items():
        if where == "(not found)":
            continue
        got = installed[what]
        assert got != "(not found)", what
        assert os.path.realpath(got).startswith(str(inst.root) + "/"), (what, got)
    assert inst.touched("paths") == []


def test_every_tool_help_from_the_prefix(inst):
    """Every tool's --help, by `offpath TOOL` and by its link, touching
    nothing of the checkout."""
    tools = tools_of(inst.run("help", inst.offpath, "--help").stdout)
    for t in tools:
        r = inst.run(f"help-{t}", inst.offpath, t, "--help")
        assert r.returncode == 0 and len(r.stdout) > 100, (t, r.stderr)
        assert inst.touched(f"help-{t}") == [], t
        if t in LINKED:
            by_link = inst.run(f"link-{t}", inst.links / t, "--help")
            assert (by_link.returncode, by_link.stdout) == (0, r.stdout), t


def test_inc_test_on_loopback(inst):
    net, _ = next_net()
    r = inst.run("inc_test", inst.offpath, "inc_test", "--leaders", 4, "--tors", 2, "--count", 256,
                 "--iters", 5, "--net", net, "--port", next_port(), "--json", "--quiet")
    rep = json.loads([l for l in r.stdout.splitlines() if l.startswith("{")][-1])
    assert r.returncode == 0 and rep["pass"] is True and rep["mismatches"] == 0, r.stderr
    assert inst.touched("inc_test") == []


def test_ib_write_bw_by_its_link(inst):
    port = next_port()
    tool = inst.links / "ib_write_bw"
    server = inst.start("bw-server", tool, "-p", port, "-n", 100, "-s", 4096)
    try:
        client = inst.run("bw-client", tool, "-p", port, "-n", 100, "-s", 4096, "127.0.0.1")
    finally:
        rc, out, err = finish(server)
    assert client.returncode == 0 and rc == 0, client.stderr + err
    assert "data check ok" in client.stdout
    assert re.search(r"^ 4096 +100 ", client.stdout, re.M), client.stdout
    assert inst.touched("bw-server") == [] and inst.touched("bw-client") == []


def test_keygen_secure_channel_and_allreduce(inst):
    """Keys by keygen, then a secure channel and a DOCA allreduce (one
    daemon, two offloaded clients) with them."""
    for name in ("a", "b"):
        r = inst.run(f"keygen-{name}", inst.offpath, "keygen", name)
        assert r.returncode == 0 and (inst.work / f"{name}.key").stat().st_mode & 0o777 == 0o600
        assert inst.touched(f"keygen-{name}") == []
    ep = f"tcp:127.0.0.1:{next_port()}"
    sc = inst.links / "secure_channel"
    agent = inst.start("sc-agent", sc, "-s", 64, "-n", 10, "-p", ep, "-r", "any", "--key", "a.key",
                       "--peer", "b.pub")
    try:
        host = inst.run("sc-host", sc, "-s", 64, "-n", 10, "-p", ep, "--key", "b.key", "--peer",
                        "a.pub")
    finally:
        rc, out, err = finish(agent)
    assert host.returncode == 0 and rc == 0, host.stderr + err
    assert "total amount of messages received successfully: 10" in out + err
    assert inst.touched("sc-agent") == [] and inst.touched("sc-host") == []

    port = next_port()
    job = ["-s", 16, "-d", "float", "-o", "sum", "-b", 1, "-i", 1, "--timeout", 30]
    procs = [inst.start("ar-daemon", inst.offpath, "allreduce", "-r", "daemon", "-t", port, "-c", 2,
                        "-a", f"127.0.0.1:{port}", "--key", "a.key", "--peer", "b.pub", *job)]
    procs += [inst.start(f"ar-client{i}", inst.offpath, "allreduce", "-r", "client", "-m",
                         "offloaded", "-a", f"127.0.0.1:{port}", "--key", "b.key", "--peer",
                         "a.pub", *job) for i in range(2)]
    res = [finish(p) for p in procs]
    assert [r[0] for r in res] == [0, 0, 0], [r[2] for r in res]
    for rc, out, err in res[1:]:
        assert "result check: 0 elements wrong (5 results" in out, out
    for name in ("ar-daemon", "ar-client0", "ar-client1"):
        assert inst.touched(name) == []


def test_mpirun_osu_allreduce_through_the_switches(inst):
    """mpirun preloads the installed liboffpath_mpi and runs the installed
    osu_allreduce_openmpi: every MPI_Allreduce goes through the switches."""
    if "(not found)" in inst.run("paths-mpi", inst.offpath, "--paths").stdout.split(
            "liboffpath_mpi.so", 1)[1].splitlines()[0]:
        pytest.skip("built without Open MPI")
    net, _ = next_net()
    r = inst.run("mpirun", inst.offpath, "mpirun", "--nodes", 2, "--net", net, "--port",
                 next_port(), "--verbose", "--", inst.links / "osu_allreduce", "-m", "4:64", "-i",
                 20, "-x", 5, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert [l.split()[0] for l in r.stdout.splitlines() if re.match(r"\d+ ", l)] == \
        ["4", "8", "16", "32", "64"]
    assert re.search(r"(\d+) allreduce calls: \1 offloaded, 0 fell back", r.stdout + r.stderr)
    assert inst.touched("mpirun") == []
    # the ranks' loader opened the preloaded library from the prefix
    opened = [os.path.normpath(m) for m in re.findall(
        r'openat\([^"]*"([^"]*liboffpath_mpi\.so)", [^)]*\) = \d+',
        "\n".join(inst.calls("mpirun")))]
    assert opened and all(p == f"{inst.libdir}/liboffpath_mpi.so" for p in opened), opened


def test_model_plot_and_dns_zone_from_the_prefix(inst):
    """The model's plot script and `offpath dns --check` of a zone file in
    the user's folder (the DNS XDP object: test_paths_all_in_the_prefix)."""
    r = inst.run("model", inst.offpath, "model", "project", "--nodes", 16, "--max-bytes", "1K",
                 "--link", "25G", "--plot", "plot.png")
    if "built without SimGrid" in r.stderr:
        pytest.skip("built without SimGrid")
    assert r.returncode == 0, r.stderr
    assert (inst.work / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert inst.touched("model") == []
    shutil.copy(SRC / "tests" / "dns" / "second.zone", inst.work / "second.zone")
    r = inst.run("dns", inst.offpath, "dns", "--zone", "second.zone", "--check")
    assert r.returncode == 0 and re.match(r"offpath dns: 1 zones, \d+ records", r.stdout), r.stderr
    assert inst.touched("dns") == []


def test_c_api_through_pkg_config(inst):
    """A 20-line program of another project, compiled and linked with
    nothing but `pkg-config --cflags --libs offpath` against the prefix."""
    shutil.copy(SRC / "tests" / "install" / "api_client.c", inst.work / "api_client.c")
    env = dict(inst.env, PKG_CONFIG_PATH=str(inst.libdir / "pkgconfig"),
               PKG_CONFIG_SYSROOT_DIR=inst.tmp)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "offpath"], capture_output=True,
                           text=True, env=env, check=True).stdout.split()
    assert f"-I{inst.root}/include" in flags and "-loffpath" in flags, flags
    r = subprocess.run(["cc", "-std=c17", "-Wall", "-Wextra", "-Werror", "api_client.c", "-o",
                        "api_client", *flags], capture_output=True, text=True, cwd=inst.work,
                       env=env)
    assert r.returncode == 0, r.stderr
    env = dict(inst.env, LD_LIBRARY_PATH=str(inst.libdir))
    ldd = subprocess.run(["ldd", "api_client"], capture_output=True, text=True, cwd=inst.work,
                         env=env).stdout
    assert f"liboffpath.so.0 => {inst.libdir}/liboffpath.so.0" in ldd, ldd
    r = inst.run("api", inst.work / "api_client", env=env)
    assert (r.returncode, r.stdout) == (0, "sum 11 22 33 44, parsed 4096, timed out\n"), r.stderr
    assert inst.touched("api") == []
