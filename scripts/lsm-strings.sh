#!/usr/bin/env bash
# Experiment 5 of issue 17 (docs/results/lsm.md, "String keys"; Liu §5.2
# range lookups, §5.3 string keys): word and URL keys in the LSM store with
# every index kind at one position boundary.
#
# 1. Generates the keys (strata gen --dist words|urls: sorted text files).
# 2. Index memory (deterministic): loads each data set into a store per kind
#    (strata lsm load, then lsm compact) and records `strata lsm stats`.
# 3. Latency: strata kvbench --key-file with every kind as one engine each
#    (interleaved, REPEATS times): readrandom and seekrandom (seek + 10
#    nexts), then seekrandom with --scan-length 100 (and any other
#    SCAN_LENGTHS), warm and cold (--cold: O_DIRECT and a dropped page
#    cache, which needs root; kvbench notes it when it could not).
# 4. scripts/report_lsm_strings.py: a markdown table and a PNG.
#
# Writes JSON Lines into OUT (strings-*.jsonl), the report beside them.
# Knobs (environment): N (keys of both sets; default 10M words, 5M URLs),
# N_WORDS, N_URLS, QUICK=1 (N=100000, OPS=10000, 1 repeat), OUT
# (docs/results/lsm), W (work directory, /tmp/strata-lsm-strings), STRATA
# (target/release/strata), PY (.venv/bin/python), KINDS, BOUNDARY (16),
# MEMORY (64M), VALUE (100), OPS (100000), REPEATS (3), SCAN_LENGTHS
# ("100"), MODES ("warm cold"), STAGES ("memory latency report").
# Timed results are for a quiet machine: do not commit them from a shared one.
set -euo pipefail
cd "$(dirname "$0")/.."
S=${STRATA:-target/release/strata}
PY=${PY:-.venv/bin/python}
if [ -n "${QUICK:-}" ]; then
  N=${N:-100000}
  OPS=${OPS:-10000}
  REPEATS=${REPEATS:-1}
fi
N_WORDS=${N_WORDS:-${N:-10000000}}
N_URLS=${N_URLS:-${N:-5000000}}
OUT=${OUT:-docs/results/lsm}
W=${W:-/tmp/strata-lsm-strings}
KINDS=${KINDS:-fp pgm pgm-cpr rs plr fiting gap-zonemap-d air}
BOUNDARY=${BOUNDARY:-16}
MEMORY=${MEMORY:-64M}
VALUE=${VALUE:-100}
OPS=${OPS:-100000}
REPEATS=${REPEATS:-3}
SCAN_LENGTHS=${SCAN_LENGTHS:-100}
MODES=${MODES:-warm cold}
STAGES=${STAGES:-memory latency report}
stage() { [[ " $STAGES " == *" $1 "* ]]; }

[ -x "$S" ] || { echo "lsm-strings: no $S (cargo build --release -p strata-cli, or set STRATA)" >&2; exit 1; }
mkdir -p "$W" "$OUT"

# Keys: one sorted text file per data set, reused when present with the right count.
keys() { # dist n -> path
  local f="$W/$1-$2.txt"
  if [ ! -f "$f" ] || [ "$(wc -l < "$f")" -ne "$2" ]; then
    "$S" gen --dist "$1" --n "$2" --out "$f" -q
  fi
  echo "$f"
}
declare -A FILE NKEYS
FILE[words]=$(keys words "$N_WORDS"); NKEYS[words]=$N_WORDS
FILE[urls]=$(keys urls "$N_URLS"); NKEYS[urls]=$N_URLS

# Room on disk: a store holds keys, values and their tables about twice over
# while it compacts; the memory stage keeps one store at a time, kvbench one
# per engine of a run.
need=0
for ds in words urls; do
  bytes=$(stat -c %s "${FILE[$ds]}")
  one=$(( 2 * (bytes + ${NKEYS[$ds]} * (VALUE + 16)) ))
  all=$(( one * $(wc -w <<< "$KINDS") ))
  need=$(( all > need ? all : need ))
done
avail=$(( $(df --output=avail -k "$W" | tail -1) * 1024 ))
if [ "$avail" -lt "$need" ]; then
  echo "lsm-strings: about $need bytes of disk needed in $W, $avail free: lower N_WORDS / N_URLS" >&2
  exit 1
fi

# 2. Index memory per kind (deterministic).
if stage memory; then
  mem="$OUT/strings-memory.jsonl"
  : > "$mem"
  for ds in words urls; do
    tsv="$W/$ds.tsv"
    awk '{ printf "%s\t%d\n", $0, NR }' "${FILE[$ds]}" > "$tsv"
    for kind in $KINDS; do
      st="$W/store-$ds-$kind"
      rm -rf "$st"
      "$S" lsm load "$st" "$tsv" --index "$kind" --boundary "$BOUNDARY" --memory "$MEMORY" --sync never -q > /dev/null
      # Compacted into the last level: a layout that does not depend on when
      # the background compactions of the load ran.
      "$S" lsm compact "$st" --index "$kind" --boundary "$BOUNDARY" --memory "$MEMORY" --sync never -q > /dev/null
      stats=$("$S" lsm stats "$st" --memory "$MEMORY" | tr -d '\n')
      printf '{"experiment":"strings-memory","dataset":"%s","n":%d,"index":"%s","boundary":%d,"memory":"%s","key_file":"%s","stats":%s}\n' \
        "$ds" "${NKEYS[$ds]}" "$kind" "$BOUNDARY" "$MEMORY" "$(basename "${FILE[$ds]}")" "$stats" >> "$mem"
      rm -rf "$st"
    done
    rm -f "$tsv"
  done
  echo "lsm-strings: index memory in $mem" >&2
fi

# 3. Latency through kvbench, every kind in one run (interleaved).
if stage latency; then
  engines=""
  for kind in $KINDS; do engines+="${engines:+,}lsm:index=$kind,boundary=$BOUNDARY"; done
  for ds in words urls; do
    for mode in $MODES; do
      cold=()
      [ "$mode" = cold ] && cold=(--cold)
      run() { # name scan-length workloads
        "$S" kvbench --engines "$engines" --workloads "$3" --key-file "${FILE[$ds]}" \
          --reads "$OPS" --scan-length "$2" --value-size "$VALUE" --memory "$MEMORY" \
          --repeats "$REPEATS" --work-dir "$W/kv" "${cold[@]}" \
          --json "$OUT/strings-$ds-$mode-$1.jsonl" -q > /dev/null
      }
      run point 10 readrandom,seekrandom
      for L in $SCAN_LENGTHS; do run "scan$L" "$L" seekrandom; done
    done
  done
  echo "lsm-strings: latency in $OUT/strings-{words,urls}-{$(tr ' ' , <<< "$MODES")}-*.jsonl" >&2
fi

# 4. Report: markdown and PNG, and key-map collisions counted on the key files.
if stage report; then
  "$PY" scripts/report_lsm_strings.py --out "$OUT" --keys "words=${FILE[words]}" --keys "urls=${FILE[urls]}"
fi
