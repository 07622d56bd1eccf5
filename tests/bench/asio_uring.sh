#!/usr/bin/env bash
# Asio's own io_uring backend against today's epoll build (issue 23 item 3; docs/performance-fast-path.md
# "Asio's own io_uring backend"). Opt-in, never part of scripts/test.sh: Debian 12's default Boost is
# 1.74 (no io_uring backend) and libboost1.81-dev conflicts with libboost1.74-dev, so this unpacks
# Debian's libboost1.81-dev into a private folder (apt-get download + dpkg -x; nothing installed)
# and builds iserkit-target and iserkit-nbd three times: Boost 1.74 (the project's build/, as
# scripts/bench.sh --guard uses it), Boost 1.81 with epoll, Boost 1.81 with ISERKIT_ASIO_IO_URING.
# Then, alternating the three builds ROUNDS times (default 3): the speed guard (tests/bench/guard.py,
# pinned, ratios to qemu-nbd + tgtd and to nbdkit) and once each the system calls per request
# (tests/bench/syscalls/syscall_count.py under strace -c). Prints; never fails on the figures.
#
# Usage: tests/bench/asio_uring.sh [ROUNDS]     (ISERKIT_BOOST181_DIR: where to unpack, default
#        /var/tmp/iserkit-boost181; build dirs: $ISERKIT_BUILD-boost181-{epoll,uring})
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"

rounds=${1:-3}
boost=${ISERKIT_BOOST181_DIR:-/var/tmp/iserkit-boost181}
if [[ ! -f $boost/root/usr/include/boost/version.hpp ]]; then
  say "unpacking Debian's libboost1.81-dev into $boost (not installed)"
  mkdir -p "$boost" && chmod 0777 "$boost"   # apt-get download runs as _apt where it can
  (cd "$boost" && apt-get download libboost1.81-dev >/dev/null)
  dpkg -x "$boost"/libboost1.81-dev_*.deb "$boost/root"
fi
boost_dir=$(echo "$boost"/root/usr/lib/*/cmake/Boost-1.81.0)
[[ -f $boost_dir/BoostConfig.cmake ]] || die "no BoostConfig.cmake under $boost/root"

say "building the Boost 1.74 build ($ISERKIT_BUILD) and the two Boost 1.81 builds"
[[ -f $ISERKIT_BUILD/build.ninja ]] || cmake -S "$ISERKIT_SOURCE" -B "$ISERKIT_BUILD" "${ISERKIT_CMAKE_OPTIONS[@]}" >/dev/null
ninja -C "$ISERKIT_BUILD" -j"$(nproc)" iserkit-target iserkit-nbd >/dev/null
declare -A bin=([boost1.74-epoll]=$ISERKIT_BUILD/bin)
for reactor in epoll uring; do
  dir=$ISERKIT_BUILD-boost181-$reactor
  uring=OFF; [[ $reactor == uring ]] && uring=ON
  cmake -S "$ISERKIT_SOURCE" -B "$dir" "${ISERKIT_CMAKE_OPTIONS[@]}" -DBoost_DIR="$boost_dir" \
        -DISERKIT_ASIO_IO_URING=$uring >/dev/null
  ninja_progress -C "$dir" iserkit-target iserkit-nbd
  bin[boost1.81-$reactor]=$dir/bin
done

variants=(boost1.74-epoll boost1.81-epoll boost1.81-uring)
for ((r = 1; r <= rounds; r++)); do
  for v in "${variants[@]}"; do
    say "round $r of $rounds: $v (load average $(cut -d' ' -f1-3 /proc/loadavg))"
    python3 "$ISERKIT_SOURCE/tests/bench/guard.py" --bin "${bin[$v]}" | sed -n '/^workload/,/^1 MiB/p'
  done
done
for v in "${variants[@]}"; do
  say "system calls per request: $v"
  python3 "$ISERKIT_SOURCE/tests/bench/syscalls/syscall_count.py" --bin "${bin[$v]}" --runtime 3 || true
done
