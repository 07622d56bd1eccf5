#!/bin/bash
# iSER interop in the QEMU lab (Soft-RoCE): (1) the iserkit initiator against tgtd's iSER target
# (login over RDMA SENDs with tgtd's initiator-name ACL, 4 MiB written and read back in 512 KiB
# commands, READ CAPACITY); (2) the Linux kernel iSER initiator (open-iscsi, ib_iser) against
# iserkit-target: SendTargets discovery over iSER, login, 32 MiB dd round trip, logout. The
# target's copy counter then shows the immediate data the kernel sent (copied out of receive
# buffers: expected, not zero).
# Run from the host:
#   /work/shared/lab/run-lab.sh -t 800 -e ISERKIT_BIN=$PWD/build/bin \
#       /work/shared/lab/scenarios/with-env.sh --rxe --tgt-iser --iscsid -- $PWD/docs/lab/iser_interop.sh
# Uses the lab's helpers (wait_for, iscsi_disk) from its scenarios/lib.sh.
. /work/shared/lab/scenarios/lib.sh
here=$(cd "$(dirname "$0")" && pwd)
B=${ISERKIT_BIN:-$here/../../build/bin}
IP=$LAB_RXE_IP
OUT=/lab/out
rc=0
bad() { echo "FAIL: $*"; rc=1; }
echo "=== 1. iserkit -> tgtd (iSER), LUN 1"
U="iser://$IP:3260/$LAB_TGT_ISER_IQN/1"
head -c $((4 << 20)) /dev/urandom > /tmp/a
timeout 120 $B/iserkit write "$U" -i /tmp/a --initiator-name "$LAB_INITIATOR_IQN" --log-level info || bad "write to tgtd"
timeout 120 $B/iserkit read "$U" --length $((4 << 20)) -o /tmp/b --initiator-name "$LAB_INITIATOR_IQN" --log-level info || bad "read from tgtd"
cmp -s /tmp/a /tmp/b && echo "tgtd: 4 MiB round trip over iSER: same bytes" || bad "tgtd data differs"
timeout 60 $B/iserkit readcap "$U" --initiator-name "$LAB_INITIATOR_IQN" || bad "readcap tgtd"

echo "=== 2. kernel ib_iser -> iserkit-target"
IQN=iqn.2026-11.lab:kernel
truncate -s 128M /run/lab/k.img
rm -f /tmp/kport
$B/iserkit-target --lun /run/lab/k.img --listen $IP:3262 --iqn $IQN --port-file /tmp/kport --stats-file $OUT/ktarget.stats --log-level debug > $OUT/ktarget.log 2>&1 &
T=$!
for i in $(seq 100); do [ -s /tmp/kport ] && break; sleep 0.1; done; sleep 0.5
if ! timeout 60 iscsiadm -m discovery -t st -p "$IP:3262" -I iser; then
  bad "discovery over iSER"; iscsiadm -m node -o new -T "$IQN" -p "$IP:3262,1" -I iser
fi
timeout 120 iscsiadm -m node -T "$IQN" -p "$IP:3262" -I iser --login || bad "kernel login"
iscsiadm -m session -P 1 | grep -E 'Target|Transport|State' 
wait_for 30 iscsi_disk "$IQN"
DISK=$(iscsi_disk "$IQN")
echo "disk: $DISK"
if [ -n "$DISK" ]; then
  head -c $((32 << 20)) /dev/urandom > /tmp/k
  dd if=/tmp/k of=$DISK bs=1M oflag=direct status=none || bad "kernel write"
  dd if=$DISK of=/tmp/k2 bs=1M count=32 iflag=direct status=none || bad "kernel read"
  cmp -s /tmp/k /tmp/k2 && echo "kernel iSER -> iserkit-target: 32 MiB round trip: same bytes" || bad "kernel data differs"
  cmp -s /tmp/k <(head -c $((32 << 20)) /run/lab/k.img) && echo "target file holds the bytes" || bad "target file differs"
  timeout 60 iscsiadm -m node -T "$IQN" -p "$IP:3262" -I iser --logout || bad "logout"
fi
kill -TERM $T; wait $T || bad "target exit $?"
echo "target stats: $(cat $OUT/ktarget.stats)"
grep -E 'login|iSER|warn|error' $OUT/ktarget.log | head -20
dmesg | grep -iE 'iser' | tail -n 10
exit $rc
