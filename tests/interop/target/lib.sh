# Shared helpers for the target interop tests: start iserkit-target on a free loopback port with
# temporary LUNs, stop it at exit, and skip (exit 77) with a reason when a tool is missing.
set -euo pipefail

BIN=${ISERKIT_BIN:?ISERKIT_BIN must point at the build bin directory}
IQN=iqn.2026-11.org.iserkit:interop
WORK=$(mktemp -d /tmp/iserkit-target-test.XXXXXX)
TARGET_PID=""

cleanup() {
  if [[ -n "$TARGET_PID" ]] && kill -0 "$TARGET_PID" 2>/dev/null; then
    kill -TERM "$TARGET_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$TARGET_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$TARGET_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

require() {
  for tool in "$@"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      echo "SKIP: $tool not installed" >&2
      exit 77
    fi
  done
}

# start_target ARGS...: starts iserkit-target listening on 127.0.0.1:0 plus ARGS; sets PORT.
start_target() {
  rm -f "$WORK/port"
  "$BIN/iserkit-target" --iqn "$IQN" --listen 127.0.0.1:0 --port-file "$WORK/port" "$@" \
    >"$WORK/target.out" 2>"$WORK/target.err" &
  TARGET_PID=$!
  for _ in $(seq 100); do
    [[ -s "$WORK/port" ]] && break
    if ! kill -0 "$TARGET_PID" 2>/dev/null; then
      echo "FAIL: iserkit-target exited at startup:" >&2
      cat "$WORK/target.err" >&2
      exit 1
    fi
    sleep 0.05
  done
  PORT=$(cat "$WORK/port")
  URL="iscsi://127.0.0.1:$PORT/$IQN"
}

# stop_target: SIGTERM, expecting a clean exit 0.
stop_target() {
  kill -TERM "$TARGET_PID"
  local rc=0
  wait "$TARGET_PID" || rc=$?
  TARGET_PID=""
  if [[ $rc -ne 0 ]]; then
    echo "FAIL: iserkit-target exited with $rc after SIGTERM" >&2
    cat "$WORK/target.err" >&2
    exit 1
  fi
}

# stop_target_log: stop_target, then its whole log (stdout and stderr) in $LOG.
stop_target_log() {
  stop_target
  LOG="$WORK/target.all"
  cat "$WORK/target.out" "$WORK/target.err" >"$LOG"
}

fail() {
  echo "FAIL: $*" >&2
  echo "--- target log:" >&2
  tail -50 "$WORK/target.err" >&2 || true
  exit 1
}
