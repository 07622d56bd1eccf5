#!/usr/bin/env bash
# The install rules, proven from outside: `cmake --install` of the build into a DESTDIR, then
#  - the four programs are where GNUInstallDirs puts them and run (--version) from there;
#  - the headers, the static libraries, the CMake package config and iserkit.pc are installed;
#  - a consumer project (tests/packaging/install/consumer) is configured with find_package(iserkit) against
#    that prefix only and built, and the same source is built again with `pkg-config --cflags
#    --libs iserkit`; no path into the source or build tree may leak into the installed files;
#  - both consumers write and read back 1 MiB through the installed iserkit-target (file LUN).
# Usage: install_consumer_test.sh BUILD_DIR
set -euo pipefail
skip() { echo "SKIP: $*" >&2; exit 77; }
build=${1:?usage: install_consumer_test.sh BUILD_DIR}
source_dir=${ISERKIT_SOURCE:?}
for tool in cmake pkg-config c++; do command -v $tool >/dev/null || skip "$tool is not installed"; done

tmp=$(mktemp -d /tmp/iserkit-install.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [[ -f $tmp/target.log ]] && { echo "--- target log"; cat "$tmp/target.log"; }; exit 1; } >&2

prefix=/opt/iserkit-test   # not a default search path: only the DESTDIR copy can be found
DESTDIR=$tmp/root cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install failed"; }
root=$tmp/root$prefix
libdir=$(cmake -L -N "$build" 2>/dev/null | sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p')
libdir=${libdir:-lib}

for f in bin/iserkit bin/iserkit-nbd bin/iserkit-fuse sbin/iserkit-target \
         include/iserkit/initiator/client.hpp include/iserkit/common/result.hpp include/iserkit/scsi/sense.hpp \
         "$libdir/libiserkit_initiator.a" "$libdir/libiserkit_common.a" \
         "$libdir/cmake/iserkit/iserkitConfig.cmake" "$libdir/cmake/iserkit/iserkitConfigVersion.cmake" \
         "$libdir/pkgconfig/iserkit.pc"; do
  [[ -e $root/$f ]] || fail "not installed: $prefix/$f"
done
for p in bin/iserkit bin/iserkit-nbd bin/iserkit-fuse sbin/iserkit-target; do
  "$root/$p" --version >"$tmp/version" 2>&1 || fail "$p --version failed: $(cat "$tmp/version")"
  grep -q '[0-9]\+\.[0-9]\+\.[0-9]\+' "$tmp/version" || fail "$p --version printed no version: $(cat "$tmp/version")"
done
if leaks=$(grep -rlF -e "$source_dir" -e "$build" "$root/include" "$root/$libdir/cmake" "$root/$libdir/pkgconfig"); then
  fail "installed files name the source or build tree: $leaks"
fi

# The installed target serves a file LUN to both consumers.
truncate -s 16M "$tmp/lun.img"
iqn=iqn.2026-11.org.iserkit:install
"$root/sbin/iserkit-target" --iqn $iqn --lun "$tmp/lun.img" --listen 127.0.0.1:0 --port-file "$tmp/port" \
  >"$tmp/target.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [[ -s $tmp/port ]] && break; sleep 0.1; done
[[ -s $tmp/port ]] || fail "installed iserkit-target did not start"
url="iscsi://127.0.0.1:$(cat "$tmp/port")/$iqn/0"

echo "--- find_package(iserkit)"
cmake -S "$source_dir/tests/packaging/install/consumer" -B "$tmp/consumer-cmake" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$root" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
  >"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; fail "the consumer's find_package(iserkit) failed"; }
grep -q "iserkit_DIR:PATH=$root/" "$tmp/consumer-cmake/CMakeCache.txt" || fail "find_package found another iserkit: $(grep iserkit_DIR "$tmp/consumer-cmake/CMakeCache.txt")"
cmake --build "$tmp/consumer-cmake" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "the CMake consumer did not build"; }
"$tmp/consumer-cmake/consumer" "$url" || fail "the CMake consumer's round trip failed"

echo "--- pkg-config iserkit"
export PKG_CONFIG_PATH=$root/$libdir/pkgconfig
flags=$(pkg-config --define-variable=prefix="$root" --cflags --libs iserkit) || fail "pkg-config iserkit failed"
echo "flags: $flags"
# shellcheck disable=SC2086 # the flags are words
c++ -std=c++20 -O1 -o "$tmp/consumer-pc" "$source_dir/tests/packaging/install/consumer/consumer.cpp" $flags \
  >"$tmp/pc.log" 2>&1 || { cat "$tmp/pc.log"; fail "the pkg-config consumer did not build"; }
"$tmp/consumer-pc" "$url" || fail "the pkg-config consumer's round trip failed"
echo "PASS: installed programs run; find_package(iserkit) and pkg-config consumers round-trip 1 MiB"
