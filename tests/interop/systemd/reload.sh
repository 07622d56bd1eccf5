# sd_notify and SIGHUP reload of iserkit-target (reload.py says what is checked); then SIGHUP to a
# target with nothing to reload (no --config) is logged and ignored: it keeps serving.
source "$(dirname "$0")/../target/lib.sh"
require python3 iscsi-inq
timeout 120 python3 "$(dirname "$0")/reload.py" "$BIN" || fail "reload.py"
start_target --lun mem:16M
kill -HUP "$TARGET_PID"
for _ in $(seq 50); do grep -q "nothing to reload" "$WORK/target.err" "$WORK/target.out" && break; sleep 0.1; done
grep -q "nothing to reload" "$WORK/target.err" "$WORK/target.out" || fail "SIGHUP without --config not logged"
kill -0 "$TARGET_PID" 2>/dev/null || fail "SIGHUP ended a target without --config"
timeout 30 iscsi-inq "$URL/0" >/dev/null || fail "iscsi-inq after SIGHUP"
stop_target
echo PASS
