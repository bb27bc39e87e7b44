#!/usr/bin/env bash
# strata tables in DataFusion (issue 22; crates/strata-datafusion), out of
# the default build and test: lints the crate (clippy -D warnings) and runs
# its tests. Prints the time of each step (CI records them: .ci/run step 3b).
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
cargo clippy -p strata-datafusion --all-targets -- -D warnings
t1=$(date +%s)
echo "datafusion: clippy took $((t1 - t0)) s"
cargo test --release -p strata-datafusion
t2=$(date +%s)
echo "datafusion: tests (build and run) took $((t2 - t1)) s"
