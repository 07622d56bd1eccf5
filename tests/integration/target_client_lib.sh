#!/usr/bin/env bash
# Sourced by the shell halves of the gtest clients (target_*/NAME_test.sh CLIENT_PROGRAM, see
# iserkit_add_client_script_test in tests/CMakeLists.txt): CLIENT, BIN (exit 77 when iserkit-target
# is not built), WORK (/tmp/iserkit-NAME.*, removed on exit, when the targets in PID and PID2 are
# killed).
set -u
CLIENT=${1:?client program}
BIN=${ISERKIT_BIN:-}
[[ -x "$BIN/iserkit-target" ]] || { echo "SKIP: iserkit-target not built ($BIN)"; exit 77; }
WORK=$(mktemp -d "/tmp/iserkit-$(basename "$0" _test.sh).XXXXXX")
PID="" PID2=""
cleanup() {
  for p in $PID $PID2; do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT

# wait_ports FILE...: waits (5 s at most) until every port FILE in $WORK is written; 1 if one is not.
wait_ports() {
  local f ready
  for _ in $(seq 100); do
    ready=1
    for f in "$@"; do [[ -s $WORK/$f ]] || ready=0; done
    ((ready)) && return 0
    sleep 0.05
  done
  return 1
}
