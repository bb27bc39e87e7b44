#!/usr/bin/env bash
# Lookups from an object store (issue 22; docs/results/scale-out.md):
# the S3-compatible test server on 127.0.0.1 (scripts/install-s3-server.sh)
# against the local disk, in one run:
#   1. the storage profiles of both, measured (`strata profile`);
#   2. cold lookups (no cache, no resident level: every read goes to the
#      store) of fixed designs and of AirTune's design for the measured s3
#      profile (`air:profile=custom:LAT:BW`), on s3 and on the local disk
#      (O_DIRECT);
#   3. on s3 again: batched lookups (--batch 64 --queue-depth 16: each
#      batch's reads as coalesced get_ranges, ranges closer than the
#      measured latency × bandwidth merged: STRATA_S3_COALESCE), and a page
#      cache of 4096 pages in front.
# Every bench run checks every answer (a wrong one fails it).
# Environment: DATA (key file; default: osm-like N keys generated into WORK),
# N (10000000), OPS (2000), REPEAT (3), STRATA_BIN (a strata built with
# `--features s3`; default: built here), WORK (/tmp/strata-s3-exp), OUT
# (docs/results/scale-out).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-10000000}
OPS=${OPS:-2000}
REPEAT=${REPEAT:-3}
WORK=${WORK:-/tmp/strata-s3-exp}
OUT=${OUT:-docs/results/scale-out}
KINDS=${KINDS:-btree-static pgm-disk-cpr rs-disk gap-zonemap-d}
if [ -z "${STRATA_BIN:-}" ]; then
    cargo build --release --quiet -p strata-cli --features s3
    STRATA_BIN=target/release/strata
fi
S=$STRATA_BIN
./scripts/install-s3-server.sh
rm -rf "$WORK"
mkdir -p "$WORK/server/bench" "$WORK/local" "$OUT"
DATA=${DATA:-$WORK/osm-like-$N.keys}
[ -f "$DATA" ] || "$S" gen --dist osm-like --n "$N" --out "$DATA" --quiet
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
target/tools/bin/strata-s3-server --host 127.0.0.1 --port "$port" \
    --access-key strata-exp --secret-key strata-exp-secret "$WORK/server" 2>"$WORK/server.log" &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
export AWS_ENDPOINT=http://127.0.0.1:$port AWS_ALLOW_HTTP=true AWS_REGION=us-east-1 \
    AWS_ACCESS_KEY_ID=strata-exp AWS_SECRET_ACCESS_KEY=strata-exp-secret
for _ in $(seq 100); do
    (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break
    sleep 0.1
done

# 1. Profiles.
"$S" profile s3://bench/profile --file-mib 64 --reads 100 --quiet > "$OUT/profile-s3.json"
"$S" profile "$WORK/local" --file-mib 256 --reads 200 --quiet > "$OUT/profile-local.json"
read -r lat bw < <(python3 -c "import json; p=json.load(open('$OUT/profile-s3.json')); print(round(p['latency_us'], 1), round(p['bandwidth_mb_s'], 1))")
s3_profile="custom:$lat:$bw"
# Batched reads merge ranges closer than latency × bandwidth (reading the
# gap costs less than another request).
export STRATA_S3_COALESCE=${STRATA_S3_COALESCE:-$(python3 -c "print(int($lat * $bw))")}
echo "s3 profile: $s3_profile, coalescing ranges closer than $STRATA_S3_COALESCE bytes"

idx=()
for k in $KINDS; do idx+=(--index "$k"); done
idx+=(--index "air:profile=$s3_profile")
common=(--data "$DATA" --dataset osm-like --workload lookup --ops "$OPS" --repeat "$REPEAT" --resident none --quiet)
run() { # name, location, extra args...
    local name=$1 where=$2
    shift 2
    echo "== $name ($where) $(date -u +%H:%M:%S)"
    "$S" bench "${common[@]}" "${idx[@]}" --work-dir "$where" --profile "$s3_profile" "$@" \
        --json "$OUT/$name.jsonl"
}
# 2. Cold lookups, one at a time: s3, local disk, s3 again (the spread).
run s3-cold s3://bench/work
run local-cold "$WORK/local/work"
run s3-cold-2 s3://bench/work
# 3. Batched, and with a page cache.
run s3-batch64 s3://bench/work --batch 64 --queue-depth 16
run local-batch64 "$WORK/local/work" --batch 64 --queue-depth 16
run s3-cache4096 s3://bench/work --cache-pages 4096
echo "done $(date -u +%H:%M:%S); python3 scripts/report_scale_out.py $OUT"
