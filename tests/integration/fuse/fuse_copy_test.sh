#!/usr/bin/env bash
# copy_file_range through the FUSE view on a real mount (issue 25 item 4): coreutils cp between LUN
# files offloads to EXTENDED COPY on the target, measured on the target's own payload counters
# (status socket: totals.bytes read + write + other, every Data-In and Data-Out byte of every
# command that crossed the network).
#  - cp lun0 → lun1 of one target (64 MiB): the counters move by less than 1 MiB; cmp equal.
#  - cp into the LUN of another target of the same process (the view is logged in to both with one
#    initiator name from one address): offloaded too.
#  - cp into a LUN of another target process: the target declines (UNREACHABLE COPY TARGET), the
#    view answers EOPNOTSUPP and the kernel copies through read/write: correct data, and that
#    process's counters move by at least the size (so the measurement can tell the two apart).
#  - xfs_io copy_range with offsets inside a block (same place in the block on both sides: the
#    partial edge blocks by READ + WRITE, the rest offloaded; different places: EOPNOTSUPP and the
#    kernel's own copy), where xfs_io is installed; every result checked with cmp.
source "$(dirname "$0")/lib.sh"
command -v cp >/dev/null || skip "coreutils missing"

base=iqn.2026-11.org.iserkit.copy$$
mib=$((1 << 20))
size=$((64 * mib))
mkdir -p "$tmp/A/one" "$tmp/A/two" "$tmp/B/three"
for f in A/one/a.img A/one/b.img A/two/c.img B/three/d.img; do truncate -s $size "$tmp/$f"; done
head -c $size /dev/urandom >"$tmp/A/one/a.img"
start_target A --iqn $base --export-dir "$tmp/A" --status-socket "$tmp/A.sock"
start_target B --iqn $base --export-dir "$tmp/B" --status-socket "$tmp/B.sock"
mnt=$tmp/mnt
mount_view "$mnt" "iscsi://127.0.0.1:${target_port[A]}" "iscsi://127.0.0.1:${target_port[B]}"
a=$mnt/$base:one/lun0
b=$mnt/$base:one/lun1
c=$mnt/$base:two/lun0
d=$mnt/$base:three/lun0
for f in "$a" "$b" "$c" "$d"; do [[ $(stat -c %s "$f") == "$size" ]] || fail "$f: size $(stat -c %s "$f")"; done

# payload SOCKET: the target's payload bytes so far (every kind).
payload() {
  "$BIN/iserkit" status "$1" --json | python3 -c 'import json,sys; t=json.load(sys.stdin)["totals"]["bytes"]; print(sum(t.values()))'
}

before=$(payload "$tmp/A.sock")
cp "$a" "$b" || fail "cp lun0 → lun1"
after=$(payload "$tmp/A.sock")
moved=$((after - before))
echo "cp of $size bytes between two LUNs of one target: $moved payload bytes crossed the network"
((moved < mib)) || fail "cp lun0 → lun1 moved $moved payload bytes over the network (not offloaded)"
cmp "$tmp/A/one/a.img" "$tmp/A/one/b.img" || fail "b.img differs from a.img after cp"
cmp "$a" "$b" || fail "lun1 reads back different from lun0 through the view"

before=$(payload "$tmp/A.sock")
cp "$a" "$c" || fail "cp into the other target of the process"
moved=$(($(payload "$tmp/A.sock") - before))
echo "cp into another target of the same process: $moved payload bytes crossed the network"
((moved < mib)) || fail "cp into :two moved $moved payload bytes (not offloaded)"
cmp "$tmp/A/one/a.img" "$tmp/A/two/c.img" || fail "c.img differs after cp"

before=$(payload "$tmp/B.sock")
cp "$a" "$d" || fail "cp into another target process"
moved=$(($(payload "$tmp/B.sock") - before))
echo "cp into another target process (kernel read/write fallback): $moved payload bytes written there"
((moved >= size)) || fail "cp into another process moved only $moved bytes there: the measurement cannot tell"
cmp "$tmp/A/one/a.img" "$tmp/B/three/d.img" || fail "d.img differs after cp"

if command -v xfs_io >/dev/null; then
  # b.img and c.img equal a.img now, so a copy between different offsets shows in cmp.
  # Same place within the block on both sides (1000 = 5096 mod 512): edges by READ + WRITE.
  before=$(payload "$tmp/A.sock")
  xfs_io -c "copy_range -s 1000 -d 5096 -l 20000000 $a" "$b" || fail "xfs_io copy_range (aligned alike)"
  moved=$(($(payload "$tmp/A.sock") - before))
  echo "copy_range of 20000000 bytes at offsets 1000 → 5096: $moved payload bytes crossed the network"
  ((moved < mib)) || fail "copy_range with partial edge blocks moved $moved payload bytes"
  cmp -s <(tail -c +1001 "$tmp/A/one/a.img" | head -c 20000000) <(tail -c +5097 "$tmp/A/one/b.img" | head -c 20000000) ||
    fail "copy_range 1000 → 5096 differs"
  # Different places within the block: EOPNOTSUPP, the kernel copies through read/write.
  xfs_io -c "copy_range -s 7 -d 1000 -l 3000000 $a" "$c" || fail "xfs_io copy_range (misaligned)"
  cmp -s <(tail -c +8 "$tmp/A/one/a.img" | head -c 3000000) <(tail -c +1001 "$tmp/A/two/c.img" | head -c 3000000) ||
    fail "copy_range 7 → 1000 differs"
else
  echo "xfs_io not installed: unaligned copy_range not exercised"
fi
unmount_view "$mnt" "$fuse_pid"
echo "PASS: copy_file_range between LUN files offloaded to EXTENDED COPY (network payload under 1 MiB per copy)"
