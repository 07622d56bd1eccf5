# kill -9 right after the acknowledgements loses no write acknowledged as durable (FUA, or before
# a successful SYNCHRONIZE CACHE): two generations over a file LUN, the target killed after each,
# restarted and read back (python3, kill9.py).
source "$(dirname "$0")/lib.sh"
require python3
DISK="$WORK/disk.img"
truncate -s 16M "$DISK"
for gen in 1 2; do
  start_target --lun "$DISK"
  timeout 60 python3 "$(dirname "$0")/kill9.py" "$PORT" "$IQN" write "$TARGET_PID" "$gen" || fail "kill9.py write $gen"
  rc=0
  wait "$TARGET_PID" || rc=$?
  TARGET_PID=""
  [[ $rc -eq 137 ]] || fail "the target was not killed by SIGKILL (status $rc)"
  start_target --lun "$DISK"
  timeout 60 python3 "$(dirname "$0")/kill9.py" "$PORT" "$IQN" verify 0 "$gen" || fail "kill9.py verify $gen"
  stop_target
done
echo PASS
