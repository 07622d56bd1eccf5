#!/usr/bin/env bash
# The benchmark suite of issue 6: installs what is missing (tgt, qemu-nbd, fio, libiscsi-bin,
# nbdkit, iperf3, ...), builds iserkit-target and iserkit-nbd (RelWithDebInfo, into build/), then
# runs tests/bench/bench.py: every system on loopback, the same workloads against each, pinned and
# unpinned, and writes docs/benchmarks.md (regenerated each time; never edit it by hand). First in
# the same run, the /dev/shm section: issue 23's three chains (iserkit, qemu-nbd + tgtd, one-hop
# nbdkit file) pinned on a LUN file on /dev/shm, from which issue 23 item 6's goals are judged.
#
# Usage: scripts/bench.sh [--rbd] [--quick] [--output PATH] [--json PATH] [--keep]
#        scripts/bench.sh --guard [--accept] [guard.py options]
#        --guard: the speed guard (issue 23; tests/bench/guard.py): no install, no rebuild when nothing
#        changed (ninja on the existing build/), one pinned interleaved run of about 50 s: iserkit chain
#        / peer chain (qemu-nbd + tgtd) and / one-hop nbdkit (file on /dev/shm) at 4 KiB QD1 read, QD32
#        read and write and 1 MiB QD8 read, beside the kept figures (tests/bench/guard-figures.json),
#        "slower by N %" where a ratio fell by more than 15 %. Prints; never fails on the figures.
#        --accept writes this run's ratios as the kept figures (commit them with the change).
#        --rbd: the Ceph RBD profile (issue 12): iserkit-target's rbd: LUN vs tgtd's bs_rbd (tgt-rbd) on one
#        throwaway one-OSD cluster, two images of 1 GiB (--quick: 256 MiB), pinned and unpinned; writes
#        docs/benchmarks-rbd.md; exits 77 with the reason when Ceph, tgt-rbd or librbd-dev is missing.
#        --quick: under 3 minutes (256 MiB files, 3 reps x 1 s, 3 workloads; unpinned: the two chains only); default: the full run
#        (1 GiB files, 3 reps x 4 s, 6 workloads; unpinned: the two chains, iscsi-perf and iperf3), under 20 minutes.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

if [[ ${1:-} == --guard ]]; then
  shift
  if [[ -f $ISERKIT_BUILD/build.ninja ]]; then
    # ninja does nothing when nothing changed; it rebuilds the two programs when their sources did.
    out=$(ninja -C "$ISERKIT_BUILD" -j"$(nproc)" iserkit-target iserkit-nbd 2>&1) || { echo "$out"; die "build failed"; }
    grep -q '^ninja: no work to do' <<<"$out" || say "rebuilt iserkit-target and iserkit-nbd"
  else
    say "no build in $ISERKIT_BUILD yet: configuring and building iserkit-target and iserkit-nbd (RelWithDebInfo)"
    cmake -S "$ISERKIT_SOURCE" -B "$ISERKIT_BUILD" "${ISERKIT_CMAKE_OPTIONS[@]}" >/dev/null
    ninja -C "$ISERKIT_BUILD" -j"$(nproc)" iserkit-target iserkit-nbd
  fi
  exec /usr/bin/python3 "$ISERKIT_SOURCE/tests/bench/guard.py" --bin "$ISERKIT_BUILD/bin" "$@"
fi

say "installing what is missing"
sets=(bench)
for a in "$@"; do if [[ $a == --rbd ]]; then sets+=(rbd); fi; done
"$ISERKIT_SOURCE/packaging/install-deps.sh" "${sets[@]}"

say "building iserkit-target and iserkit-nbd (RelWithDebInfo)"
cmake -S "$ISERKIT_SOURCE" -B "$ISERKIT_BUILD" "${ISERKIT_CMAKE_OPTIONS[@]}" >/dev/null
ninja -C "$ISERKIT_BUILD" -j"$(nproc)" iserkit-target iserkit-nbd

say "benchmarking"
# /usr/bin/python3: the pyenv python that may come first on PATH lacks Debian's modules.
exec /usr/bin/python3 "$ISERKIT_SOURCE/tests/bench/bench.py" --bin "$ISERKIT_BUILD/bin" "$@"
