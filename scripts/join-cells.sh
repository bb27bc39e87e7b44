#!/usr/bin/env bash
# A few cells of issue 20's join grid, repeated more often than the whole
# grid can be (docs/results/joins.md, "Session 29"): for each data set and
# ratio, the index nested-loop joins over KINDS and the sort-merge join,
# interleaved run by run, each cold (page cache dropped when root, the index
# read with O_DIRECT). Uses join-experiments.sh's data layout in DATA_DIR and
# makes what is missing (key files, outer samples, indexes).
#
#   DATA_DIR=/work/bench/joins DSS="fb-like osm-like" RATIOS="10 100" REPEAT=7 \
#     OUT=/tmp/cells.jsonl ./scripts/join-cells.sh
#
# Knobs: DSS, N (10000000), RATIOS (1 10 100), KINDS (pgm btree btree-static),
# REPEAT (3), MEMORY (256M), OUT (JSON lines, appended), DATA_DIR, STRATA_BIN.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-10000000}
DSS=${DSS:-fb-like osm-like wiki-like books-like}
RATIOS=${RATIOS:-1 10 100}
KINDS=${KINDS:-pgm btree btree-static}
REPEAT=${REPEAT:-3}
MEMORY=${MEMORY:-256M}
OUT=${OUT:-bench-data/join-cells.jsonl}
DATA_DIR=${DATA_DIR:-bench-data/joins}
if [ -z "${STRATA_BIN:-}" ]; then
  cargo build --release -q -p strata-cli
  STRATA_BIN=target/release/strata
fi
S=$STRATA_BIN
venv=${STRATA_VENV:-.venv}
if [ ! -x "$venv/bin/python" ]; then
  ./scripts/ensure-python-venv.sh
  python3 -m venv "$venv"
fi
"$venv/bin/python" -c "import numpy" 2>/dev/null || "$venv/bin/python" -m pip install --quiet numpy
mkdir -p "$DATA_DIR" "$(dirname "$OUT")"
slug() { echo "$1" | tr ':,=' '___'; }

for ds in $DSS; do
  keys="$DATA_DIR/$ds-$N.keys"
  [ -f "$keys" ] || $S gen --dist "$ds" --n "$N" --out "$keys" -q
  for r in $RATIOS; do
    o="$DATA_DIR/$ds-outer-r$r.keys"
    [ -f "$o" ] || "$venv/bin/python" scripts/join_sample.py "$keys" "$r" 7 "$o"
  done
  for k in $KINDS; do
    d="$DATA_DIR/$ds-$(slug "$k")"
    [ -f "$d/strata-index.json" ] || { rm -rf "$d"; $S build --data "$keys" --index "$k" --out "$d" -q > /dev/null; }
  done
done

for ds in $DSS; do
  first="$DATA_DIR/$ds-$(slug "${KINDS%% *}")"
  for rep in $(seq 1 "$REPEAT"); do
    for r in $RATIOS; do
      for a in $KINDS smj; do
        if [ "$a" = smj ]; then algo=smj inner=$first; else algo="inlj:${a%%:*}" inner="$DATA_DIR/$ds-$(slug "$a")"; fi
        sync
        if [ "$(id -u)" = 0 ]; then echo 3 > /proc/sys/vm/drop_caches; fi
        tmp=$(mktemp)
        $S join --outer "$DATA_DIR/$ds-outer-r$r.keys" --inner "$inner" --algo "$algo" --memory "$MEMORY" \
          --spill-dir "$DATA_DIR" -q --json "$tmp" > /dev/null
        jq -c --arg ds "$ds" --arg a "$(slug "$a")" --argjson r "$r" --argjson rep "$rep" \
          '{ds: $ds, a: $a, ratio: $r, rep: $rep, s: .seconds, pages: .index_pages_read, count: .count, checksum: .checksum}' \
          "$tmp" >> "$OUT"
        rm -f "$tmp"
      done
    done
  done
done
