#!/bin/bash
# session 20: issue 18's remaining experiments, run on a quiet machine
S=/work/bench/strata-s19c
W=/work/bench/updx/work
O=/work/bench/x7
K="--index btree --index btree-ld --index fiting --index dpgm --index alex --index lipp"
declare -A KEYS=([fb-like]=/work/bench/updx/fb-like-10000000.keys [osm-like]=/work/bench/updx/osm-like-10000000.keys [wiki-like]=/work/bench/data/wiki-like-10000000.keys)
echo "start $(date)"
# 1. write workloads, all on disk (Lan's first setting), and wiki-like with inner nodes in memory
for ds in fb-like osm-like wiki-like; do
  for w in write-only read-heavy write-heavy balanced; do
    $S bench --data ${KEYS[$ds]} --dataset $ds $K --workload $w --ops 30000 --resident none --repeat 1 \
      --profile nvme -q --work-dir $W --json $O/write-$ds-none-$w.jsonl > /dev/null
    echo "write $ds none $w $(date)"
  done
done
for w in write-only read-heavy write-heavy balanced; do
  $S bench --data ${KEYS[wiki-like]} --dataset wiki-like $K --workload $w --ops 30000 --resident index --repeat 1 \
    --profile nvme -q --work-dir $W --json $O/write-wiki-like-index-$w.jsonl > /dev/null
  echo "write wiki-like index $w $(date)"
done
# 2. btree-ld against db and the B+-tree at equal memory under writes
$S bench --data ${KEYS[fb-like]} --dataset fb-like --index btree-ld --index db:memory=196608 \
  --index btree:resident=none,cache=196608 \
  --workload write-only --workload read-heavy --workload write-heavy --workload balanced \
  --ops 60000 --repeat 3 --profile nvme -q --work-dir $W --json $O/own-db-write-fb-like.jsonl > /dev/null
echo "own-db write $(date)"
# 3. wiki-like reads, both settings
for r in none index; do
  $S bench --data ${KEYS[wiki-like]} --dataset wiki-like $K --workload lookup --workload scan \
    --ops 20000 --resident $r --repeat 3 --profile nvme -q --work-dir $W --json $O/read-wiki-like-$r.jsonl > /dev/null
  echo "read wiki-like $r $(date)"
done
# 4. buffer sweep on osm-like and wiki-like
for ds in osm-like wiki-like; do
  for p in 4 16 64 256; do
    args=""
    for k in btree btree-ld fiting dpgm alex lipp; do args="$args --index $k:cache=$((p * 4))K"; done
    $S bench --data ${KEYS[$ds]} --dataset $ds $args --workload lookup --ops 20000 --resident none --repeat 3 \
      --profile nvme -q --work-dir $W --json $O/buffer-$ds-$p.jsonl > /dev/null
    echo "buffer $ds $p $(date)"
  done
done
echo "end $(date)"
