#!/usr/bin/env python3
"""Markdown tables of docs/results/peers.md from the JSON Lines of scripts/peers.sh.

    python3 scripts/report_peers.py [docs/results/peers]

Per data set: every (workload, cache, index) record of $ds-cold/-warm/-write
.jsonl with its ratio to btree in the same run; then the write runs of
$ds-write-db.jsonl (db at the budget and at 64 MiB); then btree against LMDB
on cold lookups, per repeat.
"""

import json
import os
import sys


def load(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def num(x, d=1):
    return "—" if x is None else f"{x:.{d}f}"


def label(r):
    name = r["index"]
    if name == "db":
        mem = r["config"].get("memory")
        name = f"db (memory {mem:,} B)" if isinstance(mem, int) else "db"
    return name


def table(rows):
    base = {(r["workload"], r["cache"]): r["throughput_ops_s"] for r in rows if r["index"] == "btree"}
    out = [
        "| workload | cache | index | kops/s | vs btree | p50 µs | p99 µs | max ms | pages/op | bits/key | memory MiB | disk MiB | build s |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        b = base.get((r["workload"], r["cache"]))
        ratio = f"{r['throughput_ops_s'] / b:.2f}×" if b else "—"
        cache = "warm" if r["cache"] == "os" else r["cache"]
        lat = r["latency_ns"]
        out.append(
            f"| {r['workload']} | {cache} | {label(r)} | {r['throughput_ops_s'] / 1e3:.1f} | {ratio} "
            f"| {lat['p50'] / 1e3:.1f} | {lat['p99'] / 1e3:.0f} | {lat['max'] / 1e6:.0f} "
            f"| {num(r['io']['pages_per_op'], 2)} | {r['bits_per_key']:.2f} | {r['memory_bytes'] / 2**20:.2f} "
            f"| {r['disk_bytes'] / 2**20:.0f} | {r['build_s']:.1f} |"
        )
    return "\n".join(out)


def runs(r):
    return ", ".join(f"{x / 1e3:.1f}" for x in r["throughput_runs"])


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "docs/results/peers"
    lmdb_rows = []
    for ds in ("fb-like", "osm-like"):
        rows = []
        for part in ("cold", "warm", "write"):
            rows += load(os.path.join(d, f"{ds}-{part}.jsonl"))
        if not rows:
            continue
        print(f"\n### {ds} (n = {rows[0]['n']:,})\n")
        print(table(rows))
        extra = load(os.path.join(d, f"{ds}-write-db.jsonl"))
        if extra:
            print(f"\n`db` at the budget and at 64 MiB ({ds}, separate run, `{ds}-write-db.jsonl`):\n")
            print(table(extra))
        cold = {r["index"]: r for r in rows if r["workload"] == "lookup" and r["cache"] == "cold"}
        if "btree" in cold and "lmdb" in cold:
            b, l = cold["btree"], cold["lmdb"]
            per = [x / y for x, y in zip(b["throughput_runs"], l["throughput_runs"])]
            lmdb_rows.append(
                f"| {ds} | {b['throughput_ops_s'] / 1e3:.1f} ({runs(b)}) | {l['throughput_ops_s'] / 1e3:.1f} ({runs(l)}) "
                f"| {b['throughput_ops_s'] / l['throughput_ops_s']:.2f} | {min(per):.2f}–{max(per):.2f} |"
            )
    if lmdb_rows:
        print("\n| data set | btree kops/s (runs) | lmdb kops/s (runs) | btree / lmdb (medians) | per repeat |")
        print("|---|---:|---:|---:|---:|")
        print("\n".join(lmdb_rows))


if __name__ == "__main__":
    main()
