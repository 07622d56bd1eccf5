#!/usr/bin/env bash
# The QEMU lab in one command: installs what is missing (the build's packages and the lab's own:
# QEMU, busybox-static, rdma-core, tgt, open-iscsi, ...), builds the three programs, boots Debian's
# kernel (TCG, or KVM when usable) and runs every lab scenario in it (tests/lab/README.md), then
# prints the results. The opt-in benchmark: scripts/lab.sh --only bench-iser (docs/benchmarks-iser.md).
# The kernel: Debian 12's 6.1 by default; trixie-backports' 7.x with --kernel 7 (or
# ISERKIT_LAB_KERNEL=7), fetched through a private apt state in the lab's cache.
#
# Usage: scripts/lab.sh [tests/lab/lab.sh options: --kernel 6.1|7  --only A,B  --list  --out DIR  --accel A  -v]
# Exit status: 0 nothing failed, 1 a check failed, 2 the VM broke, 77 the lab cannot run here.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
# Help and listing first: they install, build and boot nothing.
for a in "$@"; do
  case $a in
    -h | --help) usage; exec "$ISERKIT_SOURCE/tests/lab/lab.sh" --help ;;
  esac
done
((EUID == 0)) || die "the lab needs root (QEMU exports the host root file system to the VM): sudo $0"

say "installing what is missing"
"$ISERKIT_SOURCE/packaging/install-deps.sh" test lab
say "building iserkit-target, iserkit-nbd and iserkit"
if [[ ! -f $ISERKIT_BUILD/build.ninja ]]; then
  cmake -S "$ISERKIT_SOURCE" -B "$ISERKIT_BUILD" "${ISERKIT_CMAKE_OPTIONS[@]}" >/dev/null
fi
# and the lab's own tools when the build has them (iserkit-mw-probe: a build with iSER)
tools=()
ninja -C "$ISERKIT_BUILD" -t targets all 2>/dev/null | grep -q '^iserkit-mw-probe:' && tools+=(iserkit-mw-probe)
ninja -C "$ISERKIT_BUILD" -j"$(nproc)" iserkit-target iserkit-nbd iserkit "${tools[@]}" >/dev/null
say "running the lab (QEMU; under TCG: minutes, not seconds)"
exec "$ISERKIT_SOURCE/tests/lab/lab.sh" --install --bin "$ISERKIT_BUILD/bin" "$@"
