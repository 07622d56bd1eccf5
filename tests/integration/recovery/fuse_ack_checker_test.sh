#!/usr/bin/env bash
# The acknowledged-flush checker (ack_checker.py --file) on the LUN file of a mounted iserkit-fuse
# view while the target is killed -9 and restarted twice (3 s later) and frozen 3 s once. Through
# the view a write is pwrite(2) (write-through: answered once the WRITE completed), a FUA write
# goes through an O_DSYNC descriptor (WRITE with FUA), a flush is fdatasync(2) (SYNCHRONIZE
# CACHE). At the end the checker reads every block back through the view (O_DIRECT); then, with the
# view unmounted and the target stopped, the target's data file is checked offline: no write
# acknowledged with FUA or before an acknowledged flush lost, no torn or foreign block.
# Longer runs: ISERKIT_FAULT_DURATION (25 s of writing), ISERKIT_FAULT_RATE (200 writes/s).
source "$(dirname "$0")/lib.sh"
need_fuse
checker=$(dirname "$0")/ack_checker.py
duration=${ISERKIT_FAULT_DURATION:-25}
rate=${ISERKIT_FAULT_RATE:-200}

truncate -s 64M "$tmp/lun.img"
start_target
mount_fuse mnt --replacement-timeout 30 --timeout 10 --nop-interval 1 --nop-timeout 1

start_checker "$checker" --file "$lun_file"

kill_restart_rounds 2 $checker_pid "the checker" 3 view_recovered
# Freeze a working session, not one still logging in again after the second kill.
view_recovered 2
sleep 1
kill -0 $checker_pid 2>/dev/null || fail "the checker ended before the freeze"
echo "== SIGSTOP the target for 3 s"
kill -STOP $target_pid; sleep 3; kill -CONT $target_pid

wait_checker $checker_pid "$duration" "the FUSE view"
lost=$(grep -c "session: connection lost: target=" "$tmp/mnt.log" || true)
recovered=$(grep -c "session: recovered: target=" "$tmp/mnt.log" || true)
echo "  iserkit-fuse: connections lost $lost, recoveries $recovered"
((lost >= 3 && recovered >= 3)) || fail "expected three lost connections and three recoveries (two kills, one freeze)"
unmount_fuse mnt

verify_offline "$checker"
echo PASS
