#!/usr/bin/env python3
"""Tables and figures of docs/results/joins.md from scripts/join-experiments.sh
output: one `strata join --json` record per run in DIR/runs.jsonl (tagged
with the data set, the size ratio and the run: `coldN-KIND`,
`model-PROFILE-KIND`, `threadsT-N`, `memory-LIMIT`), the builds' JSON
(DIR/builds.jsonl, tagged with data set and spec) and fio's JSON
(DIR/fio-*.json).

Usage: .venv/bin/python scripts/report_joins.py DIR > DIR/report.md
(from the repository root)

Prints Markdown: fio's figures; per data set and ratio the median join time
(min-max) of every algorithm with the ratios the acceptance asks for; index
sizes and build times; modelled read time per profile; threads; peak RSS
against the limit. Draws DIR/joins-<dataset>.png (time against ratio) and
DIR/joins-size.png (index size against join time), when matplotlib is there.
"""
import glob
import json
import os
import statistics
import sys


def load(d):
    """The runs (runs.jsonl) and the builds ({dataset-spec: record}, builds.jsonl)."""

    def lines(name):
        try:
            with open(os.path.join(d, name)) as f:
                return [json.loads(l) for l in f if l.strip()]
        except OSError:
            return []

    runs = lines("runs.jsonl")
    builds = {f"{b['dataset']}-{b['spec']}": b for b in lines("builds.jsonl")}
    return runs, builds


def fio(d):
    out = {}
    for f in sorted(glob.glob(os.path.join(d, "fio-*.json"))):
        try:
            j = json.load(open(f))
        except (OSError, ValueError):
            continue
        name = os.path.basename(f)[len("fio-") : -len(".json")]
        job = j["jobs"][0]["read"]
        out[name] = (job["bw_bytes"] / 1e6, job["iops"])
    return out


# Index specs by their slug in run tags (`pgm_sample_128_epsilon_2`), from
# builds.jsonl.
SPECS = {}


def slug(spec):
    return spec.replace(":", "_").replace(",", "_").replace("=", "_")


def label(r):
    """The algorithm with the index spec of a run (`inlj:pgm`, `smj`, ...)."""
    tag = r.get("tag", "")
    if r["algo"].startswith("inlj"):
        spec = tag.split("-", 1)[1] if tag.startswith("cold") and "-" in tag else None
        if tag.startswith("model-"):
            spec = tag.split("-", 2)[2] if tag.count("-") >= 2 else None
            # profile names hold a dash (sata-ssd)
            if tag.startswith("model-sata-ssd-"):
                spec = tag[len("model-sata-ssd-") :]
        if spec in SPECS:
            return "inlj:" + SPECS[spec]
        return "inlj:" + (spec or r["algo"].split(":", 1)[-1]).replace("_", ":", 1).replace("_", "=")
    return r["algo"]


def med(xs):
    return statistics.median(xs) if xs else None


def fmt_s(xs):
    if not xs:
        return "–"
    return f"{med(xs):.3f} ({min(xs):.3f}–{max(xs):.3f})"


def ordered(labels):
    first = [l for l in labels if l.startswith("inlj:")]
    return sorted(first) + [l for l in ("smj", "hash") if l in labels]


def main():
    d = sys.argv[1]
    runs, builds = load(d)
    SPECS.update({slug(b["spec"]): b["spec"] for b in builds.values()})
    cold = [r for r in runs if r.get("tag", "").startswith("cold")]
    datasets = sorted({r["dataset"] for r in runs})
    ratios = sorted({r["ratio"] for r in cold})
    print("# Joins: results\n")
    f = fio(d)
    if f:
        print("fio on the same file system (O_DIRECT, psync):\n")
        print("| run | MB/s | IOPS |\n|---|---|---|")
        for k, (bw, iops) in sorted(f.items()):
            print(f"| {k} | {bw:,.0f} | {iops:,.0f} |")
        print()

    # Cold join times.
    checks = []
    for ds in datasets:
        print(f"## {ds}: cold join time, seconds (median of repeats, min–max)\n")
        labels = ordered({label(r) for r in cold if r["dataset"] == ds})
        print("| algorithm | " + " | ".join(f"ratio {x}" for x in ratios) + " |")
        print("|---|" + "---|" * len(ratios))
        times = {}
        for l in labels:
            row = []
            for x in ratios:
                xs = [r["seconds"] for r in cold if r["dataset"] == ds and r["ratio"] == x and label(r) == l]
                times[(l, x)] = xs
                row.append(fmt_s(xs))
            print(f"| {l} | " + " | ".join(row) + " |")
        print()
        # Counts must agree across algorithms.
        for x in ratios:
            outs = {(r["count"], r["checksum"]) for r in cold if r["dataset"] == ds and r["ratio"] == x}
            if len(outs) > 1:
                print(f"**MISMATCH** at ratio {x}: {sorted(outs)}\n")
        pages = []
        for l in labels:
            if not l.startswith("inlj:"):
                continue
            row = []
            for x in ratios:
                rs = [r for r in cold if r["dataset"] == ds and r["ratio"] == x and label(r) == l]
                if rs:
                    row.append(f"{rs[0]['index_pages_read']:,} / {rs[0]['index_reads']:,}")
                else:
                    row.append("–")
            pages.append(f"| {l} | " + " | ".join(row) + " |")
        print("Pages read / read calls of the nested-loop joins:\n")
        print("| index | " + " | ".join(f"ratio {x}" for x in ratios) + " |")
        print("|---|" + "---|" * len(ratios))
        print("\n".join(pages) + "\n")
        learned = [l for l in labels if l.startswith("inlj:") and "btree" not in l]
        for x in ratios:
            bt = med(times.get(("inlj:btree", x), []))
            bts = med(times.get(("inlj:btree-static", x), []))
            smj = med(times.get(("smj", x), []))
            for l in learned:
                t = med(times.get((l, x), []))
                if t:
                    checks.append((ds, x, l, bt / t if bt else None, bts / t if bts else None, smj / t if smj else None))
    if checks:
        print("## Speed-ups of the learned nested-loop joins (median over median)\n")
        print("| data set | ratio | index | vs btree | vs btree-static | vs smj |")
        print("|---|---|---|---|---|---|")
        for ds, x, l, a, b, c in checks:
            def f2(v):
                return f"{v:.2f}x" if v else "–"
            print(f"| {ds} | {x} | {l} | {f2(a)} | {f2(b)} | {f2(c)} |")
        print()

    # Index sizes and build times.
    if builds:
        print("## Index size and build time (10M keys unless said)\n")
        print("| data set | kind | memory bytes | bits/key | build s | keys/s |")
        print("|---|---|---|---|---|---|")
        for k, b in sorted(builds.items()):
            print(
                f"| {b['dataset']} | {b['spec']} | {b['memory_bytes']:,} | {b['bits_per_key']:.3f} | {b['build_s']:.3f} | {b['build_keys_per_s'] / 1e6:.1f}M |"
            )
        print()

    # Modelled read time.
    model = [r for r in runs if r.get("tag", "").startswith("model-")]
    if model:
        print("## Modelled read time of the nested-loop joins' index reads, seconds\n")
        profiles = ["nvme", "sata-ssd", "hdd"]
        for ds in datasets:
            print(f"{ds}:\n")
            print("| index | ratio | " + " | ".join(profiles) + " |")
            print("|---|---|" + "---|" * len(profiles))
            labels = ordered({label(r) for r in model if r["dataset"] == ds})
            for l in labels:
                for x in ratios:
                    row = []
                    for p in profiles:
                        v = [
                            r["modelled_read_s"]
                            for r in model
                            if r["dataset"] == ds and r["ratio"] == x and label(r) == l and r["tag"].startswith(f"model-{p}-")
                        ]
                        row.append(f"{v[0]:.3f}" if v and v[0] is not None else "–")
                    print(f"| {l} | {x} | " + " | ".join(row) + " |")
            print()

    # Threads.
    th = [r for r in runs if r.get("tag", "").startswith("threads")]
    if th:
        print("## Threads (seconds, median (min–max))\n")
        print("| data set | ratio | algorithm | 1 thread | 2 threads | speed-up |")
        print("|---|---|---|---|---|---|")
        keys = sorted({(r["dataset"], r["ratio"], r["algo"]) for r in th})
        for ds, x, a in keys:
            one = [r["seconds"] for r in th if (r["dataset"], r["ratio"], r["algo"]) == (ds, x, a) and r["threads"] == 1]
            two = [r["seconds"] for r in th if (r["dataset"], r["ratio"], r["algo"]) == (ds, x, a) and r["threads"] == 2]
            sp = f"{med(one) / med(two):.2f}x" if one and two else "–"
            print(f"| {ds} | {x} | {a} | {fmt_s(one)} | {fmt_s(two)} | {sp} |")
        print()

    # Memory.
    mem = [r for r in runs if r.get("tag", "").startswith("memory-")]
    if mem:
        print("## Peak resident memory against the limit\n")
        print("| data set | ratio | algorithm | limit MiB | buffers MiB | peak RSS MiB | peak / limit | seconds |")
        print("|---|---|---|---|---|---|---|---|")
        for r in sorted(mem, key=lambda r: (r["dataset"], r["memory_limit"], r["ratio"], r["algo"])):
            lim = r["memory_limit"] / 2**20
            peak = (r["peak_rss_bytes"] or 0) / 2**20
            print(
                f"| {r['dataset']} | {r['ratio']} | {r['algo']} | {lim:.0f} | {r['memory_budget'] / 2**20:.1f} | {peak:.1f} | {peak / lim:.2f} | {r['seconds']:.3f} |"
            )
        print()

    # Index size against join time: the sampled PGM's windows.
    sz = [r for r in runs if r.get("tag", "").startswith("size")]
    if sz:
        print("## Sampled PGM (every 128th key): window, index size and join time\n")
        sratios = sorted({r["ratio"] for r in sz})
        print("| spec | window (records) | index bytes | " + " | ".join(f"ratio {x}: s, pages / calls" for x in sratios) + " |")
        print("|---|---|---|" + "---|" * len(sratios))
        specs = sorted({r["tag"].split("-", 1)[1] for r in sz}, key=lambda t: int(t.rsplit("_", 1)[1]))
        for spec in specs:
            rs = [r for r in sz if r["tag"].split("-", 1)[1] == spec]
            eps = int(spec.rsplit("_", 1)[1])
            row = []
            for x in sratios:
                t = [r for r in rs if r["ratio"] == x]
                row.append(f"{fmt_s([r['seconds'] for r in t])}, {t[0]['index_pages_read']:,} / {t[0]['index_reads']:,}" if t else "–")
            mem = rs[0]["index"]["memory_bytes"] if rs[0].get("index") else 0
            print(f"| pgm:sample=128,epsilon={eps} | {(2 * eps + 2) * 128} | {mem:,} | " + " | ".join(row) + " |")
        print()

    # Unsorted inputs.
    un = [r for r in runs if r.get("tag", "").startswith("unsorted-")]
    if un:
        print("## Unsorted tables: external merge sort against learned partitioning\n")
        print("| algorithm | sort | limit MiB | seconds, median (min–max) | spill MiB written | peak RSS MiB (max) | peak / limit |")
        print("|---|---|---|---|---|---|---|")
        keys = sorted({(r["algo"], r.get("sort_method", "-"), r["memory_limit"]) for r in un})
        for a, srt, lim in keys:
            rs = [r for r in un if (r["algo"], r.get("sort_method", "-"), r["memory_limit"]) == (a, srt, lim)]
            peak = max((r["peak_rss_bytes"] or 0) for r in rs) / 2**20
            spill = med([r["spill_bytes_written"] for r in rs]) / 2**20
            print(
                f"| {a} | {srt if a != 'hash' else '–'} | {lim / 2**20:.0f} | {fmt_s([r['seconds'] for r in rs])} | {spill:,.1f} | {peak:.1f} | {peak / (lim / 2**20):.2f} |"
            )
        print()

    draw(d, cold, datasets, ratios, builds)


def draw(d, cold, datasets, ratios, builds):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    for ds in datasets:
        fig, ax = plt.subplots(figsize=(7.5, 4.8))
        labels = ordered({label(r) for r in cold if r["dataset"] == ds})
        colours = plt.get_cmap("tab20").colors
        for n, l in enumerate(labels):
            xs, ys, lo, hi = [], [], [], []
            for x in ratios:
                t = [r["seconds"] for r in cold if r["dataset"] == ds and r["ratio"] == x and label(r) == l]
                if t:
                    xs.append(x)
                    ys.append(med(t))
                    lo.append(med(t) - min(t))
                    hi.append(max(t) - med(t))
            style = "-" if l.startswith("inlj:") and "btree" not in l else ("--" if "btree" in l else ":")
            ax.errorbar(xs, ys, yerr=[lo, hi], label=l, marker="o", linestyle=style, capsize=2, color=colours[(2 * n) % 20])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("size ratio |inner| / |outer|")
        ax.set_ylabel("join time, s (cold, median; bars: min–max)")
        ax.set_title(f"{ds}: joins of sorted tables, 10M-key inner")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2, loc="best")
        fig.tight_layout()
        fig.savefig(os.path.join(d, f"joins-{ds}.png"), dpi=110)
        plt.close(fig)
    # Index size against join time (fb-like, else the first data set; ratios 10 and 100).
    if not datasets:
        return
    ds = "fb-like" if "fb-like" in datasets else datasets[0]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    for ax, x in zip(axes, [10, 100]):
        for l in ordered({label(r) for r in cold if r["dataset"] == ds and r["ratio"] == x}):
            if not l.startswith("inlj:"):
                continue
            rs = [r for r in cold if r["dataset"] == ds and r["ratio"] == x and label(r) == l]
            size = rs[0]["index"]["memory_bytes"] / 1e6 if rs and rs[0].get("index") else None
            if size is None:
                continue
            ax.scatter([size], [med([r["seconds"] for r in rs])])
            ax.annotate(l[len("inlj:") :], (size, med([r["seconds"] for r in rs])), fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.set_xscale("log")
        ax.set_xlabel("index memory, MB")
        ax.set_ylabel("join time, s (cold, median)")
        ax.set_title(f"{ds}, ratio {x}")
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "joins-size.png"), dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
