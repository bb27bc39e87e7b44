#!/bin/bash
for w in write-only read-heavy write-heavy balanced; do
  /work/bench/strata-s19c bench --data updx/osm-like-10000000.keys --dataset osm-like \
    --index btree --index btree-ld --index fiting --index dpgm --index alex --index lipp \
    --workload $w --ops 30000 --resident index --repeat 1 --profile nvme -q \
    --work-dir /work/bench/updx/work --json /work/bench/w6/write-osm-like-index-$w.jsonl > /dev/null
  echo "$w done $(date)"
done
