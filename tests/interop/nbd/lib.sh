# Shared helpers for the NBD interop scripts (sourced). Skips (exit 77) with a reason when a peer
# tool is missing, like libnbd's requires().
set -euo pipefail

skip() { echo "SKIP: $*" >&2; exit 77; }
requires() { command -v "$1" >/dev/null 2>&1 || skip "$1 is not installed"; }

BIN=${ISERKIT_BIN:-$(cd "$(dirname "$0")/../../../build-nbd/bin" 2>/dev/null && pwd)}
SERVER=$BIN/nbd_memory_server
[ -x "$SERVER" ] || { echo "nbd_memory_server not built: $SERVER" >&2; exit 1; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/iserkit-nbd.XXXXXX")
SERVER_PIDS=()
cleanup() {
  for pid in "${SERVER_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT

# A python3 that has libnbd's bindings (pyenv shims may hide the system one).
nbd_python() {
  for py in python3 /usr/bin/python3; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import nbd' 2>/dev/null; then echo "$py"; return 0; fi
  done
  return 1
}

# start_unix_server SOCKET ARGS...: starts the server in the background and waits for the socket.
start_unix_server() {
  local socket=$1; shift
  "$SERVER" --unix "$socket" "$@" 2>>"$TMP/server.log" &
  SERVER_PIDS+=($!)
  for _ in $(seq 100); do [ -S "$socket" ] && return 0; sleep 0.05; done
  echo "server did not create $socket" >&2; cat "$TMP/server.log" >&2; exit 1
}

# stop_server PID: SIGTERM, then the server must exit 0 after finishing its clients.
stop_server() {
  local pid=$1
  kill -TERM "$pid"
  local rc=0
  wait "$pid" || rc=$?
  if [ "$rc" -ne 0 ]; then echo "server exited with $rc" >&2; cat "$TMP/server.log" >&2; exit 1; fi
}
