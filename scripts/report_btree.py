#!/usr/bin/env python3
"""Table of docs/results/btree.md from scripts/bench-btree.sh output.

Usage: python3 scripts/report_btree.py WORKDIR
"""
import json
import os
import sys

HDD = (4800.0, 141e6)  # latency µs, bandwidth bytes/s (BENCHMARKS.md)


def load(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def hdd_us(r):
    return r["io"]["reads_per_op"] * HDD[0] + r["io"]["bytes_per_op"] / HDD[1] * 1e6


def main():
    w = sys.argv[1]
    rows = []
    for name in ["btree-read-index", "btree-read-none", "btree-write"]:
        rows += load(f"{w}/{name}.jsonl")
    print(
        "| workload | resident | ops | kops/s (runs) | p50 µs | p99 µs | pages/op | writes/op | "
        "nvme modelled µs/op | hdd modelled µs/op | disk MiB | memory KiB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        runs = ", ".join(f"{t / 1e3:.1f}" for t in r["throughput_runs"])
        print(
            f"| {r['workload']} | {r['resident']} | {r['ops']:,} | {r['throughput_ops_s'] / 1e3:.2f} ({runs}) | "
            f"{r['latency_ns']['p50'] / 1e3:.1f} | {r['latency_ns']['p99'] / 1e3:.0f} | {r['io']['pages_per_op']:.3f} | "
            f"{r['io']['writes_per_op']:.3f} | {r['io']['modelled_us_per_op']:.1f} | {hdd_us(r):.0f} | "
            f"{r['disk_bytes'] / 2**20:.1f} | {r['memory_bytes'] / 1024:.0f} |"
        )
    if rows:
        b = rows[0]
        print(f"\nBulk load of {b['bulk_n']:,} keys (fill 100 %): {b['build_s']:.2f} s = {b['build_keys_per_s'] / 1e6:.1f} M keys/s.")


if __name__ == "__main__":
    main()
