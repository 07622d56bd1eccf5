#!/usr/bin/env bash
# Shared by the recovery fault tests: start/kill/restart iserkit-target on a fixed file and port,
# start iserkit-nbd on a Unix socket. Every process started here is stopped on exit (SIGCONT first,
# for a target left frozen).
set -euo pipefail
skip() { echo "SKIP: $*" >&2; exit 77; }
BIN=${ISERKIT_BIN:?ISERKIT_BIN must name the bin directory of the build}
export PATH=/usr/bin:$PATH   # nbdsh needs the system python3 with libnbd's bindings
tmp=$(mktemp -d /tmp/iserkit-recovery.XXXXXX)
pids=()
target_pid=
cleanup() {
  [[ -n $target_pid ]] && kill -CONT "$target_pid" 2>/dev/null || true
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$tmp"/*.log; do echo "--- $(basename "$f")"; tail -n 40 "$f"; done
  exit 1
} >&2
iqn=iqn.2026-11.org.iserkit:recovery
port=

# start_target: starts iserkit-target on $tmp/lun.img; the first time on any free port (kept in
# $port), later on that same port (restart after a kill).
start_target() {
  local listen=127.0.0.1:${port:-0}
  rm -f "$tmp/port"
  "$BIN/iserkit-target" --iqn $iqn --lun "$tmp/lun.img" --listen "$listen" --port-file "$tmp/port" \
    >>"$tmp/target.log" 2>&1 &
  target_pid=$!; pids+=($target_pid)
  for _ in $(seq 100); do [[ -s $tmp/port ]] && break; sleep 0.1; done
  [[ -s $tmp/port ]] || fail "target did not start on $listen"
  port=$(cat "$tmp/port")
}

# start_bridge NAME ARGS...: iserkit-nbd on $tmp/NAME.sock with its status in $tmp/NAME.stats;
# sets bridge_pid.
start_bridge() {
  local name=$1; shift
  "$BIN/iserkit-nbd" "iscsi://127.0.0.1:$port/$iqn/0" --socket "$tmp/$name.sock" --stats-file "$tmp/$name.stats" \
    "$@" >"$tmp/$name.log" 2>&1 &
  bridge_pid=$!; pids+=($bridge_pid)
  for _ in $(seq 100); do [[ -S $tmp/$name.sock ]] && break; sleep 0.1; done
  [[ -S $tmp/$name.sock ]] || fail "iserkit-nbd $name did not start"
}

stat_of() { sed -n "s/^$2=//p" "$tmp/$1.stats"; }
