#!/usr/bin/env bash
# Issue 19's experiments (docs/results/batched.md): cold lookups at the
# device's queue depth. For one and two threads, `strata bench` runs each
# kind one by one (`batch=1`: one `get` per lookup, queue depth 1) and
# batched (`batch=B,qd=Q`: `get_many` of B keys with up to Q reads in
# flight) at every queue depth, all over one build, interleaved and
# repeated; `fio` measures random 4 KiB O_DIRECT reads at the same queue
# depths (io_uring, a file on the same file system) right before and right
# after. Then scripts/report_batched.py prints the tables and draws the
# figure.
#
#   ./scripts/batched-experiments.sh                                  # the real run
#   N=200000 OPS=5000 FIO_S=1 OUT=/tmp/bx ./scripts/batched-experiments.sh   # quick
#
# Knobs (environment):
#   KINDS    kinds (default: btree gap-zonemap-d pgm-disk-cpr air db, and
#            btree with resident=none: the dependent-read case)
#   DS       data set (default fb-like); N keys (default 10000000)
#   QDS      queue depths (default 1 2 4 8 16 32 64); BATCH keys per
#            get_many (default 256)
#   THREADS  thread counts (default 1 2)
#   OPS      lookups per run (default 200000); REPEAT interleaved repeats (3)
#   FIO_S    seconds per fio run (default 5); FIO_SIZE its file (default 4G)
#   OUT      JSON output (default docs/results/batched)
#   DATA_DIR key files, fio's file and work directories (default bench-data)
#   STRATA_BIN the binary (default: a release build of strata-cli)
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-10000000}
DS=${DS:-fb-like}
QDS=${QDS:-1 2 4 8 16 32 64}
BATCH=${BATCH:-256}
THREADS=${THREADS:-1 2}
OPS=${OPS:-200000}
REPEAT=${REPEAT:-3}
FIO_S=${FIO_S:-5}
FIO_SIZE=${FIO_SIZE:-4G}
OUT=${OUT:-docs/results/batched}
DATA_DIR=${DATA_DIR:-bench-data}
KINDS=${KINDS:-btree btree:resident=none gap-zonemap-d pgm-disk-cpr air db}
if [ -z "${STRATA_BIN:-}" ]; then
  cargo build --release -q -p strata-cli
  STRATA_BIN=target/release/strata
fi
S=$STRATA_BIN
if ! command -v fio > /dev/null; then
  echo "installing fio (Debian package)" >&2
  if [ "$(id -u)" = 0 ]; then
    apt-get install -y -qq fio > /dev/null || { apt-get update -qq && apt-get install -y -qq fio > /dev/null; }
  else
    sudo apt-get install -y -qq fio > /dev/null || { sudo apt-get update -qq && sudo apt-get install -y -qq fio > /dev/null; }
  fi
fi
mkdir -p "$OUT" "$DATA_DIR"
keys="$DATA_DIR/$DS-$N.keys"
[ -f "$keys" ] || $S gen --dist "$DS" --n "$N" --out "$keys" -q

# Every kind one by one, then batched at each queue depth.
specs=()
for k in $KINDS; do
  sep=":"
  case "$k" in *:*) sep="," ;; esac
  specs+=(--index "$k${sep}batch=1")
  for q in $QDS; do
    specs+=(--index "$k${sep}batch=$BATCH,qd=$q")
  done
done

fio_sweep() { # threads, tag
  for q in $QDS; do
    fio --name="qd$q" --filename="$DATA_DIR/fio-random-read.bin" --size="$FIO_SIZE" --rw=randread \
      --bs=4k --direct=1 --ioengine=io_uring --iodepth="$q" --numjobs="$1" --group_reporting \
      --time_based --runtime="$FIO_S" --output-format=json > "$OUT/fio-t$1-qd$q-$2.json"
  done
}

uname -r > "$OUT/kernel.txt"
for t in $THREADS; do
  echo "== threads $t: fio before" >&2
  fio_sweep "$t" before
  echo "== threads $t: strata bench (${#specs[@]} configurations / 2)" >&2
  $S bench --data "$keys" --dataset "$DS" "${specs[@]}" --workload lookup --ops "$OPS" \
    --threads "$t" --repeat "$REPEAT" --profile nvme -q --work-dir "$DATA_DIR/work" \
    --json "$OUT/lookups-t$t.jsonl" > /dev/null
  echo "== threads $t: fio after" >&2
  fio_sweep "$t" after
done
rm -f "$DATA_DIR/fio-random-read.bin"

venv=${STRATA_VENV:-.venv}
if [ ! -x "$venv/bin/python" ]; then python3 -m venv "$venv"; fi
if ! "$venv/bin/python" -c "import matplotlib" 2>/dev/null; then
  "$venv/bin/python" -m pip install --quiet matplotlib
fi
"$venv/bin/python" scripts/report_batched.py "$OUT" | tee "$OUT/report.md"
