#!/usr/bin/env bash
# Builds the Python package (crates/strata-py + python/strata) into a virtual
# environment and runs its tests with pytest. Idempotent: the venv (.venv, or
# $STRATA_VENV) and its packages are reused, cargo rebuilds only what changed.
#
#   ./scripts/test-python.sh [PYTEST ARGS...]
#
# Needs python3 >= 3.9 with the venv module (when `python3 -m venv` fails,
# scripts/ensure-python-venv.sh installs Debian's python3-venv with apt-get,
# or says what to do), a Rust toolchain, and PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
venv=${STRATA_VENV:-$root/.venv}
python=${PYTHON:-python3}
# The Python tools the build and the tests need (one line, also the stamp).
deps="maturin>=1.9.4,<2 numpy pytest hypothesis matplotlib"

t0=$(date +%s)
if [ ! -x "$venv/bin/python" ]; then
    echo "test-python: creating $venv"
    if ! "$python" -m venv "$venv"; then
        rm -rf "$venv"
        ./scripts/ensure-python-venv.sh "$python"
        "$python" -m venv "$venv"
    fi
fi
stamp="$venv/.strata-deps"
if [ "$(cat "$stamp" 2>/dev/null)" != "$deps" ]; then
    echo "test-python: installing $deps"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    # shellcheck disable=SC2086
    "$venv/bin/python" -m pip install --quiet $deps
    echo "$deps" > "$stamp"
fi
t1=$(date +%s)

# maturin builds crates/strata-py in release mode into the shared target/
# directory and installs the package in editable mode (the extension module
# is copied next to python/strata/__init__.py).
(cd python && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" maturin develop --release --quiet)
t2=$(date +%s)

"$venv/bin/python" -m pytest python/tests -q "$@"
t3=$(date +%s)
echo "test-python: venv $((t1 - t0)) s, build $((t2 - t1)) s, pytest $((t3 - t2)) s"
