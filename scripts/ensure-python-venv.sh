#!/usr/bin/env bash
# Makes sure `PYTHON -m venv` works (PYTHON: $1, else $PYTHON, else python3):
# creates a throw-away environment; when that fails (Debian and Ubuntu ship
# the venv module's ensurepip in the separate package python3-venv), installs
# python3-venv and python3.X-venv with apt-get (through sudo when not root)
# and tries again. Exits non-zero with a message saying what to do when
# Python is missing or the environment still cannot be created.
#
# Called by .ci/run (first thing, so CI fails at once) and by
# scripts/test-python.sh before it creates .venv.
set -euo pipefail
python=${1:-${PYTHON:-python3}}

die() {
    echo "ensure-python-venv: $*" >&2
    exit 1
}

command -v "$python" >/dev/null 2>&1 ||
    die "no $python on PATH: install Python >= 3.9 with its venv module (Debian/Ubuntu: apt-get install python3 python3-venv), or set PYTHON to an interpreter"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 9))' ||
    die "$("$python" --version 2>&1) is too old: strata's Python package needs Python >= 3.9 (set PYTHON to a newer interpreter)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
try_venv() {
    rm -rf "$tmp/venv"
    "$python" -m venv "$tmp/venv" >"$tmp/log" 2>&1
}
try_venv && exit 0

version=$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
echo "ensure-python-venv: '$python -m venv' fails:" >&2
sed 's/^/  /' "$tmp/log" >&2
if ! command -v apt-get >/dev/null 2>&1; then
    die "no apt-get here: install the venv module of Python $version with your package manager (or use a Python built with ensurepip), then run again"
fi
sudo=()
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 ||
        die "not root and no sudo: as root, run 'apt-get install python3-venv python$version-venv', then run again"
    sudo=(sudo)
fi
packages=(python3-venv)
if apt-cache show "python$version-venv" >/dev/null 2>&1; then
    packages+=("python$version-venv")
fi
echo "ensure-python-venv: installing ${packages[*]} with apt-get" >&2
"${sudo[@]}" apt-get update -qq ||
    die "apt-get update failed: install ${packages[*]} by hand, then run again"
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${packages[@]}" ||
    die "apt-get install ${packages[*]} failed: install them by hand, then run again"
try_venv ||
    die "'$python -m venv' still fails after installing ${packages[*]} ($(head -1 "$tmp/log")): is $python Debian's python3? Set PYTHON to the interpreter the package belongs to"
echo "ensure-python-venv: '$python -m venv' works now" >&2
