#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds with warnings as errors, runs every ctest
# (unit, interop, integration, conformance) and then the unit and integration tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer, the threaded tests under ThreadSanitizer
# (build-tsan), and every libFuzzer target for a few seconds (build-fuzz, clang; docs/fuzzing.md).
# The QEMU lab (label "lab") is opt-in: LAB=1. TSAN=0 / FUZZ=0 skip those stages.
#
# Usage: scripts/test.sh            (CI runs exactly this: .ci/run)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

say "installing what is missing"
sets=(test)
if [[ ${LAB:-0} == 1 ]]; then sets+=(lab); fi
"$ISERKIT_SOURCE/packaging/install-deps.sh" "${sets[@]}"

jobs=$(nproc)
say "building (warnings are errors)"
cmake -S "$ISERKIT_SOURCE" -B "$ISERKIT_BUILD" "${ISERKIT_CMAKE_OPTIONS[@]}" >/dev/null
ninja -C "$ISERKIT_BUILD" -j"$jobs"

exclude=lab
[[ ${LAB:-0} == 1 ]] && exclude='^$'
say "running the test suite"
(cd "$ISERKIT_BUILD" && ctest -j"$jobs" --output-on-failure --timeout 900 -LE "$exclude")

asan=$ISERKIT_SOURCE/build-asan
say "building with ASan + UBSan"
cmake -S "$ISERKIT_SOURCE" -B "$asan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DISERKIT_WERROR=ON -DISERKIT_SANITIZE=ON >/dev/null
ninja -C "$asan" -j"$jobs"
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

# ThreadSanitizer: the tests whose code runs on several threads — buffer pools (common_unit), the
# FUSE view's loop-thread synchronisation (fuse_unit) and the FUSE view on a real mount
# (integration_fuse_tree: iserkit-fuse's worker threads over BlockingClient), BlockingClient in the
# iserkit CLI against iserkit-target, the initiator's concurrent I/O, and the NBD server's hand-off
# of connections between event loops (nbd_server_loops_unit; integration_chain_nbd_multiconn:
# iserkit-nbd --threads 2 under nbdcopy --connections=2). Only their binaries are built.
# Suppressions, each with its reason: tests/tsan.supp.
if [[ ${TSAN:-1} == 1 ]]; then
  tsan=$ISERKIT_SOURCE/build-tsan
  say "building the threaded tests with ThreadSanitizer"
  cmake -S "$ISERKIT_SOURCE" -B "$tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DISERKIT_WERROR=ON -DISERKIT_TSAN=ON >/dev/null
  ninja -C "$tsan" -j"$jobs" common_unit fuse_unit iserkit-fuse iserkit-target iserkit initiator_concurrent_io \
    nbd_server_loops_unit iserkit-nbd
  say "running the threaded tests under ThreadSanitizer"
  (cd "$tsan" && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$ISERKIT_SOURCE/tests/tsan.supp" \
    ctest -j"$jobs" --output-on-failure --timeout 900 \
      -R '^(common_unit|fuse_unit|integration_fuse_tree|initiator_cli_interop_iserkit-target|initiator_concurrent_io_iserkit-target|nbd_server_loops_unit|integration_chain_nbd_multiconn)$')
fi

# libFuzzer: every fuzz target for ISERKIT_FUZZ_SECONDS (10 s) on its seed corpus (ctest label
# fuzz). Longer runs: scripts/fuzz.sh. Needs clang++-14 (clang-14, libclang-rt-14-dev).
if [[ ${FUZZ:-1} == 1 ]]; then
  fuzz=$ISERKIT_SOURCE/build-fuzz
  say "building the fuzz targets (clang++-14, ASan + UBSan + libFuzzer)"
  CXX=clang++-14 cmake -S "$ISERKIT_SOURCE" -B "$fuzz" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DISERKIT_WERROR=ON \
    -DISERKIT_FUZZ=ON >/dev/null
  ninja -C "$fuzz" -j"$jobs"
  say "running every fuzz target for a few seconds"
  (cd "$fuzz" && ctest -j"$jobs" --output-on-failure --timeout 300 -L fuzz)
fi
