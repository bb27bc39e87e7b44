#!/usr/bin/env bash
# Runs every test of strata: the Rust workspace (unit, property, conformance,
# model and crash tests), then the Python package (built into a virtual
# environment with maturin and tested with pytest; see scripts/test-python.sh).
# CI calls this through .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/check-toolchain.sh
# strata-py is a cdylib without Rust tests: pytest covers it below.
# strata-datafusion and strata-ballista (DataFusion, Ballista) are heavy and
# out of the default build: scripts/datafusion-tests.sh, CI step 4.
cargo test --workspace --exclude strata-py --exclude strata-datafusion --exclude strata-ballista --all-targets
cargo test --workspace --exclude strata-py --exclude strata-datafusion --exclude strata-ballista --doc
./scripts/test-python.sh
