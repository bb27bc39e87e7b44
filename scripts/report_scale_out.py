#!/usr/bin/env python3
"""Tables of scripts/s3-experiments.sh's runs (docs/results/scale-out.md).

Usage: report_scale_out.py DIR. Prints the two profiles, then one row per
run and index: throughput (median of the repeats, with their range), p50
latency, read calls, pages and bytes per lookup."""

import json
import statistics
import sys
from pathlib import Path

RUNS = [
    ("s3-cold", "s3, one at a time"),
    ("s3-cold-2", "s3, one at a time (again)"),
    ("local-cold", "local disk (O_DIRECT), one at a time"),
    ("s3-batch64", "s3, batches of 64 (queue depth 16)"),
    ("local-batch64", "local disk, batches of 64 (queue depth 16)"),
    ("s3-cache4096", "s3, page cache of 4096 pages"),
]


def main(d: Path) -> None:
    for name in ("s3", "local"):
        p = d / f"profile-{name}.json"
        if p.exists():
            j = json.loads(p.read_text())
            print(f"- {name}: latency {j['latency_us']:.1f} µs, bandwidth {j['bandwidth_mb_s']:.0f} MB/s (r² {j['r2']:.3f})")
    print()
    print("| run | index | kops/s (range) | p50 µs | reads/lookup | pages/lookup | KiB/lookup | cache hits |")
    print("|---|---|---|---|---|---|---|---|")
    for run, what in RUNS:
        f = d / f"{run}.jsonl"
        if not f.exists():
            continue
        for line in f.read_text().splitlines():
            r = json.loads(line)
            runs = r["throughput_runs"]
            med = statistics.median(runs)
            io = r["io"]
            hits = r.get("cache_hit_ratio")
            print(
                f"| {what} | `{r['spec']}` | {med / 1e3:.2f} ({min(runs) / 1e3:.2f}–{max(runs) / 1e3:.2f}) "
                f"| {r['latency_ns']['p50'] / 1e3:.0f} | {io['reads_per_op']:.2f} | {io['pages_per_op']:.2f} "
                f"| {io['bytes_per_op'] / 1024:.1f} | {'' if hits is None else f'{hits:.2f}'} |"
            )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
