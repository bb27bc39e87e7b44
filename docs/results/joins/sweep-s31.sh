#!/bin/bash
# Cold, interleaved: base (f71b676) vs sweep binaries; every algo per cell per repeat.
D=/work/bench/joins
OUT=${OUT:-/tmp/sweep-s31.tsv}
REPS=${REPS:-5}
BASE=/work/bench/strata-s31base
NEW=/work/bench/strata-s31sweep
echo -e "rep\tds\tratio\tbin\talgo\tseconds\tcount\tchecksum\tindex_pages_read\tindex_reads\tpeak_rss" > $OUT
for rep in $(seq 1 $REPS); do
 for cell in fb-like:1 osm-like:1 wiki-like:1 books-like:1 fb-like:10 osm-like:10 wiki-like:10 books-like:10 fb-like:100 osm-like:100 wiki-like:100 books-like:100; do
  ds=${cell%%:*}; r=${cell##*:}
  for bin in base new; do
   B=$BASE; [ $bin = new ] && B=$NEW
   for a in pgm pgm_epsilon_256 btree btree-static smj; do
    case $a in
      smj) algo=smj; inner=$D/$ds-pgm;;
      pgm_epsilon_256) algo=inlj:pgm; inner=$D/$ds-pgm_epsilon_256;;
      *) algo=inlj:$a; inner=$D/$ds-$a;;
    esac
    sync; echo 3 > /proc/sys/vm/drop_caches
    $B join --outer $D/$ds-outer-r$r.keys --inner $inner --algo $algo --memory 256M -q --json /tmp/g.json || { echo FAIL $cell $bin $a; continue; }
    python3 - "$rep" "$ds" "$r" "$bin" "$a" >> $OUT <<'PY'
import json,sys
d=json.load(open('/tmp/g.json'))
print("\t".join(sys.argv[1:]+[str(d['seconds']),str(d['count']),d['checksum'],str(d.get('index_pages_read')),str(d.get('index_reads')),str(d.get('peak_rss_bytes'))]))
PY
   done
  done
 done
done
