#!/usr/bin/env bash
# Issue 18's experiments (docs/results/updatable.md): Lan et al.'s six
# workloads on the updatable index kinds (the B+-tree and the updatable
# learned trees), in Lan's two settings, through `strata bench`. Writes JSON
# Lines into OUT, then scripts/report_updatable.py prints the Markdown tables
# (Lan's Table 4 beside strata's blocks per lookup, the winner of every
# workload) and draws the figures.
#
#   ./scripts/updatable-experiments.sh                          # the real run
#   N=200000 OPS=2000 OUT=/tmp/updx ./scripts/updatable-experiments.sh   # quick
#   ONLY=read ./scripts/updatable-experiments.sh                # a section
#
# Sections (ONLY, comma-separated; default all):
#   read    lookup-only and scan-only (lookup + next 99) on the bulk-loaded
#           index, `--resident none` (Lan §6.1, all on disk: only the meta
#           block in memory) and `--resident index` (Lan §6.2, inner nodes
#           in memory).
#   write   write-only (bulk half, insert the other half), read-heavy,
#           write-heavy, balanced (Lan §5.2), both settings.
#   buffer  lookup-only with an LRU page cache of 4, 16, 64 and 256 pages
#           in front of each kind, all on disk (Lan §6.6, Fig. 13).
#   own     strata's own design at equal memory: `btree-ld` (its learned
#           leaf directory: M bytes, read from a first short run) against
#           `btree` held to M bytes (all on disk behind an LRU of M bytes)
#           and `btree` with its inner nodes resident (about 5x M), the six
#           workloads, REPEAT interleaved repeats of each (write runs too).
#
# Knobs (environment):
#   KINDS    index specs (default: btree fiting dpgm, and every other
#            updatable kind that `strata list` shows)
#   DS       data sets (default: fb-like osm-like books-like)
#   N        keys per data set (default 10000000; Lan: 200M for the reads,
#            10M bulk + 10M operations for the writes)
#   OPS      lookups/scans per read run (default 200000, Lan's figure);
#            WOPS operations per write run (default N/2, at most 1M: Lan
#            runs 10M, which takes hours per kind at ~5k inserts/s)
#   REPEAT   interleaved repeats of the read runs (default 3)
#   OUT      where the JSON Lines go (default docs/results/updatable)
#   DATA_DIR key files and work directories (default bench-data)
#   STRATA_BIN the binary (default: a release build of strata-cli)
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-10000000}
OPS=${OPS:-200000}
WOPS=${WOPS:-$((N / 2 < 1000000 ? N / 2 : 1000000))}
REPEAT=${REPEAT:-3}
OUT=${OUT:-docs/results/updatable}
DATA_DIR=${DATA_DIR:-bench-data}
DS=${DS:-fb-like osm-like books-like}
ONLY=${ONLY:-read,write,buffer,own}
if [ -z "${STRATA_BIN:-}" ]; then
  cargo build --release -q -p strata-cli
  STRATA_BIN=target/release/strata
fi
S=$STRATA_BIN
if [ -z "${KINDS:-}" ]; then
  KINDS="btree"
  for k in fiting dpgm alex lipp; do
    if $S list 2>/dev/null | grep -qw "$k"; then KINDS="$KINDS $k"; fi
  done
fi
mkdir -p "$OUT" "$DATA_DIR"
want() { [[ ",$ONLY," == *",$1,"* ]]; }
index_args() { for k in $KINDS; do printf -- '--index %s ' "$k"; done; }

for ds in $DS; do
  keys="$DATA_DIR/$ds-$N.keys"
  [ -f "$keys" ] || $S gen --dist "$ds" --n "$N" --out "$keys" -q
  if want read; then
    for resident in none index; do
      echo "== read $ds resident=$resident" >&2
      # shellcheck disable=SC2046
      $S bench --data "$keys" --dataset "$ds" $(index_args) --workload lookup --workload scan \
        --ops "$OPS" --resident "$resident" --repeat "$REPEAT" --profile nvme -q \
        --work-dir "$DATA_DIR/work" --json "$OUT/read-$ds-$resident.jsonl" > /dev/null
    done
  fi
  if want write; then
    for resident in none index; do
      echo "== write $ds resident=$resident" >&2
      # shellcheck disable=SC2046
      $S bench --data "$keys" --dataset "$ds" $(index_args) --workload write-only \
        --workload read-heavy --workload write-heavy --workload balanced \
        --ops "$WOPS" --resident "$resident" --repeat 1 --profile nvme -q \
        --work-dir "$DATA_DIR/work" --json "$OUT/write-$ds-$resident.jsonl" > /dev/null
    done
  fi
  if want buffer; then
    for pages in 4 16 64 256; do
      echo "== buffer $ds cache=$pages pages" >&2
      args=""
      for k in $KINDS; do
        case "$k" in *:*) args="$args --index $k,cache=$((pages * 4))K" ;; *) args="$args --index $k:cache=$((pages * 4))K" ;; esac
      done
      # shellcheck disable=SC2086
      $S bench --data "$keys" --dataset "$ds" $args --workload lookup \
        --ops "$OPS" --resident none --repeat "$REPEAT" --profile nvme -q \
        --work-dir "$DATA_DIR/work" --json "$OUT/buffer-$ds-$pages.jsonl" > /dev/null
    done
  fi
  if want own; then
    echo "== own $ds: btree-ld at equal memory" >&2
    $S bench --data "$keys" --dataset "$ds" --index btree-ld --workload lookup --ops 1000 -q \
      --work-dir "$DATA_DIR/work" --json "$OUT/own-$ds-probe.jsonl" > /dev/null
    mem=$(python3 -c 'import json,sys; print(max(json.loads(l)["memory_bytes"] for l in open(sys.argv[1])))' "$OUT/own-$ds-probe.jsonl")
    rm -f "$OUT/own-$ds-probe.jsonl"
    echo "   btree-ld holds $mem bytes; btree gets an LRU of as many" >&2
    own="--index btree:resident=none,cache=$mem --index btree-ld --index btree:resident=index"
    # shellcheck disable=SC2086
    $S bench --data "$keys" --dataset "$ds" $own --workload lookup --workload scan \
      --ops "$OPS" --repeat "$REPEAT" --profile nvme -q \
      --work-dir "$DATA_DIR/work" --json "$OUT/own-read-$ds.jsonl" > /dev/null
    # shellcheck disable=SC2086
    $S bench --data "$keys" --dataset "$ds" $own --workload write-only --workload read-heavy \
      --workload write-heavy --workload balanced \
      --ops "$WOPS" --repeat "$REPEAT" --profile nvme -q \
      --work-dir "$DATA_DIR/work" --json "$OUT/own-write-$ds.jsonl" > /dev/null
  fi
done
# Tables and figures: matplotlib in .venv (created the way
# scripts/test-python.sh creates it, when missing).
venv=${STRATA_VENV:-.venv}
if [ ! -x "$venv/bin/python" ]; then python3 -m venv "$venv"; fi
if ! "$venv/bin/python" -c "import matplotlib" 2>/dev/null; then
  "$venv/bin/python" -m pip install --quiet matplotlib
fi
"$venv/bin/python" scripts/report_updatable.py "$OUT" | tee "$OUT/report.md"
