#!/usr/bin/env bash
# The .deb packages end to end, as a user gets them:
#  - packaging/build-debs.sh builds iserkit-target, iserkit and libiserkit-dev with
#    dpkg-buildpackage -b -us -uc, and lintian finds no error in them;
#  - apt installs the three .debs; the programs are in /usr/bin and /usr/sbin with their man pages,
#    and --version prints the package's version, --help works;
#  - the installed iserkit-target serves a file LUN and the installed iserkit writes 4 MiB of random
#    data and reads it back: same SHA-256, also in the target's backing file;
#  - pkg-config finds the installed library at the package's version;
#  - the packages are purged and their files are gone.
# Packages of ours left installed (or with their configuration files) by an earlier run that was
# interrupted are purged first, so every run tests the packages it built; whatever happens, the
# packages are purged again on exit.
# Usage: debs_test.sh WORK_DIR   (needs root)
set -euo pipefail
skip() { echo "SKIP: $*" >&2; exit 77; }
work=${1:?usage: debs_test.sh WORK_DIR}
source_dir=${ISERKIT_SOURCE:?}
((EUID == 0)) || skip "installing packages needs root"
for tool in dpkg-buildpackage dh fakeroot lintian apt-get sha256sum pkg-config; do
  command -v $tool >/dev/null || skip "$tool is not installed (packaging/install-deps.sh)"
done
packages=(iserkit-target iserkit libiserkit-dev)
version=$(dpkg-parsechangelog -l "$source_dir/packaging/debian/changelog" -S Version)

# present: those of our packages dpkg knows in any state but "not installed" (installed, half
# installed, removed with configuration files left).
present() {
  local p status
  for p in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) || continue
    [[ $status == *not-installed ]] || echo "$p"
  done
}
# purge_ours: purges whatever present() lists; returns non-zero when some is still there.
purge_ours() {
  local left
  left=$(present)
  [[ -z $left ]] && return 0
  # shellcheck disable=SC2086 # one package name a word
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq $left >>"$tmp/purge.log" 2>&1 || true
  [[ -z $(present) ]]
}

tmp=$(mktemp -d /tmp/iserkit-debs-test.XXXXXX)
target_pid=""
cleanup() {
  [[ -n $target_pid ]] && kill "$target_pid" 2>/dev/null
  wait 2>/dev/null
  purge_ours || echo "WARNING: could not purge $(present | tr '\n' ' ')(see apt-get purge)" >&2
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [[ -f $tmp/target.log ]] && { echo "--- target log"; cat "$tmp/target.log"; } >&2; exit 1; }

if [[ -n $(present) ]]; then
  echo "--- purging packages an earlier run left: $(present | tr '\n' ' ')"
  purge_ours || { cat "$tmp/purge.log"; fail "could not purge $(present | tr '\n' ' ')before the test"; }
fi

echo "--- build-debs.sh (work dir $work)"
"$source_dir/packaging/build-debs.sh" "$tmp/debs" --work-dir "$work" --lintian --dev-flags || fail "building the packages failed"
for p in "${packages[@]}"; do
  [[ -f $tmp/debs/${p}_${version}_$(dpkg --print-architecture).deb ]] || fail "no ${p}_${version} package: $(ls "$tmp/debs")"
done

echo "--- apt install"
(cd "$tmp/debs" && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  ./iserkit-target_*.deb ./iserkit_*.deb ./libiserkit-dev_*.deb) >"$tmp/apt.log" 2>&1 || { cat "$tmp/apt.log"; fail "apt install failed"; }

for program in /usr/bin/iserkit /usr/bin/iserkit-nbd /usr/bin/iserkit-fuse /usr/sbin/iserkit-target; do
  [[ -x $program ]] || fail "$program is not installed"
  out=$("$program" --version 2>&1) || fail "$program --version failed: $out"
  [[ $out == *"$version"* ]] || fail "$program --version says '$out', the package is $version"
  "$program" --help >/dev/null 2>&1 || fail "$program --help failed"
done
for page in iserkit.1 iserkit-nbd.1 iserkit-fuse.1 iserkit-target.8 iserkit-target.toml.5; do
  section=${page##*.}
  [[ -f /usr/share/man/man$section/$page.gz ]] || fail "man page $page is not installed"
done
[[ $(pkg-config --modversion iserkit 2>&1) == "$version" ]] || fail "pkg-config iserkit: $(pkg-config --modversion iserkit 2>&1)"

echo "--- round trip: installed iserkit-target + installed iserkit"
truncate -s 64M "$tmp/lun.img"
iqn=iqn.2026-11.org.iserkit:debs
/usr/sbin/iserkit-target --iqn $iqn --lun "$tmp/lun.img" --listen 127.0.0.1:0 --port-file "$tmp/port" \
  >"$tmp/target.log" 2>&1 &
target_pid=$!
for _ in $(seq 100); do [[ -s $tmp/port ]] && break; sleep 0.1; done
[[ -s $tmp/port ]] || fail "the installed iserkit-target did not start"
url="iscsi://127.0.0.1:$(cat "$tmp/port")/$iqn/0"
head -c $((4 << 20)) /dev/urandom >"$tmp/data"
/usr/bin/iserkit write "$url" --offset 1048576 -i "$tmp/data" || fail "iserkit write failed"
/usr/bin/iserkit read "$url" --offset 1048576 --length $((4 << 20)) -o "$tmp/back" || fail "iserkit read failed"
want=$(sha256sum <"$tmp/data" | cut -d' ' -f1)
[[ $(sha256sum <"$tmp/back" | cut -d' ' -f1) == "$want" ]] || fail "read back data differs from what was written"
[[ $(tail -c +1048577 "$tmp/lun.img" | head -c $((4 << 20)) | sha256sum | cut -d' ' -f1) == "$want" ]] ||
  fail "the target's backing file does not hold the written data"
kill "$target_pid"; wait "$target_pid" 2>/dev/null || true; target_pid=""

echo "--- purge"
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${packages[@]}" >"$tmp/purge.log" 2>&1 || { cat "$tmp/purge.log"; fail "apt purge failed"; }
[[ -z $(present) ]] || fail "still known to dpkg after purge: $(present | tr '\n' ' ')"
for f in /usr/bin/iserkit /usr/sbin/iserkit-target /usr/include/iserkit; do
  [[ ! -e $f ]] || fail "$f is still there after purge"
done
echo "PASS: packages $version built, lintian-clean, installed, 4 MiB round trip with the installed programs, purged"
