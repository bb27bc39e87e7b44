#!/usr/bin/env bash
# Builds target/release/strata with the peer systems (RocksDB, fjall,
# LevelDB; features peers,fjall,leveldb), installing the system packages it
# links against when they are missing (apt-get, run as root):
#   libclang-dev    bindgen, to generate the RocksDB C API bindings;
#   librocksdb-dev  Debian's prebuilt RocksDB (7.8), linked through
#                   ROCKSDB_LIB_DIR so that RocksDB's C++ sources are not
#                   compiled here. STRATA_VENDORED_ROCKSDB=1 compiles the
#                   RocksDB bundled with the crate instead (hours on 2 cores).
#   libleveldb-dev  Debian's LevelDB (1.23), linked by overriding the build
#                   script of leveldb-sys (cargo --config ...leveldb.rustc-link-lib),
#                   so its bundled LevelDB 1.22 is not compiled (its cmake
#                   build fails with GCC: clang's -Wthread-safety).
# fjall is pure Rust (crates.io) and needs nothing from the system.
# Used by scripts/peers.sh and scripts/lsm-experiments.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${STRATA_VENDORED_ROCKSDB:-}" ]; then
    need=()
    dpkg -s libclang-dev >/dev/null 2>&1 || need+=(libclang-dev)
    dpkg -s librocksdb-dev >/dev/null 2>&1 || need+=(librocksdb-dev)
    if [ ${#need[@]} -gt 0 ]; then
        echo "build-peers: installing ${need[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
    fi
    multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
    export ROCKSDB_LIB_DIR=${ROCKSDB_LIB_DIR:-/usr/lib/$multiarch}
fi

if ! dpkg -s libleveldb-dev >/dev/null 2>&1; then
    echo "build-peers: installing libleveldb-dev"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libleveldb-dev
fi
triple=$(rustc -vV | sed -n 's/^host: //p')
link=(--config "target.$triple.leveldb.rustc-link-lib=[\"leveldb\"]")
t0=$(date +%s)
cargo build --release -p strata-cli --features peers,fjall,leveldb "${link[@]}"
echo "build-peers: build took $(( $(date +%s) - t0 )) s"
