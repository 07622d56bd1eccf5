#!/usr/bin/env bash
# Builds the Debian packages (iserkit-target, iserkit, libiserkit-dev) from this tree with
# `dpkg-buildpackage -b -us -uc` and puts the .debs in OUT_DIR. The tree is copied (without build
# directories and .git) to WORK_DIR/iserkit-VERSION and packaging/debian/ becomes its debian/, so
# the checkout itself is never touched. Tests are off in the package build (scripts/test.sh runs them).
#
# Usage: packaging/build-debs.sh OUT_DIR [--work-dir DIR] [--lintian] [--dev-flags] [--jobs N]
#   --work-dir DIR  where the copy is built (default: a fresh temporary directory, removed after).
#                   A fixed one lets ccache reuse objects from an earlier package build.
#   --lintian       run lintian on the result and fail on any error (warnings are printed).
#   --dev-flags     compile with the project's own flags (RelWithDebInfo, -Werror) instead of
#                   Debian's (dpkg-buildflags: hardening, -ffile-prefix-map): the objects are then
#                   ccache hits from an ordinary build of the same sources, so the package build
#                   takes a minute instead of a full compile. For tests; not for packages you ship.
# Needs: dpkg-dev, debhelper, fakeroot and the Build-Depends of packaging/debian/control
# (packaging/install-deps.sh installs them all).
set -euo pipefail
source_dir=$(cd "$(dirname "$0")/.." && pwd)
source "$source_dir/scripts/lib.sh"  # usage(); its die() is replaced below
die() { echo "build-debs: $*" >&2; exit 1; }

out=""; work=""; lint=0; dev_flags=0; jobs=$(nproc)
while (($#)); do
  case $1 in
    --work-dir) work=$2; shift 2 ;;
    --lintian) lint=1; shift ;;
    --dev-flags) dev_flags=1; shift ;;
    --jobs) jobs=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown option $1" ;;
    *) [[ -z $out ]] || die "one OUT_DIR only"; out=$1; shift ;;
  esac
done
[[ -n $out ]] || die "usage: packaging/build-debs.sh OUT_DIR [--work-dir DIR] [--lintian] [--dev-flags] [--jobs N]"
for tool in dpkg-buildpackage dh fakeroot; do
  command -v $tool >/dev/null || die "$tool is missing (packaging/install-deps.sh installs it)"
done

# The package version (debian/changelog) must be the CMake project version.
version=$(dpkg-parsechangelog -l "$source_dir/packaging/debian/changelog" -S Version)
cmake_version=$(sed -n 's/^project(iserkit VERSION \([0-9.]*\).*/\1/p' "$source_dir/CMakeLists.txt")
[[ $version == "$cmake_version" ]] ||
  die "packaging/debian/changelog says $version but CMakeLists.txt says $cmake_version: add a changelog entry (dch -v $cmake_version)"

mkdir -p "$out"
out=$(cd "$out" && pwd)
if [[ -z $work ]]; then
  work=$(mktemp -d /tmp/iserkit-debs.XXXXXX)
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"
work=$(cd "$work" && pwd)
tree=$work/iserkit-$version
rm -rf "$tree" "$work"/*.deb "$work"/*.ddeb "$work"/*.changes "$work"/*.buildinfo
mkdir -p "$tree"
tar -C "$source_dir" --exclude=./.git --exclude='./build*' --exclude='./obj-*' --exclude=./debian -cf - . |
  tar -C "$tree" -xf -
cp -r "$source_dir/packaging/debian" "$tree/debian"

# dh points HOME at a private directory: keep ccache's cache where it is (it is then shared with
# ordinary builds of the same tree).
if command -v ccache >/dev/null && [[ -z ${CCACHE_DIR:-} ]]; then
  CCACHE_DIR=$(ccache -k cache_dir 2>/dev/null || true)
  [[ -n $CCACHE_DIR ]] && export CCACHE_DIR
fi
export CCACHE_BASEDIR=$work CCACHE_NOHASHDIR=true
if ((dev_flags)); then
  # dpkg-buildflags returns exactly these (empty) flags; CMake's RelWithDebInfo flags remain.
  export DEB_CFLAGS_SET="" DEB_CXXFLAGS_SET="" DEB_CPPFLAGS_SET="" DEB_LDFLAGS_SET=""
  export ISERKIT_DEB_CMAKE_ARGS="-DCMAKE_BUILD_TYPE=RelWithDebInfo -DISERKIT_WERROR=ON"
  # debhelper sets LC_ALL=C.UTF-8, which ccache hashes: the compiler runs without it (LANG stays)
  # so the hashes are those of an ordinary build.
  if command -v ccache >/dev/null; then
    printf '#!/bin/sh\nunset LC_ALL\nexec ccache "$@"\n' >"$work/ccache-launcher"
    chmod +x "$work/ccache-launcher"
    ISERKIT_DEB_CMAKE_ARGS+=" -DCMAKE_CXX_COMPILER_LAUNCHER=$work/ccache-launcher"
  fi
fi
export DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:+$DEB_BUILD_OPTIONS }nocheck noautodbgsym parallel=$jobs"
(cd "$tree" && dpkg-buildpackage -b -us -uc) >"$work/build.log" 2>&1 || {
  tail -60 "$work/build.log" >&2; die "dpkg-buildpackage failed (log above; whole log: $work/build.log)"
}
shopt -s nullglob
debs=("$work"/*.deb)
((${#debs[@]} > 0)) || die "dpkg-buildpackage made no .deb"
if ((lint)); then
  command -v lintian >/dev/null || die "lintian is missing (packaging/install-deps.sh installs it)"
  # lintian exits non-zero on errors only (--fail-on error); warnings are printed for the reader.
  lintian --fail-on error --tag-display-limit 0 "$work"/*.changes >&2 || die "lintian reported errors (above)"
fi
cp "${debs[@]}" "$out/"
printf 'build-debs: %s\n' "${debs[@]##*/}"
