#!/usr/bin/env bash
# Checks the Rust toolchain before a long run, and fails at once with what to
# do: rustc must work (rustup installs the toolchain rust-toolchain.toml pins
# when it can download it), be at least the workspace's rust-version, and
# have rustfmt and clippy. Prints the toolchain in use.
#
# Called by .ci/run and scripts/test-all.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
pinned=$(sed -n 's/^channel = "\(.*\)"/\1/p' rust-toolchain.toml)
need=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml | head -1)
install="rustup toolchain install $pinned --component rustfmt,clippy"

die() {
    echo "check-toolchain: $*" >&2
    exit 1
}

command -v rustc >/dev/null 2>&1 ||
    die "no rustc on PATH: install rustup (https://rustup.rs), then '$install'"
if ! have=$(rustc --version 2>&1); then
    die "rustc does not run (${have%%$'\n'*}): '$install' installs the toolchain rust-toolchain.toml pins; to use another installed toolchain (>= $need) instead, set RUSTUP_TOOLCHAIN, e.g. RUSTUP_TOOLCHAIN=stable"
fi
version=$(echo "$have" | awk '{print $2}')
version=${version%%-*}
if [ "$(printf '%s\n%s\n' "$need" "$version" | sort -V | head -1)" != "$need" ]; then
    die "$have is too old: strata needs Rust >= $need (rust-version in Cargo.toml); '$install' installs the pinned one, or 'rustup update'"
fi
cargo fmt --version >/dev/null 2>&1 ||
    die "$have has no rustfmt: 'rustup component add rustfmt'"
cargo clippy --version >/dev/null 2>&1 ||
    die "$have has no clippy: 'rustup component add clippy'"
if [ "$version" != "$pinned" ]; then
    echo "check-toolchain: $have (rust-toolchain.toml pins $pinned; needs >= $need)"
else
    echo "check-toolchain: $have"
fi
