#!/bin/bash
cd /work/main
export STRATA_FULL=1 STRATA_SPECS=btree-ld,alex,lipp
echo "start $(date)"
/usr/bin/time -v nice -n 5 cargo test --release -q --test updatable -- --nocapture > /work/bench/full/updatable.log 2>&1; echo "updatable rc=$? $(date)"
/usr/bin/time -v nice -n 5 cargo test --release -q --test power_loss paged -- --nocapture > /work/bench/full/power_loss.log 2>&1; echo "power_loss rc=$? $(date)"
/usr/bin/time -v nice -n 5 cargo test --release -q -p strata-cli --test index_kill -- --nocapture > /work/bench/full/index_kill.log 2>&1; echo "index_kill rc=$? $(date)"
