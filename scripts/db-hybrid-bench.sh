#!/usr/bin/env bash
# Zhang et al. §10 analogue for strata's hybrid store (docs/results/hybrid.md):
# YCSB read-only / write-only / balanced on fb-like, osm-like and books-like,
# `db` at several memory budgets against `btree` given the same memory
# (pinned inner nodes + an LRU page cache of the rest), one `strata bench`
# run per (data set, budget) so every ratio is measured in one run.
#
# Usage: scripts/db-hybrid-bench.sh OUT_DIR [DATASETS...]
# Env: N (keys in the file; 15/16 are bulk-loaded, default 16000000),
#      OPS_READ (default 100000), OPS_WRITE (default 200000),
#      BUDGETS (default "1M 4M 16M"), STRATA (binary).
set -euo pipefail
out=${1:?usage: db-hybrid-bench.sh OUT_DIR [DATASETS...]}
shift || true
datasets=${*:-fb-like osm-like books-like}
N=${N:-16000000}
OPS_READ=${OPS_READ:-100000}
OPS_WRITE=${OPS_WRITE:-200000}
BUDGETS=${BUDGETS:-1M 4M 16M}
STRATA=${STRATA:-target/release/strata}
mkdir -p "$out"
bytes() { numfmt --from=iec "$1"; }
for d in $datasets; do
  keys="$out/$d-$N.sosd"
  [ -f "$keys" ] || "$STRATA" gen --dist "$d" --n "$N" --out "$keys" --quiet
  work="$out/work-$d"
  # Read-only: the static stage alone; learned kinds at several error bounds.
  "$STRATA" bench --data "$keys" --dataset "$d" --work-dir "$work" --quiet \
    --index btree --index db:memory=1M \
    --index db:memory=1M,static=pgm-disk-cpr,epsilon=32 \
    --index db:memory=1M,static=pgm-disk-cpr,epsilon=128 \
    --workload ycsb-read-only --ops "$OPS_READ" --repeat 3 --json "$out/$d-read.jsonl" > "$out/$d-read.txt"
  # Writes: the B+-tree gets the same memory as the store's budget: its inner
  # nodes (measured by the read-only run) plus a page cache of the rest.
  inner=$(python3 -c "import json,sys; print(next(json.loads(l)['memory_bytes'] for l in open(sys.argv[1]) if json.loads(l)['index']=='btree'))" "$out/$d-read.jsonl")
  for m in $BUDGETS; do
    cache=$(( ( $(bytes "$m") - inner ) / 4096 ))
    [ "$cache" -lt 0 ] && cache=0
    "$STRATA" bench --data "$keys" --dataset "$d" --work-dir "$work" --quiet \
      --index btree --index "db:memory=$m,insert=blind" --cache-pages "$cache" \
      --workload ycsb-write-only --workload ycsb-balanced --ops "$OPS_WRITE" \
      --json "$out/$d-write-$m.jsonl" > "$out/$d-write-$m.txt"
  done
  rm -rf "$work"
done
