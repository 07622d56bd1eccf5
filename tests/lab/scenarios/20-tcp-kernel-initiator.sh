#!/bin/bash
# Linux iSCSI/TCP initiator (open-iscsi, iscsi_tcp) -> iserkit-target: login, /dev/sdX, dd, logout
# SendTargets discovery, login, the LUN appears as a SCSI disk with our INQUIRY strings and size,
# 64 MiB of random data written and read back with O_DIRECT (SHA-256 compared, and compared with
# the target's backing file), a small fio verify job, logout, and the disk is gone.
source "$LAB_SOURCE/tests/lab/guest/lib.sh"
plan target iscsid discovery login disk dd-roundtrip backing-file fio-verify logout

iqn=iqn.2026-11.org.iserkit.lab:tcp-kernel
portal=127.0.0.1:3260
size_mib=256
truncate -s "${size_mib}M" "$work/lun.img"
daemon target iserkit-target --iqn "$iqn" --lun "$work/lun.img" --listen "$portal" --port-file "$work/port"
check target serving iserkit-target "$work/port" 120 || give_up "iserkit-target did not start"

modprobe iscsi_tcp || give_up "modprobe iscsi_tcp failed"
check iscsid iscsid_up || give_up "iscsid did not start"

discover() {
  timeout 120 iscsiadm -m discovery -t sendtargets -p "$portal" -I default || return 1
  iscsiadm -m node -T "$iqn" -p "$portal" >/dev/null || { echo "$iqn not among the discovered nodes"; return 1; }
  echo "discovered $iqn at $portal"
}
check discovery discover || give_up "discovery failed"
check login timeout 180 iscsiadm -m node -T "$iqn" -p "$portal" --login || give_up "login failed"

find_disk() {
  wait_until 60 scsi_disk_of "$iqn" || { echo "no SCSI disk for the session"; return 1; }
  disk=$(scsi_disk_of "$iqn")
  local sys=/sys/block/${disk#/dev/} bytes
  bytes=$(blockdev --getsize64 "$disk")
  ((bytes == size_mib << 20)) || { echo "$disk has $bytes bytes, the LUN $((size_mib << 20))"; return 1; }
  echo "$disk: $(cat "$sys/device/vendor" | xargs) $(cat "$sys/device/model" | xargs), $bytes bytes"
}
disk=""
check disk find_disk || give_up "the LUN did not appear as a disk"
check dd-roundtrip roundtrip "$disk" 64
check backing-file disk_holds_backing "$disk" "$work/lun.img" 64
if command -v fio >/dev/null; then
  check fio-verify fio_verify "$disk" 128M 16M
else
  skip fio-verify "fio is not installed"
fi
logout() {
  timeout 120 iscsiadm -m node -T "$iqn" -p "$portal" --logout || return 1
  wait_until 30 bash -c "[[ ! -e /sys/block/${disk#/dev/} ]]" || { echo "$disk still there after logout"; return 1; }
  echo "logged out, $disk gone"
}
check logout logout
stop_daemon iscsid 20 >/dev/null
stop_daemon target >/dev/null
