#!/usr/bin/env python3
"""Tables and figures of docs/results/airtune.md from scripts/bench-airtune.sh output.

Usage: report_airtune.py WORKDIR [--fig-dir docs/results/airtune]
Prints Markdown to stdout; writes PNGs into --fig-dir (needs matplotlib).
Every modelled figure is deterministic: the tuner's cost model (replayed on
its query sample) or reads/bytes per lookup counted by IoStats, costed with
T(bytes) = latency + bytes / bandwidth.
"""
import argparse
import glob
import json
import math
import os
import statistics

SETS = ["fb-like", "osm-like", "wiki-like", "books-like", "gmm"]
PROFILES = {  # name: (latency µs, bandwidth bytes/s) — BENCHMARKS.md
    "nvme": (70.0, 6.9e9),
    "sata-ssd": (211.6, 560e6),
    "hdd": (4800.0, 141e6),
    "azure-ssd": (250.0, 175e6),
    "nfs": (50000.0, 12e6),
}
# Profiles whose star in the design map is labelled on its left (its
# neighbour's label is on the right).
LABEL_LEFT = {"azure-ssd"}
# Fixed kinds at their default knobs, as `strata bench` runs them (the
# --compare spec that equals each default).
DEFAULTS = {
    "btree-static": "btree-static:page=4096",
    "pgm": "pgm:epsilon=64",
    "rs": "rs:epsilon=64",
    "rmi": "rmi:models=65536",
    "leco-zonemap-d": "leco-zonemap-d",
}


# Builder names as the tuner prints them (older JSON spelt some kebab-case).
OLD_NAMES = {"g-step": "gstep", "g-band": "gband", "e-band": "eband", "z-band": "zband"}


def _names(v):
    if isinstance(v, dict):
        return {k: (OLD_NAMES.get(x, x) if k == "builder" else _names(x)) for k, x in v.items()}
    if isinstance(v, list):
        return [_names(x) for x in v]
    return v


def load_json(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return _names(json.load(f))


def load_lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [_names(json.loads(line)) for line in f if line.strip()]


def t_us(reads, nbytes, profile):
    lat, bw = PROFILES[profile]
    return reads * lat + nbytes / bw * 1e6


def us(x):
    return f"{x:,.1f}" if x < 1000 else f"{x:,.0f}"


def design_str(d):
    return " < ".join(f"{lay['builder']}(λ={lay['lambda']})" for lay in d["layers"]) or "none"


def cold_modelled(w, figs):
    """Table 1: modelled cold first-query latency, air vs the fixed kinds."""
    out = ["| data set | profile | air µs (design) | btree-static | btree | pgm | rs | rmi | leco-zonemap-d |",
           "|---|---|---|---|---|---|---|---|---|"]
    bars = {}
    for d in SETS:
        r = load_json(f"{w}/optimal-{d}.json")
        if not r:
            continue
        cold = {x["spec"]: x for x in load_lines(f"{w}/cold-{d}.jsonl")}
        for p in r["points"]:
            prof = p["profile"]
            air = p["cost_ns"] / 1e3
            cmp = {c["spec"]: c["modelled_ns"] / 1e3 for c in p["compare"]}
            row = [d, prof, f"{us(air)} ({design_str(p['design'])})"]
            vals = {}
            for k in ["btree-static", "btree", "pgm", "rs", "rmi", "leco-zonemap-d"]:
                if k == "btree":
                    b = cold.get("btree")
                    v = t_us(b["io"]["reads_per_op"], b["io"]["bytes_per_op"], prof) if b else None
                else:
                    v = cmp.get(DEFAULTS[k])
                vals[k] = v
                row.append("—" if v is None else f"{us(v)} ({v / air:.2f}×)")
            bars[(d, prof)] = (air, vals)
            out.append("| " + " | ".join(row) + " |")
    if figs and bars:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        kinds = ["air", "btree-static", "btree", "pgm", "rs", "rmi", "leco-zonemap-d"]
        fig, axes = plt.subplots(1, len(PROFILES), figsize=(18, 4), sharey=False)
        for ax, prof in zip(axes, PROFILES):
            width = 0.8 / len(kinds)
            for i, k in enumerate(kinds):
                ys = []
                for d in SETS:
                    air, vals = bars.get((d, prof), (math.nan, {}))
                    v = air if k == "air" else vals.get(k)
                    ys.append(math.nan if v is None else v / 1e3)
                ax.bar([j + i * width for j in range(len(SETS))], ys, width, label=k)
            ax.set_xticks([j + 0.4 - width / 2 for j in range(len(SETS))])
            ax.set_xticklabels(SETS, rotation=30, fontsize=8)
            ax.set_title(f"{prof}")
            ax.set_ylabel("modelled cold lookup (ms)")
        axes[0].legend(fontsize=7)
        fig.suptitle("Cold first-query latency, nothing resident, 10M keys (modelled)")
        fig.tight_layout()
        fig.savefig(os.path.join(figs, "cold.png"), dpi=110)
        plt.close(fig)
    return "\n".join(out)


def acceptance(w):
    """Table 2: tuned vs best fixed design (grid) and best fixed kind (any knob)."""
    out = ["| data set | profile | air µs | best grid point µs (builder, λ, layers) | best fixed kind µs | air / best | air / btree-static |",
           "|---|---|---|---|---|---|---|"]
    worst = 0.0
    for d in SETS:
        r = load_json(f"{w}/optimal-{d}.json")
        if not r:
            continue
        for p in r["points"]:
            air = p["cost_ns"]
            grid = min(p["fixed"], key=lambda f: f["cost_ns"])
            best_cmp = min(p["compare"], key=lambda c: c["modelled_ns"])
            best = min(grid["cost_ns"], best_cmp["modelled_ns"])
            bs = next(c for c in p["compare"] if c["spec"] == DEFAULTS["btree-static"])
            worst = max(worst, air / best)
            out.append(
                f"| {d} | {p['profile']} | {us(air / 1e3)} | {us(grid['cost_ns'] / 1e3)} "
                f"({grid['builder']}, {grid['lambda']}, {grid['layers']}) | {us(best_cmp['modelled_ns'] / 1e3)} "
                f"({best_cmp['spec']}) | {air / best:.4f} | {air / bs['modelled_ns']:.3f} |")
    out.append("")
    out.append(f"Largest air / best ratio over all {len(out) - 3} cells: **{worst:.4f}**.")
    return "\n".join(out)


def model_vs_iostats(w):
    """The tuner's modelled bytes per lookup against IoStats of `strata bench`
    (air:profile=nfs, resident=none, its own random lookups)."""
    out = ["| data set | modelled bytes/lookup (tuner, 65,536 sampled keys) | IoStats bytes/lookup (bench, 2,000 lookups × 3) | difference | modelled reads | IoStats reads |",
           "|---|---|---|---|---|---|"]
    for d in SETS:
        r = load_json(f"{w}/optimal-{d}.json")
        rows = [x for x in load_lines(f"{w}/cold-{d}.jsonl") if x["spec"] == "air:profile=nfs"]
        if not r or not rows:
            continue
        p = next(x for x in r["points"] if x["profile"] == "nfs")
        io = rows[0]["io"]
        m = p["design"]["expected_read_bytes"]
        out.append(f"| {d} | {m:,.0f} | {io['bytes_per_op']:,.0f} | {(io['bytes_per_op'] - m) / m * 100:+.2f}% | "
                   f"{len(p['design']['layers']) + 1} | {io['reads_per_op']:.2f} |")
    return "\n".join(out)


def measured(w):
    """Table 3: measured cold lookups here (O_DIRECT), with IoStats figures."""
    local = load_json(f"{w}/local-profile.json")
    out = []
    if local:
        out.append(f"Local device (strata profile, O_DIRECT): latency {local['latency_us']:.1f} µs, "
                   f"bandwidth {local['bandwidth_mb_s']:.0f} MB/s.\n")
    out += ["| data set | index | mean µs (spread of 3 runs) | p50 µs | p99 µs | reads/op | pages/op | bytes/op | modelled local µs | mean vs btree-static |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for d in SETS:
        rows = load_lines(f"{w}/cold-{d}.jsonl")
        if not rows:
            continue
        base = None
        for r in rows:
            runs = r.get("throughput_runs") or [r["throughput_ops_s"]]
            means = [1e6 / t for t in runs if t > 0]
            mean = statistics.median(means)
            if r["spec"] == "btree-static":
                base = mean
        for r in rows:
            runs = r.get("throughput_runs") or [r["throughput_ops_s"]]
            means = sorted(1e6 / t for t in runs if t > 0)
            mean = statistics.median(means)
            io = r["io"]
            lm = io["reads_per_op"] * local["latency_us"] + io["bytes_per_op"] / local["bandwidth_mb_s"] if local else math.nan
            spec = r["spec"]
            if spec.startswith("air:profile=custom"):
                spec = "air:profile=local"
            out.append(
                f"| {d} | {spec} | {mean:.0f} ({means[0]:.0f}–{means[-1]:.0f}) | {r['latency_ns']['p50'] / 1e3:.0f} | "
                f"{r['latency_ns']['p99'] / 1e3:.0f} | {io['reads_per_op']:.2f} | {io['pages_per_op']:.2f} | "
                f"{io['bytes_per_op']:.0f} | {lm:.0f} | {mean / base:.2f}× |" if base else "")
    return "\n".join(out)


def optimality_fig(w, figs):
    """Fig. 11 analogue: fixed designs' cost against λ per number of layers."""
    r = load_json(f"{w}/optimal-fb-like.json")
    if not r or not figs:
        return ""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    shown = ["nvme", "hdd", "nfs"]
    fams = ["gstep", "gband", "cpr"]
    fig, axes = plt.subplots(len(fams), len(shown), figsize=(14, 10))
    lines = []
    for j, prof in enumerate(shown):
        p = next(x for x in r["points"] if x["profile"] == prof)
        for i, fam in enumerate(fams):
            ax = axes[i][j]
            fixed = [f for f in p["fixed"] if f["builder"] == fam and f["layers"] > 0]
            for layers in sorted({f["layers"] for f in fixed}):
                pts = sorted((f["lambda"], f["cost_ns"] / 1e3) for f in fixed if f["layers"] == layers)
                ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", ms=3, label=f"L={layers}")
            ax.axhline(p["cost_ns"] / 1e3, color="red", lw=1.5, label="AirTune")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{fam} stacks, {prof}", fontsize=9)
            ax.set_xlabel("granularity λ (bytes)", fontsize=8)
            ax.set_ylabel("modelled µs", fontsize=8)
            ax.legend(fontsize=6)
            best = min(f["cost_ns"] for f in fixed) / 1e3 if fixed else math.nan
            lines.append(f"| {prof} | {fam} | {us(best)} | {us(p['cost_ns'] / 1e3)} |")
    fig.suptitle("fb-like, 10M keys: fixed designs (one builder at one λ, L layers) vs the tuned design")
    fig.tight_layout()
    fig.savefig(os.path.join(figs, "optimality.png"), dpi=100)
    plt.close(fig)
    return "\n".join(["| profile | builder | best of its grid µs | AirTune µs |", "|---|---|---|---|"] + lines)


def design_map_doc(r):
    """What the design-map figure needs of the tuner's map JSON: the grid's
    axes and, per profile, the layers chosen and the bytes read per lookup
    (kept as docs/results/airtune/design-map.json, so that the figure can be
    redrawn without the run's work directory)."""
    return {
        "dataset": r.get("dataset", "fb-like"),
        "n": r.get("n", 10_000_000),
        "latency_us": r["latency_us"],
        "bandwidth_mb_s": r["bandwidth_mb_s"],
        "points": [{k: p[k] for k in ("latency_us", "bandwidth_mb_s", "layers", "read_bytes")}
                   for p in r["points"]],
    }


def _bytes(b):
    for div, unit in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if b >= div:
            return f"{b / div:.0f} {unit}"
    return f"{b:.0f} B"


def draw_design_map(doc, path):
    """AirTune's design map: per (latency, bandwidth) profile, the number of
    index layers chosen (discrete colours, with a legend) and the bytes read
    per lookup (log colour scale); the named profiles starred."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import BoundaryNorm, ListedColormap, LogNorm, to_rgb
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter
    import matplotlib.patheffects as pe

    lats, bws = doc["latency_us"], doc["bandwidth_mb_s"]
    grid = {(p["latency_us"], p["bandwidth_mb_s"]): p for p in doc["points"]}

    def tick(v):
        return f"{v:,.0f}" if v >= 1000 else f"{v:g}"

    def ink(rgb):
        """Black or white, whichever reads better on a cell of colour rgb."""
        r, g, b = rgb[:3]
        return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"

    fig, axes = plt.subplots(1, 2, figsize=(14, 5.2))
    layers = np.array([[grid[(lat, b)]["layers"] for b in bws] for lat in lats], dtype=int)
    counts = list(range(0, int(layers.max()) + 1))
    palette = ["#fde725", "#21918c", "#3b0f70", "#e16462", "#6a00a8"][: len(counts)]
    cmap = ListedColormap(palette)
    axes[0].imshow(layers, origin="lower", aspect="auto", cmap=cmap,
                   norm=BoundaryNorm([c - 0.5 for c in counts] + [counts[-1] + 0.5], len(counts)))
    nbytes = np.array([[grid[(lat, b)]["read_bytes"] for b in bws] for lat in lats], dtype=float)
    norm = LogNorm(vmin=nbytes.min(), vmax=nbytes.max())
    im = axes[1].imshow(nbytes, origin="lower", aspect="auto", cmap="viridis", norm=norm)
    for i in range(len(lats)):
        for j in range(len(bws)):
            v = layers[i, j]
            axes[0].text(j, i, str(v), ha="center", va="center", fontsize=7, color=ink(to_rgb(palette[v])))
            axes[1].text(j, i, _bytes(nbytes[i, j]), ha="center", va="center", fontsize=6,
                         color=ink(im.cmap(norm(nbytes[i, j]))))
    for ax, title in ((axes[0], "index layers L chosen"), (axes[1], "bytes read per lookup")):
        ax.set_xticks(range(len(bws)))
        ax.set_xticklabels([tick(b) for b in bws], fontsize=7)
        ax.set_yticks(range(len(lats)))
        ax.set_yticklabels([tick(lat) for lat in lats], fontsize=7)
        ax.set_xlabel("bandwidth (MB/s)")
        ax.set_ylabel("latency (µs)")
        ax.set_title(title)
        for name, (lat, bw) in PROFILES.items():
            x = np.interp(math.log10(bw / 1e6), [math.log10(b) for b in bws], range(len(bws)))
            y = np.interp(math.log10(lat), [math.log10(v) for v in lats], range(len(lats)))
            ax.plot(x, y, marker="*", ms=14, mfc="white", mec="black", mew=0.8, ls="none", zorder=4)
            # Labels of neighbouring stars go to opposite sides.
            left = name in LABEL_LEFT
            t = ax.annotate(name, (x, y), xytext=(-7 if left else 7, 5), textcoords="offset points", fontsize=8,
                            ha="right" if left else "left", color="black", fontweight="bold", zorder=5)
            t.set_path_effects([pe.withStroke(linewidth=3, foreground="white")])
    axes[0].legend(handles=[Patch(facecolor=palette[c], edgecolor="grey", label=f"L = {c}") for c in counts],
                   title="layers", loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=8)
    # Colour bar ticks at the values present (few), else at powers of 1024.
    present = sorted(set(nbytes.flat))
    ticks = present if len(present) <= 6 else [
        1024.0**k for k in range(6) if nbytes.min() <= 1024.0**k <= nbytes.max()]
    cb = fig.colorbar(im, ax=axes[1], ticks=ticks)
    cb.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: _bytes(v)))
    cb.ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _pos: ""))
    cb.ax.minorticks_off()
    fig.suptitle(f"AirTune design map, {doc['dataset']} {doc['n'] / 1e6:g}M keys "
                 f"(stars: the named profiles)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def design_map(w, figs):
    r = load_json(f"{w}/map-fb-like.json")
    if not r:
        return ""
    lats, bws = r["latency_us"], r["bandwidth_mb_s"]
    grid = {(p["latency_us"], p["bandwidth_mb_s"]): p for p in r["points"]}
    out = ["Number of index layers chosen (rows: latency µs; columns: bandwidth MB/s):", "",
           "| latency \\ MB/s | " + " | ".join(f"{b:g}" for b in bws) + " |",
           "|---" * (len(bws) + 1) + "|"]
    for lat in lats:
        out.append(f"| {lat:g} | " + " | ".join(str(grid[(lat, b)]["layers"]) for b in bws) + " |")
    out += ["", "Total bytes read per lookup (KiB):", "",
            "| latency \\ MB/s | " + " | ".join(f"{b:g}" for b in bws) + " |",
            "|---" * (len(bws) + 1) + "|"]
    for lat in lats:
        out.append(f"| {lat:g} | " + " | ".join(f"{grid[(lat, b)]['read_bytes'] / 1024:.0f}" for b in bws) + " |")
    out.append("")
    out.append(f"{len(r['points'])} profiles tuned in {r['map_s']:.0f} s with one tuner (layers built once).")
    if figs:
        doc = design_map_doc(r)
        with open(os.path.join(figs, "design-map.json"), "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        draw_design_map(doc, os.path.join(figs, "design-map.png"))
    return "\n".join(out)


def warm(w, figs):
    out = []
    data = [x for x in (load_json(f"{w}/warm-{d}.json") for d in ["fb-like", "osm-like"]) if x]
    if not data:
        return ""
    shown = ["nfs", "sata-ssd"]
    for r in data:
        for prof in shown:
            cps = [p["queries"] for p in r["runs"][0]["points"]]
            out.append(f"\n{r['dataset']}, average modelled µs per lookup under {prof} "
                       f"(LRU cache {r['cache_pages']} pages, nothing resident):\n")
            out.append("| index | " + " | ".join(f"{c:,}" for c in cps) + " |")
            out.append("|---" * (len(cps) + 1) + "|")
            for run in r["runs"]:
                vals = [t_us(p["read_calls"], p["bytes_read"], prof) / p["queries"] for p in run["points"]]
                out.append(f"| {run['index']} | " + " | ".join(us(v) for v in vals) + " |")
    if figs:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(len(data), len(shown), figsize=(12, 4.5 * len(data)), squeeze=False)
        for i, r in enumerate(data):
            for j, prof in enumerate(shown):
                ax = axes[i][j]
                for run in r["runs"]:
                    xs = [p["queries"] for p in run["points"]]
                    ys = [t_us(p["read_calls"], p["bytes_read"], prof) / p["queries"] for p in run["points"]]
                    ax.plot(xs, ys, marker="o", ms=3, label=run["index"], lw=2 if run["index"].startswith("air") else 1)
                ax.set_xscale("log")
                ax.set_yscale("log")
                ax.set_xlabel("queries")
                ax.set_ylabel("average modelled µs per lookup")
                ax.set_title(f"{r['dataset']}, {prof}")
                ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(figs, "warm.png"), dpi=100)
        plt.close(fig)
    return "\n".join(out)


def timing(w):
    rows = load_lines(f"{w}/time.jsonl")
    out = []
    if rows:
        out += ["| keys | threads | wall ns per key: median (runs) | spread (max−min)/median | CPU ns per key: median (runs) | tuned design (nfs) |",
                "|---|---|---|---|---|---|"]
        groups = {}
        for r in rows:
            groups.setdefault((r["n"], r["threads"]), []).append(r)
        for (n, t), rs in sorted(groups.items()):
            v = sorted(x["tune_ns_per_key"] for x in rs)
            c = sorted(x.get("cpu_ns_per_key", math.nan) for x in rs)
            med = statistics.median(v)
            out.append(f"| {n:,} | {t} | {med:.0f} ({', '.join(f'{x:.0f}' for x in v)}) | "
                       f"{(v[-1] - v[0]) / med * 100:.0f}% | {statistics.median(c):.0f} ({', '.join(f'{x:.0f}' for x in c)}) | "
                       f"{design_str(rs[0]['design'])}, {us(rs[0]['design']['modelled_ns'] / 1e3)} µs |")
    rows = load_lines(f"{w}/topk.jsonl")
    if rows:
        out += ["", "| top-k | profile | wall ns per key (2 threads) | CPU ns per key | vertices | candidates built | modelled µs | design |",
                "|---|---|---|---|---|---|---|---|"]
        for r in rows:
            d = r["design"]
            out.append(f"| {r['top_k']} | {r['profile']['name']} | {r['tune_ns_per_key']:.0f} | "
                       f"{r.get('cpu_ns_per_key', math.nan):.0f} | {d['vertices']} | "
                       f"{d['candidates_built']} | {us(d['modelled_ns'] / 1e3)} | {design_str(d)} |")
    return "\n".join(out)


def scale(w):
    out = ["| keys | air design | air µs | btree-static µs (reads) | air / btree-static |", "|---|---|---|---|---|"]
    files = sorted(glob.glob(f"{w}/scale-*.json"), key=lambda p: int(p.rsplit("-", 1)[1].split(".")[0]))
    for path in files:
        r = load_json(path)
        d = r["design"]
        bs = r["compare"][0]
        out.append(f"| {r['n']:,} | {design_str(d)} (root {d['root']['bytes']:,} B) | {us(d['modelled_ns'] / 1e3)} | "
                   f"{us(bs['modelled_ns'] / 1e3)} ({bs['calls']:.0f}) | {d['modelled_ns'] / bs['modelled_ns']:.3f} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workdir", nargs="?", help="the output directory of scripts/bench-airtune.sh")
    ap.add_argument("--fig-dir", default="docs/results/airtune")
    ap.add_argument("--design-map", metavar="JSON",
                    help="only redraw FIG_DIR/design-map.png from this JSON (as the report run writes it: "
                         "docs/results/airtune/design-map.json)")
    a = ap.parse_args()
    if a.design_map:
        draw_design_map(load_json(a.design_map), os.path.join(a.fig_dir, "design-map.png"))
        return
    if not a.workdir:
        ap.error("WORKDIR is needed (or --design-map JSON)")
    figs = a.fig_dir
    try:
        import matplotlib  # noqa: F401
        os.makedirs(figs, exist_ok=True)
    except ImportError:
        figs = None
    w = a.workdir
    for title, body in [
        ("1. Cold first-query latency, modelled", cold_modelled(w, figs)),
        ("1b. Cold first-query latency, measured here", measured(w)),
        ("2. Acceptance / optimality", acceptance(w)),
        ("2a. Cost model against IoStats", model_vs_iostats(w)),
        ("2b. Fixed designs by builder (fb-like)", optimality_fig(w, figs)),
        ("3. Design map", design_map(w, figs)),
        ("4. Warm curve", warm(w, figs)),
        ("5. Tuning time", timing(w)),
        ("6. nfs bound at larger n", scale(w)),
    ]:
        print(f"### {title}\n\n{body}\n")


if __name__ == "__main__":
    main()
