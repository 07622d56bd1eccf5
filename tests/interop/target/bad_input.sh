# Bad input over raw sockets (python3, bad_input.py): the RFC's answers, and the target keeps
# serving other clients.
source "$(dirname "$0")/lib.sh"
require python3
start_target --lun mem:64M
timeout 120 python3 "$(dirname "$0")/bad_input.py" "$PORT" "$IQN" || fail "bad_input.py"
kill -0 "$TARGET_PID" || fail "target died"
stop_target
