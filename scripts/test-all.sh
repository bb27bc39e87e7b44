#!/usr/bin/env bash
# Runs every test of strata: the Rust workspace (unit, property, conformance,
# model and crash tests). CI calls this through .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --all-targets
cargo test --workspace --doc
