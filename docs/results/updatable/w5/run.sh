#!/bin/bash
for w in write-only read-heavy write-heavy balanced; do
  /work/bench/strata-s19c bench --data updx/fb-like-10000000.keys --dataset fb-like \
    --index btree --index btree-ld --index fiting --index dpgm --index alex --index lipp \
    --workload $w --ops 30000 --resident index --repeat 1 --profile nvme -q \
    --work-dir /work/bench/updx/work --json /work/bench/w5/write-fb-like-index-$w.jsonl > /dev/null
  echo "$w done $(date)"
done
