#!/usr/bin/python3
"""Plot `offpath model project`'s table: latency and INC's speedup against
node count (one line per message size) and against message size (largest
cluster), Node and Socket modes. usage: model_plot.py CSV PNG TITLE"""
import csv
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    rows = list(csv.DictReader(open(sys.argv[1])))
    if not rows:
        sys.exit("model_plot.py: no rows")
    for r in rows:
        for k in r:
            r[k] = float(r[k])
    sizes = sorted({r["bytes"] for r in rows})
    nodes = sorted({r["nodes"] for r in rows})
    fig, ax = plt.subplots(1, 3, figsize=(17, 5))
    for b in sizes[:: max(1, len(sizes) // 5)]:
        sel = [r for r in rows if r["bytes"] == b]
        label = f"{int(b)} B" if b < 1024 else f"{int(b) // 1024} KiB" if b < 1 << 20 else f"{int(b) >> 20} MiB"
        line, = ax[0].plot([r["nodes"] for r in sel], [r["host_us"] / r["node_us"] for r in sel], "o-", label=f"{label} Node")
        ax[0].plot([r["nodes"] for r in sel], [r["host_us"] / r["socket_us"] for r in sel], "s--", color=line.get_color(), label=f"{label} Socket")
    ax[0].axhline(1.0, color="grey", lw=0.8)
    ax[0].set(xscale="log", yscale="log", xlabel="nodes", ylabel="speedup (host latency / INC latency)", title="INC speedup against node count")
    ax[0].legend(fontsize=7)
    big = [r for r in rows if r["nodes"] == nodes[-1]]
    for key, style, name in (("host_us", "k^-", "host"), ("node_us", "o-", "INC Node"), ("socket_us", "s--", "INC Socket")):
        ax[1].plot([r["bytes"] for r in big], [r[key] for r in big], style, label=name)
    ax[1].set(xscale="log", yscale="log", xlabel="message size (bytes)", ylabel="latency (us)", title=f"{int(nodes[-1])} nodes")
    ax[1].legend()
    ax[2].plot([r["bytes"] for r in big], [r["slots"] for r in big], "o-")
    ax[2].set(xscale="log", xlabel="message size (bytes)", ylabel="slots per group, per switch", title="switch memory a group holds")
    fig.suptitle(sys.argv[3])
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
