"""make demo's script (scripts/demo) as a user runs it after `make build`:
the job through the switches finishes, its table has every size with every
column, the MPI calls were offloaded, and the reading and the plot come out.
Few iterations: what is checked is that the demo works, not its numbers."""
import os
import re
import subprocess
from pathlib import Path

from conftest import BIN

SRC = Path(__file__).resolve().parents[2]
BUILD = Path(BIN).resolve().parents[2]  # BUILD/src/cli/offpath
ROW = re.compile(r"^(\d+)((?:\s+-?[\d.]+%?){7})\s*$")


def test_demo_runs_through_the_switches():
    env = dict(os.environ, BUILD=str(BUILD), DEMO_ITERS="3")
    r = subprocess.run(["/usr/bin/python3", str(SRC / "scripts" / "demo")], capture_output=True,
                       text=True, timeout=300, env=env, cwd="/")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = [ROW.match(l) for l in r.stdout.splitlines()]
    sizes = [int(m[1]) for m in rows if m]
    assert sizes == [4 << k for k in range(19)], r.stdout
    for m in filter(None, rows):
        host, node, sock, udp = (float(x) for x in m[2].split()[:4])
        assert min(host, node, sock, udp) > 0, m[0]
    calls = re.search(r"offpath: (\d+) allreduce calls: (\d+) offloaded", r.stderr)
    assert calls and int(calls[2]) > 0, r.stderr[-3000:]
    agg = re.search(r"switches aggregated (\d+) chunks", r.stderr)
    assert agg and int(agg[1]) > 0, r.stderr[-3000:]
    assert "Reading: up to 256 B, INC Node mode took" in r.stdout, r.stdout
    png = re.search(r"^plot: (\S+)$", r.stdout, re.M)
    assert png, r.stdout
    path = Path(png[1]) if os.path.isabs(png[1]) else SRC / png[1]
    assert path.stat().st_size > 10000
