#!/usr/bin/env bash
# SIGTERM to iserkit-fuse while its session recovers, with reads in flight: the target is killed
# -9 under eight parallel O_DIRECT readers, the session starts reconnecting (replacement timeout
# 60 s, far longer than the test), then the view is stopped. The logout ends the recovering session
# at once: the waiting reads are answered (EIO), iserkit-fuse exits 0 without waiting for the
# replacement timeout and the mount is gone. Before the fix the logout left the session's loops
# and the waiting reads' frames (with their read buffers) parked forever: LeakSanitizer reported
# them at exit in the ASan build, which this test sees as a non-zero exit status.
source "$(dirname "$0")/lib.sh"
start_target t --lun mem:64M
mount_view "$tmp/mnt" "iscsi://127.0.0.1:${target_port[t]}" --timeout 2 --replacement-timeout 60
lun=$(ls -d "$tmp"/mnt/*/lun0 | head -1)
[[ -n $lun ]] || fail "no LUN file in the view"
readers=()
for i in $(seq 8); do
  (while :; do dd if="$lun" of=/dev/null bs=1M count=4 skip=$((i * 4)) iflag=direct status=none 2>/dev/null || true; done) &
  readers+=($!); pids+=($!)
done
sleep 1
kill -9 "${target_pid[t]}"
log=$tmp/fuse-mnt.log
for _ in $(seq 100); do grep -q 'reconnect: attempt' "$log" && break; sleep 0.1; done
grep -q 'reconnect: attempt' "$log" || fail "the session did not start reconnecting"
unmount_view "$tmp/mnt" "$fuse_pid"
for r in "${readers[@]}"; do kill "$r" 2>/dev/null || true; done
! grep -q 'giving up' "$log" || fail "the view waited for the replacement timeout instead of ending the session"
grep -q 'copied payload bytes' "$log" || fail "iserkit-fuse did not reach the end of main"
echo "PASS: iserkit-fuse stopped while recovering"
