#!/usr/bin/env python3
"""Markdown tables of docs/results/peers.md from the JSON Lines of scripts/peers.sh.

    python3 scripts/report_peers.py [docs/results/peers]

Per data set:
- the device: fio's 4 KiB random reads at queue depth 1 (O_DIRECT), run
  before every repeat of the cold workloads ($ds-fio.jsonl);
- ratios: for every (workload, cache), each index's throughput against
  btree's, LMDB's and RocksDB's (and, for cold lookups, against fio's IOPS
  measured just before the same repeat), paired repeat by repeat: the
  median of the per-repeat ratios with their min–max;
- every record of $ds-cold/-warm/-write.jsonl with its latencies, I/O and
  memory; then $ds-write-db.jsonl (db at the budget and at 64 MiB).
"""

import json
import os
import statistics
import sys

PEERS = ("lmdb", "rocksdb")


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


def cache_name(r):
    return "warm" if r["cache"] == "os" else r["cache"]


def spread(values, d=2, unit="×"):
    """`median (min–max)` of values, or the one value."""
    if not values:
        return "—"
    med = statistics.median(values)
    if len(values) == 1:
        return f"{med:.{d}f}{unit}"
    return f"{med:.{d}f}{unit} ({min(values):.{d}f}–{max(values):.{d}f})"


def paired(a, b):
    """Per-repeat ratios of two throughput_runs (the runner interleaves the
    configurations, so repeat i of each ran side by side)."""
    return [x / y for x, y in zip(a, b) if y > 0]


def kops(r):
    return spread([x / 1e3 for x in r["throughput_runs"]], d=1, unit="")


def fio_runs(fio, workload, engine):
    """fio IOPS by repeat, run before that repeat of `workload`."""
    return {x["repeat"]: x["iops"] for x in fio if x["workload"] == workload and x["engine"] == engine}


def ratio_table(rows, fio):
    """Per (workload, cache): each index's ratios to btree, LMDB and RocksDB
    (and to fio's IOPS for cold lookups), paired per repeat."""
    out = []
    groups = {}
    for r in rows:
        groups.setdefault((r["workload"], cache_name(r)), []).append(r)
    for (workload, cache), rs in groups.items():
        by = {r["index"]: r for r in rs}
        refs = [x for x in ("btree",) + PEERS if x in by]
        with_fio = cache == "cold" and workload == "lookup" and fio
        engines = [e for e in ("psync", "io_uring") if with_fio and fio_runs(fio, workload, e)]
        reps = len(rs[0]["throughput_runs"])
        out.append(f"\n{workload}, {cache} ({reps} repeat{'s' if reps > 1 else ''}; "
                   "median of the per-repeat ratios, min–max in parentheses):\n")
        head = ["index", "kops/s"] + [f"vs {x}" for x in refs] + [f"vs fio {e} IOPS" for e in engines]
        out.append("| " + " | ".join(head) + " |")
        out.append("|---|" + "---:|" * (len(head) - 1))
        for r in rs:
            cells = [label(r), kops(r)]
            for x in refs:
                cells.append("1" if x == r["index"] else spread(paired(r["throughput_runs"], by[x]["throughput_runs"])))
            for e in engines:
                f = fio_runs(fio, workload, e)
                cells.append(spread([t / f[i] for i, t in enumerate(r["throughput_runs"]) if i in f]))
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def fio_table(fio):
    out = ["| fio engine | before | runs | IOPS: median (min–max) | p50 µs | p99 µs | file |",
           "|---|---|---:|---:|---:|---:|---|"]
    keys = sorted({(x["engine"], x["workload"]) for x in fio}, key=lambda k: (k[0] != "psync", k[1]))
    for engine, workload in keys:
        xs = [x for x in fio if x["engine"] == engine and x["workload"] == workload]
        p50 = statistics.median(x["lat_ns"]["p50"] for x in xs) / 1e3
        p99 = statistics.median(x["lat_ns"]["p99"] for x in xs) / 1e3
        out.append(f"| {engine} | {workload} | {len(xs)} | {spread([x['iops'] for x in xs], d=0, unit='')} "
                   f"| {p50:.1f} | {p99:.0f} | {xs[0]['file_bytes'] / 2**20:.0f} MiB |")
    return "\n".join(out)


def table(rows):
    out = [
        "| workload | cache | index | kops/s | p50 µs | p99 µs | max ms | pages/op | bits/key | memory MiB | disk MiB | build s |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lat = r["latency_ns"]
        out.append(
            f"| {r['workload']} | {cache_name(r)} | {label(r)} | {r['throughput_ops_s'] / 1e3:.1f} "
            f"| {lat['p50'] / 1e3:.1f} | {lat['p99'] / 1e3:.0f} | {lat['max'] / 1e6:.0f} "
            f"| {num(r['io']['pages_per_op'], 2)} | {r['bits_per_key']:.2f} | {r['memory_bytes'] / 2**20:.2f} "
            f"| {r['disk_bytes'] / 2**20:.0f} | {r['build_s']:.1f} |"
        )
    return "\n".join(out)


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "docs/results/peers"
    for ds in ("fb-like", "osm-like"):
        rows = []
        for part in ("cold", "warm", "write"):
            rows += load(os.path.join(d, f"{ds}-{part}.jsonl"))
        if not rows:
            continue
        fio = load(os.path.join(d, f"{ds}-fio.jsonl"))
        print(f"\n### {ds} (n = {rows[0]['n']:,})\n")
        if fio:
            print("The device, before every repeat of the cold workloads "
                  "(4 KiB random reads, queue depth 1, O_DIRECT):\n")
            print(fio_table(fio))
        print(ratio_table(rows, fio))
        print("\nEvery record (kops/s: median of the repeats; latencies of all repeats together):\n")
        print(table(rows))
        extra = load(os.path.join(d, f"{ds}-write-db.jsonl"))
        if extra:
            print(f"\n`db` at the budget and at 64 MiB ({ds}, separate run, `{ds}-write-db.jsonl`):")
            print(ratio_table(extra, []))
            print()
            print(table(extra))


if __name__ == "__main__":
    main()
