#!/usr/bin/env bash
# Builds strata with the peer systems (LMDB, RocksDB) and runs the peer
# comparison of docs/results/peers.md: cold and warm lookups and scans over
# strata's B+-tree, the best static strata kinds, the hybrid store `db`, LMDB
# and RocksDB, then write-only and balanced over the updatable ones, on
# fb-like and osm-like keys; then draws the figures with strata.plot.
#
#   ./scripts/peers.sh                        # 10M keys, 20k operations per run
#   N=1000000 OPS=5000 OUT=/tmp/peers ./scripts/peers.sh   # a quick look
#   KV_SMOKE_ONLY=1 ./scripts/peers.sh        # build, then only the kvbench smoke
#   (DATA_DIR: where keys and indexes go; KEYS_DIR: reuse $KEYS_DIR/$ds.keys
#   when it holds N keys; STRATA_BIN: run this strata binary)
#
# System packages and the build: scripts/build-peers.sh (installs
# libclang-dev, librocksdb-dev and libleveldb-dev with apt-get when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
n=${N:-10000000}
ops=${OPS:-20000}
out=${OUT:-$root/docs/results/peers}
data=${DATA_DIR:-$root/bench-data}
venv=${STRATA_VENV:-$root/.venv}
mkdir -p "$out" "$data"

t0=$(date +%s)
./scripts/build-peers.sh
strata=${STRATA_BIN:-$root/target/release/strata}

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
read_kinds=(--index btree --index lmdb --index rocksdb --index pgm-disk-cpr --index leco-zonemap-d --index zonemap --index $db)
write_kinds=(--index btree --index lmdb --index rocksdb --index $db)

for ds in fb-like osm-like; do
    keys=$data/$ds-$n.keys
    if [ -n "${KEYS_DIR:-}" ] && [ -f "$KEYS_DIR/$ds.keys" ] \
        && [ "$(od -An -tu8 -N8 "$KEYS_DIR/$ds.keys" | tr -d ' ')" = "$n" ]; then
        keys=$KEYS_DIR/$ds.keys
    fi
    [ -f "$keys" ] || "$strata" gen --dist "$ds" --n "$n" --out "$keys"
    common=(--data "$keys" --dataset "$ds" --ops "$ops" --profile nvme --work-dir "$data/$ds-$n.bench")
    # Cold: strata reads with O_DIRECT; LMDB's leaves are evicted from the
    # page cache every 64 operations; RocksDB reads with O_DIRECT.
    "$strata" bench "${common[@]}" "${read_kinds[@]}" --workload lookup --workload scan \
        --repeat 3 --json "$out/$ds-cold.jsonl"
    # Warm: everything through the OS page cache (files just written).
    "$strata" bench "${common[@]}" "${read_kinds[@]}" --workload lookup --workload scan \
        --repeat 3 --no-direct --json "$out/$ds-warm.jsonl"
    # Writes (updatable kinds only): half bulk-loaded, then inserts.
    "$strata" bench "${common[@]}" "${write_kinds[@]}" --workload write-only --workload balanced \
        --json "$out/$ds-write.jsonl"
    # The hybrid store at the budget and at its default 64 MiB, beside btree:
    # how much of its write cost is merging within a sub-MiB budget.
    "$strata" bench "${common[@]}" --index btree --index $db --index db:memory=64M \
        --workload write-only --workload balanced --json "$out/$ds-write-db.jsonl"
done

# Figures (the Python package is built by scripts/test-python.sh).
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import strata.plot" 2>/dev/null; then
    ./scripts/test-python.sh -q -x -k "plot" >/dev/null
fi
plot=("$venv/bin/python" -m strata.plot)
cat "$out"/*-cold.jsonl "$out"/*-warm.jsonl "$out"/*-write.jsonl > "$out/all.jsonl"
for ds in fb-like osm-like; do
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
