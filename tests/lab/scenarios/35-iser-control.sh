#!/bin/bash
# Control: Linux iSER initiator (ib_iser) -> tgtd's iSER target, no iserkit code involved
# Proves the lab's iSER plumbing (rxe, ib_iser, iscsid without systemd, tgtd's iSER portal and its
# ACLs) with two known-good peers, so that a failure of iser-kernel-initiator or iser-tgtd points
# at our code and not at the lab: discovery over iSER, login, transport iser, /dev/sdX, 32 MiB
# O_DIRECT round trip, logout.
source "$LAB_SOURCE/tests/lab/guest/lib.sh"
plan soft-roce tgtd iscsid discovery login transport disk dd-roundtrip logout
check soft-roce rxe_up || give_up "no Soft-RoCE device"
command -v tgtd >/dev/null || give_up "tgt is not installed"
command -v iscsiadm >/dev/null || give_up "open-iscsi is not installed"
iqn=iqn.2026-11.org.iserkit.lab:control
portal=$LAB_RDMA_IP:3260
check tgtd tgtd_iser_up "$iqn" "$work/tgt.img" || give_up "tgtd did not come up"
modprobe ib_iser || give_up "modprobe ib_iser failed"
check iscsid iscsid_up || give_up "iscsid did not start"
iser_node_login
disk=""
find_disk() {
  wait_until 60 scsi_disk_of "$iqn" || { echo "no SCSI disk for the session"; return 1; }
  disk=$(scsi_disk_of "$iqn")
  echo "$disk: $(blockdev --getsize64 "$disk") bytes from tgtd over iSER"
}
check disk find_disk || give_up "the LUN did not appear as a disk"
check dd-roundtrip roundtrip "$disk" 32
iser_node_logout
tgtadm --op delete --mode system >/dev/null 2>&1   # how tgtd is told to exit
stop_daemon tgtd 20 >/dev/null || true
