#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds with warnings as errors, runs every ctest
# (unit, interop, integration, conformance) and then the unit and integration tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer, and every libFuzzer target for a few seconds
# (build-fuzz, clang; docs/fuzzing.md). The QEMU lab (label "lab") is opt-in: LAB=1. FUZZ=0 skips
# the fuzz stage.
#
# Usage: scripts/test.sh            (CI runs exactly this: .ci/run)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

say "installing what is missing"
"$ISERKIT_SOURCE/packaging/install-deps.sh"

jobs=$(nproc)
say "building (warnings are errors)"
cmake -S "$ISERKIT_SOURCE" -B "$ISERKIT_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DISERKIT_WERROR=ON >/dev/null
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
(cd "$asan" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest -j"$jobs" --output-on-failure --timeout 900 -L 'unit|integration')

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
