#!/usr/bin/python3
"""Plots of a `rocemu sim` run: reads DIR/summary.json and DIR/*.csv and
writes DIR/flows.png, queues.png, cnp.png, pfc.png and (when the NICs
report DCQCN state) dcqcn.png. Every plot carries the scenario's name and
description, axis labels with units and a legend, so it reads without the
scenario file.

    python3 scripts/sim-plot.py DIR

`rocemu sim` runs it after a run (skip with --no-plots). Exit status 3 if
matplotlib is not installed (Debian: python3-matplotlib).
"""
import csv
import json
import os
import sys
import textwrap

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("sim-plot.py: matplotlib is not installed (apt-get install python3-matplotlib)", file=sys.stderr)
    sys.exit(3)

MAX_LEGEND = 12


def read_csv(path):
    """(time_us, {column: values}) or None if the file is absent or has no data columns."""
    if not os.path.exists(path):
        return None
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if len(rows) < 2 or len(rows[0]) < 2:
        return None
    header, data = rows[0], rows[1:]
    time = [float(r[0]) for r in data]
    cols = {name: [float(r[i]) for r in data] for i, name in enumerate(header) if i > 0}
    return time, cols


def new_figure(summary, what, rows=1):
    # Constrained layout leaves room for a title of several lines.
    fig, axes = plt.subplots(rows, 1, figsize=(10, 4.2 * rows), sharex=True, squeeze=False, layout="constrained")
    title = f"{summary['scenario']}: {what}"
    if summary.get("description"):
        title += "\n" + textwrap.fill(summary["description"], 110)
    fig.suptitle(title, fontsize=11)
    return fig, [a[0] for a in axes]


def finish(fig, axes, path, n_lines):
    for ax in axes:
        ax.grid(True, alpha=0.3)
        if 0 < n_lines <= MAX_LEGEND:
            ax.legend(fontsize=8, loc="best")
    axes[-1].set_xlabel("virtual time since the scenario's start (µs)")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"plots: {path}")


def plot_flows(d, summary):
    series = read_csv(os.path.join(d, "flows.csv"))
    if series is None:
        return
    time, cols = series
    fig, (ax,) = new_figure(summary, "per-flow send rate")
    flows = summary.get("flows", {})
    for name, v in cols.items():
        flow = name.removesuffix("_gbps")
        f = flows.get(flow)
        label = f"{flow} ({f['src']} → {f['dst']}, {f['verb']})" if f else flow
        ax.plot(time, v, label=label, linewidth=1)
    ax.set_ylabel("rate of new payload sent (Gbit/s)")
    if len(cols) > MAX_LEGEND:
        ax.set_title(f"{len(cols)} flows", fontsize=9)
    finish(fig, [ax], os.path.join(d, "flows.png"), len(cols))


def plot_queues(d, summary):
    series = read_csv(os.path.join(d, "queues.csv"))
    if series is None:
        print("plots: queues.png skipped (every switch queue stayed empty)")
        return
    time, cols = series
    fig, (ax,) = new_figure(summary, "switch egress queue depth")
    for name, v in cols.items():
        ax.plot(time, [x / 1000 for x in v], label=name.removesuffix("_bytes"), linewidth=1)
    ax.set_ylabel("queue depth (KB, 1 KB = 1000 bytes)")
    finish(fig, [ax], os.path.join(d, "queues.png"), len(cols))


def plot_cnp(d, summary):
    series = read_csv(os.path.join(d, "cnp.csv"))
    if series is None:
        return
    time, cols = series
    labels = {
        "cnp_sent_per_s": "CNPs sent by receivers (NP)",
        "cnp_handled_per_s": "CNPs handled by senders (RP)",
        "ecn_marked_per_s": "packets ECN-marked by switches",
    }
    fig, (ax,) = new_figure(summary, "congestion notification")
    for name, v in cols.items():
        ax.plot(time, [x / 1000 for x in v], label=labels.get(name, name), linewidth=1)
    ax.set_ylabel("events per second (thousands)")
    finish(fig, [ax], os.path.join(d, "cnp.png"), len(cols))


def plot_pfc(d, summary):
    """A heat map, one row per switch port and priority: how much of each
    sample interval it asserted XOFF (its senders paused) or had its egress
    paused by PFC it received. Lines would not tell 16 ports apart."""
    series = read_csv(os.path.join(d, "pfc.csv"))
    if series is None:
        print("plots: pfc.png skipped (no port was ever paused)")
        return
    time, cols = series

    def label(name):
        if name.endswith("_xoff"):
            return name.removesuffix("_xoff").replace("/prio", " prio ") + ": XOFF to its sender"
        return name.removesuffix("_paused").replace("/prio", " prio ") + ": egress paused by PFC"

    order = sorted(cols, key=lambda n: (0 if n.endswith("_xoff") else 1, n))
    rows = [cols[n] for n in order]
    step = time[1] - time[0] if len(time) > 1 else 1
    edges = [t - step for t in time] + [time[-1]]  # each value covers the interval before its sample
    fig, (ax,) = new_figure(summary, "PFC at the switch ports, per priority")
    fig.set_figheight(max(3.5, 1.6 + 0.28 * len(rows)))
    mesh = ax.pcolormesh(edges, list(range(len(rows) + 1)), rows, vmin=0, vmax=1, cmap="Reds", shading="flat")
    if len(rows) <= 48:
        ax.set_yticks([i + 0.5 for i in range(len(rows))])
        ax.set_yticklabels([label(n) for n in order], fontsize=7)
    else:
        ax.set_ylabel(f"{len(rows)} ports and priorities")
    ax.invert_yaxis()
    fig.colorbar(mesh, ax=ax, label="fraction of the interval paused (0..1)")
    finish(fig, [ax], os.path.join(d, "pfc.png"), 0)


def plot_dcqcn(d, summary):
    series = read_csv(os.path.join(d, "dcqcn.csv"))
    if series is None:
        return
    time, cols = series
    fig, (ax_rate, ax_alpha) = new_figure(summary, "DCQCN state per QP (reaction point)", rows=2)
    n = 0
    for name, v in cols.items():
        if name.endswith("_rate_gbps"):
            ax_rate.plot(time, v, label=name.removesuffix("_rate_gbps"), linewidth=1)
            n += 1
        elif name.endswith("_alpha"):
            ax_alpha.plot(time, v, label=name.removesuffix("_alpha"), linewidth=1)
    ax_rate.set_ylabel("current rate R_C (Gbit/s)")
    ax_alpha.set_ylabel("alpha (0..1)")
    finish(fig, [ax_rate, ax_alpha], os.path.join(d, "dcqcn.png"), n)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    d = sys.argv[1]
    with open(os.path.join(d, "summary.json")) as f:
        summary = json.load(f)
    plot_flows(d, summary)
    plot_queues(d, summary)
    plot_cnp(d, summary)
    plot_pfc(d, summary)
    plot_dcqcn(d, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
