#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds with warnings as errors, runs every ctest
# (unit, interop, integration, conformance, packaging, benchmark smoke tests), the unit and
# integration tests under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan, clang), every
# libFuzzer target for a few seconds (the same clang tree; docs/fuzzing.md), and the threaded tests
# under ThreadSanitizer (build-tsan). The QEMU lab (label "lab") is opt-in: LAB=1. TSAN=0 / FUZZ=0
# skip those stages.
#
# Each test runs once, in the strictest build that can run it: the unit tests and the integration
# tests the ASan tree runs are not built or run again in build/, which runs the rest (conformance,
# interop, benchmark smoke tests, packaging, the nbdkit plugin). The two sanitizer trees are
# compiled in the background (nice 10) while the stage before them runs its tests, which mostly
# wait on sockets, daemons and timeouts: the cores the tests leave idle compile the next tree
# (docs/notes/build-time.md has the figures).
#
# Usage: scripts/test.sh            (CI runs exactly this: .ci/run)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
started=$SECONDS

say "installing what is missing"
sets=(test)
if [[ ${LAB:-0} == 1 ]]; then sets+=(lab); fi
"$ISERKIT_SOURCE/packaging/install-deps.sh" "${sets[@]}"

jobs=$(nproc)
asan=$ISERKIT_SOURCE/build-asan
tsan=$ISERKIT_SOURCE/build-tsan
run_tsan=${TSAN:-1}
run_fuzz=${FUZZ:-1}

say "building (warnings are errors; the unit tests' binaries only in the ASan tree)"
cmake -S "$ISERKIT_SOURCE" -B "$ISERKIT_BUILD" "${ISERKIT_CMAKE_OPTIONS[@]}" >/dev/null
ninja -C "$ISERKIT_BUILD" -j"$jobs" iserkit_suite_without_unit_tests
say "built build/ at $((SECONDS - started)) s"

# The other trees: configured now, compiled in the background one after the other.
# build-asan: clang++-14 (clang-14, libclang-rt-14-dev), ASan + UBSan, and its fuzz targets are
# libFuzzer binaries (ISERKIT_FUZZ): the unit and integration tests and the fuzz stage run there,
# one tree instead of a GCC ASan tree and a clang fuzz tree (FUZZ=0 builds it the same and skips
# the fuzz stage). A build-asan configured with GCC before (until 2026-11-29) is configured afresh.
if [[ -f $asan/CMakeCache.txt ]] && ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang++-14$' "$asan/CMakeCache.txt"; then
  rm -rf "$asan"
fi
CXX=clang++-14 cmake -S "$ISERKIT_SOURCE" -B "$asan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DISERKIT_WERROR=ON \
  -DISERKIT_SANITIZE=ON -DISERKIT_FUZZ=ON >/dev/null
# ThreadSanitizer: the tests whose code runs on several threads — buffer pools (common_unit), the
# FUSE view's loop-thread synchronisation (fuse_unit) and the FUSE view on a real mount
# (integration_fuse_tree: iserkit-fuse's worker threads over BlockingClient), BlockingClient in the
# iserkit CLI against iserkit-target, the initiator's concurrent I/O, and the NBD server's hand-off
# of connections between event loops (nbd_server_loops_unit; integration_chain_nbd_multiconn:
# iserkit-nbd --threads 2 under nbdcopy --connections=2). Only their binaries are built; the
# iserkit-target these tests talk to is only their peer, so they get build/'s (uninstrumented,
# ISERKIT_TARGET_BIN) and the TSan tree compiles no target code (95 compiles instead of 136).
# Suppressions, each with its reason: tests/tsan.supp.
tsan_targets=(common_unit fuse_unit iserkit-fuse iserkit initiator_concurrent_io nbd_server_loops_unit
              iserkit-nbd)
tsan_tests='^(common_unit|fuse_unit|integration_fuse_tree|initiator_cli_interop_iserkit-target|initiator_concurrent_io_iserkit-target|nbd_server_loops_unit|integration_chain_nbd_multiconn)$'
if ((run_tsan)); then
  cmake -S "$ISERKIT_SOURCE" -B "$tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DISERKIT_WERROR=ON -DISERKIT_TSAN=ON >/dev/null
fi

# The background builds: STAGE.log, then STAGE.ok (seconds it took) or STAGE.failed.
stages=$ISERKIT_BUILD/test-stages
rm -rf "$stages"; mkdir -p "$stages"
build_stage() {  # build_stage NAME NINJA-ARGS...
  local name=$1 start=$SECONDS; shift
  if nice -n 10 ninja -j"$jobs" "$@" >"$stages/$name.log" 2>&1; then
    echo $((SECONDS - start)) >"$stages/$name.ok"
  else
    touch "$stages/$name.failed"; return 1
  fi
}
(
  build_stage asan -C "$asan"
  if ((run_tsan)); then build_stage tsan -C "$tsan" "${tsan_targets[@]}"; fi
) &
builder=$!
# ninja, stopped by SIGTERM, stops the compilers it runs.
# (|| true: under set -e a failing kill in the trap would turn a passed run into exit status 1.)
stop_builder() { pkill -P "$builder" 2>/dev/null || true; kill "$builder" 2>/dev/null || true; }
trap stop_builder EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# wait_stage NAME: until the background build NAME is done; on failure its errors and exit 1.
wait_stage() {
  local name=$1 waited=$SECONDS
  until [[ -e $stages/$name.ok || -e $stages/$name.failed ]]; do
    if ! kill -0 "$builder" 2>/dev/null && [[ ! -e $stages/$name.ok && ! -e $stages/$name.failed ]]; then
      die "the background build stopped before $name (log: $stages)"
    fi
    sleep 2
  done
  if [[ -e $stages/$name.failed ]]; then
    echo "the $name build failed; its errors:" >&2
    grep -E 'error:|FAILED:|warning:' "$stages/$name.log" >&2 || tail -50 "$stages/$name.log" >&2
    exit 1
  fi
  say "$name tree built in $(cat "$stages/$name.ok") s in the background (waited $((SECONDS - waited)) s for it)"
}

# The unit tests and the integration tests of the ASan tree run there; every other test here.
# (Every regular-expression character of a name is escaped for ctest -E.)
asan_integration=$(cd "$asan" && ctest -N -L integration | sed -n 's/^ *Test *#[0-9]*: //p' |
  sed 's/[]\\.^$*+?(){}|[]/\\&/g' | paste -sd'|')
exclude_labels='^(lab|unit)$'
[[ ${LAB:-0} == 1 ]] && exclude_labels='^unit$'
say "running the tests that cannot run under ASan (conformance, interop, benchmarks, packaging, nbdkit)"
(cd "$ISERKIT_BUILD" && ctest -j"$jobs" --output-on-failure --timeout 900 -LE "$exclude_labels" \
  ${asan_integration:+-E "^($asan_integration)\$"})

wait_stage asan
say "running unit and integration tests under ASan + UBSan"
# Reports go to files (one per process) as well as failing the test: a test that shows only the
# tail of a daemon's log would cut the stack off. Every report is printed whole after the run.
reports=$asan/sanitizer-reports
rm -rf "$reports"; mkdir -p "$reports"
asan_status=0
(cd "$asan" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:log_path=$reports/asan \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$reports/ubsan \
  ctest -j"$jobs" --output-on-failure --timeout 900 -L 'unit|integration') || asan_status=$?
found_reports=0
for r in "$reports"/*; do
  [[ -e $r ]] || continue
  found_reports=1
  echo "=== sanitizer report $(basename "$r")"; cat "$r"
done
((asan_status == 0)) || exit "$asan_status"
# A report from a process whose exit status no test checks (a daemon stopped by a cleanup trap, a
# --fork child) fails the stage too: every report is a bug, not only the ones a test saw.
if ((found_reports)); then
  echo "sanitizer reports were written (above) although every test passed" >&2
  exit 1
fi

# libFuzzer: every fuzz target for ISERKIT_FUZZ_SECONDS (10 s) on its seed corpus (ctest label
# fuzz), in the ASan tree. Longer runs: scripts/fuzz.sh. (Before the TSan stage: the TSan tree
# keeps compiling in the background meanwhile.)
if ((run_fuzz)); then
  say "running every fuzz target for a few seconds"
  (cd "$asan" && ctest -j"$jobs" --output-on-failure --timeout 300 -L fuzz)
fi

if ((run_tsan)); then
  wait_stage tsan
  say "running the threaded tests under ThreadSanitizer (iserkit-target: build/'s)"
  target_bin=$ISERKIT_BUILD/bin/iserkit-target
  [[ -x $target_bin ]] || die "$target_bin is missing (the TSan tests' peer)"
  (cd "$tsan" && ISERKIT_TARGET_BIN=$target_bin \
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$ISERKIT_SOURCE/tests/tsan.supp" \
    ctest -j"$jobs" --output-on-failure --timeout 900 -R "$tsan_tests")
fi
say "the whole suite passed in $((SECONDS - started)) s"
