#!/usr/bin/env bash
# Builds strata with the peer systems (LMDB, RocksDB) and runs the peer
# comparison of docs/results/peers.md: cold and warm lookups and scans over
# strata's B+-tree, the best static strata kinds, the hybrid store `db`, LMDB
# and RocksDB, with fio's 4 KiB random reads at queue depth 1 (O_DIRECT,
# psync and io_uring, on the same file system) measured before every repeat
# of the cold runs, between the index runs; then write-only and balanced over
# the updatable ones, on fb-like and osm-like keys; then draws the figures
# with strata.plot.
#
#   ./scripts/peers.sh                        # 10M keys, 20k operations per run
#   N=1000000 OPS=5000 OUT=/tmp/peers ./scripts/peers.sh   # a quick look
#   KV_SMOKE_ONLY=1 ./scripts/peers.sh        # build, then only the kvbench smoke
#   (DATA_DIR: where keys and indexes go; KEYS_DIR: reuse $KEYS_DIR/$ds.keys
#   when it holds N keys; STRATA_BIN: run this strata binary; REPEAT: repeats
#   of the read runs (7), WRITE_REPEAT: of the write runs (5); FIO_S: seconds
#   per fio run (5); FIO_SIZE: fio's file, default as big as btree's data,
#   16 bytes a key; DATASETS: "fb-like osm-like"; STEPS: "cold warm write
#   write-db plot")
#   QUIET_FILE=/path: on a shared machine, a file that marks a timed run:
#   each timed step waits while it exists, creates it for its duration and
#   removes it after (so that other jobs that honour it pause meanwhile),
#   and first waits for the load average to fall below QUIET_LOAD (1.5).
#
# System packages and the build: scripts/build-peers.sh (installs
# libclang-dev, librocksdb-dev and libleveldb-dev with apt-get when missing);
# fio is installed with apt-get when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
n=${N:-10000000}
ops=${OPS:-20000}
repeat=${REPEAT:-7}
write_repeat=${WRITE_REPEAT:-5}
fio_s=${FIO_S:-5}
fio_size=${FIO_SIZE:-$(( (n * 16 + 1048575) / 1048576 ))M}
datasets=${DATASETS:-fb-like osm-like}
steps=" ${STEPS:-cold warm write write-db plot} "
out=${OUT:-$root/docs/results/peers}
data=${DATA_DIR:-$root/bench-data}
venv=${STRATA_VENV:-$root/.venv}
mkdir -p "$out" "$data"

# Timed steps hold $QUIET_FILE (created atomically, removed on any exit).
quiet_held=
quiet_begin() {
    [ -n "${QUIET_FILE:-}" ] || return 0
    until (set -o noclobber; echo "scripts/peers.sh $$" > "$QUIET_FILE") 2>/dev/null; do sleep 20; done
    quiet_held=1
    # Jobs already running when the file appeared go on: wait (10 minutes
    # at most) for the 1-minute load average to fall below QUIET_LOAD.
    local waited=0
    while awk -v max="${QUIET_LOAD:-1.5}" '{ exit !($1 >= max) }' /proc/loadavg && [ $waited -lt 600 ]; do
        sleep 15
        waited=$(( waited + 15 ))
    done
    echo "peers: quiet after ${waited} s, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
}
quiet_end() {
    if [ -n "$quiet_held" ]; then rm -f "$QUIET_FILE"; quiet_held=; fi
}
trap quiet_end EXIT
trap 'exit 130' INT TERM HUP
timed() { # runs "$@" as one timed step
    quiet_begin
    local t=$(date +%s)
    "$@"
    quiet_end
    echo "peers: step took $(( $(date +%s) - t )) s: ${*:1:12} ..." >&2
}

t0=$(date +%s)
if [ -z "${STRATA_BIN:-}" ]; then
    ./scripts/build-peers.sh
fi
strata=${STRATA_BIN:-$root/target/release/strata}
if ! command -v fio > /dev/null; then
    echo "peers: installing fio (Debian package)" >&2
    sudo=()
    [ "$(id -u)" = 0 ] || sudo=(sudo)
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq fio > /dev/null \
        || { "${sudo[@]}" apt-get update -qq && DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq fio > /dev/null; }
fi

# kvbench smoke: every workload on every engine, 10k keys (u64 keys and
# values, with strata db), then 16-byte keys and 100-byte values; strata's
# LSM store first (the baseline of the ratios); fails on any wrong answer.
kv_all=fillrandom,readrandom,readmissing,seekrandom,overwrite,readwhilewriting
kv_all=$kv_all,ycsb-a,ycsb-b,ycsb-c,ycsb-d,ycsb-e,ycsb-f,deleterandom
"$strata" kvbench --engines lsm:index=pgm,db,rocksdb,fjall,leveldb --workloads "$kv_all" --num 10000 \
    --key-size 8 --value-size 8 --memory 1M --json "$out/kvbench-smoke-8-8.jsonl"
"$strata" kvbench --engines lsm:index=pgm,rocksdb,fjall,leveldb --workloads "$kv_all" --num 10000 \
    --key-size 16 --value-size 100 --memory 1M --json "$out/kvbench-smoke-16-100.jsonl"
if [ -n "${KV_SMOKE_ONLY:-}" ]; then
    echo "peers: kvbench smoke in $out ($(( $(date +%s) - t0 )) s)"
    exit 0
fi

# Strata's B+-tree comes first: it is the baseline of the ratios and its
# memory is the budget of the peers (RocksDB's block cache) and of the hybrid
# store (`db:memory=budget`: dynamic stages + static index within btree's
# memory; log not synced per write, as LMDB and RocksDB here).
db=db:memory=budget
read_kinds=(--index btree --index lmdb --index rocksdb --index pgm-disk-cpr --index leco-zonemap-d
    --index gap-zonemap-d --index zonemap --index $db)
write_kinds=(--index btree --index lmdb --index rocksdb --index $db)

for ds in $datasets; do
    keys=$data/$ds-$n.keys
    if [ -n "${KEYS_DIR:-}" ] && [ -f "$KEYS_DIR/$ds.keys" ] \
        && [ "$(od -An -tu8 -N8 "$KEYS_DIR/$ds.keys" | tr -d ' ')" = "$n" ]; then
        keys=$KEYS_DIR/$ds.keys
    fi
    [ -f "$keys" ] || "$strata" gen --dist "$ds" --n "$n" --out "$keys"
    common=(--data "$keys" --dataset "$ds" --ops "$ops" --profile nvme --work-dir "$data/$ds-$n.bench")
    if [[ $steps == *" cold "* ]]; then
        # The device: fio's QD1 random reads on a file in the work directory's
        # file system, laid out (and its first run thrown away) here, then
        # run before every repeat of every cold workload.
        fio_file=$data/fio-qd1-$ds.dat
        ./scripts/fio-qd1.sh "$fio_file" "$fio_size" /dev/null 1 > /dev/null
        : > "$out/$ds-fio.jsonl"
        fio_cmd=$(printf '%q ' ./scripts/fio-qd1.sh "$fio_file" "$fio_size" "$out/$ds-fio.jsonl" "$fio_s" "$ds")
        # Cold: strata reads with O_DIRECT; LMDB's leaves are evicted from the
        # page cache every 64 operations; RocksDB reads with O_DIRECT.
        timed "$strata" bench "${common[@]}" "${read_kinds[@]}" --workload lookup --workload scan \
            --repeat "$repeat" --before-repeat "$fio_cmd" --json "$out/$ds-cold.jsonl"
        rm -f "$fio_file"
    fi
    if [[ $steps == *" warm "* ]]; then
        # Warm: everything through the OS page cache, each timed run right
        # after an untimed pass over the same operations (--warmup): this VM
        # pages out page-cache memory idle for a minute (DAMON), so without
        # it a repeat would start partly cold.
        timed "$strata" bench "${common[@]}" "${read_kinds[@]}" --workload lookup --workload scan \
            --repeat "$repeat" --no-direct --warmup --before-repeat sync --json "$out/$ds-warm.jsonl"
    fi
    if [[ $steps == *" write "* ]]; then
        # Writes (updatable kinds only): half bulk-loaded, then inserts.
        timed "$strata" bench "${common[@]}" "${write_kinds[@]}" --workload write-only --workload balanced \
            --repeat "$write_repeat" --before-repeat sync --json "$out/$ds-write.jsonl"
    fi
    if [[ $steps == *" write-db "* ]]; then
        # The hybrid store at the budget and at its default 64 MiB, beside btree:
        # how much of its write cost is merging within a sub-MiB budget.
        timed "$strata" bench "${common[@]}" --index btree --index $db --index db:memory=64M \
            --workload write-only --workload balanced --repeat "$write_repeat" --before-repeat sync \
            --json "$out/$ds-write-db.jsonl"
    fi
done
if [[ $steps != *" plot "* ]]; then
    echo "peers: results in $out ($(( $(date +%s) - t0 )) s in all)"
    exit 0
fi

# Figures (the Python package is built by scripts/test-python.sh).
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import strata.plot" 2>/dev/null; then
    ./scripts/test-python.sh -q -x -k "plot" >/dev/null
fi
plot=("$venv/bin/python" -m strata.plot)
cat "$out"/*-cold.jsonl "$out"/*-warm.jsonl "$out"/*-write.jsonl > "$out/all.jsonl"
for ds in $datasets; do
    "${plot[@]}" "$out/$ds-cold.jsonl" --kind pareto --workload lookup --out "$out/pareto-pages-$ds.png" \
        --title "$ds, cold lookups: memory vs pages per lookup"
    "${plot[@]}" "$out/$ds-cold.jsonl" --kind pareto --y latency --workload lookup \
        --out "$out/pareto-latency-$ds.png" --title "$ds, cold lookups: memory vs median latency"
    "${plot[@]}" "$out/$ds-cold.jsonl" "$out/$ds-warm.jsonl" "$out/$ds-write.jsonl" --kind bars \
        --baseline btree --out "$out/bars-$ds.png" --title "$ds: throughput, ratio to strata btree"
    "${plot[@]}" "$out/$ds-cold.jsonl" --kind latency --workload lookup --out "$out/latency-lookup-cold-$ds.png" \
        --title "$ds: cold lookup latency"
    "${plot[@]}" "$out/$ds-write-db.jsonl" --kind bars --baseline btree --out "$out/bars-db-$ds.png" \
        --title "$ds: hybrid store db at btree's memory and at 64 MiB, ratio to btree"
done
echo "peers: results and figures in $out ($(( $(date +%s) - t0 )) s in all)"
