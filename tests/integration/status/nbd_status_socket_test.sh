#!/bin/bash
# iserkit-nbd --status-socket, read with `iserkit status [--json] PATH`: the answer is one JSON
# document whose state and counters are the bridge's real ones — connected after start; the
# session's Data-Out bytes grow by exactly the bytes nbdcopy wrote and its Data-In bytes by at
# least the bytes read back; after kill -9 of the target the state is "recovering" with a lost
# connection counted; SIGTERM then ends it with status 0. A regular file at the socket path is refused (and left alone); the socket
# file is removed at exit.
source "$(dirname "$0")/lib.sh" status nbdcopy jq
start_target

# A regular file where the socket should go: refused with a clear message, the file kept.
echo keep >"$W/not-a-socket"
if timeout 30 "$B/iserkit-nbd" "$URL" --socket "$W/x.sock" --status-socket "$W/not-a-socket" 2>"$W/refused.err"; then
  fail "iserkit-nbd accepted a regular file as its status socket"
fi
grep -q 'status socket: .*path=' "$W/refused.err" || { cat "$W/refused.err"; fail "no clear message for a bad status socket path"; }
[ "$(cat "$W/not-a-socket")" = keep ] || fail "the regular file was changed"

"$B/iserkit-nbd" "$URL" --socket "$W/nbd.sock" --status-socket "$W/status.sock" --replacement-timeout 60 \
  >"$W/nbd.log" 2>&1 &
NBD=$!; PIDS+=($NBD)
for _ in $(seq 100); do [ -S "$W/nbd.sock" ] && [ -S "$W/status.sock" ] && break; sleep 0.1; done
[ -S "$W/status.sock" ] || { cat "$W/nbd.log"; fail "no status socket"; }
[ "$(stat -c %a "$W/status.sock")" = 600 ] || fail "status socket is not mode 0600"

status() { timeout 10 "$B/iserkit" status --json "$W/status.sock" >"$1" || fail "iserkit status exited $?"; }
status "$W/s0.json"
cat "$W/s0.json"
[ "$(jq -r .program "$W/s0.json")" = iserkit-nbd ] || fail "wrong program"
[ "$(jq -r .state "$W/s0.json")" = connected ] || fail "not connected after start"
[ "$(jq -r .multipath "$W/s0.json")" = null ] || fail "multipath should be null with one URL"
out0=$(jq -e .session.data_out_bytes "$W/s0.json") || fail "no data_out_bytes"
in0=$(jq -e .session.data_in_bytes "$W/s0.json") || fail "no data_in_bytes"

head -c 4194304 /dev/urandom >"$W/data"
timeout 60 nbdcopy "$W/data" "nbd+unix:///?socket=$W/nbd.sock" || fail "nbdcopy write failed"
timeout 60 nbdcopy --no-extents "nbd+unix:///?socket=$W/nbd.sock" "$W/back" || fail "nbdcopy read failed"  # --no-extents: read every byte, holes too (BLOCK_STATUS would skip them)
cmp -n 4194304 "$W/data" "$W/back" || fail "data read back differs"
status "$W/s1.json"
cat "$W/s1.json"
out1=$(jq -e .session.data_out_bytes "$W/s1.json")
in1=$(jq -e .session.data_in_bytes "$W/s1.json")
[ $((out1 - out0)) = 4194304 ] || fail "data_out_bytes grew by $((out1 - out0)), not the 4194304 written"
[ $((in1 - in0)) -ge 67108864 ] || fail "data_in_bytes grew by $((in1 - in0)), less than the 64 MiB read"
[ "$(jq -r .copied_payload_bytes "$W/s1.json")" = 0 ] || fail "payload was copied over TCP"
# The text form flattens the same document.
timeout 10 "$B/iserkit" status "$W/status.sock" | grep -qx 'state: connected' || fail "text form lacks the state"

# Lose the target: the bridge is recovering and says so.
kill -9 "$TARGET"
state=""
for _ in $(seq 100); do
  status "$W/s2.json"
  state=$(jq -r .state "$W/s2.json")
  [ "$state" = recovering ] && break
  sleep 0.1
done
cat "$W/s2.json"
[ "$state" = recovering ] || fail "state after kill -9 of the target is $state, not recovering"
[ "$(jq -r .session.connections_lost "$W/s2.json")" -ge 1 ] || fail "no lost connection counted"

# Stopped while it reconnects: the logout ends the recovering session and the bridge exits 0
# (nothing of the session left behind: LeakSanitizer in the ASan stage).
stop_bridge "$NBD" "iserkit-nbd (recovering)"
[ ! -e "$W/status.sock" ] || fail "the status socket file stayed after exit"
if timeout 10 "$B/iserkit" status "$W/status.sock" 2>"$W/gone.err" >/dev/null; then fail "status of a stopped bridge succeeded"; fi
grep -q 'status: cannot query the status socket' "$W/gone.err" || fail "unclear message for a missing socket"
echo "PASS: iserkit-nbd status socket"
