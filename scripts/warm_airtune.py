#!/usr/bin/env python3
"""Warm curve of docs/results/airtune.md (AirIndex Fig. 10), through the Python bindings.

Builds each index once, opens it with nothing resident and an LRU page cache,
and looks up uniformly drawn existing keys in order; after 1, 10, 100, ...
lookups it records the storage reads and bytes so far (cache misses only),
from which the report computes the average modelled latency per lookup under
any profile. Deterministic (fixed seed, modelled time only).

Usage: warm_airtune.py KEYFILE DATASET OUT.json WORKDIR [--cache-pages 65536]
"""
import argparse
import json
import os
import shutil

import numpy as np

import strata

SPECS = ["btree-static", "btree", "pgm", "rs", "rmi", "leco-zonemap-d"]
AIR_PROFILES = ["nfs", "sata-ssd"]
CHECKPOINTS = [1, 10, 100, 1_000, 10_000, 100_000]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("keys")
    ap.add_argument("dataset")
    ap.add_argument("out")
    ap.add_argument("workdir")
    ap.add_argument("--cache-pages", type=int, default=65536)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    keys = strata.read_keys(a.keys)
    rng = np.random.default_rng(a.seed)
    queries = keys[rng.integers(0, len(keys), CHECKPOINTS[-1])]
    expect = np.searchsorted(keys, queries).astype(np.uint64)
    os.makedirs(a.workdir, exist_ok=True)
    runs = []
    indexes = [(s, s) for s in SPECS] + [(f"air:profile={p}", None) for p in AIR_PROFILES]
    for label, spec in indexes:
        path = os.path.join(a.workdir, label.replace(":", "_").replace("=", "_"))
        shutil.rmtree(path, ignore_errors=True)
        if spec is None:
            strata.tune(keys, profile=label.split("=", 1)[1], out=path)
        else:
            strata.build(keys, kind=spec, path=path).close()
        idx = strata.open(path, resident="none", cache_pages=a.cache_pages, profile="nfs")
        points, done = [], 0
        for cp in CHECKPOINTS:
            got = idx.get_many(queries[done:cp])
            if not np.array_equal(got, expect[done:cp]):
                raise SystemExit(f"{label}: wrong answers")
            done = cp
            io = idx.io()
            points.append({"queries": cp, "read_calls": io["read_calls"], "bytes_read": io["bytes_read"],
                           "pages_read": io["pages_read"]})
        idx.close()
        shutil.rmtree(path, ignore_errors=True)
        runs.append({"index": label, "points": points})
        print(label, points[-1], flush=True)
    with open(a.out, "w") as f:
        json.dump({"dataset": a.dataset, "n": int(len(keys)), "cache_pages": a.cache_pages,
                   "seed": a.seed, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
