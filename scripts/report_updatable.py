#!/usr/bin/env python3
"""Tables and figures of docs/results/updatable.md from
scripts/updatable-experiments.sh output (JSON Lines of `strata bench`).

Usage: .venv/bin/python scripts/report_updatable.py DIR [--fig-dir DIR] > DIR/report.md
(from the repository root; ./scripts/test-python.sh makes .venv with matplotlib;
the report embeds its figures by file name, for a report.md next to them)

Prints Markdown: Lan et al.'s Table 4 beside strata's blocks per lookup and
per scan (inner/leaf, all on disk), the six workloads per setting with the
winner of each, and the buffer sweep; draws DIR/workloads-<setting>.png
(needs matplotlib; tables are printed without it).
"""
import argparse
import glob
import os
import statistics

from report_static import load  # same directory: JSON Lines, [] when missing

# Lan et al. Table 4 (200M keys, 4 KB blocks, error bound 64): inner blocks,
# leaf blocks per lookup, leaf blocks per scan (LIPP: nodes, no inner/leaf
# split). The B+-tree: 3 inner blocks and 1 leaf on all three data sets.
LAN_TABLE4 = {
    ("fb-like", "fiting"): (3, 1.2, 2.0),
    ("fb-like", "dpgm"): (3.9, 1.3, 1.7),
    ("fb-like", "alex"): (6.5, 2.6, 4.1),
    ("fb-like", "lipp"): (None, 3.0, 24.0),
    ("fb-like", "btree"): (3, 1.0, None),
    ("osm-like", "fiting"): (3, 1.2, 1.8),
    ("osm-like", "dpgm"): (3.7, 1.2, 1.5),
    ("osm-like", "alex"): (2.6, 2.2, 3.8),
    ("osm-like", "lipp"): (None, 3.8, 30.0),
    ("osm-like", "btree"): (3, 1.0, None),
}

# Lan's winners on disk (SSD and HDD, §6.1): lookup-only LIPP, scan-only the
# B+-tree, write-only PGM, and the B+-tree in 6 of the 9 mixed cases.
LAN_WINNERS = {
    "lookup": "lipp",
    "scan": "btree",
    "write-only": "dpgm",
    "read-heavy": "btree (mostly)",
    "write-heavy": "btree (mostly)",
    "balanced": "btree (mostly)",
}

WORKLOADS = ["lookup", "scan", "write-only", "read-heavy", "write-heavy", "balanced"]


def kind_of(r):
    return r["spec"].split(":")[0]


def blocks(r):
    b = r.get("blocks") or {}
    return b.get("inner_read_per_op"), b.get("leaf_read_per_op")


def fmt(x, nd=2):
    return "–" if x is None else f"{x:.{nd}f}"


def spread(r):
    runs = r.get("throughput_runs") or []
    if len(runs) < 2:
        return ""
    return f" ({min(runs) / 1e3:.1f}–{max(runs) / 1e3:.1f})"


def table4(d):
    print("## Blocks per lookup and per scan, all on disk (Lan Table 4)\n")
    print("| data set | kind | inner (Lan) | leaf (Lan) | scan leaf (Lan) | pages/lookup | disk MiB |")
    print("|---|---|---|---|---|---|---|")
    for path in sorted(glob.glob(os.path.join(d, "read-*-none.jsonl"))):
        ds = os.path.basename(path)[len("read-"):-len("-none.jsonl")]
        rows = load(path)
        for r in rows:
            if r["workload"] != "lookup":
                continue
            k = kind_of(r)
            inner, leaf = blocks(r)
            scan = next((s for s in rows if s["workload"] == "scan" and s["spec"] == r["spec"]), None)
            scan_leaf = blocks(scan)[1] if scan else None
            lan = LAN_TABLE4.get((ds, k), (None, None, None))
            print(
                f"| {ds} | `{r['spec']}` | {fmt(inner)} ({fmt(lan[0], 1)}) | {fmt(leaf)} ({fmt(lan[1], 1)}) | "
                f"{fmt(scan_leaf)} ({fmt(lan[2], 1)}) | {r['io']['pages_per_op']:.2f} | {r['disk_bytes'] / 2**20:.1f} |"
            )
    print()


def workloads(d, resident):
    rows = []
    for path in sorted(glob.glob(os.path.join(d, f"read-*-{resident}.jsonl"))) + sorted(
        glob.glob(os.path.join(d, f"write-*-{resident}.jsonl"))
    ):
        rows += load(path)
    if not rows:
        return {}
    setting = "all on disk" if resident == "none" else "inner nodes in memory"
    print(f"## The six workloads, {setting} (`--resident {resident}`)\n")
    print("| data set | workload | kind | kops/s (spread) | p99 µs | inner/leaf blocks per op | writes/op | SMOs | memory KiB | disk MiB | wrong |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    by = {}
    for r in rows:
        by.setdefault((r["dataset"], r["workload"]), []).append(r)
    winners = {}
    for (ds, w), rs in sorted(by.items(), key=lambda x: (x[0][0], WORKLOADS.index(x[0][1]) if x[0][1] in WORKLOADS else 99)):
        best = max(rs, key=lambda r: r["throughput_ops_s"])
        winners[(ds, w)] = kind_of(best)
        for r in rs:
            inner, leaf = blocks(r)
            b = r.get("blocks") or {}
            star = " **(best)**" if r is best else ""
            print(
                f"| {ds} | {w} | `{r['spec']}`{star} | {r['throughput_ops_s'] / 1e3:.1f}{spread(r)} | "
                f"{r['latency_ns']['p99'] / 1e3:.0f} | {fmt(inner)} / {fmt(leaf)} | {fmt(r['io']['writes_per_op'])} | "
                f"{b.get('smo', '–')} | {r['memory_bytes'] / 1024:.0f} | {r['disk_bytes'] / 2**20:.1f} | {r['wrong']} |"
            )
    print()
    print(f"Winners ({setting}) beside Lan's (§6.1):\n")
    print("| workload | " + " | ".join(sorted({ds for ds, _ in winners})) + " | Lan |")
    print("|---|" + "---|" * (len({ds for ds, _ in winners}) + 1))
    for w in WORKLOADS:
        cells = [winners.get((ds, w), "–") for ds in sorted({ds for ds, _ in winners})]
        print(f"| {w} | " + " | ".join(f"`{c}`" for c in cells) + f" | {LAN_WINNERS[w]} |")
    print()
    return by


def buffer_sweep(d):
    paths = sorted(glob.glob(os.path.join(d, "buffer-*.jsonl")))
    if not paths:
        return
    print("## Lookups with an LRU buffer in front, all on disk (Lan §6.6)\n")
    print("| data set | buffer pages | kind | kops/s | pages read/lookup | blocks fetched/lookup |")
    print("|---|---|---|---|---|---|")
    rows = []
    for p in paths:
        stem = os.path.basename(p)[len("buffer-"):-len(".jsonl")]
        ds, pages = stem.rsplit("-", 1)
        for r in load(p):
            rows.append((ds, int(pages), r))
    for ds, pages, r in sorted(rows, key=lambda x: (x[0], x[1], x[2]["spec"])):
        inner, leaf = blocks(r)
        fetched = None if inner is None else inner + leaf
        print(
            f"| {ds} | {pages} | `{r['spec']}` | {r['throughput_ops_s'] / 1e3:.1f} | "
            f"{r['io']['pages_per_op']:.2f} | {fmt(fetched)} |"
        )
    print()


def figures(by, resident, fig_dir):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib missing: no figures)")
        return
    datasets = sorted({ds for ds, _ in by})
    if not datasets:
        return
    fig, axes = plt.subplots(1, len(datasets), figsize=(5 * len(datasets), 4), squeeze=False)
    for ax, ds in zip(axes[0], datasets):
        kinds = sorted({kind_of(r) for (d, _), rs in by.items() if d == ds for r in rs})
        width = 0.8 / max(len(kinds), 1)
        for i, k in enumerate(kinds):
            ys = []
            for w in WORKLOADS:
                rs = [r for r in by.get((ds, w), []) if kind_of(r) == k]
                ys.append(statistics.median(r["throughput_ops_s"] for r in rs) / 1e3 if rs else 0)
            ax.bar([j + i * width for j in range(len(WORKLOADS))], ys, width, label=k)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(WORKLOADS))])
        ax.set_xticklabels(WORKLOADS, rotation=30, ha="right")
        ax.set_ylabel("kops/s")
        ax.set_title(f"{ds}, resident={resident}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    out = os.path.join(fig_dir, f"workloads-{resident}.png")
    fig.savefig(out, dpi=110)
    print(f"![the six workloads, resident={resident}]({os.path.basename(out)})\n")


def own_label(r):
    s = r["spec"]
    if s.startswith("btree-ld"):
        return "btree-ld"
    if s.startswith("db"):
        return "db (hybrid store), equal bytes"
    if "resident=index" in s or (s.startswith("btree") and r.get("resident") == "index" and "cache" not in s):
        return "btree, inner nodes resident"
    return "btree, LRU of equal bytes"


def own(d, fig_dir):
    """strata's own design (btree-ld) against the B+-tree at equal memory."""
    rows = []
    for p in sorted(glob.glob(os.path.join(d, "own-read-*.jsonl"))) + sorted(
        glob.glob(os.path.join(d, "own-write-*.jsonl"))
    ):
        rows += load(p)
    if not rows:
        return
    print("## strata's own design at equal memory (`btree-ld`)\n")
    print("Medians of the interleaved repeats, (min–max) of the repeats; `ld/eq` = btree-ld's median over")
    print("the B+-tree's at equal memory.\n")
    print("| data set | workload | configuration | kops/s (spread) | p99 µs | pages read/op | inner/leaf blocks/op | memory KiB | disk MiB | wrong |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    by = {}
    for r in rows:
        by.setdefault((r["dataset"], r["workload"]), []).append(r)
    wins = {}
    for (ds, w), rs in sorted(by.items(), key=lambda x: (x[0][0], WORKLOADS.index(x[0][1]) if x[0][1] in WORKLOADS else 99)):
        for r in sorted(rs, key=own_label):
            inner, leaf = blocks(r)
            print(
                f"| {ds} | {w} | {own_label(r)} | {r['throughput_ops_s'] / 1e3:.2f}{spread(r)} | "
                f"{r['latency_ns']['p99'] / 1e3:.0f} | {r['io']['pages_per_op']:.2f} | {fmt(inner)} / {fmt(leaf)} | "
                f"{r['memory_bytes'] / 1024:.0f} | {r['disk_bytes'] / 2**20:.1f} | {r['wrong']} |"
            )
        ld = next((r for r in rs if own_label(r) == "btree-ld"), None)
        eq = next((r for r in rs if own_label(r) == "btree, LRU of equal bytes"), None)
        if ld and eq:
            wins[(ds, w)] = (ld["throughput_ops_s"] / eq["throughput_ops_s"], ld, eq)
    print()
    print("| data set | workload | ld/eq throughput | btree-ld runs (kops/s) | btree equal-memory runs | spreads apart | pages/op ld vs eq |")
    print("|---|---|---|---|---|---|---|")
    n_win = {}
    for (ds, w), (ratio, ld, eq) in sorted(wins.items()):
        a = ld.get("throughput_runs") or [ld["throughput_ops_s"]]
        b = eq.get("throughput_runs") or [eq["throughput_ops_s"]]
        apart = "yes" if min(a) > max(b) else ("no" if ratio > 1 else "–")
        n_win.setdefault(ds, [0, 0])
        n_win[ds][0] += ratio > 1
        n_win[ds][1] += 1
        print(
            f"| {ds} | {w} | **{ratio:.2f}** | {', '.join(f'{x / 1e3:.2f}' for x in a)} | "
            f"{', '.join(f'{x / 1e3:.2f}' for x in b)} | {apart} | {ld['io']['pages_per_op']:.2f} vs {eq['io']['pages_per_op']:.2f} |"
        )
    print()
    for ds, (won, total) in sorted(n_win.items()):
        print(f"- {ds}: `btree-ld` ahead on {won} of {total} workloads at equal memory.")
    print()
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib missing: no figures)")
        return
    datasets = sorted({ds for ds, _ in by})
    labels = [l for l in ["btree, LRU of equal bytes", "btree-ld", "btree, inner nodes resident", "db (hybrid store), equal bytes"]
              if any(own_label(r) == l for rs in by.values() for r in rs)]
    fig, axes = plt.subplots(1, len(datasets), figsize=(5.5 * len(datasets), 4), squeeze=False)
    for ax, ds in zip(axes[0], datasets):
        width = 0.8 / len(labels)
        for i, lab in enumerate(labels):
            ys, lo, hi = [], [], []
            for w in WORKLOADS:
                r = next((r for r in by.get((ds, w), []) if own_label(r) == lab), None)
                runs = (r.get("throughput_runs") or [r["throughput_ops_s"]]) if r else [0]
                m = statistics.median(runs) / 1e3
                ys.append(m)
                lo.append(m - min(runs) / 1e3)
                hi.append(max(runs) / 1e3 - m)
            ax.bar([j + i * width for j in range(len(WORKLOADS))], ys, width, yerr=[lo, hi], capsize=2, label=lab)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(WORKLOADS))])
        ax.set_xticklabels(WORKLOADS, rotation=30, ha="right")
        ax.set_ylabel("kops/s (median, min–max)")
        ax.set_title(f"{ds}: btree-ld vs btree")
        ax.legend(fontsize=7)
    fig.tight_layout()
    out = os.path.join(fig_dir, "own-equal-memory.png")
    fig.savefig(out, dpi=110)
    print(f"![btree-ld against btree at equal memory]({os.path.basename(out)})\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--fig-dir")
    a = ap.parse_args()
    table4(a.dir)
    for resident in ["none", "index"]:
        by = workloads(a.dir, resident)
        if by:
            figures(by, resident, a.fig_dir or a.dir)
    buffer_sweep(a.dir)
    own(a.dir, a.fig_dir or a.dir)


if __name__ == "__main__":
    main()
