#!/usr/bin/env bash
# The device's ceiling for one-read-per-lookup indexes: fio's 4 KiB random
# reads at queue depth 1 with O_DIRECT, with psync (one pread per read, as
# strata's cold lookups) and then io_uring, on FILE (laid out by fio at SIZE
# the first time). Appends one JSON line per engine to OUT.jsonl.
#
#   scripts/fio-qd1.sh FILE SIZE OUT.jsonl [SECONDS] [DATASET]
#
# scripts/peers.sh runs it through `strata bench --before-repeat`, so that
# the device is measured before every repeat, between the index runs of the
# same benchmark; the line then carries the repeat and the workload it came
# before (STRATA_BENCH_REPEAT, STRATA_BENCH_WORKLOAD), or null outside one.
# It calls sync(1) first.
set -euo pipefail
if [ $# -lt 3 ]; then
    echo "usage: $0 FILE SIZE OUT.jsonl [SECONDS] [DATASET]" >&2
    exit 2
fi
file=$1
size=$2
out=$3
secs=${4:-5}
dataset=${5:-}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
# Dirty pages (of the builds just made) are written back now, not during
# the timed reads.
sync
for engine in psync io_uring; do
    fio --name=qd1 --filename="$file" --size="$size" --rw=randread --bs=4k --direct=1 \
        --iodepth=1 --ioengine="$engine" --time_based --runtime="$secs" --randrepeat=0 \
        --norandommap --output-format=json > "$tmp"
    python3 - "$tmp" "$engine" "$file" "$size" "$dataset" >> "$out" <<'EOF'
import json, os, sys
path, engine, file, size, dataset = sys.argv[1:]
r = json.load(open(path))
j = r["jobs"][0]
rd = j["read"]
pct = rd["clat_ns"].get("percentile", {})
rep = os.environ.get("STRATA_BENCH_REPEAT")
print(json.dumps({
    "tool": "fio", "fio_version": r["fio version"], "engine": engine,
    "dataset": dataset or None,
    "workload": os.environ.get("STRATA_BENCH_WORKLOAD"),
    "repeat": int(rep) if rep is not None else None,
    "time": r.get("timestamp"),
    "file": file, "size": size, "file_bytes": os.path.getsize(file),
    "bs": 4096, "iodepth": 1, "direct": True, "runtime_ms": j["job_runtime"],
    "ios": rd["total_ios"], "iops": rd["iops"],
    "lat_ns": {"mean": rd["lat_ns"]["mean"], "p50": pct.get("50.000000"),
               "p99": pct.get("99.000000"), "max": rd["lat_ns"]["max"]},
}))
EOF
done
