#!/usr/bin/env bash
# Installs the S3-compatible test server (tools/s3-server: s3s-fs's store
# from crates.io, served with TCP_NODELAY; not a workspace member, its own
# Cargo.lock) into target/tools/bin/strata-s3-server, unless the installed
# one is newer than its sources. Used by scripts/s3-tests.sh and
# scripts/s3-experiments.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
server=target/tools/bin/strata-s3-server
if [ ! -x "$server" ] || [ -n "$(find tools/s3-server -newer "$server" -type f -not -path '*/target/*' | head -1)" ]; then
    cargo install --quiet --path tools/s3-server --locked --root target/tools --target-dir target/tools-build
fi
