# SIGTERM drains (target/README.md "Shutdown"; python3, drain.py): a WRITE in flight at SIGTERM
# completes and is on disk after a restart; a stalled initiator does not hold the exit beyond
# --shutdown-timeout; the exit status is 0 both times.
source "$(dirname "$0")/lib.sh"
require python3
DISK="$WORK/disk.img"
truncate -s 16M "$DISK"

# wait_exit SECONDS: the test sent SIGTERM; the target must exit 0 within SECONDS.
wait_exit() {
  local seconds=$1 rc=0
  for _ in $(seq $((seconds * 10))); do kill -0 "$TARGET_PID" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$TARGET_PID" 2>/dev/null && fail "iserkit-target still running ${seconds} s after SIGTERM"
  wait "$TARGET_PID" || rc=$?
  TARGET_PID=""
  [[ $rc -eq 0 ]] || fail "iserkit-target exited with $rc after SIGTERM"
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
echo PASS
