#!/usr/bin/env bash
# Zhang et al. §10 analogue for strata's hybrid store (docs/results/hybrid.md):
# YCSB read-only / write-only / balanced on fb-like, osm-like and books-like,
# `db` at several memory budgets against `btree` given the same memory
# (pinned inner nodes + an LRU page cache of the rest, the runner's per-index
# `cache=` parameter). All configurations of a workload run in one
# `strata bench` invocation, interleaved in every repeat, so each ratio is
# measured in one run.
#
# Usage: scripts/db-hybrid-bench.sh OUT_DIR [DATASETS...]
# Env: N (keys in the file; 15/16 are bulk-loaded, default 16000000),
#      OPS_READ (default 50000), OPS_WRITE (default 200000),
#      BUDGETS (db memory budgets, default "1M 2M 4M 8M"; the B+-tree runs at
#      the smallest and the largest), REPEAT (default 3), THREADS (default 1),
#      READ (1: run the read-only part, default 1), WRITE (1: run the
#      writing part, default 1), DB_WRITE (parameters added to the store's
#      spec in the writing part, default ",static=leco-zonemap-d": merges
#      rebuild the static index, and the LeCo zone map builds ~15x faster than
#      pgm-disk-cpr for the same memory; see docs/results/hybrid.md),
#      STRATA (binary).
set -euo pipefail
out=${1:?usage: db-hybrid-bench.sh OUT_DIR [DATASETS...]}
shift || true
datasets=${*:-fb-like osm-like books-like}
N=${N:-16000000}
OPS_READ=${OPS_READ:-50000}
OPS_WRITE=${OPS_WRITE:-200000}
BUDGETS=${BUDGETS:-1M 2M 4M 8M}
REPEAT=${REPEAT:-3}
THREADS=${THREADS:-1}
READ=${READ:-1}
WRITE=${WRITE:-1}
DB_WRITE=${DB_WRITE-,static=leco-zonemap-d}
STRATA=${STRATA:-target/release/strata}
mkdir -p "$out"
bytes() { numfmt --from=iec "$1"; }
tag="t$THREADS"
for d in $datasets; do
  keys="$out/$d-$N.sosd"
  [ -f "$keys" ] || "$STRATA" gen --dist "$d" --n "$N" --out "$keys" --quiet
  work="$out/work-$d"
  # The B+-tree's pinned inner nodes over the 15/16 bulk load.
  inner=$("$STRATA" bench --data "$keys" --dataset "$d" --work-dir "$work" --quiet \
    --index btree --workload ycsb-read-only --ops 1000 \
    | python3 -c "import json,sys; print(json.loads(sys.stdin.readline())['memory_bytes'])")
  if [ "$READ" = 1 ]; then
    # Read-only (Fig. 11a): the static stage alone; the learned static kinds
    # at several error bounds against the B+-tree with and without a cache.
    "$STRATA" bench --data "$keys" --dataset "$d" --work-dir "$work" --quiet \
      --index btree --index "btree:cache=$(( $(bytes 4M) - inner ))" \
      --index db:memory=1M \
      --index db:memory=1M,static=pgm-disk-cpr,epsilon=32 \
      --index db:memory=1M,static=pgm-disk-cpr,epsilon=128 \
      --workload ycsb-read-only --ops "$OPS_READ" --repeat "$REPEAT" --threads "$THREADS" \
      --json "$out/$d-read-$tag.jsonl" > "$out/$d-read-$tag.txt"
  fi
  # Writes (Fig. 11b, c): the store at every budget; the B+-tree given the
  # smallest and the largest budget (inner nodes + cache of the rest).
  if [ "$WRITE" != 1 ]; then rm -rf "$work"; continue; fi
  set -- $BUDGETS
  lo=$1; hi=${!#}
  specs=()
  for m in "$lo" "$hi"; do
    cache=$(( $(bytes "$m") - inner ))
    [ "$cache" -lt 0 ] && cache=0
    specs+=(--index "btree:cache=$cache")
  done
  for m in $BUDGETS; do specs+=(--index "db:memory=$m,insert=blind$DB_WRITE"); done
  "$STRATA" bench --data "$keys" --dataset "$d" --work-dir "$work" --quiet "${specs[@]}" \
    --workload ycsb-write-only --workload ycsb-balanced --ops "$OPS_WRITE" \
    --repeat "$REPEAT" --threads "$THREADS" \
    --json "$out/$d-write-$tag.jsonl" > "$out/$d-write-$tag.txt"
  rm -rf "$work"
done
