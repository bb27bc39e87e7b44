#!/usr/bin/env python3
"""Report of scripts/lsm-strings.sh (issue 17, experiment 5: string keys and
range lookups): a markdown table (OUT/strings.md) and a PNG (OUT/strings.png).

Usage: report_lsm_strings.py --out OUT [--keys NAME=FILE ...]

- Index memory per kind from OUT/strings-memory.jsonl (`strata lsm stats`).
- Key-map collisions of each key file: the store's key map strips a table's
  common prefix and reads the next 8 bytes; `lsm stats` does not count the
  keys that then share a value, so this counts them over the whole file
  (strip the file's common prefix, compare neighbours' next 8 bytes). A
  table's prefix is at least as long as the file's, and two keys that
  differ within the file's window also differ within a table's window, so
  this is an upper bound of what the tables see.
- Latency (p50, p99 in µs; median over repeats) of readrandom, seekrandom
  (scan length 10) and each longer scan length, warm and cold, from
  OUT/strings-DATASET-MODE-*.jsonl (kvbench records).
"""
import argparse
import glob
import json
import os
import re
import statistics


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def collisions(path):
    """(keys, keys sharing their 8-byte window with the previous key, common
    prefix bytes, mean size of the group of equal windows a key is in)."""
    with open(path, "rb") as f:
        keys = f.read().split(b"\n")
    if keys and keys[-1] == b"":
        keys.pop()
    if not keys:
        return 0, 0, 0, 0.0
    first, last = min(keys), max(keys)
    p = 0
    while p < min(len(first), len(last)) and first[p] == last[p]:
        p += 1
    keys.sort()
    window = [k[p : p + 8].ljust(8, b"\0") for k in keys]
    same = sum(1 for a, b in zip(window, window[1:]) if a == b)
    groups, run = [], 1
    for a, b in zip(window, window[1:]):
        if a == b:
            run += 1
        else:
            groups.append(run)
            run = 1
    groups.append(run)
    return len(keys), same, p, sum(g * g for g in groups) / len(keys)


def memory_table(recs):
    kinds = list(dict.fromkeys(r["index"] for r in recs))
    sets = list(dict.fromkeys(r["dataset"] for r in recs))
    by = {(r["dataset"], r["index"]): r for r in recs}
    out = ["| kind | " + " | ".join(f"{d} index bytes" for d in sets) + " | fp ÷ kind (" + " / ".join(sets) + ") |"]
    out.append("|---|" + "---:|" * len(sets) + "---|")
    for k in kinds:
        cells, ratios = [], []
        for d in sets:
            r = by.get((d, k))
            if r is None:
                cells.append("")
                ratios.append("")
                continue
            b = r["stats"]["index_bytes"]
            fp = by.get((d, "fp"))
            cells.append(f"{b:,}")
            ratios.append(f"{fp['stats']['index_bytes'] / b:.1f}" if fp and b else "")
        out.append(f"| `{k}` | " + " | ".join(cells) + " | " + " / ".join(ratios) + " |")
    notes = []
    for d in sets:
        r = next((r for r in recs if r["dataset"] == d), None)
        if r:
            files = sum(l["files"] for l in r["stats"]["levels"])
            notes.append(
                f"{d}: n = {r['n']:,}, boundary {r['boundary']}, memory {r['memory']}, "
                f"{files} tables (fp), filter {r['stats']['filter_bytes']:,} bytes"
            )
    return out, notes


def latency_rows(out_dir):
    """(dataset, mode, kind, workload label) -> [p50 µs], [p99 µs], cache."""
    rows = {}
    for path in sorted(glob.glob(os.path.join(out_dir, "strings-*-*-*.jsonl"))):
        m = re.match(r"strings-(\w+)-(warm|cold)-(\w+)\.jsonl$", os.path.basename(path))
        if not m:
            continue
        ds, mode, _ = m.groups()
        for r in load(path):
            label = r["workload"]
            if label == "seekrandom":
                label = f"seek+{r['config'].get('scan_length', 10)}"
            key = (ds, mode, r["config"].get("index", r["index"]), label)
            e = rows.setdefault(key, {"p50": [], "p99": [], "cache": set(), "wrong": 0})
            e["p50"].append(r["latency_ns"]["p50"] / 1e3)
            e["p99"].append(r["latency_ns"]["p99"] / 1e3)
            e["cache"].add(r["cache"])
            e["wrong"] += r["wrong"]
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--keys", action="append", default=[], help="NAME=FILE")
    a = ap.parse_args()
    md = ["# String keys and range lookups (issue 17, experiment 5)", ""]

    mem_path = os.path.join(a.out, "strings-memory.jsonl")
    mem = load(mem_path) if os.path.exists(mem_path) else []
    if mem:
        table, notes = memory_table(mem)
        md += ["## Index memory (`strata lsm stats`)", ""] + table + [""] + [f"- {n}" for n in notes] + [""]

    if a.keys:
        md += ["## Key-map collisions (whole file: an upper bound of the tables')", ""]
        md += [
            "| data set | keys | common prefix bytes | keys sharing the next 8 bytes with their neighbour | "
            "mean group of equal values a key is in |",
            "|---|---:|---:|---:|---:|",
        ]
        for spec in a.keys:
            name, path = spec.split("=", 1)
            n, same, p, group = collisions(path)
            md.append(f"| {name} | {n:,} | {p} | {same:,} ({100 * same / max(n, 1):.1f} %) | {group:,.1f} |")
        md.append("")

    rows = latency_rows(a.out)
    if rows:
        md += ["## Latency (µs, median of repeats)", ""]
        labels = sorted({k[3] for k in rows}, key=lambda s: (s != "readrandom", int(s.split("+")[1]) if "+" in s else 0))
        md.append("| data set | mode | kind | " + " | ".join(f"{l} p50 / p99" for l in labels) + " |")
        md.append("|---|---|---|" + "---:|" * len(labels))
        for ds, mode, kind in sorted({k[:3] for k in rows}, key=lambda k: (k[0], k[1] != "warm", k[2])):
            cells = []
            for l in labels:
                e = rows.get((ds, mode, kind, l))
                cells.append(
                    f"{statistics.median(e['p50']):.1f} / {statistics.median(e['p99']):.1f}"
                    + ("" if e["cache"] == {"cold"} or mode == "warm" else " (os cache)")
                    + (f" **{e['wrong']} wrong**" if e["wrong"] else "")
                    if e
                    else ""
                )
            md.append(f"| {ds} | {mode} | `{kind}` | " + " | ".join(cells) + " |")
        md.append("")

    png = os.path.join(a.out, "strings.png")
    if mem:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        sets = list(dict.fromkeys(r["dataset"] for r in mem))
        fig, axes = plt.subplots(1, len(sets), figsize=(6 * len(sets), 4.5), squeeze=False)
        for ax, d in zip(axes[0], sets):
            for r in (r for r in mem if r["dataset"] == d):
                kind = r["index"]
                lat = rows.get((d, "warm", kind, "readrandom"))
                x = r["stats"]["index_bytes"] / 2**20
                y = statistics.median(lat["p50"]) if lat else 0.0
                ax.scatter([x], [y])
                ax.annotate(kind, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
            ax.set_xlabel("index MiB")
            ax.set_ylabel("readrandom p50 µs (warm; 0 = not measured)")
            ax.set_title(f"{d}: memory against point-lookup latency")
            ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(png, dpi=120)
        md += [f"![memory against latency]({os.path.basename(png)})", ""]

    path = os.path.join(a.out, "strings.md")
    with open(path, "w") as f:
        f.write("\n".join(md))
    print("\n".join(md))
    print(f"report: {path}" + (f", {png}" if mem else ""))


if __name__ == "__main__":
    main()
