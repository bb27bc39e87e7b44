#!/usr/bin/env bash
# Builds and runs strata's coverage-guided fuzz targets (fuzz/, cargo-fuzz
# with libFuzzer) and prints a table: target, executions, exec/s, crashes.
#
#   scripts/fuzz.sh [BUDGET] [TARGETS...]
#
# BUDGET is seconds per target (`60`, the default) or a run count (`100000r`,
# passed as -runs=N). TARGETS default to every target (`cargo fuzz list`).
# Each run starts from the committed seeds in fuzz/corpus/<target>/ and
# keeps what it finds there (git ignores all but the seed-* files); a crash
# is saved under fuzz/artifacts/<target>/ and the run goes on (-fork=1
# is not used: the first crash ends that target's run, and is counted).
#
# Toolchain: cargo-fuzz needs nightly (`-Z sanitizer`); the script uses
# `cargo +nightly` when rustup has it, else RUSTC_BOOTSTRAP=1 on the
# default toolchain. cargo-fuzz is installed if missing.
# Environment: FUZZ_JOBS (parallel targets, default 1), FUZZ_ARGS (extra
# libFuzzer flags), FUZZ_LOG_DIR (default fuzz/logs).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
# The fuzz crate builds into fuzz/target, whatever the caller's target dir.
export CARGO_TARGET_DIR="$PWD/target"

# The sosd target writes its input to a file per run: keep it in memory.
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
  export TMPDIR=/dev/shm
fi

budget="${1:-60}"
shift || true

if ! command -v cargo-fuzz >/dev/null 2>&1; then
  echo "installing cargo-fuzz (cargo install cargo-fuzz --locked)" >&2
  cargo install cargo-fuzz --locked >&2
fi
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  fuzz=(cargo +nightly fuzz)
else
  export RUSTC_BOOTSTRAP=1
  fuzz=(cargo fuzz)
fi

if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <("${fuzz[@]}" list | grep -v '^seeds$')
fi

case "$budget" in
  *r) limit="-runs=${budget%r}" ;;
  *) limit="-max_total_time=$budget" ;;
esac

# One build for every target (release, debug assertions on: overflow checks
# panic, as they do in the test suite).
start=$(date +%s)
"${fuzz[@]}" build -O --debug-assertions >&2
echo "build: $(( $(date +%s) - start )) s" >&2

logs="${FUZZ_LOG_DIR:-logs}"
mkdir -p "$logs"
printf '%-18s %14s %10s %8s %8s\n' target executions exec/s seconds crashes
total_crashes=0
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t"
  log="$logs/$t.log"
  t0=$(date +%s)
  set +e
  # shellcheck disable=SC2086
  "${fuzz[@]}" run -O --debug-assertions "$t" "corpus/$t" -- "$limit" -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 -print_final_stats=1 ${FUZZ_ARGS:-} >"$log" 2>&1
  rc=$?
  set -e
  secs=$(( $(date +%s) - t0 ))
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || true)
  [ -n "$execs" ] || execs=$(grep -o 'Done [0-9]* runs' "$log" | tail -1 | grep -o '[0-9]\+' || true)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || true)
  crashes=$(ls "artifacts/$t" 2>/dev/null | grep -c -E '^(crash|oom|timeout|leak)-' || true)
  if [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ]; then crashes="rc=$rc"; fi
  printf '%-18s %14s %10s %8s %8s\n' "$t" "${execs:-?}" "${rate:-?}" "$secs" "$crashes"
  case "$crashes" in 0) ;; *) total_crashes=$((total_crashes + 1)) ;; esac
done
echo "logs: fuzz/$logs/<target>.log; crash inputs: fuzz/artifacts/<target>/" >&2
[ "$total_crashes" -eq 0 ]
