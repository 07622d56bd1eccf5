#!/bin/bash
# iserkit-nbd with two paths (--multipath failover): per-path metrics and status, and the NBD
# buffer budget. Two iserkit-target processes serve the same file LUN under the same target name
# (so the same LU identity: one gateway per path, each listing the other as an ALUA peer) on
# loopback. nbdcopy writes through the bridge: path 0 carries it (failover); then target 0 is
# killed and the next write goes through path 1. The metrics show path 0 down (path_up 0, a down
# counted) and path 1's written bytes grown by at least what was written; the status JSON lists
# the same per-path state and bytes; the buffer budget gauge is back to 0 when idle and its limit
# is the per-connection 64 MiB.
source "$(dirname "$0")/lib.sh" nbd-multipath nbdcopy curl python3
# The system interpreter: a version-manager shim (pyenv) costs seconds per call.
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
IQN=iqn.2026-11.org.iserkit:mp
truncate -s 64M "$W/lun.img"
start_gateway() {  # INDEX TPGT PEER
  "$B/iserkit-target" --iqn $IQN --lun "$W/lun.img" --no-iser --listen "127.0.0.1:0,tpgt=$2" \
    --alua-peer "$3=active/optimized" >"$W/target$1.log" 2>&1 &
  PIDS+=($!); eval "GW$1=$!"
  for _ in $(seq 100); do grep -q 'listening on' "$W/target$1.log" && break; sleep 0.1; done
  eval "PORTAL$1=$(grep -o 'listening on [0-9.]*:[0-9]*' "$W/target$1.log" | head -1 | cut -d' ' -f3)"
}
start_gateway 0 1 2
start_gateway 1 2 1
[ -n "$PORTAL0" ] && [ -n "$PORTAL1" ] || { cat "$W"/target*.log; fail "targets did not start"; }

"$B/iserkit-nbd" "iscsi://$PORTAL0/$IQN/0" "iscsi://$PORTAL1/$IQN/0" --multipath failover \
  --socket "$W/nbd.sock" --metrics 127.0.0.1:0 --status-socket "$W/status.sock" --nop-interval 1 --nop-timeout 1 \
  --path-replacement-timeout 2 --replacement-timeout 30 >"$W/nbd.out" 2>"$W/nbd.err" &
PIDS+=($!)
for _ in $(seq 100); do grep -q '^metrics on' "$W/nbd.out" && [ -S "$W/nbd.sock" ] && [ -S "$W/status.sock" ] && break; sleep 0.1; done
ADDR=$(sed -n 's/^metrics on //p' "$W/nbd.out")
[ -n "$ADDR" ] && [ -S "$W/nbd.sock" ] || { cat "$W/nbd.out" "$W/nbd.err"; fail "bridge did not start"; }

scrape() { curl -sf --max-time 10 "http://$ADDR/metrics" >"$1" || fail "scrape failed"; }
# metric FILE NAME PATH: the sample of path PATH as an integer (-1 when absent).
metric() { awk -v n="$2" -v p="path=\"$3\"" 'index($1, n "{") == 1 && index($1, p) { printf "%.0f\n", $2; f=1 } END { if (!f) print -1 }' "$1"; }
plain() { awk -v n="$2" '$1 == n { printf "%.0f\n", $2; f=1 } END { if (!f) print -1 }' "$1"; }

head -c 1048576 /dev/urandom >"$W/a"
timeout 60 nbdcopy "$W/a" "nbd+unix:///?socket=$W/nbd.sock" || fail "first write failed"
sleep 1.5  # the bridge moves its counters into the metrics once a second
scrape "$W/m0"
[ "$(metric "$W/m0" iserkit_nbd_path_up 0)" = 1 ] && [ "$(metric "$W/m0" iserkit_nbd_path_up 1)" = 1 ] ||
  { grep path_up "$W/m0"; fail "both paths should be up"; }
[ "$(metric "$W/m0" iserkit_nbd_path_data_out_bytes_total 0)" -ge 1048576 ] || fail "path 0 did not carry the write"
out1_before=$(metric "$W/m0" iserkit_nbd_path_data_out_bytes_total 1)
[ "$(plain "$W/m0" iserkit_nbd_buffer_budget_limit_bytes)" = 67108864 ] || fail "buffer budget limit"
[ "$(plain "$W/m0" iserkit_nbd_buffer_budget_used_bytes)" = 0 ] || fail "buffer budget not given back when idle"

kill -9 "$GW0"
head -c 1048576 /dev/urandom >"$W/b"
timeout 60 nbdcopy "$W/b" "nbd+unix:///?socket=$W/nbd.sock" || fail "write after path 0 died failed"
ok=""
for _ in $(seq 50); do
  scrape "$W/m1"
  # the bridge refreshes path values once a second: wait for the down AND for path 1's bytes
  [ "$(metric "$W/m1" iserkit_nbd_path_up 0)" = 0 ] && [ "$(metric "$W/m1" iserkit_nbd_path_downs_total 0)" -ge 1 ] &&
    [ $(( $(metric "$W/m1" iserkit_nbd_path_data_out_bytes_total 1) - out1_before )) -ge 1048576 ] && ok=1 && break
  sleep 0.2
done
grep '^iserkit_nbd_path\|^iserkit_nbd_failovers\|^iserkit_nbd_buffer' "$W/m1"
[ -n "$ok" ] || fail "path 0 not shown down"
[ $(( $(metric "$W/m1" iserkit_nbd_path_data_out_bytes_total 1) - out1_before )) -ge 1048576 ] ||
  fail "path 1 did not carry the second write"
[ "$(metric "$W/m1" iserkit_nbd_path_up 1)" = 1 ] || fail "path 1 should be up"
[ "$(plain "$W/m1" iserkit_nbd_failovers_total)" -ge 0 ] || fail "no failover counter"

"$B/iserkit" status --json "$W/status.sock" >"$W/s1" || fail "iserkit status failed"
"$PY" - "$W/s1" <<'PY' || fail "status JSON per-path fields"
import json, sys
d = json.load(open(sys.argv[1]))
p = d["multipath"]["paths"]
assert p[0]["state"] != "up", p[0]
assert p[0]["downs"] >= 1, p[0]
assert p[1]["state"] == "up", p[1]
assert p[1]["data_out_bytes"] >= 1048576, p[1]
# Where reinstating stands: an up path has none pending; a down one counts its logins.
assert p[1]["reinstate_attempts"] == 0 and p[1]["next_attempt_in_ms"] is None, p[1]
assert p[0]["state"] != "down" or p[0]["reinstate_attempts"] >= 0 and "next_attempt_in_ms" in p[0], p[0]
assert d["buffer_budget"]["limit_bytes_per_connection"] == 67108864, d["buffer_budget"]
PY
echo "PASS: iserkit-nbd multipath metrics"
