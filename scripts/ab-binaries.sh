#!/usr/bin/env bash
# Compares two builds of `strata` (before and after a change) on the same
# data: `strata bench` lookups, scans and ycsb-write-only, the two binaries
# alternating run by run (A B, then B A, ...) so neither sits in a better slot,
# each run on its own fresh work directory. Prints, per (index, workload), the
# median throughput of each binary with its min-max, the ratio after/before,
# and whether the deterministic counts (pages/op, reads/op, bytes/op,
# disk_bytes) are identical. Fails if any answer was wrong or a count differs.
#
#   scripts/ab-binaries.sh BEFORE_BIN AFTER_BIN [ROUNDS] [N_KEYS] [OPS] [INNER]
#
# ROUNDS alternations of the two binaries; each invocation builds every
# configuration once and runs INNER repeats of OPS operations on it
# (`strata bench --repeat INNER`, configurations interleaved inside). The
# summary pools every repeat: median and min-max per binary, and the ratio of
# medians; the per-round ratios of medians give a spread that includes the
# drift between invocations. disk_bytes is compared without the index
# manifest (it records the build time, whose digits vary).
#
# Used for issue 15 (no change of behaviour); results in docs/results/house.md.
set -euo pipefail
before=$1 after=$2 repeats=${3:-5} n=${4:-2000000} ops=${5:-20000} inner=${6:-1}
out=${AB_OUT:-target/ab}
rm -rf "$out"; mkdir -p "$out"
"$after" gen --dist fb-like --n "$n" --out "$out/fb-like.keys" --quiet 2>/dev/null ||
    "$after" gen --dist fb-like --n "$n" --out "$out/fb-like.keys"
read_idx=(--index btree --index binary --index pgm --index rs --index gap-zonemap-d --index db:memory=1M)
write_idx=(--index btree --index db:memory=1M)
run() { # BIN TAG REPEAT
    local bin=$1 tag=$2 r=$3 w="$out/work-$2-$3"
    "$bin" bench --data "$out/fb-like.keys" --dataset fb-like --ops "$ops" --repeat "$inner" --work-dir "$w" \
        "${read_idx[@]}" --workload lookup --workload scan --quiet --json "$out/$tag-$r-read.jsonl"
    "$bin" bench --data "$out/fb-like.keys" --dataset fb-like --ops "$ops" --repeat "$inner" --work-dir "$w" \
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
runs = collections.defaultdict(lambda: {"before": [], "after": []})
rounds = collections.defaultdict(lambda: collections.defaultdict(dict))
counts = collections.defaultdict(lambda: {"before": set(), "after": set()})
disk = collections.defaultdict(lambda: {"before": set(), "after": set()})
bad = 0
for f in sorted(glob.glob(f"{out}/*.jsonl")):
    tag, rnd = f.split("/")[-1].split("-")[:2]
    for line in open(f):
        j = json.loads(line)
        key = (j["index"], j["workload"])
        tr = j.get("throughput_runs") or [j["throughput_ops_s"]]
        runs[key][tag] += tr
        rounds[key][rnd][tag] = statistics.median(tr)
        io = j["io"]
        counts[key][tag].add((io["pages_per_op"], io["reads_per_op"], io["bytes_per_op"]))
        disk[key][tag].add(j["disk_bytes"])
        if j.get("wrong", 0):
            print("WRONG ANSWERS", key, tag, j["wrong"]); bad = 1
print(f"{'index':14} {'workload':16} {'before ops/s: median (min-max)':>31} {'after ops/s: median (min-max)':>31} {'ratio':>6} {'per-round ratios (min-max)':>27}  pages/reads/bytes per op; disk bytes")
ratios = []
for key in sorted(runs):
    b, a = runs[key]["before"], runs[key]["after"]
    mb, ma = statistics.median(b), statistics.median(a)
    r = ma / mb; ratios.append(r)
    rr = [v["after"] / v["before"] for v in rounds[key].values() if "after" in v and "before" in v]
    cb, ca = counts[key]["before"], counts[key]["after"]
    if cb == ca and len(cb) == 1:
        c = "identical"
    elif len(cb) > 1 and len(ca) > 1:
        lo = lambda s, i: min(x[i] for x in s); hi = lambda s, i: max(x[i] for x in s)
        c = f"vary in both (pages/op before {lo(cb,0):.4f}-{hi(cb,0):.4f}, after {lo(ca,0):.4f}-{hi(ca,0):.4f})"
    else:
        c = f"DIFFER {cb} {ca}"; bad = 1
    db_, da = disk[key]["before"], disk[key]["after"]
    spread = max(db_ | da) - min(db_ | da)
    d = "identical" if db_ == da and len(db_) == 1 else (f"within {spread} B (manifest build-time digits)" if spread <= 16 else f"DIFFER {sorted(db_)} {sorted(da)}")
    if d.startswith("DIFFER"): bad = 1
    print(f"{key[0]:14} {key[1]:16} {mb:10.0f} ({min(b):6.0f}-{max(b):6.0f}) {ma:10.0f} ({min(a):6.0f}-{max(a):6.0f}) {r:6.3f} {statistics.geometric_mean(rr):8.3f} ({min(rr):.3f}-{max(rr):.3f})  {c}; {d}")
print(f"geometric mean of the ratios of medians: {statistics.geometric_mean(ratios):.3f} over {len(ratios)} (index, workload) pairs")
sys.exit(bad)
PY
