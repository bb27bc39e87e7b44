#!/usr/bin/env bash
# Experiments of AirTune (docs/results/airtune.md): cold first-query latency,
# optimality against fixed designs, the design map, the warm curve, tuning
# time, and the nfs bound at larger n. Writes JSON (Lines) into WORKDIR;
# scripts/report_airtune.py turns them into tables and figures.
#
# Usage: scripts/bench-airtune.sh [WORKDIR] [STEP...]
#   steps: data optimal cold map warm time scale (default: all, in that order)
# Needs a release build (cargo build --release -p strata-cli). Environment:
#   N (keys per data set, 10000000), OPS (cold lookups, 2000),
#   SCALE_N (sizes of the nfs bound, "50000000 200000000"),
#   TIME_N (sizes of the tuning-time runs, "1000000 10000000 50000000"),
#   SETS (data sets, "fb-like osm-like wiki-like books-like gmm"; the warm
#   step runs fb-like and osm-like when in SETS).
set -euo pipefail
cd "$(dirname "$0")/.."
W=${1:-/tmp/strata-tune}
shift || true
STEPS=${*:-data optimal cold map warm time scale}
S=${STRATA:-target/release/strata}
N=${N:-10000000}
OPS=${OPS:-2000}
SCALE_N=${SCALE_N:-50000000 200000000}
TIME_N=${TIME_N:-1000000 10000000 50000000}
SETS=${SETS:-fb-like osm-like wiki-like books-like gmm}
PROFILES="nvme sata-ssd hdd azure-ssd nfs"
BASELINES=(--index btree-static --index btree --index pgm --index rs --index rmi --index leco-zonemap-d)
mkdir -p "$W"
has() { [[ " $STEPS " == *" $1 "* ]]; }
keys() { # dist n -> path (generated once, seed 1)
  local f="$W/$1-$2.keys"
  [ -f "$f" ] || $S gen --dist "$1" --n "$2" --out "$f" -q
  echo "$f"
}

if has data; then
  for d in $SETS; do keys "$d" "$N" > /dev/null; done
  # The local device, measured once (resident=none lookups read it with O_DIRECT).
  $S profile "$W" > "$W/local-profile.json"
fi
local_spec() {
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("custom:%.3f:%.3f" % (r["latency_us"], r["bandwidth_mb_s"]))' "$W/local-profile.json"
}

# 1+2. Modelled cold first-query latency and optimality: for each data set,
#    one tuner tunes for every profile (layers are built once); each design is
#    compared with every fixed design the tuner evaluated (builder x
#    granularity x layers, --grid) and with the fixed kinds over their knobs
#    (--compare: built in memory and replayed on the tuner's query sample).
if has optimal; then
  cmp=()
  for pg in 4096 16384 65536; do cmp+=(--compare "btree-static:page=$pg"); done
  for e in 16 64 256 1024 4096; do cmp+=(--compare "pgm:epsilon=$e" --compare "pgm-disk-cpr:epsilon=$e"); done
  for e in 16 64 256 1024; do cmp+=(--compare "rs:epsilon=$e"); done
  for m in 1024 16384 65536 262144; do cmp+=(--compare "rmi:models=$m"); done
  cmp+=(--compare zonemap --compare leco-zonemap --compare leco-zonemap-d)
  for d in $SETS; do
    $S tune --data "$(keys "$d" "$N")" --profiles "${PROFILES// /,}" --no-build --grid -q \
      --json "$W/optimal-$d.json" "${cmp[@]}" > /dev/null
  done
fi

# 1b. Measured cold first-query latency here: resident=none, no cache,
#     O_DIRECT, one thread; `air` tuned for the measured local device (and
#     for nfs) beside the fixed kinds at their default knobs. The modelled
#     time of every profile follows from reads/op and bytes/op.
if has cold; then
  for d in $SETS; do
    $S bench --data "$(keys "$d" "$N")" --dataset "$d" --work-dir "$W/work" --ops "$OPS" \
      --resident none --profile nvme --repeat 3 -q --json "$W/cold-$d.jsonl" "${BASELINES[@]}" \
      --index "air:profile=$(local_spec)" --index air:profile=nfs --workload lookup > /dev/null
    rm -rf "$W/work"
  done
fi

# 3. Design map over latency 1 µs – 1 s and bandwidth 1 MB/s – 10 GB/s (fb-like).
if has map; then
  $S tune --data "$(keys fb-like "$N")" --no-build -q --json "$W/map-fb-like.json" \
    --map-latency-us 1,3.16,10,31.6,100,316,1000,3162,10000,31623,100000,316228,1000000 \
    --map-bandwidth-mb-s 1,3.16,10,31.6,100,316,1000,3162,10000 > /dev/null
fi

# 4. Warm curve: storage reads after the first 1, 10, ..., 100k lookups with
#    an LRU page cache of 65536 pages (256 MiB) and nothing resident, through
#    the Python bindings (scripts/test-python.sh builds them into .venv).
if has warm; then
  for d in fb-like osm-like; do
    [[ " $SETS " == *" $d "* ]] || continue
    ${PY:-.venv/bin/python} scripts/warm_airtune.py "$(keys "$d" "$N")" "$d" "$W/warm-$d.json" "$W/work-warm"
  done
  rm -rf "$W/work-warm"
fi

# 5. Tuning time per key (no build) on 1 and 2 threads, three repeats
#    interleaved at 10M keys (one run at the other sizes), with the process's CPU time beside the wall time (the
#    machine is shared: on one thread CPU time is the uncontended figure);
#    then top-k at 10M keys.
if has time; then
  merge() { # report.json time-file extra-json -> one line of time.jsonl / topk.jsonl
    python3 -c 'import json,sys
r=json.load(open(sys.argv[1])); e,u,s=map(float,open(sys.argv[2]).read().split()[-3:])
r.update(json.loads(sys.argv[3])); r["wall_s"]=e; r["cpu_s"]=u+s
r["cpu_ns_per_key"]=(u+s)*1e9/r["n"]
r["design"]={k: r["design"][k] for k in ("modelled_ns","vertices","candidates_built","layers")}
print(json.dumps(r))' "$@"
  }
  : > "$W/time.jsonl"
  for rep in 1 2 3; do
    for n in $TIME_N; do
      # Three repeats at 10M keys (the acceptance figure), one elsewhere.
      [ "$rep" = 1 ] || [ "$n" = 10000000 ] || continue
      for t in 1 2; do
        /usr/bin/time -f "%e %U %S" -o "$W/t.time" $S tune --data "$(keys fb-like "$n")" --profile nfs \
          --no-build --threads "$t" -q --json "$W/t.json" > /dev/null
        merge "$W/t.json" "$W/t.time" "{\"rep\": $rep}" >> "$W/time.jsonl"
      done
    done
  done
  : > "$W/topk.jsonl"
  for k in 1 2 5 8; do
    /usr/bin/time -f "%e %U %S" -o "$W/t.time" $S tune --data "$(keys fb-like "$N")" --profile nfs \
      --top-k "$k" --no-build --threads 2 -q --json "$W/t.json" > /dev/null
    merge "$W/t.json" "$W/t.time" "{\"top_k\": $k}" >> "$W/topk.jsonl"
  done
  rm -f "$W/t.json" "$W/t.time"
fi

# 6. The nfs bound at larger n: air against btree-static, modelled.
if has scale; then
  for n in $N $SCALE_N; do
    $S tune --data "$(keys fb-like "$n")" --profile nfs --no-build -q --json "$W/scale-$n.json" \
      --compare btree-static > /dev/null
  done
fi
echo "results in $W"
