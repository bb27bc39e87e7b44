#!/usr/bin/env bash
# Experiments 1-4 and 6 of issue 17 (docs/results/lsm.md): Liu et al.'s
# learned indexes in the SSTables of strata's LSM store. Writes JSON Lines
# into OUT, then scripts/report_lsm.py draws the PNG figures there and prints
# the Markdown tables (also saved as OUT/report.md).
#
#   ./scripts/lsm-experiments.sh                       # the real run (hours)
#   N=200000 OPS=2000 OUT=/tmp/lsmx ./scripts/lsm-experiments.sh   # quick: every section
#   ONLY=fig8,sweep ./scripts/lsm-experiments.sh       # some sections only
#
# Sections (ONLY, comma-separated; default all):
#   fig8   Liu Fig. 8 at position boundary 16: fb-like, osm-like, wiki-like
#          (N 8-byte keys, 8-byte values) through `strata bench` (kind lsm),
#          cold (O_DIRECT) and warm lookups, every index kind; and the
#          YCSB-style set (24-byte keys, 1000-byte values, YCSB_N entries)
#          through `strata kvbench` (fillseq, then readrandom cold and warm).
#   sweep  Liu Fig. 7: boundary 4..256, fp, pgm, pgm-cpr, gap-zonemap-d, rs,
#          plr on fb-like, cold lookups.
#   train  Liu §5.4: training time as a share of table-building time
#          (StoreStats train_nanos / (compaction_nanos + flush_nanos)),
#          kvbench fillrandom with compactions inline, 16 B and ~1 KiB entries.
#   gran   Liu §5.5: table size 8M, 32M, 128M and one table per level, cold
#          lookups and index memory, pgm, pgm-cpr, gap-zonemap-d, fp.
#   kv     `strata kvbench` against RocksDB, fjall and LevelDB at equal
#          memory (16 B keys, 100 B values), and write-only on fb-like
#          against strata `db` at a 1 MiB budget.
#
# Knobs (environment):
#   N          keys of fb-like/osm-like/wiki-like (default 50000000)
#   OPS        operations per timed run (default 100000)
#   REPEAT     interleaved repeats of every run (default 3)
#   OUT        where the JSON Lines and figures go (default docs/results/lsm)
#   DATA_DIR   key files and stores (default bench-data; keys are reused)
#   STRATA_BIN run this binary (default: build target/release/strata with
#              the peers, scripts/build-peers.sh, when the kv section runs,
#              else a plain release build)
#   MEMORY     budget of the lsm stores of fig8/sweep/gran (default 16M)
#   YCSB_N     entries of the YCSB-style set (default N/5: 10M at the default N)
#   TRAIN_N    entries of the 16 B training run (default N/5); the 1 KiB run
#              writes TRAIN_N/10; TRAIN_MEMORY its budget (default 16M: a
#              4 MiB memtable, LevelDB's default write buffer)
#   KV_N       entries of the kvbench suite (default N/5)
#   KV_MEMORY  budget of every engine in the kv section (default 64M)
#   KV_COLD    1: kvbench reads cold too (reopen, drop caches, O_DIRECT)
#   WRITE_N    fb-like keys of the write-only run against db (default N/5),
#   WRITE_OPS  its inserts (default 1000000, at most WRITE_N/16)
# Cold runs read tables with O_DIRECT; as root the page cache is also
# dropped before each cold run (it holds the key file and the logs).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
n=${N:-50000000}
ops=${OPS:-100000}
repeat=${REPEAT:-3}
out=${OUT:-$root/docs/results/lsm}
data=${DATA_DIR:-$root/bench-data}
memory=${MEMORY:-16M}
ycsb_n=${YCSB_N:-$((n / 5))}
train_n=${TRAIN_N:-$((n / 5))}
kv_n=${KV_N:-$((n / 5))}
kv_memory=${KV_MEMORY:-64M}
write_n=${WRITE_N:-$((n / 5))}
write_ops=${WRITE_OPS:-1000000}
[ "$write_ops" -le $((write_n / 16)) ] || write_ops=$((write_n / 16))
only=${ONLY:-fig8,sweep,train,gran,kv}
venv=${STRATA_VENV:-$root/.venv}
mkdir -p "$out" "$data"
want() { [[ ",$only," == *",$1,"* ]]; }
t0=$(date +%s)

if [ -n "${STRATA_BIN:-}" ]; then
    strata=$STRATA_BIN
elif want kv; then
    ./scripts/build-peers.sh
    strata=$root/target/release/strata
else
    cargo build --release -p strata-cli
    strata=$root/target/release/strata
fi

# Every index kind of the tables, in the order of the figures.
all_kinds=(fp pgm pgm-cpr rs rmi plr fiting gap-zonemap-d air)

# The key file of data set $1 with $2 keys (generated once).
keys() {
    local f=$data/$1-$2.keys
    [ -f "$f" ] || "$strata" gen --dist "$1" --n "$2" --out "$f" -q
    echo "$f"
}

# Drops the OS page cache when allowed (root); cold reads use O_DIRECT anyway.
drop_caches() {
    sync
    if [ -w /proc/sys/vm/drop_caches ]; then echo 3 > /proc/sys/vm/drop_caches; fi
}

# bench JSONL DATASET KEYS ARGS...: `strata bench` lookups into JSONL.
bench() {
    local json=$1 ds=$2 k=$3
    shift 3
    "$strata" bench --data "$k" --dataset "$ds" --ops "$ops" --repeat "$repeat" \
        --work-dir "$data/lsmx-work" -q --json "$json" "$@" > /dev/null
    rm -rf "$data/lsmx-work"
}

# The kvbench engine list of lsm stores with index kinds $2.. and parameters $1.
lsm_engines() {
    local params=$1 e=()
    shift
    for k in "$@"; do e+=("lsm:index=$k,$params"); done
    (IFS=,; echo "${e[*]}")
}

# 1. Liu Fig. 8: memory and lookup latency of every kind at boundary 16.
if want fig8; then
    for ds in fb-like osm-like wiki-like; do
        k=$(keys "$ds" "$n")
        specs=()
        for kind in "${all_kinds[@]}"; do specs+=(--index "lsm:index=$kind,boundary=16,memory=$memory"); done
        drop_caches
        bench "$out/fig8-$ds-cold.jsonl" "$ds" "$k" "${specs[@]}" --workload lookup
        bench "$out/fig8-$ds-warm.jsonl" "$ds" "$k" "${specs[@]}" --workload lookup --no-direct
        echo "lsm-experiments: fig8 $ds ($(( $(date +%s) - t0 )) s)"
    done
    # YCSB-style: 24-byte keys, 1000-byte values; one store per engine and
    # repeat (fillseq), then uniform reads of present keys.
    engines=$(lsm_engines "boundary=16" "${all_kinds[@]}")
    ycsb=(--engines "$engines" --workloads fillseq,readrandom --num "$ycsb_n" --reads "$ops"
        --key-size 24 --value-size 1000 --memory "$memory" --repeats "${YCSB_REPEATS:-1}"
        --work-dir "$data/lsmx-kv")
    mkdir -p "$data/lsmx-kv"
    "$strata" kvbench "${ycsb[@]}" --cold --json "$out/fig8-ycsb-cold.jsonl" 2> /dev/null
    "$strata" kvbench "${ycsb[@]}" --json "$out/fig8-ycsb-warm.jsonl" 2> /dev/null
    echo "lsm-experiments: fig8 ycsb ($(( $(date +%s) - t0 )) s)"
fi

# 2. Liu Fig. 7: position boundary sweep on fb-like, cold lookups; the
# kinds of one boundary interleaved in one run.
if want sweep; then
    k=$(keys fb-like "$n")
    : > "$out/sweep-fb-like.jsonl"
    for b in 4 8 16 32 64 128 256; do
        specs=()
        for kind in fp pgm pgm-cpr gap-zonemap-d rs plr; do
            specs+=(--index "lsm:index=$kind,boundary=$b,memory=$memory")
        done
        drop_caches
        bench "$out/sweep-$b.jsonl" fb-like "$k" "${specs[@]}" --workload lookup
        cat "$out/sweep-$b.jsonl" >> "$out/sweep-fb-like.jsonl"
        rm "$out/sweep-$b.jsonl"
    done
    echo "lsm-experiments: sweep ($(( $(date +%s) - t0 )) s)"
fi

# 3. Liu §5.4: training share. fillrandom with compactions run inline by the
# writer (background=false), so every compaction has finished when the
# record is taken; the store's counters are in config.stats.
if want train; then
    engines=$(lsm_engines "boundary=16,background=false" "${all_kinds[@]}")
    common=(--engines "$engines" --workloads fillrandom --memory "${TRAIN_MEMORY:-16M}" --repeats "$repeat"
        --work-dir "$data/lsmx-kv")
    mkdir -p "$data/lsmx-kv"
    "$strata" kvbench "${common[@]}" --num "$train_n" --key-size 8 --value-size 8 \
        --json "$out/train-16.jsonl" 2> /dev/null
    "$strata" kvbench "${common[@]}" --num "$((train_n / 10))" --key-size 24 --value-size 1000 \
        --json "$out/train-1024.jsonl" 2> /dev/null
    echo "lsm-experiments: train ($(( $(date +%s) - t0 )) s)"
fi

# 4. Liu §5.5: index granularity. Table sizes 8M, 32M, 128M and one table
# per level, per kind in one interleaved run; fb-like, cold lookups. Each
# store is compacted into its deepest level after the load (compact=true):
# a sorted load otherwise moves tables down at the size its L0 compactions
# gave them, whatever the target size.
if want gran; then
    k=$(keys fb-like "$n")
    : > "$out/gran-fb-like.jsonl"
    for kind in pgm pgm-cpr gap-zonemap-d fp; do
        base="lsm:index=$kind,boundary=16,memory=$memory,compact=true"
        drop_caches
        bench "$out/gran-$kind.jsonl" fb-like "$k" --workload lookup \
            --index "$base,target_file=8M" --index "$base,target_file=32M" \
            --index "$base,target_file=128M" --index "$base,granularity=level"
        cat "$out/gran-$kind.jsonl" >> "$out/gran-fb-like.jsonl"
        rm "$out/gran-$kind.jsonl"
    done
    echo "lsm-experiments: gran ($(( $(date +%s) - t0 )) s)"
fi

# 6. kvbench against the peers at equal memory (strata's store first: the
# baseline of the ratios), then write-only on fb-like against db at 1 MiB.
if want kv; then
    mkdir -p "$data/lsmx-kv"
    cold=()
    [ "${KV_COLD:-0}" = 1 ] && cold=(--cold)
    kv=(--engines "lsm:index=pgm,boundary=16,rocksdb,fjall,leveldb" --num "$kv_n" --reads "$ops"
        --key-size 16 --value-size 100 --memory "$kv_memory" --repeats "$repeat"
        --work-dir "$data/lsmx-kv" "${cold[@]}")
    # fillseq on a fresh store; the rest in db_bench's order on one store
    # per engine and repeat (deleterandom last: it empties the store).
    "$strata" kvbench "${kv[@]}" --workloads fillseq --json "$out/kv-fillseq.jsonl" 2> /dev/null
    "$strata" kvbench "${kv[@]}" --json "$out/kv-suite.jsonl" 2> /dev/null \
        --workloads fillrandom,overwrite,readrandom,readmissing,seekrandom,readwhilewriting,ycsb-a,ycsb-b,ycsb-c,ycsb-d,ycsb-e,ycsb-f,deleterandom
    cat "$out/kv-fillseq.jsonl" "$out/kv-suite.jsonl" > "$out/kv.jsonl"
    rm "$out/kv-fillseq.jsonl" "$out/kv-suite.jsonl"
    echo "lsm-experiments: kv suite ($(( $(date +%s) - t0 )) s)"
    # Zhang §10.1.1 write-only (15/16 bulk-loaded, then blind inserts of new
    # keys) at a 1 MiB budget: the LSM store against the hybrid store db.
    # The store keeps to 1 MiB only with its tables' sections unpinned
    # (pin=false: 10M keys' filters alone take 7 MB); half the budget is the
    # memtable, half its one frozen successor or the block cache.
    k=$(keys fb-like "$write_n")
    wo="boundary=16,memory=1M,insert=blind,pin=false,write_buffer=512K,max_immutable=1"
    "$strata" bench --data "$k" --dataset fb-like --ops "$write_ops" --repeat "$repeat" \
        --work-dir "$data/lsmx-work" -q --json "$out/kv-write-only-db.jsonl" --workload write-only \
        --index "lsm:index=gap-zonemap-d,$wo" --index "lsm:index=pgm,$wo" \
        --index "db:memory=1M,insert=blind" > /dev/null
    rm -rf "$data/lsmx-work"
    echo "lsm-experiments: write-only vs db ($(( $(date +%s) - t0 )) s)"
fi
rm -rf "$data/lsmx-kv"

# Figures and tables: matplotlib in .venv (created the way
# scripts/test-python.sh creates it, when missing).
if [ ! -x "$venv/bin/python" ]; then python3 -m venv "$venv"; fi
if ! "$venv/bin/python" -c "import matplotlib" 2>/dev/null; then
    "$venv/bin/python" -m pip install --quiet matplotlib
fi
"$venv/bin/python" scripts/report_lsm.py "$out" > "$out/report.md"
echo "lsm-experiments: results, figures and report.md in $out ($(( $(date +%s) - t0 )) s in all)"
