#!/usr/bin/env bash
# Merges of the hybrid store, binaries interleaved run by run (issue 23's
# "merge throughput"; docs/results/build.md): a write-only run whose every
# merge rebuilds the static index over all keys. Appends one JSON line per
# run to OUT: `merge_s` is the store's time spent merging, `peak_rss_bytes`
# the peak RSS of the whole bench process (bulk load, inserts and merges).
#
# Usage: scripts/db-merge-runs.sh OUT LABEL=BINARY...
# Env: DATA (key file, default /work/bench/bx/osm-like-10000000.keys),
#      KINDS (static kinds, default "pgm-disk-cpr"), REPEAT (default 3),
#      OPS (default 1000000: the runner inserts 1/16 of the file's keys),
#      WORK (store directory, removed before each run; default /tmp/strata-merge-db).
set -euo pipefail
out=${1:?usage: db-merge-runs.sh OUT LABEL=BINARY...}
shift
DATA=${DATA:-/work/bench/bx/osm-like-10000000.keys}
KINDS=${KINDS:-pgm-disk-cpr}
REPEAT=${REPEAT:-3}
OPS=${OPS:-1000000}
WORK=${WORK:-/tmp/strata-merge-db}
for kind in $KINDS; do
  for r in $(seq 1 "$REPEAT"); do
    for b in "$@"; do
      label=${b%%=*}
      bin=${b#*=}
      rm -rf "$WORK"
      sync
      tf=$(mktemp)
      js=$(mktemp)
      /usr/bin/time -f '%M' -o "$tf" "$bin" -q bench --data "$DATA" \
        --index "db:memory=4M,insert=blind,static=$kind" --workload ycsb-write-only \
        --ops "$OPS" --work-dir "$WORK" --json "$js" > /dev/null
      python3 - "$label" "$kind" "$r" "$js" "$tf" <<'PY' >> "$out"
import json, sys
label, kind, rep, path, tf = sys.argv[1:]
rss = int(open(tf).read().split()[-1]) * 1024
for line in open(path):
    r = json.loads(line)
    s = r.get("store") or {}
    print(json.dumps({"section": "merge", "bin": label, "static": kind, "rep": int(rep),
                      "n": r.get("n"), "ops": r.get("ops"), "merges": s.get("merges"),
                      "merge_s": s.get("merge_s"), "peak_rss_bytes": rss}))
PY
      rm -f "$tf" "$js"
      tail -n 1 "$out" >&2
    done
  done
done
rm -rf "$WORK"
