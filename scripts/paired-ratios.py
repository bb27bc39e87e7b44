#!/usr/bin/env python3
"""Paired throughput ratios of `strata bench` runs, with a confidence interval.

Usage: paired-ratios.py RUN.jsonl [RUN.jsonl ...]
In each file the first record of a workload is the baseline; every other
record of that workload is compared with it repeat by repeat (the runner
interleaves configurations, so repeat i of each ran side by side). Prints,
per configuration, the median and [min, max] of the paired ratios, their
geometric mean with a 95% bootstrap interval (4,000 resamples, seed 1), the
ratio of median throughputs, memory against the baseline's and p50
latencies; then the same pooled over every file.
"""
import json
import math
import random
import statistics
import sys


def interval(logs, rng):
    means = sorted(statistics.mean(rng.choices(logs, k=len(logs))) for _ in range(4000))
    return math.exp(means[100]), math.exp(means[3899])


def main():
    rng = random.Random(1)
    pooled = []
    for path in sys.argv[1:]:
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        for w in dict.fromkeys(r["workload"] for r in rows):
            same = [r for r in rows if r["workload"] == w]
            base = same[0]
            for r in same[1:]:
                ratios = [a / b for a, b in zip(r["throughput_runs"], base["throughput_runs"]) if b > 0]
                if not ratios:
                    continue
                pooled += ratios
                logs = [math.log(x) for x in ratios]
                lo, hi = interval(logs, rng)
                print(
                    f"{r['dataset']} {w} {r['spec']} vs {base['spec']}: n={len(ratios)} "
                    f"median {statistics.median(ratios):.3f} [{min(ratios):.3f}, {max(ratios):.3f}], "
                    f"geomean {math.exp(statistics.mean(logs)):.3f} (95% CI {lo:.3f}-{hi:.3f}), "
                    f"median throughputs {statistics.median(r['throughput_runs']) / statistics.median(base['throughput_runs']):.3f}, "
                    f"memory {r['memory_bytes']} B = {r['memory_bytes'] / base['memory_bytes']:.3f}, "
                    f"p50 {r['latency_ns']['p50'] / 1e3:.1f} us ({base['latency_ns']['p50'] / 1e3:.1f})"
                )
    if len(sys.argv) > 2 and pooled:
        logs = [math.log(x) for x in pooled]
        lo, hi = interval(logs, rng)
        print(
            f"pooled: n={len(pooled)} median {statistics.median(pooled):.3f}, "
            f"geomean {math.exp(statistics.mean(logs)):.3f} (95% CI {lo:.3f}-{hi:.3f}), "
            f"share >= 1: {sum(x >= 1 for x in pooled) / len(pooled):.2f}"
        )


if __name__ == "__main__":
    main()
