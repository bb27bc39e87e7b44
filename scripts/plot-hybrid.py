#!/usr/bin/env python3
"""Fig. 11 analogue: throughput against memory for `db` and `btree`.

Usage: plot-hybrid.py RESULTS_DIR OUT_DIR
Reads the JSON Lines written by scripts/db-hybrid-bench.sh and writes
hybrid-<workload>.png (one panel per data set) into OUT_DIR.
"""
import glob
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

WORKLOADS = ["ycsb-read-only", "ycsb-write-only", "ycsb-balanced"]


def load(results):
    rows = []
    for path in sorted(glob.glob(os.path.join(results, "*.jsonl"))):
        with open(path) as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    r["_file"] = os.path.basename(path)
                    rows.append(r)
    return rows


def table(rows):
    """Markdown table: every record, with its ratio to the B+-tree of its run."""
    lines = [
        "| data set | workload | index | kops/s (runs) | ratio | MiB (peak) | disk MiB | pages/op | writes/op | p99 µs |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        base = next(
            b for b in rows
            if b["index"] == "btree" and b["workload"] == r["workload"] and b["dataset"] == r["dataset"]
            and b["_file"] == r["_file"]
        )
        runs = ", ".join(f"{x / 1e3:.1f}" for x in r["throughput_runs"])
        spec = r["spec"] + (f" (cache {r['cache']})" if r["index"] == "btree" else "")
        lines.append(
            f"| {r['dataset']} | {r['workload']} | `{spec}` | {r['throughput_ops_s'] / 1e3:.1f} ({runs}) "
            f"| {r['throughput_ops_s'] / base['throughput_ops_s']:.2f}x | {r['memory_bytes'] / 2**20:.3f} "
            f"| {r['disk_bytes'] / 2**20:.0f} | {r['io']['pages_per_op']:.2f} | {r['io']['writes_per_op']:.3f} "
            f"| {r['latency_ns']['p99'] / 1e3:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main():
    results, out = sys.argv[1], sys.argv[2]
    rows = load(results)
    with open(os.path.join(out, "hybrid-table.md"), "w") as f:
        f.write(table(rows))
    datasets = sorted({r["dataset"] for r in rows})
    for w in WORKLOADS:
        fig, axes = plt.subplots(1, len(datasets), figsize=(max(5.5, 4.2 * len(datasets)), 3.6), squeeze=False)
        for ax, d in zip(axes[0], datasets):
            sel = [r for r in rows if r["workload"] == w and r["dataset"] == d]
            for kind, marker in (("btree", "s"), ("db", "o")):
                pts = sorted(
                    (r["memory_bytes"] / 2**20, r["throughput_ops_s"] / 1e3, r["spec"])
                    for r in sel
                    if r["index"] == kind
                )
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, label=kind)
            ax.set_title(d)
            ax.set_xscale("log")
            ax.set_xlabel("memory (MiB, peak)")
            ax.set_ylabel("throughput (kops/s)")
            ax.grid(True, alpha=0.3)
            ax.legend()
        fig.suptitle(f"{w}: throughput vs memory (15M keys bulk-loaded)", fontsize=10)
        fig.tight_layout()
        fig.savefig(os.path.join(out, f"hybrid-{w}.png"), dpi=110)
        plt.close(fig)


if __name__ == "__main__":
    main()
