# Shared set-up of the status tests (nbd_status_socket_test.sh, nbd_metrics_test.sh,
# target_status_test.sh, ../socket_io/socket_io_status_test.sh): skip/fail, a work directory and
# the processes killed at exit; start_target, which starts iserkit-target on a 64 MiB memory LUN
# and sets TARGET (its pid), PORTAL and URL (its LUN 0); target_refuses, for a bad option value.
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

# target_refuses OPTION VALUE MESSAGE TOML_LINE TOML_MESSAGE: iserkit-target refuses --OPTION VALUE
# with a message matching MESSAGE (grep), and a --config file holding TOML_LINE with one matching
# TOML_MESSAGE.
target_refuses() {
  local option=$1 value=$2 message=$3 toml=$4 toml_message=$5
  if "$B/iserkit-target" --lun mem:1M --listen 127.0.0.1:0 "--$option" "$value" >/dev/null 2>"$W/bad.err"; then
    fail "--$option $value accepted"
  fi
  grep -q -- "$message" "$W/bad.err" || { cat "$W/bad.err"; fail "unclear message for --$option $value"; }
  printf '%s\n' "$toml" >"$W/bad.toml"
  if "$B/iserkit-target" --lun mem:1M --listen 127.0.0.1:0 --config "$W/bad.toml" >/dev/null 2>"$W/badtoml.err"; then
    fail "$toml accepted"
  fi
  grep -q -- "$toml_message" "$W/badtoml.err" || { cat "$W/badtoml.err"; fail "unclear message for $toml"; }
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
