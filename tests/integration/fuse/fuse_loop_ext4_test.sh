#!/usr/bin/env bash
# A real block device without nbd: a loop device over a LUN file of the FUSE view (direct I/O),
# mkfs.ext4, mount, copy a real tree, unmount, e2fsck -fn clean, remount, every checksum equal.
# Needs root (losetup, mount) and a free loop device; skips otherwise.
source "$(dirname "$0")/lib.sh"
((EUID == 0)) || skip "needs root for losetup and mount"
for tool in losetup mkfs.ext4 e2fsck sha256sum; do command -v $tool >/dev/null || skip "$tool is not installed"; done
[[ -e /dev/loop-control ]] || skip "no loop device support (/dev/loop-control)"
tree=/usr/include/linux
[[ -d $tree ]] || tree=/usr/share/doc
loopdev=""
trap 'set +e; mountpoint -q "$tmp/fs" && umount "$tmp/fs"; [[ -n $loopdev ]] && losetup -d "$loopdev"; cleanup' EXIT

base=iqn.2026-11.org.iserkit:ext4
truncate -s 256M "$tmp/lun.img"
start_target ext4 --iqn $base --lun "$tmp/lun.img"
mount_view "$tmp/mnt" "iscsi://127.0.0.1:${target_port[ext4]}/$base"
lun=$tmp/mnt/$base/lun0
loopdev=$(losetup --find --show --direct-io=on "$lun" 2>/dev/null || losetup --find --show "$lun") ||
  skip "no free loop device"
echo "loop device $loopdev over $lun ($(blockdev --getsize64 "$loopdev") bytes)"
mkfs.ext4 -q -F "$loopdev" || fail "mkfs.ext4"
mkdir -p "$tmp/fs"
mount "$loopdev" "$tmp/fs" || fail "mount"
(cd "$tree" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$tmp/source.sha256"
cp -a "$tree/." "$tmp/fs/" || fail "copy $tree"
umount "$tmp/fs"
e2fsck -fn "$loopdev" >"$tmp/e2fsck.log" 2>&1 || { cat "$tmp/e2fsck.log"; fail "e2fsck found problems"; }
tail -1 "$tmp/e2fsck.log"
mount "$loopdev" "$tmp/fs" || fail "remount"
(cd "$tmp/fs" && sha256sum --quiet -c "$tmp/source.sha256") || fail "checksums differ after remount"
echo "  $(wc -l <"$tmp/source.sha256") files of $tree verified"
umount "$tmp/fs"
losetup -d "$loopdev"; loopdev=""
# The filesystem really lives on the target: e2fsck the backing file itself.
e2fsck -fn "$tmp/lun.img" >/dev/null 2>&1 || fail "e2fsck of the target's backing file"
echo "PASS"
