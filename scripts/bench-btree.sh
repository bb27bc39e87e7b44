#!/usr/bin/env bash
# The B+-tree baseline report (docs/results/btree.md): Lan et al.'s six
# workloads on 10M fb-like keys, modelled under nvme (the hdd column is
# derived from the same reads: T = reads × 4.8 ms + bytes / 141 MB/s).
# Usage: scripts/bench-btree.sh [WORKDIR]   (needs a release build)
set -euo pipefail
cd "$(dirname "$0")/.."
W=${1:-/tmp/strata-btree}
S=target/release/strata
mkdir -p "$W"
[ -f "$W/fb-like.keys" ] || $S gen --dist fb-like --n 10000000 --out "$W/fb-like.keys"
for resident in index none; do
  $S bench --data "$W/fb-like.keys" --index btree --workload lookup --workload scan \
    --ops 200000 --profile nvme --resident "$resident" --repeat 3 \
    --work-dir "$W/work" --json "$W/btree-read-$resident.jsonl"
done
$S bench --data "$W/fb-like.keys" --index btree:fill=70 --workload write-only --workload read-heavy \
  --workload write-heavy --workload balanced --ops 1000000 --profile nvme --resident index \
  --work-dir "$W/work" --json "$W/btree-write.jsonl"
