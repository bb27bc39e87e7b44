#!/usr/bin/env bash
# Runs every test of strata: the Rust workspace (unit, property, conformance,
# model and crash tests), then the Python package (built into a virtual
# environment with maturin and tested with pytest; see scripts/test-python.sh).
# CI calls this through .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/check-toolchain.sh
# strata-py is a cdylib without Rust tests: pytest covers it below.
cargo test --workspace --exclude strata-py --all-targets
cargo test --workspace --exclude strata-py --doc
./scripts/test-python.sh
