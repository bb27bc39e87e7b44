#!/usr/bin/env python3
"""Tables and figures of docs/results/static.md from scripts/bench-static.sh output.

Usage: .venv/bin/python scripts/report_static.py WORKDIR [--fig-dir docs/results]
(from the repository root; ./scripts/test-python.sh makes .venv, with
matplotlib and the strata package whose helpers label the log axis; the
JSON Lines of the run behind static.md are in docs/results/static)
Prints Markdown to stdout; writes static-pareto-*.png (needs matplotlib).
"""
import argparse
import json
import os
import sys

PROFILES = {  # name: (latency µs, bandwidth bytes/s) — BENCHMARKS.md
    "optane": (11.7, 7.2e9),
    "nvme": (70.0, 6.9e9),
    "sata-ssd": (211.6, 560e6),
    "hdd": (4800.0, 141e6),
}


def load(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def modelled_us(r, profile):
    lat, bw = PROFILES[profile]
    return r["io"]["reads_per_op"] * lat + r["io"]["bytes_per_op"] / bw * 1e6


def by_spec(rows):
    return {r["spec"]: r for r in rows}


def table3(w):
    out = ["| data set | index | 1.01 pages (ε=1) | 1.5 (ε=64) | 2 (ε=128) | 3 (ε=255) |", "|---|---|---|---|---|---|"]
    for d in ["fb-like", "osm-like", "wiki-like", "books-like", "uniform"]:
        rows = by_spec(load(f"{w}/table3-{d}.jsonl"))
        if not rows:
            continue
        for base, disk, label in [("pgm", "pgm-disk", "PGM"), ("rs", "rs-disk", "RS")]:
            plain = [rows.get(f"{base}:epsilon={e}") for e in (1, 64, 128, 255)]
            zero = [rows.get(f"{disk}:epsilon={e}") for e in (1, 64, 128, 255)]

            def cell(r):
                return f"{r['models']:,} ({r['io']['pages_per_op']:.3f} p)" if r else "-"

            out.append(f"| {d} | {label} models w/o (pages) | " + " | ".join(cell(r) for r in plain) + " |")
            out.append(f"| {d} | {label} models w/ zero intervals | " + " | ".join(cell(r) for r in zero) + " |")
            saving = []
            for a, b in zip(plain, zero):
                saving.append(f"{100 * (1 - b['models'] / a['models']):.1f} %" if a and b and a["models"] else "-")
            out.append(f"| {d} | {label} % of saving | " + " | ".join(saving) + " |")
    return "\n".join(out)


def family(spec):
    kind = spec.split(":")[0]
    return kind


def pareto(w, fig_dir):
    lines = []
    for d in ["fb-like", "osm-like"]:
        rows = load(f"{w}/pareto-{d}.jsonl")
        if not rows:
            continue
        lines.append(f"\n**{d}** (bits/key of memory, pages per lookup):\n")
        lines.append("| index | models | memory | bits/key | pages/lookup |")
        lines.append("|---|---|---|---|---|")
        for r in rows:
            m = r["models"] if r["models"] is not None else "-"
            lines.append(
                f"| `{r['spec']}` | {m} | {r['memory_bytes']:,} B | {r['bits_per_key']:.3f} | {r['io']['pages_per_op']:.3f} |"
            )
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            from strata.plot import plain_log_axis
        except ImportError:
            print("matplotlib or the strata package missing (./scripts/test-python.sh, then .venv/bin/python): "
                  "no figure", file=sys.stderr)
            continue
        fig, ax = plt.subplots(figsize=(9.5, 5.5))
        fams = {}
        for r in rows:
            fams.setdefault(family(r["spec"]), []).append(r)
        markers = "os^vD<>ph*xP"
        for i, (fam, rs) in enumerate(sorted(fams.items())):
            rs = sorted(rs, key=lambda r: r["bits_per_key"])
            xs = [max(r["bits_per_key"], 1e-4) for r in rs]
            ys = [r["io"]["pages_per_op"] for r in rs]
            ax.plot(xs, ys, marker=markers[i % len(markers)], label=fam, linestyle="-" if len(rs) > 1 else "none")
        ax.set_xscale("log")
        plain_log_axis(ax.xaxis)
        ax.set_xlabel("memory (bits per key, log scale)")
        ax.set_ylabel("pages read per lookup")
        ax.set_title(f"Memory against I/O per lookup — {d}, 10M keys, 4 KiB pages")
        ax.grid(True, which="both", alpha=0.3)
        # Beside the axes: the curves reach every corner of the plot.
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
        path = os.path.join(fig_dir, f"static-pareto-{d}.png")
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        lines.append(f"\n![Pareto {d}](static-pareto-{d}.png)\n")
    return "\n".join(lines)


def g1(w):
    rows = load(f"{w}/g1-fb-like.jsonl")
    out = [
        "| ε | fetch | pages/op | reads/op | KiB/op | measured µs p50 | kops/s (3 runs) | optane µs | nvme µs | sata-ssd µs | hdd µs |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        eps = r["config"].get("epsilon")
        runs = ", ".join(f"{t / 1e3:.1f}" for t in r["throughput_runs"])
        mod = " | ".join(f"{modelled_us(r, p):.1f}" for p in PROFILES)
        out.append(
            f"| {eps} | {r['config'].get('fetch')} | {r['io']['pages_per_op']:.3f} | {r['io']['reads_per_op']:.3f} | "
            f"{r['io']['bytes_per_op'] / 1024:.2f} | {r['latency_ns']['p50'] / 1e3:.1f} | {runs} | {mod} |"
        )
    return "\n".join(out)


def g2(w):
    rows = load(f"{w}/g2-fb-like.jsonl")
    out = ["| ε (items) | granularity G | models | memory | pages/lookup |", "|---|---|---|---|---|"]
    for r in rows:
        c = r["config"]
        out.append(
            f"| {c.get('epsilon')} | {c.get('granularity')} | {r['models']:,} | {r['memory_bytes']:,} B | {r['io']['pages_per_op']:.3f} |"
        )
    return "\n".join(out)


def lookup(w):
    out = []
    for d in ["fb-like", "osm-like"]:
        rows = load(f"{w}/lookup-{d}.jsonl")
        if not rows:
            continue
        base = rows[0]
        out.append(f"\n**{d}**, 100 000 cold lookups, O_DIRECT, 1 thread, 3 interleaved runs:\n")
        out.append("| index | kops/s (median) | runs | ratio to btree | p99 µs | pages | memory | bits/key |")
        out.append("|---|---|---|---|---|---|---|---|")
        for r in rows:
            runs = ", ".join(f"{t / 1e3:.1f}" for t in r["throughput_runs"])
            out.append(
                f"| `{r['spec']}` | {r['throughput_ops_s'] / 1e3:.1f} | {runs} | {r['throughput_ops_s'] / base['throughput_ops_s']:.2f} | "
                f"{r['latency_ns']['p99'] / 1e3:.0f} | {r['io']['pages_per_op']:.3f} | {r['memory_bytes']:,} B | {r['bits_per_key']:.3f} |"
            )
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workdir")
    ap.add_argument("--fig-dir", default="docs/results")
    a = ap.parse_args()
    print("## 1. Models with and without zero intervals (Zhang Table 3)\n")
    print(table3(a.workdir))
    print("\n## 2. Memory against pages per lookup (Zhang Fig. 7/9)\n")
    print(pareto(a.workdir, a.fig_dir))
    print("\n## 3. G1: all-at-once against one-by-one (fb-like, PGM)\n")
    print(g1(a.workdir))
    print("\n## 4. G2: prediction granularity (fb-like, PGM)\n")
    print(g2(a.workdir))
    print("\n## 5. Cold lookups against the B+-tree\n")
    print(lookup(a.workdir))


if __name__ == "__main__":
    main()
