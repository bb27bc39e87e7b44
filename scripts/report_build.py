#!/usr/bin/env python3
"""Tables and figures of issue 23's build experiments (scripts/build-experiments.sh).

    python3 scripts/report_build.py docs/results/build   # prints Markdown, writes build-*.png there

Reads RUNS (runs.jsonl): one line per build ("section": "build"), per
`strata analyze` ("analyze") and per db merge run ("merge"). Medians over
repeats, with the spread (min-max) where there is more than one.
"""
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def spread(xs, fmt="{:.2f}"):
    if len(xs) < 2:
        return ""
    return " [" + fmt.format(min(xs)) + "–" + fmt.format(max(xs)) + "]"


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/results/build")
    rows = [json.loads(line) for line in open(out / "runs.jsonl") if line.strip()]
    builds = [r for r in rows if r["section"] == "build"]
    bins = sorted({r["bin"] for r in builds}, key=lambda b: b != "before")
    groups = defaultdict(list)
    for r in builds:
        groups[(r["dataset"], r["n"], r["kind"], r["threads"], r["bin"])].append(r)
    kinds = list(dict.fromkeys(r["kind"] for r in builds))
    sets = sorted({(r["dataset"], r["n"]) for r in builds}, key=lambda x: (x[0], x[1]))
    threads = sorted({r["threads"] for r in builds})

    def wall(ds, n, k, t, b):
        # The library's build time (`build_s`: data run and index written and
        # synced; the key file already read), the figure the issue compares.
        return [r["build_s"] for r in groups.get((ds, n, k, t, b), [])]

    for ds, n in sets:
        print(f"\n### {ds}, {n:,} keys\n")
        head = "| kind |"
        for t in threads:
            for b in bins:
                head += f" {b} {t}t s |"
            head += f" after {t}t vs btree |"
        head += " keys/s (after, max threads) | process wall s | peak RSS MiB | run write share | models |"
        print(head)
        print("|" + "---|" * (head.count("|") - 1))
        for k in kinds:
            line = f"| `{k}` |"
            for t in threads:
                for b in bins:
                    w = wall(ds, n, k, t, b)
                    line += f" {med(w):.2f}{spread(w)} |" if w else " |"
                a, bt = wall(ds, n, k, t, "after"), wall(ds, n, "btree", t, "after")
                line += f" {med(a) / med(bt):.2f}× |" if a and bt else " |"
            a = groups.get((ds, n, k, threads[-1], "after"), [])
            if a:
                b_s = med([r["build_s"] for r in a])
                ks = n / b_s if b_s > 0 else float("nan")
                w_s = med([r["wall_s"] for r in a])
                rss = med([r["peak_rss_bytes"] for r in a]) / 2**20
                shares = [r["data_run_s"] / r["build_s"] for r in a if r.get("data_run_s") and r.get("build_s")]
                share = f"{med(shares):.0%}" if shares else ""
                models = a[0].get("models")
                line += f" {ks / 1e6:.1f}M | {w_s:.2f} | {rss:.0f} | {share} | {models if models is not None else ''} |"
            else:
                line += " | | | | |"
            print(line)

    # Peak memory against the acceptance's bound: the model (`memory_bytes`)
    # plus 64 MiB of buffers, whatever n.
    print("\n### Peak RSS of `strata build` (MiB, before → after; bound: model + 64 MiB)\n")
    head = "| kind |"
    for ds, n in sets:
        for t in threads:
            head += f" {n // 1_000_000}M {t}t |"
    head += " model MiB (largest n) | within the bound (after) |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for k in kinds:
        line = f"| `{k}` |"
        ok = True
        model = None
        for ds, n in sets:
            for t in threads:
                cell = []
                for b in bins:
                    g = groups.get((ds, n, k, t, b), [])
                    cell.append(f"{max(r['peak_rss_bytes'] for r in g) / 2**20:.0f}" if g else "–")
                    if b == "after" and g:
                        m = (g[0].get("memory_bytes") or 0) / 2**20
                        model = m
                        if max(r["peak_rss_bytes"] for r in g) / 2**20 > m + 64:
                            ok = False
                line += " " + " → ".join(cell) + " |"
        line += f" {model:.1f} | {'yes' if ok else 'no'} |" if model is not None else " | |"
        print(line)

    an = [r for r in rows if r["section"] == "analyze"]
    if an:
        print("\n### Segment counts (`strata analyze`)\n")
        print("| data set | n | epsilon | " + " | ".join(f"pgm {b} | zero-interval {b}" for b in bins) + " |")
        print("|" + "---|" * (3 + 2 * len(bins)))
        by = defaultdict(dict)
        for r in an:
            by[(r["dataset"], r["n"])][r["bin"]] = r["segments"]
        for (ds, n), m in sorted(by.items()):
            for eps in next(iter(m.values())):
                cells = []
                for b in bins:
                    s = m.get(b, {}).get(eps, {})
                    cells += [str(s.get("pgm", "")), str(s.get("pgm_zero_interval", ""))]
                print(f"| {ds} | {n:,} | {eps} | " + " | ".join(cells) + " |")

    merges = [r for r in rows if r["section"] == "merge"]
    if merges:
        print("\n### Merges of the hybrid store (write-only, `db:memory=4M,insert=blind`)\n")
        print("| data set | static | bin | n | inserts | merges | s merging | s per merge | peak RSS MiB |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in merges:
            per = r["merge_s"] / r["merges"] if r.get("merges") else float("nan")
            rss = f"{r['peak_rss_bytes'] / 2**20:.0f}" if r.get("peak_rss_bytes") else ""
            print(f"| {r['dataset']} | {r['static']} | {r['bin']} | {r['n']:,} | {r['ops']:,} | "
                  f"{r['merges']} | {r['merge_s']:.2f} | {per:.3f} | {rss} |")

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    for ds in sorted({d for d, _ in sets}):
        fig, axes = plt.subplots(1, len(threads), figsize=(6 * len(threads), 4.5), squeeze=False)
        ns = sorted({n for d, n in sets if d == ds})
        cmap = plt.get_cmap("tab20")
        for ax, t in zip(axes[0], threads):
            for i, k in enumerate(kinds):
                xs, ys = [], []
                for n in ns:
                    w = wall(ds, n, k, t, "after")
                    if w:
                        xs.append(n)
                        ys.append(n / med(w) / 1e6)
                if xs:
                    ax.plot(xs, ys, marker="o", color=cmap(i % 20), label=k,
                            linewidth=2.5 if k == "btree" else 1.2)
            ax.set_xscale("log")
            ax.set_xlabel("keys")
            ax.set_ylabel("million keys/s (build_s)")
            ax.set_title(f"{ds}, {t} thread{'s' if t > 1 else ''}")
            ax.grid(alpha=0.3)
        axes[0][-1].legend(fontsize=7, ncol=2)
        fig.tight_layout()
        fig.savefig(out / f"build-{ds}.png", dpi=110)
        plt.close(fig)


if __name__ == "__main__":
    main()
