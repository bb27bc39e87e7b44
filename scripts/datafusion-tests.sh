#!/usr/bin/env bash
# strata tables in DataFusion and on Ballista (issue 22;
# crates/strata-datafusion, crates/strata-ballista), out of the default
# build and test: lints both crates (clippy -D warnings) and runs their
# tests (the Ballista test starts a scheduler and two executors on
# 127.0.0.1 over the S3 test server, which this script installs). Both
# crates are built in one cargo run, so DataFusion is compiled once with
# the features both need. The tests run in the profile `sql-test` (no
# optimisation, no debug info; tables of a few thousand rows): DataFusion
# and Ballista then compile in about 7 minutes on 2 cores, where the
# release build took over 25. Prints the time of each step (CI records
# them: .ci/run step 4).
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
./scripts/install-s3-server.sh
cargo clippy -p strata-datafusion -p strata-ballista --all-targets -- -D warnings
t1=$(date +%s)
echo "datafusion: clippy took $((t1 - t0)) s"
cargo test --profile sql-test -p strata-datafusion -p strata-ballista
t2=$(date +%s)
echo "datafusion: tests (build and run) took $((t2 - t1)) s"
