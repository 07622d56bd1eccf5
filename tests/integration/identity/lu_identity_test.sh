#!/usr/bin/env bash
# LU identity (issue 24 item 5; docs/lu-identity.md, target/README.md "LU identity"): what two
# initiators — libiscsi's iscsi-inq and our `iserkit inquiry` — read from VPD 0x80 (unit serial)
# and VPD 0x83 (NAA and T10 vendor ID designators of the logical unit):
#  - two iserkit-target processes with default settings on two different files: every one of the
#    three differs, and the NAA is NAA 6h (IEEE Registered Extended, 16 bytes);
#  - a target restarted on the same file, and after the file was renamed: the same identity;
#  - two targets started at the same moment on one new file (two gateways on shared storage):
#    the same identity (the UUID in user.iserkit.lu-uuid, created once);
#  - memory LUNs: another identity per process, unless ,uuid= is given (then the same);
#  - ,serial= and ,naa= win over what is derived, and the T10 designator follows the serial;
#  - a bad identity option is refused at start-up with a message naming the forms.
set -euo pipefail
skip() { echo "SKIP: $*" >&2; exit 77; }
BIN=${ISERKIT_BIN:?ISERKIT_BIN must name the bin directory of the build}
here=$(cd "$(dirname "$0")" && pwd)
[[ -x $BIN/iserkit-target && -x $BIN/iserkit ]] || skip "iserkit-target or iserkit is not built"
command -v iscsi-inq >/dev/null || skip "iscsi-inq is not installed (package libiscsi-bin)"
command -v python3 >/dev/null || skip "python3 is not installed"

tmp=$(mktemp -d /tmp/iserkit-lu-identity.XXXXXX)
declare -A pid port
cleanup() {
  set +e
  for p in "${pid[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$tmp"/*.log; do [[ -f $f ]] && { echo "--- $f" >&2; tail -n 20 "$f" >&2; }; done
  exit 1
}
iqn=iqn.2026-11.org.iserkit:target   # the default --iqn: both targets run with default settings

# start NAME ARGS...: iserkit-target ARGS on 127.0.0.1, a free port; sets pid[NAME], port[NAME].
start() {
  local name=$1; shift
  rm -f "$tmp/$name.port"
  "$BIN/iserkit-target" "$@" --listen 127.0.0.1:0 --port-file "$tmp/$name.port" --no-iser >"$tmp/$name.log" 2>&1 &
  pid[$name]=$!
}
# ready NAME: waits for NAME's port file.
ready() {
  local name=$1
  for _ in $(seq 100); do [[ -s $tmp/$name.port ]] && break; kill -0 "${pid[$name]}" 2>/dev/null || break; sleep 0.1; done
  [[ -s $tmp/$name.port ]] || fail "iserkit-target $name did not start"
  port[$name]=$(cat "$tmp/$name.port")
}
stop() {
  kill -TERM "${pid[$1]}"
  wait "${pid[$1]}" || fail "iserkit-target $1 exited with $? on SIGTERM"
  unset "pid[$1]"
}
# ids NAME: reads VPD 0x80/0x83 of NAME's LUN 0 with both initiators into $tmp/NAME.ids.
ids() {
  local name=$1 url="iscsi://127.0.0.1:${port[$1]}/$iqn/0"
  iscsi-inq -e 1 -c 128 "$url" >"$tmp/$name.80" || fail "iscsi-inq VPD 0x80 $url"
  iscsi-inq -e 1 -c 131 "$url" >"$tmp/$name.83" || fail "iscsi-inq VPD 0x83 $url"
  "$BIN/iserkit" inquiry "$url" >"$tmp/$name.inq" || fail "iserkit inquiry $url"
  python3 "$here/lu_ids.py" "$tmp/$name.80" "$tmp/$name.83" "$tmp/$name.inq" >"$tmp/$name.ids" ||
    fail "the two initiators disagree about $name's identity"
}
field() { sed -n "s/^$2=//p" "$tmp/$1.ids"; }
same() { cmp -s "$tmp/$1.ids" "$tmp/$2.ids" || fail "$3: $(paste -d' ' "$tmp/$1.ids" "$tmp/$2.ids")"; }
differ_all() {  # NAME1 NAME2 WHAT: serial, T10 and NAA all differ
  for f in serial t10 naa; do
    [[ $(field "$1" $f) != "$(field "$2" $f)" ]] || fail "$3: the same $f $(field "$1" $f)"
  done
}

echo "== two targets with default settings on two files"
truncate -s 8M "$tmp/a.img" "$tmp/b.img"
start a --lun "$tmp/a.img"; start b --lun "$tmp/b.img"; ready a; ready b
ids a; ids b
differ_all a b "two files, two targets"
[[ $(field a naa) =~ ^6[0-9a-f]{31}$ ]] || fail "NAA is not a 16-byte NAA 6h designator: $(field a naa)"
[[ $(field a t10) == "ISERKIT $(field a serial)" ]] || fail "T10 designator $(field a t10) is not vendor + serial"
uuid_a=$(python3 -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.iserkit.lu-uuid").decode())' "$tmp/a.img") ||
  skip "this file system keeps no user xattrs"
[[ $(field a serial) == "${uuid_a//-/}" ]] || fail "serial $(field a serial) is not the UUID $uuid_a of a.img"
echo "  a: $(tr '\n' ' ' <"$tmp/a.ids")"
echo "  b: $(tr '\n' ' ' <"$tmp/b.ids")"

echo "== restart on the same file, then after a rename: the same identity"
stop a
start a2 --lun "$tmp/a.img"; ready a2; ids a2
same a a2 "after a restart"
stop a2
mv "$tmp/a.img" "$tmp/renamed.img"
start a3 --lun "$tmp/renamed.img"; ready a3; ids a3
same a a3 "after a rename"
stop a3

echo "== two gateways started at once on one new file: one identity"
truncate -s 8M "$tmp/shared.img"
start g1 --lun "$tmp/shared.img"; start g2 --lun "$tmp/shared.img"; ready g1; ready g2
ids g1; ids g2
same g1 g2 "two gateways on one file"
differ_all g1 b "shared.img and b.img"
stop g1; stop g2

echo "== memory LUNs: one identity per process unless ,uuid= names it"
start m1 --lun mem:8M; start m2 --lun mem:8M; ready m1; ready m2
ids m1; ids m2
differ_all m1 m2 "two memory LUNs"
stop m1; stop m2
u=5f1c3a52-8d0e-4b7a-9c61-2e4f3b9d7a10
start m3 --lun mem:8M,uuid=$u; start m4 --lun "mem:8M,uuid=${u^^}"; ready m3; ready m4
ids m3; ids m4
same m3 m4 "two memory LUNs with one ,uuid="
[[ $(field m3 serial) == "${u//-/}" ]] || fail "serial $(field m3 serial) is not the given UUID"
stop m3; stop m4

echo "== ,serial= and ,naa= win; the T10 designator follows the serial"
start s --lun "$tmp/b.img,serial=LEGACY-0042,naa=naa.6001405abcdef0123456789abcdef012"; ready s; ids s
[[ $(field s serial) == LEGACY-0042 ]] || fail "serial $(field s serial), want LEGACY-0042"
[[ $(field s t10) == "ISERKIT LEGACY-0042" ]] || fail "T10 $(field s t10), want ISERKIT LEGACY-0042"
[[ $(field s naa) == 6001405abcdef0123456789abcdef012 ]] || fail "NAA $(field s naa)"
stop s

echo "== bad identity options: exit 2 with the accepted forms"
for bad in "$tmp/b.img,uuid=nope" "$tmp/b.img,naa=6000" "$tmp/b.img,serial=a,serial=b"; do
  rc=0; "$BIN/iserkit-target" --lun "$bad" --listen 127.0.0.1:0 --no-iser >"$tmp/bad.out" 2>&1 || rc=$?
  ((rc == 2)) || fail "--lun $bad: exit $rc, want 2"
  grep -q ',uuid=UUID' "$tmp/bad.out" || fail "--lun $bad: no clear message: $(cat "$tmp/bad.out")"
done
# A damaged xattr stops the target with the repair in the message, and keeps the value.
python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.iserkit.lu-uuid", b"garbage")' "$tmp/b.img"
rc=0; "$BIN/iserkit-target" --lun "$tmp/b.img" --listen 127.0.0.1:0 --no-iser >"$tmp/bad.out" 2>&1 || rc=$?
((rc != 0)) || fail "the target started with a damaged user.iserkit.lu-uuid"
grep -q 'holds no UUID' "$tmp/bad.out" || fail "no clear message for a damaged xattr: $(cat "$tmp/bad.out")"
echo PASS
