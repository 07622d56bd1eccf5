#!/bin/bash
# iSER chain on Soft-RoCE: iserkit <-> iserkit-target, then iserkit-nbd + kernel nbd client, zero copy
# Discovery and login over iSER, 256 MiB of random data written and read back with the CLI
# (SHA-256 compared, and with the target's backing file), then iserkit-nbd over iSER attached with
# the kernel's nbd client: 1 GiB written and 1 GiB read with O_DIRECT, mkfs.ext4, mount, a file
# copied in, e2fsck -fn clean. At exit iserkit-nbd and iserkit-target log
# "copied payload bytes: N" (the copy counter); N must be 0. Without iSER in the build: SKIP.
source "$LAB_SOURCE/tests/lab/guest/lib.sh"
plan soft-roce target discovery login write-read-256M backing-file bridge nbd-attach write-1G read-1G mkfs \
  mount-copy e2fsck nbd-detach bridge-exit bridge-zero-copy bridge-stags target-exit target-zero-copy

check soft-roce rxe_up || give_up "no Soft-RoCE device"
if reason=$(iser_missing); then give_up "$reason"; fi

iqn=iqn.2026-11.org.iserkit.lab:iser-chain
portal=$LAB_RDMA_IP:3260
truncate -s 1G "$work/lun.img"
daemon target iserkit-target --iqn "$iqn" --lun "$work/lun.img" --listen "$portal" --port-file "$work/port"
target_log=$logdir/$scenario.target.log
check target serving iserkit-target "$work/port" 120 || give_up "iserkit-target did not start"
url=iser://$portal/$iqn/0
cli() { timeout 900 iserkit --initiator-name "$LAB_INITIATOR_IQN" "$@"; }

discover() {
  cli discover "iser://$portal" >"$work/discover.txt" 2>&1
  local rc=$?
  cat "$work/discover.txt"
  if ((rc != 0)) && initiator_refuses_iser "$work/discover.txt"; then return 3; fi
  ((rc == 0)) || return 1
  grep -q "$iqn" "$work/discover.txt" || { echo "SendTargets over iSER did not list $iqn"; return 1; }
  echo "SendTargets over iSER lists $iqn"
}
start=$EPOCHREALTIME
discover >"$work/d.log" 2>&1
rc=$?
took=$(seconds_since "$start")
cat "$work/d.log"
case $rc in
  0) pass discovery "$(tail -n 1 "$work/d.log")" "$took" ;;
  3) skip discovery "iserkit refuses iser:// URLs: $(tail -n 1 "$work/d.log")" "$took"
     give_up "the initiator in this build has no iSER: $(tail -n 1 "$work/d.log")" ;;
  *) fail discovery "$(tail -n 1 "$work/d.log")" "$took" ;;
esac

check login cli inquiry "$url" || give_up "login over iSER failed"

write_read() {
  local want got
  head -c "$(mib 256)" /dev/urandom >"$work/pattern" || return 1
  want=$(sha "$work/pattern")
  cli write "$url" -i "$work/pattern" || return 1
  rm -f "$work/pattern"
  got=$(set -o pipefail; cli read "$url" --length "$(mib 256)" | sha256sum | cut -d' ' -f1) || return 1
  [[ $want == "$got" ]] || { echo "read back $got, wrote $want"; return 1; }
  printf '%s\n' "$want" >"$work/pattern.sha"
  echo "256 MiB written and read back over iSER, sha256 ${want:0:16}… matches"
}
check write-read-256M write_read
backing() {
  local disk
  [[ -s $work/pattern.sha ]] || { echo "nothing was written"; return 1; }
  disk=$(sha "$work/lun.img" "$(mib 256)")
  [[ $disk == "$(cat "$work/pattern.sha")" ]] || { echo "backing file $disk differs from what was written"; return 1; }
  echo "the target's backing file holds the same 256 MiB"
}
check backing-file backing

daemon bridge iserkit-nbd "$url" --socket "$work/nbd.sock" --initiator-name "$LAB_INITIATOR_IQN" --log-level info
bridge_log=$logdir/$scenario.bridge.log
check bridge serving iserkit-nbd "$work/nbd.sock" 120 || give_up "iserkit-nbd did not serve $url"
modprobe nbd nbds_max=4 || give_up "modprobe nbd failed"
dev=/dev/nbd1
attach() {
  nbd-client -unix "$work/nbd.sock" "$dev" -b 4096 || return 1
  wait_until 30 test "$(cat /sys/block/nbd1/size)" -gt 0 || { echo "nbd1 has no size"; return 1; }
  echo "$dev: $(blockdev --getsize64 $dev) bytes through nbd-client -unix"
}
check nbd-attach attach || give_up "the kernel nbd client could not attach"
# 1 GiB each way with O_DIRECT: the data the copy counter must not have copied
write_1g() {
  local start=$EPOCHREALTIME
  dd if=/dev/zero of="$dev" bs=1M count=1024 oflag=direct conv=fsync status=none || return 1
  echo "1 GiB written with O_DIRECT in $(seconds_since "$start") s"
}
read_1g() {
  local start=$EPOCHREALTIME
  head -c "$(mib 1)" /dev/urandom >"$work/marker"
  dd if="$work/marker" of="$dev" bs=1M seek=1023 oflag=direct status=none || return 1
  dd if="$dev" bs=1M count=1024 iflag=direct status=none | cmp -s - <(head -c "$(mib 1023)" /dev/zero; cat "$work/marker") ||
    { echo "1 GiB read back differs from what was written"; return 1; }
  echo "1 GiB read with O_DIRECT in $(seconds_since "$start") s, contents as written"
}
check write-1G write_1g
check read-1G read_1g
check mkfs mkfs_ext4 "$dev" || give_up "mkfs.ext4 failed"
copy_in() {
  mkdir -p /mnt/iser && mount "$dev" /mnt/iser || return 1
  cp -a /usr/include/linux /mnt/iser/ && head -c "$(mib 32)" /dev/urandom >/mnt/iser/random.bin || return 1
  (cd /mnt/iser && find . -type f -print0 | sort -z | xargs -0 sha256sum >"$work/sums") || return 1
  umount /mnt/iser && echo 3 >/proc/sys/vm/drop_caches && mount "$dev" /mnt/iser || return 1
  (cd /mnt/iser && sha256sum --quiet -c "$work/sums") || return 1
  umount /mnt/iser && echo "mounted, $(wc -l <"$work/sums") files copied, remounted, all checksums match"
}
check mount-copy copy_in
check e2fsck e2fsck -fn "$dev"
check nbd-detach nbd_detach "$dev"
check bridge-exit stop_daemon bridge
zero_copy_check bridge-zero-copy iserkit-nbd "$bridge_log"
stags_check bridge-stags "$bridge_log"
check target-exit stop_daemon target
zero_copy_check target-zero-copy iserkit-target "$target_log"
