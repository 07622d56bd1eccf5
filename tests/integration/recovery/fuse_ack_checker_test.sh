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

python3 "$checker" run --file "$lun_file" --journal "$tmp/journal" --blocks 8192 --duration "$duration" \
  --rate "$rate" >"$tmp/checker.log" 2>&1 &
checker_pid=$!; pids+=($checker_pid)

for round in 1 2; do
  # A kill while the view is still logging in again would not be a lost connection of its own.
  ((round == 1)) || wait_count "$tmp/mnt.log" "session: recovered: target=" 1 30
  sleep 3
  kill -0 $checker_pid 2>/dev/null || fail "the checker ended before kill $round"
  echo "== kill -9 the target ($round), restart it 3 s later on port $port"
  kill -9 $target_pid; wait $target_pid 2>/dev/null || true
  sleep 3
  start_target
done
# Freeze a working session, not one still logging in again after the second kill.
wait_count "$tmp/mnt.log" "session: recovered: target=" 2 30
sleep 1
kill -0 $checker_pid 2>/dev/null || fail "the checker ended before the freeze"
echo "== SIGSTOP the target for 3 s"
kill -STOP $target_pid; sleep 3; kill -CONT $target_pid

wait_for $checker_pid $((duration + 90)) "the checker"
rc=0; wait $checker_pid || rc=$?
grep -v "generation" "$tmp/checker.log" | sed 's/^/  /' || true
((rc == 0)) || fail "the checker failed (exit $rc) through the FUSE view"
lost=$(grep -c "session: connection lost: target=" "$tmp/mnt.log" || true)
recovered=$(grep -c "session: recovered: target=" "$tmp/mnt.log" || true)
echo "  iserkit-fuse: connections lost $lost, recoveries $recovered"
((lost >= 3 && recovered >= 3)) || fail "expected three lost connections and three recoveries (two kills, one freeze)"
unmount_fuse mnt

echo "== the target's data file, offline"
kill -TERM $target_pid; wait $target_pid || fail "iserkit-target exited with $? on SIGTERM"
rc=0; python3 "$checker" verify --file "$tmp/lun.img" --journal "$tmp/journal" >"$tmp/verify.log" 2>&1 || rc=$?
sed 's/^/  /' "$tmp/verify.log"
((rc == 0)) || fail "the target's data file lost an acknowledged and flushed write (or holds torn/foreign blocks)"
echo PASS
