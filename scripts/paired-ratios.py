#!/usr/bin/env python3
"""Paired throughput ratios of `strata bench` runs, with a confidence interval.

Usage: paired-ratios.py RUN.jsonl [RUN.jsonl ...]
In each file the first record of a workload is the baseline; every other
record of that workload is compared with it repeat by repeat (the runner
interleaves configurations, so repeat i of each ran side by side). Prints,
per configuration, the median and [min, max] of the paired ratios, their
geometric mean with a 95% bootstrap interval (4,000 resamples, seed 1), the
ratio of median throughputs, memory against the baseline's and p50
latencies; then the same pooled over every file, and the run-level view:
the mean of the per-comparison geometric means with a 95% t-interval, the
honest interval when runs differ by more than their own intervals (slow
drifts of the disk).
"""
import json
import math
import random
import statistics
import sys


def interval(logs, rng):
    means = sorted(statistics.mean(rng.choices(logs, k=len(logs))) for _ in range(4000))
    return math.exp(means[100]), math.exp(means[3899])


# Two-sided 95% quantiles of Student's t for 1..30 degrees of freedom.
T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
       2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
       2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def main():
    rng = random.Random(1)
    pooled = []
    run_logs = []
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
                run_logs.append(statistics.mean(logs))
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
    if len(run_logs) > 1:
        k = len(run_logs)
        m = statistics.mean(run_logs)
        half = (T95[k - 2] if k - 1 <= len(T95) else 1.96) * statistics.stdev(run_logs) / math.sqrt(k)
        print(
            f"run-level: {k} comparisons, geomean of their geomeans {math.exp(m):.3f} "
            f"(95% t-interval {math.exp(m - half):.3f}-{math.exp(m + half):.3f}), "
            f"sd between them {statistics.stdev(run_logs):.4f}"
        )


if __name__ == "__main__":
    main()
