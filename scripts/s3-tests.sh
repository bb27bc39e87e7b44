#!/usr/bin/env bash
# The object-store tests (issue 22), out of the default build and test:
#   1. installs the S3-compatible test server into target/tools
#      (scripts/install-s3-server.sh);
#   2. runs the tests built with the cargo feature `s3`
#      (tests/object_store.rs, tests/object_store_failure.rs): each starts
#      the server on 127.0.0.1 at a free port and stops it afterwards;
#   3. builds the Python package with the feature `s3` into the virtual
#      environment of scripts/test-python.sh (creating it with that script
#      when missing) and runs python/tests/test_s3.py against the server
#      (STRATA_TEST_S3=1). The next scripts/test-python.sh rebuilds the
#      default package.
# Prints the time of each step (CI records them: .ci/run step 3a).
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
./scripts/install-s3-server.sh
t1=$(date +%s)
echo "s3: server install took $((t1 - t0)) s"
cargo test -p strata --features s3 --test object_store --test object_store_failure
t2=$(date +%s)
echo "s3: tests (build and run) took $((t2 - t1)) s"
venv=${STRATA_VENV:-$(pwd)/.venv}
if [ ! -x "$venv/bin/maturin" ]; then
    ./scripts/test-python.sh -q python/tests/test_s3.py
fi
(cd python && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" maturin develop --release --quiet --features s3)
STRATA_TEST_S3=1 "$venv/bin/python" -m pytest python/tests/test_s3.py -q
t3=$(date +%s)
echo "s3: Python (build with the feature s3 and run) took $((t3 - t2)) s"
