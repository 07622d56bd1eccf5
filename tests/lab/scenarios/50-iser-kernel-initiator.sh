#!/bin/bash
# Linux iSER initiator (open-iscsi, ib_iser) -> iserkit-target on Soft-RoCE: login, /dev/sdX, dd
# SendTargets discovery over iSER, login through the iser iface, the session's transport is iser,
# the LUN appears as a SCSI disk of the right size, 64 MiB of random data round-trips with O_DIRECT
# (SHA-256 compared, and with the target's backing file), logout, the disk is gone.
# Without iSER in iserkit-target: SKIP.
source "$LAB_SOURCE/tests/lab/guest/lib.sh"
plan soft-roce target iscsid discovery login transport disk dd-roundtrip backing-file logout

check soft-roce rxe_up || give_up "no Soft-RoCE device"
if reason=$(iser_missing); then give_up "$reason"; fi

iqn=iqn.2026-11.org.iserkit.lab:iser-kernel
portal=$LAB_RDMA_IP:3260
size_mib=256
truncate -s "${size_mib}M" "$work/lun.img"
daemon target iserkit-target --iqn "$iqn" --lun "$work/lun.img" --listen "$portal" --port-file "$work/port"
check target serving iserkit-target "$work/port" 120 || give_up "iserkit-target did not start"

modprobe ib_iser || give_up "modprobe ib_iser failed"
check iscsid iscsid_up || give_up "iscsid did not start"

discover() {
  timeout 180 iscsiadm -m discovery -t sendtargets -p "$portal" -I iser || return 1
  iscsiadm -m node -T "$iqn" -p "$portal" -I iser >/dev/null || { echo "$iqn not among the discovered nodes"; return 1; }
  echo "SendTargets over iSER found $iqn"
}
if ! check discovery discover; then
  # discovery is its own check: still try the login with a static node record
  iscsiadm -m node -o new -T "$iqn" -p "$portal,1" -I iser || give_up "cannot create a node record"
fi
check login timeout 300 iscsiadm -m node -T "$iqn" -p "$portal" -I iser --login || give_up "login over iSER failed"
transport() {
  iscsiadm -m session -P 1 >"$work/session.txt" 2>&1
  grep -q 'Iface Transport: iser' "$work/session.txt" || { cat "$work/session.txt"; echo "the session is not over iser"; return 1; }
  echo "session transport: iser ($(grep -m1 'Current Portal' "$work/session.txt" | xargs))"
}
check transport transport
find_disk() {
  wait_until 60 scsi_disk_of "$iqn" || { echo "no SCSI disk for the session"; return 1; }
  disk=$(scsi_disk_of "$iqn")
  local bytes
  bytes=$(blockdev --getsize64 "$disk")
  ((bytes == size_mib << 20)) || { echo "$disk has $bytes bytes, the LUN $((size_mib << 20))"; return 1; }
  echo "$disk: $bytes bytes over iSER"
}
disk=""
check disk find_disk || give_up "the LUN did not appear as a disk"
check dd-roundtrip roundtrip "$disk" 64
same_as_backing() {
  local a b
  a=$(dd if="$disk" bs=1M count=64 iflag=direct status=none | sha256sum | cut -d' ' -f1)
  b=$(sha "$work/lun.img" "$(mib 64)")
  [[ $a == "$b" ]] || { echo "disk $a, backing file $b"; return 1; }
  echo "the target's backing file holds the same 64 MiB"
}
check backing-file same_as_backing
logout() {
  timeout 180 iscsiadm -m node -T "$iqn" -p "$portal" -I iser --logout || return 1
  wait_until 30 bash -c "[[ ! -e /sys/block/${disk#/dev/} ]]" || { echo "$disk still there after logout"; return 1; }
  echo "logged out, $disk gone"
}
check logout logout
stop_daemon iscsid 20 >/dev/null
stop_daemon target >/dev/null
