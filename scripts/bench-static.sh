#!/usr/bin/env bash
# Experiments of the static learned indexes (docs/results/static.md):
# Zhang et al. Table 3 / Fig. 7 / G1 / G2 analogues and the lookup comparison
# with the B+-tree, on 10M keys of each data set. Writes JSON Lines into
# WORKDIR; scripts/report_static.py turns them into tables and figures.
# Usage: scripts/bench-static.sh [WORKDIR]   (needs a release build)
set -euo pipefail
cd "$(dirname "$0")/.."
W=${1:-/tmp/strata-static}
S=target/release/strata
N=${N:-10000000}
OPS=${OPS:-20000}
# STAGES selects experiments (default: all): table3 pareto g1 g2 lookup
STAGES=${STAGES:-table3 pareto g1 g2 lookup}
run() { [[ " $STAGES " == *" $1 "* ]]; }
mkdir -p "$W"
for d in fb-like osm-like wiki-like books-like uniform; do
  [ -f "$W/$d.keys" ] || $S gen --dist "$d" --n "$N" --out "$W/$d.keys" -q
done
bench() { # name data ops args...
  local name=$1 data=$2 ops=$3; shift 3
  $S bench --data "$W/$data.keys" --work-dir "$W/work-$data" --ops "$ops" --profile nvme -q \
    --json "$W/$name-$data.jsonl" "$@" > /dev/null
  rm -rf "$W/work-$data"
}
# 1. Models with and without zero intervals at 1.01 / 1.5 / 2 / 3 expected pages.
run table3 && for d in fb-like osm-like wiki-like books-like uniform; do
  args=()
  for e in 1 64 128 255; do
    args+=(--index "pgm:epsilon=$e" --index "pgm-disk:epsilon=$e" --index "rs:epsilon=$e" --index "rs-disk:epsilon=$e")
  done
  bench table3 "$d" "$OPS" "${args[@]}" --workload lookup
done
# 2. Memory against pages for every kind (Pareto), fb-like and osm-like.
run pareto && for d in fb-like osm-like; do
  args=(--index btree --index btree-static --index zonemap --index leco-zonemap --index leco-zonemap-d)
  args+=(--index gap-zonemap-d --index gap-zonemap-d:block=128)
  for e in 4 16 64 256 1024; do
    args+=(--index "pgm:epsilon=$e" --index "pgm-disk:epsilon=$e" --index "pgm-disk-cpr:epsilon=$e")
    args+=(--index "rs:epsilon=$e" --index "rs-disk:epsilon=$e" --index "fiting-static:epsilon=$e")
  done
  for m in 1024 16384 262144; do args+=(--index "rmi:models=$m"); done
  bench pareto "$d" "$OPS" "${args[@]}" --workload lookup
done
# 3. G1: all pages at once or one by one (measured here; modelled by the report for four profiles).
args=()
for e in 16 64 256 1024; do
  args+=(--index "pgm:epsilon=$e,fetch=all-at-once" --index "pgm:epsilon=$e,fetch=one-by-one")
done
run g1 && bench g1 fb-like "$OPS" "${args[@]}" --workload lookup --repeat 3
# 4. G2: prediction granularity at a fixed search range (R_i = 2 epsilon items).
args=()
for e in 64 128 255; do
  for g in item 16 64 page; do args+=(--index "pgm:epsilon=$e,granularity=$g"); done
done
run g2 && bench g2 fb-like "$OPS" "${args[@]}" --workload lookup
# 5. Cold lookups (O_DIRECT, one thread) of the best configurations against the B+-tree.
run lookup && for d in fb-like osm-like; do
  bench lookup "$d" 100000 --index btree --index zonemap --index leco-zonemap-d --index gap-zonemap-d --index pgm-disk:epsilon=64 \
    --index pgm-disk-cpr:epsilon=64 --index pgm-disk:epsilon=16 --index rs-disk:epsilon=64 \
    --workload lookup --repeat 3
done
echo "results in $W"
