# SIGTERM drains (target/README.md "Shutdown"; python3, drain.py): a WRITE in flight at SIGTERM
# completes and is on disk after a restart; a stalled initiator does not hold the exit beyond
# --shutdown-timeout; the exit status is 0 both times. A second SIGTERM during the drain ends the
# target at once (status 143) without losing the FUA WRITE it had answered.
source "$(dirname "$0")/lib.sh"
require python3
DISK="$WORK/disk.img"
truncate -s 16M "$DISK"

# wait_exit SECONDS [STATUS]: the test sent SIGTERM; the target must exit with STATUS (default 0)
# within SECONDS.
wait_exit() {
  local seconds=$1 want=${2:-0} rc=0
  for _ in $(seq $((seconds * 10))); do kill -0 "$TARGET_PID" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$TARGET_PID" 2>/dev/null && fail "iserkit-target still running ${seconds} s after SIGTERM"
  wait "$TARGET_PID" || rc=$?
  TARGET_PID=""
  [[ $rc -eq $want ]] || fail "iserkit-target exited with $rc after SIGTERM, want $want"
}

start_target --lun "$DISK" --shutdown-timeout 20
timeout 60 python3 "$(dirname "$0")/drain.py" "$PORT" "$IQN" inflight "$TARGET_PID" || fail "drain.py inflight"
wait_exit 10
grep -q "draining 1 connection" "$WORK/target.out" "$WORK/target.err" || fail "no drain in the log"

start_target --lun "$DISK"
timeout 60 python3 "$(dirname "$0")/drain.py" "$PORT" "$IQN" verify 0 || fail "drain.py verify"
stop_target

# A stalled initiator: the bound (2 s) closes it; exit well before the default 10 s would.
start_target --lun "$DISK" --shutdown-timeout 2
timeout 60 python3 "$(dirname "$0")/drain.py" "$PORT" "$IQN" stalled "$TARGET_PID" || fail "drain.py stalled"
wait_exit 6
grep -q "not drained within 2000 ms" "$WORK/target.out" "$WORK/target.err" || fail "the bound did not close the stalled connection"

# A second SIGTERM while draining: exit at once (128 + 15), far inside the 30 s bound; the FUA
# WRITE answered before is on disk after a restart, the WRITE still waiting for data is not.
start_target --lun "$DISK" --shutdown-timeout 30
timeout 60 python3 "$(dirname "$0")/drain.py" "$PORT" "$IQN" forced "$TARGET_PID" || fail "drain.py forced"
wait_exit 5 143
grep -q "second signal during shutdown: exiting now" "$WORK/target.err" || fail "no forced-exit message"
start_target --lun "$DISK"
timeout 60 python3 "$(dirname "$0")/drain.py" "$PORT" "$IQN" verify-forced 0 || fail "drain.py verify-forced"
stop_target
echo PASS
