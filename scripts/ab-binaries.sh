#!/usr/bin/env bash
# Compares two builds of `strata` (before and after a change) on the same
# data: `strata bench` lookups, scans and ycsb-write-only, the two binaries
# alternating run by run (A B, then B A, ...) so neither sits in a better slot,
# each run on its own fresh work directory. Prints, per (index, workload), the
# median throughput of each binary with its min-max, the ratio after/before,
# and whether the deterministic counts (pages/op, reads/op, bytes/op,
# disk_bytes) are identical. Fails if any answer was wrong or a count differs.
#
#   scripts/ab-binaries.sh BEFORE_BIN AFTER_BIN [REPEATS] [N_KEYS] [OPS]
#
# Used for issue 15 (no change of behaviour); results in docs/results/house.md.
set -euo pipefail
before=$1 after=$2 repeats=${3:-5} n=${4:-2000000} ops=${5:-20000}
out=${AB_OUT:-target/ab}
rm -rf "$out"; mkdir -p "$out"
"$after" gen --dist fb-like --n "$n" --out "$out/fb-like.keys" --quiet 2>/dev/null ||
    "$after" gen --dist fb-like --n "$n" --out "$out/fb-like.keys"
read_idx=(--index btree --index binary --index pgm --index rs --index gap-zonemap-d --index db:memory=1M)
write_idx=(--index btree --index db:memory=1M)
run() { # BIN TAG REPEAT
    local bin=$1 tag=$2 r=$3 w="$out/work-$2-$3"
    "$bin" bench --data "$out/fb-like.keys" --dataset fb-like --ops "$ops" --work-dir "$w" \
        "${read_idx[@]}" --workload lookup --workload scan --quiet --json "$out/$tag-$r-read.jsonl"
    "$bin" bench --data "$out/fb-like.keys" --dataset fb-like --ops "$ops" --work-dir "$w" \
        "${write_idx[@]}" --workload ycsb-write-only --quiet --json "$out/$tag-$r-write.jsonl"
    rm -rf "$w"
}
for r in $(seq 1 "$repeats"); do
    if [ $((r % 2)) = 1 ]; then run "$before" before "$r"; run "$after" after "$r";
    else run "$after" after "$r"; run "$before" before "$r"; fi
    echo "ab: repeat $r of $repeats done" >&2
done
python3 - "$out" <<'PY'
import json, sys, glob, statistics, collections
out = sys.argv[1]
rows = collections.defaultdict(lambda: {"before": [], "after": []})
counts = collections.defaultdict(lambda: {"before": set(), "after": set()})
bad = 0
for f in sorted(glob.glob(f"{out}/*.jsonl")):
    tag = f.split("/")[-1].split("-")[0]
    for line in open(f):
        j = json.loads(line)
        key = (j["index"], j["workload"])
        rows[key][tag].append(j["throughput_ops_s"])
        io = j["io"]
        counts[key][tag].add((io["pages_per_op"], io["reads_per_op"], io["bytes_per_op"], j["disk_bytes"]))
        if j.get("wrong", 0):
            print("WRONG ANSWERS", key, tag, j["wrong"]); bad = 1
print(f"{'index':16} {'workload':16} {'before ops/s (min-max)':>28} {'after ops/s (min-max)':>28} {'after/before':>12}  counts")
ratios = []
for key in sorted(rows):
    b, a = rows[key]["before"], rows[key]["after"]
    mb, ma = statistics.median(b), statistics.median(a)
    same = counts[key]["before"] == counts[key]["after"] and len(counts[key]["before"]) == 1
    if not same: bad = 1
    r = ma / mb if mb else float("nan"); ratios.append(r)
    print(f"{key[0]:16} {key[1]:16} {mb:12.0f} ({min(b):.0f}-{max(b):.0f}) {ma:12.0f} ({min(a):.0f}-{max(a):.0f}) {r:12.3f}  {'identical' if same else 'DIFFER ' + str(counts[key])}")
print(f"geometric mean of ratios: {statistics.geometric_mean(ratios):.3f}")
sys.exit(bad)
PY
