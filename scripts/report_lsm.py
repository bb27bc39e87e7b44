#!/usr/bin/env python3
"""Tables and figures of docs/results/lsm.md from scripts/lsm-experiments.sh output.

Usage: .venv/bin/python scripts/report_lsm.py OUT [--fig-dir DIR]
(from the repository root; ./scripts/test-python.sh makes .venv, whose
matplotlib and strata package draw the figures)
Reads OUT/*.jsonl (strata bench and strata kvbench records), prints Markdown
to stdout and writes fig8.png, sweep.png, train.png, gran.png and kv.png
into --fig-dir (default OUT; needs matplotlib). Sections whose files are
missing are skipped.

Latencies are those of the median repeat (by throughput) of `strata bench`,
or the median over kvbench's repeats; "spread" is (max - min) / median of the
repeats' throughputs. Index bytes are deterministic: what the store reports
for the resident indexes of its tables, block handles included.
"""
import argparse
import statistics

from report_static import load  # same directory: JSON Lines, [] when missing

KINDS = ["fp", "pgm", "pgm-cpr", "rs", "rmi", "plr", "fiting", "gap-zonemap-d", "air"]
DATASETS = ["fb-like", "osm-like", "wiki-like"]


def grouped_bars(ax, groups, series, value, rotation=0):
    """One bar per series in each group: value(series, group); ticks at the groups."""
    width = 0.8 / max(1, len(series))
    for i, s in enumerate(series):
        xs = [j + i * width for j in range(len(groups))]
        ax.bar(xs, [value(s, g) for g in groups], width, label=s)
    ax.set_xticks([j + width * (len(series) - 1) / 2 for j in range(len(groups))])
    ax.set_xticklabels(groups, rotation=rotation)
    ax.legend(fontsize=8)


def params(spec):
    """`lsm:index=pgm,boundary=16` -> {'index': 'pgm', 'boundary': '16'}."""
    body = spec.split(":", 1)[1] if ":" in spec else ""
    return dict(p.split("=", 1) for p in body.split(",") if "=" in p)


def spread(runs):
    if not runs or len(runs) < 2:
        return None
    m = statistics.median(runs)
    return (max(runs) - min(runs)) / m if m else None


def pct(x):
    return "-" if x is None else f"{100 * x:.0f} %"


def us(ns):
    return "-" if ns is None else f"{ns / 1000:.2f}"


def mb(b):
    return "-" if b is None else f"{b / 1e6:.2f}"


def index_bytes(r):
    """Index bytes of a bench record (its `store` stats) or a kvbench record."""
    if "store" in r and r["store"]:
        return r["store"].get("index_bytes")
    mem = r.get("memory") or {}
    return mem.get("index")


def kv_groups(rows, workload):
    """kvbench records of one workload grouped by spec (repeats together)."""
    g = {}
    for r in rows:
        if r["workload"] == workload:
            g.setdefault(r["spec"], []).append(r)
    return g


def kv_summary(recs):
    tp = [r["throughput_ops_s"] for r in recs]
    return {
        "throughput": statistics.median(tp),
        "spread": spread(tp),
        "p50": statistics.median(r["latency_ns"]["p50"] for r in recs),
        "p99": statistics.median(r["latency_ns"]["p99"] for r in recs),
        "index": statistics.median(index_bytes(r) or 0 for r in recs),
    }


def fig8(out):
    text, points = [], {}
    for ds in DATASETS:
        cold = {params(r["spec"]).get("index"): r for r in load(f"{out}/fig8-{ds}-cold.jsonl")}
        warm = {params(r["spec"]).get("index"): r for r in load(f"{out}/fig8-{ds}-warm.jsonl")}
        if not cold and not warm:
            continue
        n = next(iter((cold or warm).values()))["n"]
        fp = index_bytes(cold.get("fp") or warm.get("fp") or {})
        text += [f"\n### {ds} ({n:,} keys, boundary 16)\n",
                 "| kind | index bytes | bytes/key | fp ÷ kind | cold p50 µs | cold p99 µs | cold spread | warm p50 µs | warm p99 µs | warm spread |",
                 "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for k in KINDS:
            c, w = cold.get(k), warm.get(k)
            r = c or w
            if not r:
                continue
            ib = index_bytes(r)
            ratio = f"{fp / ib:.1f}" if fp and ib else "-"
            text.append(
                f"| `{k}` | {ib:,} | {ib / n:.2f} | {ratio} | "
                f"{us(c and c['latency_ns']['p50'])} | {us(c and c['latency_ns']['p99'])} | {pct(c and spread(c['throughput_runs']))} | "
                f"{us(w and w['latency_ns']['p50'])} | {us(w and w['latency_ns']['p99'])} | {pct(w and spread(w['throughput_runs']))} |")
            points.setdefault(ds, []).append((k, ib, c and c["latency_ns"]["p50"], w and w["latency_ns"]["p50"]))
    ycold = kv_groups(load(f"{out}/fig8-ycsb-cold.jsonl"), "readrandom")
    ywarm = kv_groups(load(f"{out}/fig8-ycsb-warm.jsonl"), "readrandom")
    if ycold or ywarm:
        any_rec = next(iter((ycold or ywarm).values()))[0]
        text += [f"\n### YCSB-style ({any_rec['n']:,} entries, 24-byte keys, 1000-byte values, boundary 16; kvbench readrandom)\n",
                 "| kind | index bytes | cold p50 µs | cold p99 µs | cold spread | warm p50 µs | warm p99 µs |",
                 "|---|---:|---:|---:|---:|---:|---:|"]
        for spec in (ycold or ywarm):
            k = params(spec).get("index")
            c = kv_summary(ycold[spec]) if spec in ycold else None
            w = kv_summary(ywarm[spec]) if spec in ywarm else None
            ib = (c or w)["index"]
            text.append(f"| `{k}` | {int(ib):,} | {us(c and c['p50'])} | {us(c and c['p99'])} | "
                        f"{pct(c and c['spread'])} | {us(w and w['p50'])} | {us(w and w['p99'])} |")
            points.setdefault("ycsb-style", []).append((k, ib, c and c["p50"], w and w["p50"]))
    return ("\n## 1. Memory and point lookups at boundary 16 (Liu Fig. 8)\n" + "\n".join(text)) if text else "", points


def sweep(out):
    rows = load(f"{out}/sweep-fb-like.jsonl")
    if not rows:
        return "", {}
    bounds = sorted({int(params(r["spec"])["boundary"]) for r in rows})
    kinds = [k for k in KINDS if any(params(r["spec"])["index"] == k for r in rows)]
    cell = {(params(r["spec"])["index"], int(params(r["spec"])["boundary"])): r for r in rows}
    text = ["\n## 2. Position boundary sweep, fb-like, cold (Liu Fig. 7)\n",
            "Index bytes / cold p50 µs.\n",
            "| kind | " + " | ".join(f"B = {b}" for b in bounds) + " |",
            "|---|" + "---:|" * len(bounds)]
    lines = {}
    for k in kinds:
        cells = []
        for b in bounds:
            r = cell.get((k, b))
            if r:
                cells.append(f"{index_bytes(r):,} / {us(r['latency_ns']['p50'])}")
                lines.setdefault(k, []).append((b, index_bytes(r), r["latency_ns"]["p50"]))
            else:
                cells.append("-")
        text.append(f"| `{k}` | " + " | ".join(cells) + " |")
    return "\n".join(text), lines


def train(out):
    sets = [("16", "16 B (8 B key + 8 B value)"), ("1024", "1 KiB (24 B key + 1000 B value)")]
    text, bars = [], {}
    for tag, label in sets:
        rows = [r for r in load(f"{out}/train-{tag}.jsonl") if r["workload"] == "fillrandom"]
        if not rows:
            continue
        groups = {}
        for r in rows:
            groups.setdefault(r["spec"], []).append(r["config"]["stats"])
        n = rows[0]["n"]
        text += [f"\n### {label}, fillrandom of {n:,} entries, compactions inline\n",
                 "| kind | train s | compaction s | flush s | compactions | train ÷ (compaction + flush) |",
                 "|---|---:|---:|---:|---:|---:|"]
        for spec, stats in groups.items():
            k = params(spec).get("index")
            share = statistics.median(s["train_nanos"] / max(1, s["compaction_nanos"] + s["flush_nanos"]) for s in stats)
            med = lambda f: statistics.median(s[f] for s in stats) / 1e9  # noqa: E731
            comps = int(statistics.median(s["compactions"] for s in stats))
            text.append(f"| `{k}` | {med('train_nanos'):.3f} | {med('compaction_nanos'):.3f} | {med('flush_nanos'):.3f} | "
                        f"{comps} | {100 * share:.1f} % |")
            bars.setdefault(label, {})[k] = share
    if not text:
        return "", {}
    head = ("\n## 3. Training time as a share of compaction time (Liu §5.4)\n\n"
            "`train_nanos` (fitting each table's index once its entries are written) over the time of flushes "
            "and compactions (merge, I/O, syncs, training, manifest), median over repeats.\n")
    return head + "\n".join(text), bars


def gran(out):
    rows = load(f"{out}/gran-fb-like.jsonl")
    if not rows:
        return "", {}

    def label(p):
        return "level" if p.get("granularity") == "level" else f"table {p.get('target_file', '8M')}"

    n = rows[0]["n"]
    text = [f"\n## 4. Index granularity, fb-like {n:,} keys, boundary 16, cold (Liu §5.5)\n",
            "| kind | granularity | tables (L0..L6) | index bytes | index bytes per level | cold p50 µs | cold p99 µs | spread |",
            "|---|---|---|---:|---|---:|---:|---:|"]
    data = {}
    for r in rows:
        p = params(r["spec"])
        lv = (r.get("store") or {}).get("levels", [])
        tables = "/".join(str(l["files"]) for l in lv)
        per = ", ".join(f"L{i}: {l['index_bytes']:,}" for i, l in enumerate(lv) if l["files"])
        text.append(f"| `{p['index']}` | {label(p)} | {tables} | {index_bytes(r):,} | {per} | "
                    f"{us(r['latency_ns']['p50'])} | {us(r['latency_ns']['p99'])} | {pct(spread(r['throughput_runs']))} |")
        data.setdefault(p["index"], {})[label(p)] = (index_bytes(r), r["latency_ns"]["p50"])
    return "\n".join(text), data


def kv(out):
    rows = load(f"{out}/kv.jsonl")
    text, ratios = [], {}
    if rows:
        workloads = list(dict.fromkeys(r["workload"] for r in rows))
        r0 = rows[0]
        budget = r0["config"].get("memory_bytes")
        budget = f"{budget / 2**20:g} MiB" if budget else "-"
        text += [f"\n## 6. kvbench at equal memory ({r0['n']:,} entries, {r0['key_size']} B keys, "
                 f"{r0['value_size']} B values, budget {budget} per engine)\n",
                 "Median throughput over repeats (ops/s), spread, ratio to strata's LSM store (first engine), p50/p99 µs.\n",
                 "| workload | engine | ops/s | spread | ÷ lsm | p50 µs | p99 µs | memory MB | write amp |",
                 "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for w in workloads:
            g = kv_groups(rows, w)
            base = None
            for spec, recs in g.items():
                s = kv_summary(recs)
                if base is None:
                    base = s["throughput"]
                ratio = s["throughput"] / base if base else None
                amps = [r["write_amp"] for r in recs if r.get("write_amp") is not None]
                wa = statistics.median(amps) if amps else None
                mem = statistics.median(r["memory_bytes"] for r in recs)
                text.append(f"| {w} | {recs[0]['index']} | {s['throughput']:,.0f} | {pct(s['spread'])} | "
                            f"{ratio:.2f} | {us(s['p50'])} | {us(s['p99'])} | {mb(mem)} | "
                            f"{'-' if wa is None else f'{wa:.2f}'} |")
                ratios.setdefault(recs[0]["index"], {})[w] = ratio
    wo = load(f"{out}/kv-write-only-db.jsonl")
    if wo:
        base = wo[0]["throughput_ops_s"]
        text += [f"\n### write-only (Zhang §10.1.1) on fb-like {wo[0]['n']:,} keys, 1 MiB budget\n",
                 "| spec | ops/s | spread | ÷ first | p50 µs | p99 µs | memory MB |", "|---|---:|---:|---:|---:|---:|---:|"]
        for r in wo:
            text.append(f"| `{r['spec']}` | {r['throughput_ops_s']:,.0f} | {pct(spread(r['throughput_runs']))} | "
                        f"{r['throughput_ops_s'] / base:.2f} | {us(r['latency_ns']['p50'])} | {us(r['latency_ns']['p99'])} | "
                        f"{mb(r['memory_bytes'])} |")
    return "\n".join(text), ratios


def plot(fig_dir, f8, sw, tr, gr, kvr):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from strata.plot import fit_labels, plain_log_axis, spread_labels

    colors = {k: plt.cm.tab10(i) for i, k in enumerate(KINDS)}

    def save(fig, name, labelled=()):
        """Lays out, keeps every point label readable and inside its axes, saves."""
        fig.tight_layout()
        for ax, texts in labelled:
            spread_labels(ax, texts)
            fit_labels(ax, texts)
        fig.savefig(f"{fig_dir}/{name}.png", dpi=120)
        plt.close(fig)

    def memory_axis(ax):
        ax.set_xscale("log")
        plain_log_axis(ax.xaxis)
        ax.set_xlabel("index memory (MB, log scale)")
    if f8:
        panels = list(f8)
        fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4), squeeze=False)
        labelled = []
        for ax, ds in zip(axes[0], panels):
            texts = []
            for k, ib, cold, warm in f8[ds]:
                if cold:
                    ax.scatter(ib / 1e6, cold / 1e3, color=colors.get(k), marker="o", label=f"{k} cold")
                if warm:
                    ax.scatter(ib / 1e6, warm / 1e3, facecolors="none", edgecolors=colors.get(k), marker="s")
                texts.append(ax.annotate(k, (ib / 1e6, (cold or warm) / 1e3), fontsize=7, xytext=(3, 3),
                                         textcoords="offset points"))
            memory_axis(ax)
            ax.set_title(ds)
            ax.set_ylabel("p50 lookup latency (µs)")
            ax.grid(alpha=0.3, which="both")
            labelled.append((ax, texts))
        fig.suptitle("Index memory vs point-lookup latency at boundary 16 (filled: cold, hollow: warm)")
        save(fig, "fig8", labelled)
    if sw:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        texts = []
        for k, pts in sw.items():
            ax.plot([p[1] / 1e6 for p in pts], [p[2] / 1e3 for p in pts], marker="o", label=k, color=colors.get(k))
            for b, ib, lat in pts:
                texts.append(ax.annotate(str(b), (ib / 1e6, lat / 1e3), fontsize=6, xytext=(2, 2),
                                         textcoords="offset points", color=colors.get(k)))
        memory_axis(ax)
        ax.set_ylabel("cold p50 lookup latency (µs)")
        ax.set_title("fb-like: position boundary 4..256 (labels: boundary)")
        # Beside the axes: the curves cross the whole plot.
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
        ax.grid(alpha=0.3, which="both")
        save(fig, "sweep", [(ax, texts)])
    if tr:
        fig, ax = plt.subplots(figsize=(7.5, 4))
        labels = list(tr)
        kinds = [k for k in KINDS if any(k in tr[lab] for lab in labels)]
        grouped_bars(ax, kinds, labels, lambda lab, k: 100 * tr[lab].get(k, 0), rotation=30)
        ax.axhline(5, color="gray", linestyle="--", linewidth=1)
        ax.set_ylabel("training, % of flush + compaction time")
        ax.set_title("Training share (dashed: the 5 % target)")
        save(fig, "train")
    if gr:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        kinds = list(gr)
        configs = list(dict.fromkeys(c for k in kinds for c in gr[k]))
        grouped_bars(axes[0], kinds, configs, lambda c, k: gr[k].get(c, (0, 0))[0] / 1e6)
        grouped_bars(axes[1], kinds, configs, lambda c, k: gr[k].get(c, (0, 0))[1] / 1e3)
        axes[0].set_ylabel("index memory (MB)")
        axes[1].set_ylabel("cold p50 lookup latency (µs)")
        axes[0].set_yscale("log")
        plain_log_axis(axes[0].yaxis)
        fig.suptitle("Index granularity: tables of 8M / 32M / 128M against one table per level (fb-like)")
        save(fig, "gran")
    if kvr:
        fig, ax = plt.subplots(figsize=(12, 4))
        engines = list(kvr)
        workloads = list(dict.fromkeys(w for e in engines for w in kvr[e]))
        grouped_bars(ax, workloads, engines, lambda e, w: kvr[e].get(w) or 0, rotation=30)
        ax.axhline(1, color="gray", linewidth=1)
        ax.set_ylabel("throughput ÷ strata lsm")
        ax.set_title("kvbench at equal memory (median over repeats)")
        save(fig, "kv")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--fig-dir")
    a = ap.parse_args()
    fig_dir = a.fig_dir or a.out
    t8, f8 = fig8(a.out)
    ts, sw = sweep(a.out)
    tt, tr = train(a.out)
    tg, gr = gran(a.out)
    tk, kvr = kv(a.out)
    print("# LSM experiments (scripts/lsm-experiments.sh)")
    for t in (t8, ts, tt, tg, tk):
        if t:
            print(t)
    try:
        plot(fig_dir, f8, sw, tr, gr, kvr)
    except ImportError:
        print("\n(matplotlib or the strata package missing: no figures; ./scripts/test-python.sh makes .venv)")


if __name__ == "__main__":
    main()
