"""Helpers of the system tests that build namespace topologies (`offpath
topo`): each test's topologies under names of its own, removed by those
names whatever happens."""
import os
import re
import subprocess

from conftest import offpath

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "two-racks.topo")


def our_netns(name):
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return sorted(l.split()[0] for l in out.splitlines() if l.startswith(f"opt-{name}-"))


def in_netns(ns):
    """PIDs of the processes in network namespace ns."""
    ino = os.stat(f"/run/netns/{ns}").st_ino
    pids = []
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and os.stat(f"/proc/{p}/ns/net").st_ino == ino:
                pids.append(int(p))
        except OSError:
            pass
    return pids


def edit(path, old, new):
    """Replaces a line's text in a topology file (a link's attributes)."""
    with open(path) as f:
        text = f.read()
    assert old in text, old
    with open(path, "w") as f:
        f.write(text.replace(old, new))


class Topologies:
    """Topology files under fresh names (PREFIX<pid>x<n>) in tmp_path;
    remove() takes every one down and deletes what `down` left."""
    count = 0

    def __init__(self, tmp_path, prefix):
        self.tmp_path, self.prefix, self.made = tmp_path, prefix, []

    def write(self, text):
        Topologies.count += 1
        name = f"{self.prefix}{os.getpid() % 100000}x{Topologies.count}"
        path = self.tmp_path / f"{name}.topo"
        path.write_text(re.sub(r"(?m)^topo \S+", f"topo {name}", text))
        self.made.append((str(path), name))
        return str(path), name

    def remove(self):
        for path, name in self.made:
            offpath("topo", "down", path, timeout=60)
            for ns in our_netns(name):  # by our own names only, should down have failed
                subprocess.run(["ip", "netns", "del", ns])
