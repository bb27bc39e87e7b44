#!/usr/bin/env bash
# The object-store tests (issue 22), out of the default build and test:
#   1. installs the S3-compatible test server into target/tools
#      (tools/s3-server: s3s-fs's store from crates.io, served with
#      TCP_NODELAY; not a workspace member, its own Cargo.lock) unless the
#      installed one is newer than its sources;
#   2. runs the tests built with the cargo feature `s3`
#      (tests/object_store.rs, tests/object_store_failure.rs): each starts
#      the server on 127.0.0.1 at a free port and stops it afterwards.
# Prints the time of each step (CI records them: .ci/run step 4).
set -euo pipefail
cd "$(dirname "$0")/.."
server=target/tools/bin/strata-s3-server
t0=$(date +%s)
if [ ! -x "$server" ] || [ -n "$(find tools/s3-server -newer "$server" -type f -not -path '*/target/*' | head -1)" ]; then
    cargo install --quiet --path tools/s3-server --locked --root target/tools --target-dir target/tools-build
fi
t1=$(date +%s)
echo "s3: server install took $((t1 - t0)) s"
cargo test -p strata --features s3 --test object_store --test object_store_failure
t2=$(date +%s)
echo "s3: tests (build and run) took $((t2 - t1)) s"
