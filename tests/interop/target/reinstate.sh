# Session reinstatement (RFC 7143 §6.3.5) over raw sockets (python3, reinstate.py): a second login
# with the ISID of a live session ends the old session first; acknowledged writes survive.
source "$(dirname "$0")/lib.sh"
require python3
start_target --lun mem:16M
timeout 60 python3 "$(dirname "$0")/reinstate.py" "$PORT" "$IQN" || fail "reinstate.py"
grep -q "reinstating the session" "$WORK/target.out" "$WORK/target.err" || fail "no reinstatement in the target log"
kill -0 "$TARGET_PID" || fail "target died"
stop_target
