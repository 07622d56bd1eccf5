#!/usr/bin/env bash
# Runs the libFuzzer targets (tests/fuzz, docs/fuzzing.md) for longer than the test suite does.
# Builds them with clang++-14 (ASan + UBSan + libFuzzer) in build-fuzz, then runs each named
# target (default: all) one after the other on one core, nice'd, for SECONDS each (default 600)
# or RUNS executions, whichever comes first. New inputs go to build-fuzz/fuzz-corpus/<target>
# (kept between runs; the committed seeds in tests/fuzz/corpus/<target> are only read); crashes
# are saved as build-fuzz/fuzz-artifacts/<target>-crash-* and end the script with status 1.
# The last lines of each run (executions, coverage, features) go to build-fuzz/fuzz-logs/<target>.log.
#
# Usage: scripts/fuzz.sh [--time SECONDS] [--runs N] [--list] [TARGET...]
#   e.g. scripts/fuzz.sh --time 3600 --runs 10000000 fuzz_bhs fuzz_text
set -euo pipefail
source "$(dirname "$0")/lib.sh"

seconds=600 runs=-1 list=0 targets=()
while (($#)); do
  case $1 in
    --time) seconds=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --list) list=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) targets+=("$1"); shift ;;
  esac
done

all=()
for f in "$ISERKIT_SOURCE"/tests/fuzz/fuzz_*.cpp; do all+=("$(basename "$f" .cpp)"); done
if ((list)); then printf '%s\n' "${all[@]}"; exit 0; fi
((${#targets[@]})) || targets=("${all[@]}")
for t in "${targets[@]}"; do
  [[ " ${all[*]} " == *" $t "* ]] || die "no fuzz target $t (scripts/fuzz.sh --list)"
done

command -v clang++-14 >/dev/null || die "clang++-14 is missing (packaging/install-deps.sh installs it)"
fuzz_build=$ISERKIT_SOURCE/build-fuzz
say "building the fuzz targets (clang++-14, ASan + UBSan + libFuzzer) in $fuzz_build"
CXX=clang++-14 cmake -S "$ISERKIT_SOURCE" -B "$fuzz_build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DISERKIT_WERROR=ON -DISERKIT_FUZZ=ON >/dev/null
ninja -C "$fuzz_build" -j"$(nproc)" "${targets[@]}"

status=0
for t in "${targets[@]}"; do
  corpus=$fuzz_build/fuzz-corpus/$t artifacts=$fuzz_build/fuzz-artifacts log=$fuzz_build/fuzz-logs/$t.log
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  say "$t: up to ${seconds}s / $runs runs"
  if ! nice -n 10 "$fuzz_build/bin/$t" -max_total_time="$seconds" -runs="$runs" -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/$t-" \
      "$corpus" "$ISERKIT_SOURCE/tests/fuzz/corpus/$t" >"$log" 2>&1; then
    status=1
    echo "$t: FAILED, see $log and $artifacts" >&2
  fi
  grep -E '^(#[0-9]+.*(DONE|INITED)|stat::number_of_executed_units|stat::peak_rss_mb)' "$log" | tail -3 || true
done
exit $status
