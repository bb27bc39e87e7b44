#!/usr/bin/env bash
# The sampled PGM's windows section of scripts/join-experiments.sh (index
# nested-loop joins over `pgm:sample=128,epsilon=E`, windows of (2E + 2) x
# 128 = 256 to 4,096 records, ratios 10, 100 and 1000, fb-like), run with two
# builds of `strata` (before and after a change) alternating run by run
# (before/after, then after/before, ...), cold (page cache dropped when root,
# the index read with O_DIRECT as `strata join` does), on the indexes and
# outer tables join-experiments.sh left in DATA_DIR (built if missing, with
# AFTER). Prints per window and ratio the median seconds (min-max) and the
# data pages and read calls of each build; fails if the joins' checksums
# differ.
#
#   scripts/join-windows.sh BEFORE_BIN AFTER_BIN
#   DATA_DIR=/work/bench/joins REPEAT=3 OUT=target/join-windows scripts/join-windows.sh \
#       /work/main/target/release/strata target/release/strata
#
# Knobs (environment): DATA_DIR (default bench-data/joins), DS (fb-like),
# N (10000000), RATIOS (10 100 1000), EPS (0 1 3 7 15), REPEAT (3),
# MEMORY (256M), OUT (target/join-windows).
set -euo pipefail
cd "$(dirname "$0")/.."
before=$1 after=$2
DATA_DIR=${DATA_DIR:-bench-data/joins}
DS=${DS:-fb-like}
N=${N:-10000000}
RATIOS=${RATIOS:-10 100 1000}
EPS=${EPS:-0 1 3 7 15}
REPEAT=${REPEAT:-3}
MEMORY=${MEMORY:-256M}
OUT=${OUT:-target/join-windows}
mkdir -p "$OUT"
: > "$OUT/runs.jsonl"

cold() {
  sync
  if [ "$(id -u)" = 0 ]; then echo 3 > /proc/sys/vm/drop_caches; fi
}
slug() { echo "$1" | tr ':,=' '___'; }

for e in $EPS; do
  k="pgm:sample=128,epsilon=$e"
  d="$DATA_DIR/$DS-$(slug "$k")"
  [ -f "$d/strata-index.json" ] || "$after" build --data "$DATA_DIR/$DS-$N.keys" --index "$k" --out "$d" -q > /dev/null
done
for r in $RATIOS; do
  [ -f "$DATA_DIR/$DS-outer-r$r.keys" ] || { echo "missing $DATA_DIR/$DS-outer-r$r.keys (run join-experiments.sh)" >&2; exit 1; }
done

run() { # bin name rep ratio eps
  local bin=$1 name=$2 rep=$3 r=$4 e=$5
  local d="$DATA_DIR/$DS-$(slug "pgm:sample=128,epsilon=$e")"
  cold
  "$bin" join --outer "$DATA_DIR/$DS-outer-r$r.keys" --inner "$d" --algo inlj:pgm \
    --memory "$MEMORY" --spill-dir "$DATA_DIR" -q --json "$OUT/run.tmp" > /dev/null
  jq -c --arg b "$name" --argjson rep "$rep" --argjson r "$r" --argjson e "$e" \
    '. + {binary: $b, rep: $rep, ratio: $r, epsilon: $e}' "$OUT/run.tmp" >> "$OUT/runs.jsonl"
  rm -f "$OUT/run.tmp"
}

for rep in $(seq 1 "$REPEAT"); do
  for r in $RATIOS; do
    for e in $EPS; do
      if [ $((rep % 2)) = 1 ]; then
        run "$before" before "$rep" "$r" "$e"; run "$after" after "$rep" "$r" "$e"
      else
        run "$after" after "$rep" "$r" "$e"; run "$before" before "$rep" "$r" "$e"
      fi
    done
  done
  echo "join-windows: repeat $rep of $REPEAT done" >&2
done

python3 - "$OUT/runs.jsonl" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ratios = sorted({r["ratio"] for r in runs})
for x in ratios:
    sums = {(r["checksum"], r["count"]) for r in runs if r["ratio"] == x}
    if len(sums) != 1:
        sys.exit(f"ratio {x}: the joins differ: {sums}")
print("| window | index bytes | " + " | ".join(f"ratio {x}: s before / after" for x in ratios)
      + " | " + " | ".join(f"ratio {x}: pages (reads) before / after" for x in ratios) + " |")
print("|---|---|" + "---|" * (2 * len(ratios)))
for e in sorted({r["epsilon"] for r in runs}):
    def sel(b, x):
        return [r for r in runs if r["epsilon"] == e and r["binary"] == b and r["ratio"] == x]
    def s(rs):
        t = [r["seconds"] for r in rs]
        return f"{statistics.median(t):.3f} ({min(t):.3f}–{max(t):.3f})"
    def p(rs):
        return f"{rs[0]['index_pages_read']:,} ({rs[0]['index_reads']:,})"
    mem = sel("after", ratios[0])[0]["index"]["memory_bytes"]
    times = [f"{s(sel('before', x))} / {s(sel('after', x))}" for x in ratios]
    pages = [f"{p(sel('before', x))} / {p(sel('after', x))}" for x in ratios]
    print(f"| {(2 * e + 2) * 128:,} | {mem:,} | " + " | ".join(times) + " | " + " | ".join(pages) + " |")
EOF
