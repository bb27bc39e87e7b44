#!/usr/bin/env bash
# Issue 23's experiments (docs/results/build.md): how fast every index kind
# builds, at 1 and 2 threads, from 1M to 100M (200M with STRATA_FULL=1) keys,
# with peak memory and the share of the time spent writing the data run; the
# segment counts `strata analyze` reports; and the time the hybrid store `db`
# spends merging. With BASE_BIN set, that binary ("before") runs interleaved
# with STRATA_BIN ("after") in every repeat, so the two are compared in the
# same run. scripts/report_build.py prints the tables and draws the figures.
#
#   BASE_BIN=/path/to/old/strata ./scripts/build-experiments.sh        # the real run
#   NS=1000000 DSS=osm-like REPEAT=1 OUT=/tmp/bx ./scripts/build-experiments.sh   # quick
#
# Knobs (environment):
#   DSS       data sets (default: osm-like fb-like)
#   NS        key counts (default 1000000 10000000 100000000; STRATA_FULL=1 adds 200000000)
#   KINDS     index kinds (default: btree, binary and every static layered kind)
#   THREADS   model-building threads (default 1 2)
#   REPEAT    interleaved repeats (default 3; BIG_REPEAT at 100M and above, default 1)
#   MERGES    0: skip the db merge runs (default 1)
#   MERGE_N   keys of the db merge runs (default 10000000), MERGE_OPS their inserts (default 1000000)
#   OUT       JSON output (default docs/results/build)
#   DATA_DIR  key files and scratch indexes (default bench-data/build)
#   STRATA_BIN the binary (default: a release build of strata-cli); BASE_BIN an older one
set -euo pipefail
cd "$(dirname "$0")/.."

DSS=${DSS:-osm-like fb-like}
if [ -z "${NS:-}" ]; then
  NS="1000000 10000000 100000000"
  if [ "${STRATA_FULL:-0}" = 1 ]; then NS="$NS 200000000"; fi
fi
KINDS=${KINDS:-btree binary zonemap btree-static leco-zonemap leco-zonemap-d gap-zonemap-d pgm pgm-disk pgm-disk-cpr rs rs-disk rmi fiting-static pgm:sample=128,epsilon=2}
THREADS=${THREADS:-1 2}
REPEAT=${REPEAT:-3}
MERGE_N=${MERGE_N:-10000000}
MERGE_OPS=${MERGE_OPS:-1000000}
OUT=${OUT:-docs/results/build}
DATA_DIR=${DATA_DIR:-bench-data/build}
if [ -z "${STRATA_BIN:-}" ]; then
  cargo build --release -q -p strata-cli
  STRATA_BIN=target/release/strata
fi
BINS="after=$STRATA_BIN"
if [ -n "${BASE_BIN:-}" ]; then BINS="before=$BASE_BIN $BINS"; fi
mkdir -p "$OUT" "$DATA_DIR"
RUNS="$OUT/runs.jsonl"
: > "$RUNS"
uname -r > "$OUT/kernel.txt"
nproc > "$OUT/cores.txt"
scratch="$DATA_DIR/idx"
trap 'rm -rf "$scratch" "$DATA_DIR/db"' EXIT

keys() { # dataset n -> key file path (generated once)
  local f="$DATA_DIR/$1-$2.keys"
  if [ ! -s "$f" ]; then
    "$STRATA_BIN" -q gen --dist "$1" --n "$2" --out "$f"
  fi
  echo "$f"
}

# One build: prints a JSON line with the wall/CPU time and peak RSS of the
# process, the library's build report and the layered kinds' phase times.
build_once() { # label bin dataset n kind threads repeat
  local label=$1 bin=$2 ds=$3 n=$4 kind=$5 t=$6 rep=$7
  local f out tf
  f=$(keys "$ds" "$n")
  rm -rf "$scratch"
  # The previous build's dirty pages written back first, so that their
  # write-back does not throttle this one.
  sync
  tf=$(mktemp)
  # RAYON_NUM_THREADS sizes the pool of both binaries (an older one has no --threads).
  out=$(RAYON_NUM_THREADS=$t /usr/bin/time -f '%e %U %S %M' -o "$tf" "$bin" -q build --data "$f" \
    --index "$kind" --out "$scratch")
  python3 - "$label" "$ds" "$n" "$kind" "$t" "$rep" "$tf" "$scratch/strata-index.json" "$out" <<'EOF' >> "$RUNS"
import json, sys
label, ds, n, kind, t, rep, tf, manifest, out = sys.argv[1:]
wall, user, sys_s, rss = open(tf).read().split()[-4:]
r = json.loads(out)
desc = json.load(open(manifest)).get("description", {})
notes = desc.get("notes") or {}
print(json.dumps({
    "section": "build", "bin": label, "dataset": ds, "n": int(n), "kind": kind, "threads": int(t),
    "repeat": int(rep), "wall_s": float(wall), "user_s": float(user), "sys_s": float(sys_s),
    "peak_rss_bytes": int(rss) * 1024, "build_s": r.get("build_s"), "models": r.get("models"),
    "memory_bytes": r.get("memory_bytes"), "disk_bytes": r.get("disk_bytes"),
    "data_run_s": desc.get("data_run_s"), "design_s": desc.get("design_s"),
    "expected_pages": notes.get("expected_pages") if isinstance(notes, dict) else None,
    "zero_interval_window": notes.get("zero_interval_window") if isinstance(notes, dict) else None,
}))
EOF
  rm -f "$tf"
  rm -rf "$scratch"
}

for ds in $DSS; do
  for n in $NS; do
    reps=$REPEAT
    if [ "$n" -ge 100000000 ] && [ "$REPEAT" -gt "${BIG_REPEAT:-1}" ]; then reps=${BIG_REPEAT:-1}; fi
    for rep in $(seq 1 "$reps"); do
      for kind in $KINDS; do
        for t in $THREADS; do
          for b in $BINS; do
            echo "build $ds n=$n $kind threads=$t ${b%%=*} repeat $rep" >&2
            build_once "${b%%=*}" "${b#*=}" "$ds" "$n" "$kind" "$t" "$rep"
          done
        done
      done
    done
    # Segment counts: unchanged by parallel segmentation (issue 23).
    for b in $BINS; do
      "${b#*=}" -q analyze --data "$(keys "$ds" "$n")" |
        python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps({"section":"analyze","bin":sys.argv[1],"dataset":sys.argv[2],"n":d["n"],"segments":d["segments"]}))' \
          "${b%%=*}" "$ds" >> "$RUNS"
    done
  done
done

# Merges of the hybrid store: a write-only run whose every merge rebuilds the
# static index over all keys; `store.merge_s` is the time spent merging.
for ds in $DSS; do
  if [ "${MERGES:-1}" = 0 ]; then break; fi
  f=$(keys "$ds" "$MERGE_N")
  for static in pgm-disk-cpr gap-zonemap-d; do
    for b in $BINS; do
      echo "db merges $ds static=$static ${b%%=*}" >&2
      rm -rf "$DATA_DIR/db"
      tf=$(mktemp)
      /usr/bin/time -f '%M' -o "$tf" "${b#*=}" -q bench --data "$f" --index "db:memory=4M,insert=blind,static=$static" \
        --workload ycsb-write-only --ops "$MERGE_OPS" --work-dir "$DATA_DIR/db" --json "$OUT/merge.tmp" > /dev/null
      python3 - "${b%%=*}" "$ds" "$static" "$OUT/merge.tmp" "$tf" <<'EOF' >> "$RUNS"
import json, sys
label, ds, static, path, tf = sys.argv[1:]
# Peak RSS of the whole bench process (bulk load, inserts and merges).
rss = int(open(tf).read().split()[-1]) * 1024
for line in open(path):
    r = json.loads(line)
    s = r.get("store") or {}
    print(json.dumps({"section": "merge", "bin": label, "dataset": ds, "static": static,
                      "n": r.get("n"), "bulk_n": r.get("bulk_n"), "ops": r.get("ops"),
                      "merges": s.get("merges"), "merge_s": s.get("merge_s"),
                      "throughput_ops_s": r.get("throughput_ops_s"), "peak_rss_bytes": rss}))
EOF
      rm -f "$OUT/merge.tmp" "$tf"
    done
  done
done
echo "wrote $RUNS" >&2
