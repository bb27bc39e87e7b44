#!/usr/bin/env python3
"""Table and figure of docs/results/btree.md from scripts/bench-btree.sh output.

Usage (from the repository root; the figure needs the .venv that
./scripts/test-python.sh makes):

    .venv/bin/python scripts/report_btree.py WORKDIR [--fig-dir docs/results/btree]
    .venv/bin/python scripts/report_btree.py --from docs/results/btree/results.json --fig-dir docs/results/btree

The first prints the Markdown table of the run in WORKDIR; with --fig-dir it
also keeps the table's rows as FIG_DIR/results.json and draws FIG_DIR/btree.png.
The second redraws the figure from kept rows.
"""
import argparse
import json
import os

HDD = (4800.0, 141e6)  # latency µs, bandwidth bytes/s (BENCHMARKS.md)


def load(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def hdd_us(r):
    return r["io"]["reads_per_op"] * HDD[0] + r["io"]["bytes_per_op"] / HDD[1] * 1e6


def row(r):
    """What the table and the figure show of a bench record."""
    return {
        "workload": r["workload"], "resident": r["resident"], "ops": r["ops"],
        "kops_s": round(r["throughput_ops_s"] / 1e3, 2),
        "kops_s_runs": [round(t / 1e3, 1) for t in r["throughput_runs"]],
        "p50_us": round(r["latency_ns"]["p50"] / 1e3, 1), "p99_us": round(r["latency_ns"]["p99"] / 1e3),
        "pages_per_op": round(r["io"]["pages_per_op"], 3), "writes_per_op": round(r["io"]["writes_per_op"], 3),
        "nvme_modelled_us": round(r["io"]["modelled_us_per_op"], 1), "hdd_modelled_us": round(hdd_us(r)),
        "disk_mib": round(r["disk_bytes"] / 2**20, 1), "memory_kib": round(r["memory_bytes"] / 1024),
    }


def table(rows):
    out = [
        "| workload | resident | ops | kops/s (runs) | p50 µs | p99 µs | pages/op | writes/op | "
        "nvme modelled µs/op | hdd modelled µs/op | disk MiB | memory KiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        runs = f" ({', '.join(f'{t:.1f}' for t in r['kops_s_runs'])})" if r["kops_s_runs"] else ""
        out.append(
            f"| {r['workload']} | {r['resident']} | {r['ops']:,} | {r['kops_s']:.2f}{runs} | "
            f"{r['p50_us']:.1f} | {r['p99_us']:.0f} | {r['pages_per_op']:.3f} | {r['writes_per_op']:.3f} | "
            f"{r['nvme_modelled_us']:.1f} | {r['hdd_modelled_us']:.0f} | {r['disk_mib']:.1f} | {r['memory_kib']:.0f} |"
        )
    return "\n".join(out)


def figure(doc, path):
    """Per workload, pages read and pages written per operation (left) and the
    modelled time per operation under nvme and hdd (right), with the inner
    nodes in memory and with nothing resident."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from strata.plot import fit_labels, plain_log_axis

    rows = doc["rows"]
    labels = [f"{r['workload']}\n{r['resident']}" for r in rows]
    xs = range(len(rows))
    fig, axes = plt.subplots(1, 2, figsize=(14, 4.8))
    ax = axes[0]
    texts = []
    for k, (key, name, colour) in enumerate((("pages_per_op", "pages read", "tab:blue"),
                                            ("writes_per_op", "pages written", "tab:orange"))):
        bars = ax.bar([x + (k - 0.5) * 0.38 for x in xs], [r[key] for r in rows], 0.38, label=name, color=colour)
        for b, r in zip(bars, rows):
            if r[key] > 0:
                texts.append(ax.annotate(f"{r[key]:.3g}", (b.get_x() + b.get_width() / 2, b.get_height()),
                                         textcoords="offset points", xytext=(0, 2), ha="center", va="bottom",
                                         fontsize=7))
    ax.set_ylabel("pages per operation")
    ax.set_title("I/O per operation (deterministic)")
    ax = axes[1]
    for k, (key, name, colour) in enumerate((("nvme_modelled_us", "nvme (70 µs, 6.9 GB/s)", "tab:green"),
                                            ("hdd_modelled_us", "hdd (4.8 ms, 141 MB/s)", "tab:red"))):
        bars = ax.bar([x + (k - 0.5) * 0.38 for x in xs], [r[key] for r in rows], 0.38, label=name, color=colour)
        for b, r in zip(bars, rows):
            texts.append(ax.annotate(f"{r[key]:,.0f}", (b.get_x() + b.get_width() / 2, b.get_height()),
                                     textcoords="offset points", xytext=(0, 2), ha="center", va="bottom",
                                     fontsize=7))
    ax.set_yscale("log")
    plain_log_axis(ax.yaxis)
    ax.set_ylabel("modelled µs per operation (log scale)")
    ax.set_title("modelled device time per operation")
    for ax in axes:
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_xlabel("workload, resident (index: the inner nodes in memory; none: nothing)", fontsize=8)
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(f"The B+-tree baseline: {doc['dataset']}, {doc['n'] / 1e6:g}M keys, 4 KiB pages, cold reads")
    fig.tight_layout()
    for ax in axes:
        fit_labels(ax, [t for t in texts if t.axes is ax])
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workdir", nargs="?", help="the output directory of scripts/bench-btree.sh")
    ap.add_argument("--fig-dir", help="keep the rows as FIG_DIR/results.json and draw FIG_DIR/btree.png")
    ap.add_argument("--from", dest="source", metavar="JSON", help="rows kept by an earlier run (no WORKDIR)")
    a = ap.parse_args()
    if a.source:
        with open(a.source) as f:
            doc = json.load(f)
    elif a.workdir:
        records = []
        for name in ["btree-read-index", "btree-read-none", "btree-write"]:
            records += load(f"{a.workdir}/{name}.jsonl")
        doc = {"dataset": records[0]["dataset"] if records else "fb-like",
               "n": records[0]["n"] if records else 0, "rows": [row(r) for r in records]}
        print(table(doc["rows"]))
        if records:
            b = records[0]
            print(f"\nBulk load of {b['bulk_n']:,} keys (fill 100 %): {b['build_s']:.2f} s = "
                  f"{b['build_keys_per_s'] / 1e6:.1f} M keys/s.")
        if a.fig_dir:
            os.makedirs(a.fig_dir, exist_ok=True)
            with open(os.path.join(a.fig_dir, "results.json"), "w") as f:
                json.dump(doc, f, indent=1)
                f.write("\n")
    else:
        ap.error("give WORKDIR or --from JSON")
    if a.fig_dir and doc["rows"]:
        os.makedirs(a.fig_dir, exist_ok=True)
        figure(doc, os.path.join(a.fig_dir, "btree.png"))


if __name__ == "__main__":
    main()
