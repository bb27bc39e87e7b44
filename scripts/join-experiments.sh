#!/usr/bin/env bash
# Issue 20's experiments (docs/results/joins.md): Chesetti & Pandey's grid of
# external-memory joins on sorted tables. For each data set an inner table of
# N keys is built once into an index of every kind; the outer table is a
# uniform sample of 1/RATIO of its keys (sorted; RATIO 1 is a self-join).
# Every algorithm (an index nested-loop join over each kind, the sort-merge
# join and the Grace hash join, all reading the same on-disk table) runs with
# cold caches (the page cache dropped before each run when root; the index
# read with O_DIRECT), repeated and interleaved. fio measures sequential and
# random 4 KiB reads on the same file system before and after. Then the
# index nested-loop joins run once more per storage profile for their
# modelled read time, a thread sweep and a memory sweep follow, and
# scripts/report_joins.py prints the tables and draws the figures.
#
#   ./scripts/join-experiments.sh                                 # the real run
#   N=200000 DSS=fb-like REPEAT=1 OUT=/tmp/jx ./scripts/join-experiments.sh   # quick
#
# Knobs (environment):
#   DSS      data sets (default: fb-like osm-like wiki-like books-like)
#   N        keys of the inner table (default 10000000)
#   RATIOS   size ratios inner/outer (default 1 10 100 1000)
#   KINDS    index kinds of the nested-loop joins (default below)
#   REPEAT   interleaved repeats (default 3)
#   MEMORY   process memory limit of the timed runs (default 256M)
#   OUT      JSON output (default docs/results/joins)
#   DATA_DIR key files and indexes (default bench-data/joins)
#   STRATA_BIN the binary (default: a release build of strata-cli)
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-10000000}
DSS=${DSS:-fb-like osm-like wiki-like books-like}
RATIOS=${RATIOS:-1 10 100 1000}
KINDS=${KINDS:-pgm pgm:sample=128,epsilon=2 pgm:epsilon=256 rs rmi gap-zonemap-d air btree btree-static}
REPEAT=${REPEAT:-3}
MEMORY=${MEMORY:-256M}
OUT=${OUT:-docs/results/joins}
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
if ! "$venv/bin/python" -c "import matplotlib, numpy" 2>/dev/null; then
  "$venv/bin/python" -m pip install --quiet matplotlib numpy
fi
PY="$venv/bin/python"
if ! command -v fio > /dev/null; then
  echo "installing fio (Debian package)" >&2
  if [ "$(id -u)" = 0 ]; then
    apt-get install -y -qq fio > /dev/null || { apt-get update -qq && apt-get install -y -qq fio > /dev/null; }
  else
    sudo apt-get install -y -qq fio > /dev/null || { sudo apt-get update -qq && sudo apt-get install -y -qq fio > /dev/null; }
  fi
fi
mkdir -p "$OUT" "$DATA_DIR"
uname -r > "$OUT/kernel.txt"

cold() { # drop the page cache when we may
  sync
  if [ "$(id -u)" = 0 ]; then echo 3 > /proc/sys/vm/drop_caches; fi
}
slug() { echo "$1" | tr ':,=' '___'; }

fio_pair() { # tag
  local f="$DATA_DIR/fio.bin"
  fio --name=seq --filename="$f" --size=1G --rw=read --bs=256k --direct=1 --ioengine=psync \
    --output-format=json > "$OUT/fio-seq-$1.json"
  fio --name=rand --filename="$f" --size=1G --rw=randread --bs=4k --direct=1 --ioengine=psync \
    --time_based --runtime=5 --output-format=json > "$OUT/fio-rand-qd1-$1.json"
}

run_join() { # dataset ratio algo inner tag [extra args...]
  local ds=$1 r=$2 algo=$3 inner=$4 tag=$5
  shift 5
  local out="$OUT/runs.jsonl.tmp"
  cold
  $S join --outer "$DATA_DIR/$ds-outer-r$r.keys" --inner "$inner" --algo "$algo" \
    --memory "$MEMORY" --spill-dir "$DATA_DIR" -q --json "$out" "$@" > /dev/null
  jq -c --arg ds "$ds" --argjson r "$r" --arg tag "$tag" '. + {dataset: $ds, ratio: $r, tag: $tag}' \
    "$out" >> "$OUT/runs.jsonl"
  rm -f "$out"
}

fio_pair before
for ds in $DSS; do
  keys="$DATA_DIR/$ds-$N.keys"
  [ -f "$keys" ] || $S gen --dist "$ds" --n "$N" --out "$keys" -q
  # (ratios 1, 10 and 100 also feed the thread and memory sweeps)
  for r in $(echo $RATIOS 1 10 100 | tr ' ' '\n' | sort -un); do
    o="$DATA_DIR/$ds-outer-r$r.keys"
    [ -f "$o" ] || "$PY" scripts/join_sample.py "$keys" "$r" 7 "$o"
  done
  # One build per kind (its time and size recorded), reused by every run.
  for k in $KINDS; do
    d="$DATA_DIR/$ds-$(slug "$k")"
    if [ ! -f "$d/strata-index.json" ]; then
      rm -rf "$d"
      $S build --data "$keys" --index "$k" --out "$d" -q |
        jq -c --arg ds "$ds" --arg spec "$k" '. + {dataset: $ds, spec: $spec}' >> "$OUT/builds.jsonl"
    fi
  done
  first="$DATA_DIR/$ds-$(slug "${KINDS%% *}")"
  echo "== $ds: $(echo $KINDS | wc -w) kinds + smj + hash at ratios $RATIOS, $REPEAT repeats" >&2
  for rep in $(seq 1 "$REPEAT"); do
    for r in $RATIOS; do
      for k in $KINDS; do
        run_join "$ds" "$r" "inlj:${k%%:*}" "$DATA_DIR/$ds-$(slug "$k")" "cold$rep-$(slug "$k")"
      done
      # The sort-merge and hash joins read the same table (a data run).
      run_join "$ds" "$r" smj "$first" "cold$rep"
      run_join "$ds" "$r" hash "$first" "cold$rep"
    done
  done
  # Modelled read time of the nested-loop joins under each profile (counts,
  # not timings: run once, warm).
  for p in nvme sata-ssd hdd; do
    for r in $RATIOS; do
      for k in $KINDS; do
        run_join "$ds" "$r" "inlj:${k%%:*}" "$DATA_DIR/$ds-$(slug "$k")" "model-$p-$(slug "$k")" --profile "$p"
      done
    done
  done
done

# Threads and memory on the first data set, ratios 10 and 100.
ds=${DSS%% *}
for rep in $(seq 1 "$REPEAT"); do
  for r in 10 100; do
    for t in 1 2; do
      for k in pgm btree; do
        run_join "$ds" "$r" "inlj:$k" "$DATA_DIR/$ds-$k" "threads$t-$rep-$k" --threads "$t"
      done
      run_join "$ds" "$r" smj "$DATA_DIR/$ds-pgm" "threads$t-$rep" --threads "$t"
      run_join "$ds" "$r" hash "$DATA_DIR/$ds-pgm" "threads$t-$rep" --threads "$t"
    done
  done
done
for m in 64M 256M; do
  for r in 1 10; do
    for a in inlj:pgm smj hash; do
      MEMORY=$m run_join "$ds" "$r" "$a" "$DATA_DIR/$ds-pgm" "memory-$m"
    done
    MEMORY=$m run_join "$ds" "$r" inlj:btree "$DATA_DIR/$ds-btree" "memory-$m"
  done
done
# Index size against join time (first data set): the sampled PGM (every
# 128th key) at windows of 256 to 4096 records, (2 epsilon + 2) x 128.
for rep in $(seq 1 "$REPEAT"); do
  for r in 10 100 1000; do
    for e in 0 1 3 7 15; do
      k="pgm:sample=128,epsilon=$e"
      d="$DATA_DIR/$ds-$(slug "$k")"
      if [ ! -f "$d/strata-index.json" ]; then
        rm -rf "$d"
        $S build --data "$DATA_DIR/$ds-$N.keys" --index "$k" --out "$d" -q |
          jq -c --arg ds "$ds" --arg spec "$k" '. + {dataset: $ds, spec: $spec}' >> "$OUT/builds.jsonl"
      fi
      run_join "$ds" "$r" inlj:pgm "$d" "size$rep-$(slug "$k")"
    done
  done
done

# Unsorted tables (first data set): the outer a shuffled 1/10 sample, the
# inner the shuffled table; external merge sort against learned
# partitioning, at both memory limits.
u_in="$DATA_DIR/$ds-inner-shuffled.keys"
u_out="$DATA_DIR/$ds-outer-r10-shuffled.keys"
[ -f "$u_in" ] || "$PY" scripts/join_sample.py "$DATA_DIR/$ds-$N.keys" 1 11 "$u_in" --shuffle
[ -f "$u_out" ] || "$PY" scripts/join_sample.py "$DATA_DIR/$ds-$N.keys" 10 7 "$u_out" --shuffle
unsorted() { # tag algo sort [args...]
  local tag=$1 algo=$2 sort=$3
  shift 3
  cold
  $S join --outer "$u_out" --outer-unsorted --algo "$algo" --sort "$sort" \
    --memory "$MEMORY" --spill-dir "$DATA_DIR" -q --json "$OUT/runs.jsonl.tmp" "$@" > /dev/null
  jq -c --arg ds "$ds" --arg tag "$tag" --arg sort "$sort" \
    '. + {dataset: $ds, ratio: 10, tag: $tag, sort_method: $sort}' "$OUT/runs.jsonl.tmp" >> "$OUT/runs.jsonl"
  rm -f "$OUT/runs.jsonl.tmp"
}
for rep in $(seq 1 "$REPEAT"); do
  for m in 64M 256M; do
    for sort in external learned; do
      MEMORY=$m unsorted "unsorted-$m-$rep" smj "$sort" --inner "$u_in" --inner-unsorted
      MEMORY=$m unsorted "unsorted-$m-$rep" inlj:pgm "$sort" --inner "$DATA_DIR/$ds-pgm"
    done
    MEMORY=$m unsorted "unsorted-$m-$rep" hash external --inner "$u_in" --inner-unsorted
  done
done
fio_pair after
rm -f "$DATA_DIR/fio.bin"

"$PY" scripts/report_joins.py "$OUT" | tee "$OUT/report.md"
