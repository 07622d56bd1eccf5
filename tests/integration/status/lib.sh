# Shared set-up of the bridge status tests (nbd_status_socket_test.sh, nbd_metrics_test.sh):
# skip/fail, a work directory and the processes killed at exit, and start_target, which starts
# iserkit-target on a 64 MiB memory LUN and sets TARGET (its pid), PORTAL and URL (its LUN 0).
# Usage: source lib.sh NAME TOOL... (NAME names the work directory; each TOOL must be installed).
set -u
skip() { echo "SKIP: $*"; exit 77; }
# fail: the reason, then the tail of every log in the work directory (bridge, target) to say why
fail() {
  echo "FAIL: $*"
  for f in "$W"/*.log "$W"/*.err "$W"/*.out; do [ -s "$f" ] && { echo "--- ${f##*/}"; tail -n 30 "$f"; }; done
  exit 1
}
B=${ISERKIT_BIN:?ISERKIT_BIN not set}
for t in "${@:2}"; do command -v "$t" >/dev/null || skip "$t not installed"; done
W=$(mktemp -d "/tmp/iserkit-$1.XXXXXX")
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$W"; }
trap cleanup EXIT

start_target() {
  "$B/iserkit-target" --listen 127.0.0.1:0 --lun mem:64M >"$W/target.log" 2>&1 &
  TARGET=$!; PIDS+=($TARGET)
  for _ in $(seq 100); do grep -q 'listening on' "$W/target.log" && break; sleep 0.1; done
  PORTAL=$(grep -o 'listening on [0-9.]*:[0-9]*' "$W/target.log" | head -1 | cut -d' ' -f3)
  [ -n "$PORTAL" ] || { cat "$W/target.log"; fail "iserkit-target did not start"; }
  URL="iscsi://$PORTAL/$("$B/iserkit" discover "iscsi://$PORTAL" | head -1)/0"
}

# stop_bridge PID WHAT: SIGTERM to a bridge started by this shell, then fails unless it ended
# within 10 s with status 0. Under the ASan build (scripts/test.sh: detect_leaks=1,
# abort_on_error=1) a LeakSanitizer report at exit aborts the process, so it fails the test here.
stop_bridge() {
  local pid=$1 what=$2 rc=0
  kill -TERM "$pid"
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && fail "$what did not exit within 10 s of SIGTERM"
  wait "$pid" || rc=$?
  [ "$rc" = 0 ] || fail "$what exited with $rc on SIGTERM (134: aborted, e.g. a sanitizer report)"
}
