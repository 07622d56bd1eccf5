#!/usr/bin/env bash
# SANITIZE through a real session (tests/integration/target_sanitize/CMakeLists.txt): starts
# iserkit-target with a 64M memory LUN and --sanitize-rate 2M (a 32 s operation), runs
# sanitize_client_test.cpp (starts an OVERWRITE with IMMED=1, sees it in progress, logs out, logs in
# again and sees it still in progress), then sends SIGTERM: the target must stop the operation at
# its next step and exit within a few seconds, not after the 32 s the operation would take.
# Usage: sanitize_test.sh CLIENT_PROGRAM. Exit 77 when iserkit-target is not built.
source "$(dirname "$0")/../target_client_lib.sh"
IQN="iqn.2026-11.org.iserkit.test:sanitize-$$"
"$BIN/iserkit-target" --iqn "$IQN" --listen 127.0.0.1:0 --port-file "$WORK/port" --lun mem:64M \
  --sanitize-rate 2M --log-level info >"$WORK/target.log" 2>&1 &
PID=$!
wait_ports port || { cat "$WORK/target.log"; echo "FAIL: the target did not start"; exit 1; }
ISERKIT_TEST_URL="iscsi://127.0.0.1:$(cat "$WORK/port")/$IQN/0" "$CLIENT" || { cat "$WORK/target.log"; exit 1; }
start=$(date +%s%N)
kill -TERM "$PID"
for _ in $(seq 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.05; done
if kill -0 "$PID" 2>/dev/null; then
  cat "$WORK/target.log"; echo "FAIL: iserkit-target still running 5 s after SIGTERM (the sanitize kept it busy)"; exit 1
fi
wait "$PID"; rc=$?; PID=""
ms=$(( ($(date +%s%N) - start) / 1000000 ))
grep -q "sanitize: stopped" "$WORK/target.log" || { cat "$WORK/target.log"; echo "FAIL: no 'sanitize: stopped' in the log"; exit 1; }
[[ $rc -eq 0 ]] || { cat "$WORK/target.log"; echo "FAIL: iserkit-target exited with $rc"; exit 1; }
echo "PASS: the sanitize survived the session and SIGTERM stopped it; the target exited in ${ms} ms"
