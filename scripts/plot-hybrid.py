#!/usr/bin/env python3
"""Fig. 11 analogue: throughput against memory for `db` and `btree`.

Usage: plot-hybrid.py RESULTS_DIR OUT_DIR
Reads the JSON Lines written by scripts/db-hybrid-bench.sh (every *.jsonl in
RESULTS_DIR) and writes into OUT_DIR:
- hybrid-table.md: one row per (run, workload, configuration) with the median
  throughput, every repeat, and the ratio to the run's baseline (its first
  --index, a B+-tree) computed per repeat (configurations are interleaved in
  each repeat, so repeat i of a configuration ran next to repeat i of the
  baseline): median and [min, max] of the paired ratios;
- hybrid-<workload>.png: throughput (median, bars = min..max of the repeats)
  against peak memory, one panel per data set, single-threaded runs. When a
  data set was run more than once, its panel shows the newest run (a
  `-rerun-` file supersedes the one without) and says which; the table has
  every run.

Run it with the repository's virtual environment (`./scripts/test-python.sh`
creates it and installs matplotlib and the strata package, whose plot helpers
label the log axes):

    .venv/bin/python scripts/plot-hybrid.py RESULTS_DIR OUT_DIR
"""
import glob
import json
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

try:
    from strata.plot import plain_log_axis  # noqa: E402
except ImportError:
    sys.exit("plot-hybrid: needs the strata package: run ./scripts/test-python.sh, then "
             ".venv/bin/python scripts/plot-hybrid.py RESULTS_DIR OUT_DIR")

WORKLOADS = ["ycsb-read-only", "ycsb-write-only", "ycsb-balanced"]


def load(results):
    rows = []
    for path in sorted(glob.glob(os.path.join(results, "*.jsonl"))):
        with open(path) as f:
            for i, line in enumerate(f):
                if line.strip():
                    r = json.loads(line)
                    r["_file"] = os.path.basename(path)
                    r["_line"] = i
                    rows.append(r)
    return rows


def baseline(rows, r):
    """The first configuration of r's run and workload (the runner's baseline)."""
    same = [b for b in rows if b["_file"] == r["_file"] and b["workload"] == r["workload"]]
    return min(same, key=lambda b: b["_line"])


def paired(r, base):
    """Per-repeat throughput ratios to the baseline."""
    return [a / b for a, b in zip(r["throughput_runs"], base["throughput_runs"]) if b > 0]


def series(path):
    """The figure series of a JSON Lines file: files that differ only after
    their `-t1` part (`fb-like-write-t1-a.jsonl`, `...-t1-b.jsonl`: separate
    bench runs, each with its own baseline in the table) share one series."""
    stem = path.removesuffix(".jsonl")
    cut = stem.find("-t1")
    return stem if cut < 0 else stem[: cut + 3]


def newest(names):
    """The newest of a data set's series: a `-rerun-` series supersedes the
    one it reruns (the runs carry no date; this is the directory's naming)."""
    return max(names, key=lambda n: (n.count("-rerun-"), n))


def name(r):
    if r["index"] == "btree":
        return f"btree (inner nodes + {r['cache']} cache)" if r["cache"].startswith("lru") else "btree (inner nodes)"
    return r["spec"]


def table(rows):
    lines = [
        "| data set | threads | workload | configuration | kops/s median (repeats) | ratio to first btree: median [min, max] "
        "| memory MiB (peak) | disk MiB | pages/op | writes/op | p99 µs | merges |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r["dataset"], r["threads"], r["_file"], WORKLOADS.index(r["workload"])
                                          if r["workload"] in WORKLOADS else 9, r["_line"])):
        base = baseline(rows, r)
        ratios = paired(r, base)
        runs = ", ".join(f"{x / 1e3:.1f}" for x in r["throughput_runs"])
        ratio = (f"{statistics.median(ratios):.2f}x [{min(ratios):.2f}, {max(ratios):.2f}]"
                 if ratios and r is not base else "1")
        store = r.get("store") or {}
        merges = store.get("merges", "")
        if store.get("merging"):
            merges = f"{merges}+1 running"
        io = r["io"]
        lines.append(
            f"| {r['dataset']} | {r['threads']} | {r['workload']} | `{name(r)}` "
            f"| {r['throughput_ops_s'] / 1e3:.2f} ({runs}) | {ratio} | {r['memory_bytes'] / 2**20:.3f} "
            f"| {r['disk_bytes'] / 2**20:.0f} | {io['pages_per_op']:.2f} | {io['writes_per_op']:.2f} "
            f"| {r['latency_ns']['p99'] / 1e3:.0f} | {merges} |"
        )
    return "\n".join(lines) + "\n"


def main():
    results, out = sys.argv[1], sys.argv[2]
    rows = load(results)
    with open(os.path.join(out, "hybrid-table.md"), "w") as f:
        f.write(table(rows))
    # Figures: the single-threaded sweeps (files *-read-t1*.jsonl and
    # *-write-t1*.jsonl); one series per kind and run, points by budget.
    single = [r for r in rows if r["threads"] == 1 and ("-read-t1" in r["_file"] or "-write-t1" in r["_file"])]
    datasets = sorted({r["dataset"] for r in single})
    for w in WORKLOADS:
        fig, axes = plt.subplots(1, len(datasets), figsize=(max(5.5, 4.2 * len(datasets)), 3.9), squeeze=False)
        notes = []
        for ax, d in zip(axes[0], datasets):
            sel = [r for r in single if r["workload"] == w and r["dataset"] == d]
            files = sorted({series(r["_file"]) for r in sel})
            if len(files) > 1:
                f = newest(files)
                notes.append(f"{d}: {f} (newest of {len(files)} runs; the table has all)")
                files = [f]
            for f in files:
                for kind, marker in (("btree", "s"), ("db", "o")):
                    pts = sorted(
                        (r["memory_bytes"] / 2**20, r["throughput_ops_s"] / 1e3,
                         min(r["throughput_runs"]) / 1e3, max(r["throughput_runs"]) / 1e3)
                        for r in sel
                        if r["index"] == kind and series(r["_file"]) == f
                    )
                    if pts:
                        ax.errorbar([p[0] for p in pts], [p[1] for p in pts],
                                    yerr=[[p[1] - p[2] for p in pts], [p[3] - p[1] for p in pts]],
                                    marker=marker, capsize=3, label=kind,
                                    color="tab:blue" if kind == "btree" else "tab:orange")
            ax.set_title(d)
            ax.set_xscale("log")
            ax.set_yscale("log")
            plain_log_axis(ax.xaxis)
            plain_log_axis(ax.yaxis)
            ax.set_xlabel("memory (MiB, peak)")
            ax.set_ylabel("throughput (kops/s)")
            ax.grid(True, which="both", alpha=0.3)
        # One legend for every panel, below them: none covers a curve.
        handles = {}
        for ax in axes[0]:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                handles.setdefault(lab, h)
        fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=len(handles), fontsize=8,
                   frameon=False, bbox_to_anchor=(0.5, 0.01 + 0.045 * len(notes)))
        fig.suptitle(f"{w}: throughput vs memory (15M keys bulk-loaded, 1 thread)", fontsize=10)
        bottom = 0.1 + 0.045 * len(notes)
        for i, note in enumerate(notes):
            fig.text(0.01, 0.01 + 0.045 * i, note, fontsize=7, color="dimgrey")
        fig.tight_layout(rect=(0, bottom, 1, 1))
        fig.savefig(os.path.join(out, f"hybrid-{w}.png"), dpi=110)
        plt.close(fig)


if __name__ == "__main__":
    main()
