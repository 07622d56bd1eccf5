#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds with warnings as errors, runs every ctest
# (unit, interop, integration, conformance) and then the unit and integration tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer. The QEMU lab (label "lab") is opt-in: LAB=1.
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
