#!/usr/bin/env bash
# packaging/install-deps.sh's sets, checked with --print (installs nothing): the demo set holds
# what the programs build with and what demo.sh runs, and none of the peers, Ceph, clang or QEMU;
# the test set (what scripts/test.sh installs) holds every Build-Depends of the Debian package and
# no lab package; an unknown set is refused; the scripts ask for their sets.
set -euo pipefail
source_dir=${ISERKIT_SOURCE:?}
deps=$source_dir/packaging/install-deps.sh
fail() { echo "FAIL: $*" >&2; exit 1; }
set_of() { bash "$deps" "$@" --print | sort -u; }

demo=$(set_of demo)
test=$(set_of test)
all=$(set_of)
for heavy in ceph-osd ceph-mon librbd-dev clang-14 qemu-system-x86 qemu-utils tgt nbdkit lintian; do
  grep -qx "$heavy" <<<"$demo" && fail "the demo set installs $heavy"
done
for needed in cmake ninja-build libfuse3-dev fuse3 e2fsprogs util-linux libgtest-dev; do
  grep -qx "$needed" <<<"$demo" || fail "the demo set lacks $needed"
done
# Every Build-Depends of packaging/debian/control (names only, debhelper-compat is debhelper's).
build_depends=$(sed -n '/^Build-Depends:/,/^[A-Z][A-Za-z-]*:/p' "$source_dir/packaging/debian/control" |
  sed -e 's/^Build-Depends://' -e '/^[A-Z][A-Za-z-]*:/d' | tr ',' '\n' |
  sed -e 's/(.*)//' -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' -e 's/^debhelper-compat$/debhelper/' | sed '/^$/d')
[[ -n $build_depends ]] || fail "no Build-Depends found in packaging/debian/control"
while read -r p; do
  grep -qx "$p" <<<"$test" || fail "the test set lacks $p (a Build-Depends of the Debian package)"
done <<<"$build_depends"
for p in qemu-system-x86 busybox-static; do
  grep -qx "$p" <<<"$test" && fail "the test set installs the lab's $p (LAB=1 adds the lab set)"
  grep -qx "$p" <<<"$all" || fail "the default set (all) lacks $p"
done
# the lab's Linux dm-multipath client (scenario alua-multipathd) comes with the lab set
lab=$(set_of lab)
for p in multipath-tools sg3-utils; do
  grep -qx "$p" <<<"$lab" || fail "the lab set lacks $p (lab scenario alua-multipathd)"
done
[[ $(comm -23 <(echo "$demo") <(echo "$test")) == "" ]] || fail "the demo set is not part of the test set"
if bash "$deps" no-such-set --print >/dev/null 2>&1; then fail "an unknown set was accepted"; fi
grep -q 'install-deps.sh" demo$' "$source_dir/scripts/demo.sh" || fail "scripts/demo.sh does not install the demo set"
grep -q 'sets=(test)' "$source_dir/scripts/test.sh" || fail "scripts/test.sh does not install the test set"
echo "PASS: demo $(wc -l <<<"$demo") packages, test $(wc -l <<<"$test"), all $(wc -l <<<"$all")"
