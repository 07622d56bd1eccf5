#!/bin/bash
# iSCSI/TCP chain: iserkit-target <- iserkit-nbd <- kernel nbd client; mkfs.ext4, mount, copy, e2fsck
# Everything on 127.0.0.1 inside the VM. The file system holds a copy of /usr/include/linux and a
# 64 MiB random file; after unmount, e2fsck -fn must be clean and a remount must give back every
# file with the same SHA-256. iserkit-nbd and iserkit-target must exit 0 on SIGTERM, and if they
# log "copied payload bytes: N" at exit, N must be 0.
source "$LAB_SOURCE/tests/lab/guest/lib.sh"
plan target bridge nbd-attach mkfs mount-copy e2fsck remount-verify nbd-detach bridge-exit \
  bridge-zero-copy target-exit target-zero-copy

iqn=iqn.2026-11.org.iserkit.lab:tcp-chain
tree=/usr/include/linux
truncate -s 512M "$work/lun.img"
daemon target iserkit-target --iqn "$iqn" --lun "$work/lun.img" --listen 127.0.0.1:0 --port-file "$work/port"
target_log=$logdir/$scenario.target.log
check target serving iserkit-target "$work/port" 120 || give_up "iserkit-target did not start"
port=$(cat "$work/port")

url=iscsi://127.0.0.1:$port/$iqn/0
daemon bridge iserkit-nbd "$url" --socket "$work/nbd.sock" --log-level info
bridge_log=$logdir/$scenario.bridge.log
check bridge serving iserkit-nbd "$work/nbd.sock" 120 || give_up "iserkit-nbd did not serve $url"

modprobe nbd nbds_max=4 || give_up "modprobe nbd failed"
dev=/dev/nbd0
check nbd-attach nbd_attach "$work/nbd.sock" nbd0 || give_up "the kernel nbd client could not attach"

check mkfs mkfs_ext4 "$dev" || give_up "mkfs.ext4 failed"
mkdir -p /mnt/chain
check mount-copy copy_tree_in "$dev" /mnt/chain 64 || give_up "mount and copy failed"
check e2fsck e2fsck -fn "$dev"
check remount-verify remount_verify "$dev" /mnt/chain
check nbd-detach nbd_detach "$dev"

check bridge-exit stop_daemon bridge
zero_copy_check bridge-zero-copy iserkit-nbd "$bridge_log"
check target-exit stop_daemon target
zero_copy_check target-zero-copy iserkit-target "$target_log"
