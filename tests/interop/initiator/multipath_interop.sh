#!/bin/bash
# Multipath against the real iserkit-target (issue 11 item 3): starts three targets on loopback —
# A: one memory LUN behind two portal groups (127.0.0.1 tpgt 1, 127.0.0.2 tpgt 2), both
#    active/optimized;
# B: another target (another IQN, so another logical unit);
# C: like A, with portal group 1 in ALUA standby —
# then runs the test program with their URLs in ISERKIT_MP_* variables. Exit 77 when
# iserkit-target is missing.
set -u
BIN=${ISERKIT_BIN:?ISERKIT_BIN must name the bin directory of the build}
[ -x "$BIN/iserkit-target" ] || { echo "SKIP: iserkit-target not built"; exit 77; }
WORK=$(mktemp -d /tmp/iserkit-multipath.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT

# start NAME IQN ARGS...: sets PORT1 (127.0.0.1) and PORT2 (127.0.0.2, when listened on).
start() {
  local name=$1 iqn=$2; shift 2
  "$BIN/iserkit-target" --iqn "$iqn" --lun mem:16M --no-iser --listen 127.0.0.1:0 --port-file "$WORK/$name.port" \
    "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  PIDS+=($!)
  for _ in $(seq 100); do [ -s "$WORK/$name.port" ] && break; sleep 0.05; done
  [ -s "$WORK/$name.port" ] || { echo "FAIL: target $name did not start"; cat "$WORK/$name.err"; exit 1; }
  for _ in $(seq 50); do grep -q "^listening on 127.0.0.1" "$WORK/$name.out" && break; sleep 0.05; done
  PORT1=$(cat "$WORK/$name.port")
  PORT2=$(sed -n 's/^listening on 127\.0\.0\.2:\([0-9]*\)$/\1/p' "$WORK/$name.out")
}

IQN=iqn.2026-11.org.iserkit.test:multipath-$$
start a "$IQN-a" --listen 127.0.0.2:0,tpgt=2
[ -n "$PORT2" ] || { echo "FAIL: target a has no second portal"; cat "$WORK/a.out"; exit 1; }
export ISERKIT_MP_URL1="iscsi://127.0.0.1:$PORT1/$IQN-a/0" ISERKIT_MP_URL2="iscsi://127.0.0.2:$PORT2/$IQN-a/0"
start b "$IQN-b"
export ISERKIT_MP_OTHER_URL="iscsi://127.0.0.1:$PORT1/$IQN-b/0"
start c "$IQN-c" --listen 127.0.0.2:0,tpgt=2 --alua-state 1=standby
export ISERKIT_MP_STANDBY_URL1="iscsi://127.0.0.1:$PORT1/$IQN-c/0" ISERKIT_MP_ACTIVE_URL2="iscsi://127.0.0.2:$PORT2/$IQN-c/0"
"$@"
