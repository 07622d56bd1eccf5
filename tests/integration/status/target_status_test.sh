#!/bin/bash
# iserkit-target --status-socket PATH and --metrics HOST:PORT, against the real programs:
# - `iserkit status PATH --json` lists the target and its LUN; a live session (iserkit-nbd holds
#   one) appears with its initiator name, ISID, TSIH, portal and transport, and is gone after its
#   logout;
# - the Prometheus counters grow the way they must during real I/O: write bytes by exactly what
#   `iserkit write` wrote, read bytes by what `iserkit read` read, a login to a target that does
#   not exist is counted as target_not_found, each command kind's count equals its latency
#   histogram's count, the POWER ON/RESET each new session meets is a unit attention, not an error;
# - a client that connects to the metrics port or the status socket and says nothing does not
#   block another; a malformed --metrics or a `metrics` key of the wrong type is refused clearly.
source "$(dirname "$0")/lib.sh" target-status curl python3
# The system interpreter: a version-manager shim (pyenv) costs seconds per call.
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3

target_refuses metrics nonsense 'metrics: .*address=nonsense' 'metrics = 9101' 'metrics must be HOST:PORT'

# The socket path from the TOML file, the metrics address from the flag.
printf 'status_socket = "%s"\n' "$W/target.sock" >"$W/target.toml"
"$B/iserkit-target" --listen 127.0.0.1:0 --lun mem:64M --config "$W/target.toml" --metrics 127.0.0.1:0 \
  >"$W/target.log" 2>&1 &
TARGET=$!; PIDS+=($TARGET)
for _ in $(seq 100); do grep -q '^metrics on' "$W/target.log" && [ -S "$W/target.sock" ] && break; sleep 0.1; done
ADDR=$(sed -n 's/^metrics on //p' "$W/target.log")
PORTAL=$(grep -o 'listening on [0-9.]*:[0-9]*' "$W/target.log" | head -1 | cut -d' ' -f3)
[ -n "$ADDR" ] && [ -n "$PORTAL" ] || { cat "$W/target.log"; fail "target did not start"; }
[ "$(stat -c %a "$W/target.sock")" = 600 ] || fail "status socket mode is not 0600"
IQN=$("$B/iserkit" discover "iscsi://$PORTAL" | head -1)
URL="iscsi://$PORTAL/$IQN/0"

st() { "$B/iserkit" status "$W/target.sock" --json >"$1" || fail "iserkit status failed"; }
# js FILE EXPR: a Python expression over the document `d`.
js() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }
# listed_sessions FILE N: 1 unless (within 10 s) the status, kept in FILE, lists N sessions of the
# bridge's initiator (iqn.2026-11.org.example:status-test).
listed_sessions() {
  for _ in $(seq 100); do
    st "$1"
    [ "$(js "$1" 'len([s for s in d["sessions"] if s["initiator"] == "iqn.2026-11.org.example:status-test"])')" = "$2" ] &&
      return 0
    sleep 0.1
  done
  return 1
}
st "$W/s0"
[ "$(js "$W/s0" 'd["program"]')" = iserkit-target ] || fail "not the target's status"
[ "$(js "$W/s0" 'd["targets"][0]["name"]')" = "$IQN" ] || fail "target not listed"
[ "$(js "$W/s0" 'd["targets"][0]["luns"][0]["blocks"] * d["targets"][0]["luns"][0]["block_size"]')" = 67108864 ] ||
  fail "LUN 0 size not listed"
[ "$(js "$W/s0" 'len([s for s in d["sessions"] if s["type"] == "normal"])')" = 0 ] || fail "sessions before any login"
[ "$(js "$W/s0" 'd["payload_budget"]["limit_bytes"]')" = 536870912 ] || fail "global payload budget limit"
"$B/iserkit" status "$W/target.sock" | grep -q '^program' || fail "iserkit status without --json prints nothing flat"

# A live session: iserkit-nbd logs in and holds it.
"$B/iserkit-nbd" "$URL" --socket "$W/nbd.sock" --initiator-name iqn.2026-11.org.example:status-test \
  >"$W/nbd.out" 2>"$W/nbd.err" &
NBD=$!; PIDS+=($NBD)
listed_sessions "$W/s1" 1 || { cat "$W/s1" "$W/nbd.err"; fail "the bridge's session is not listed"; }
S='[s for s in d["sessions"] if s["initiator"] == "iqn.2026-11.org.example:status-test"][0]'
[ "$(js "$W/s1" "$S[\"target\"]")" = "$IQN" ] || fail "session target"
[ "$(js "$W/s1" "$S[\"tsih\"] > 0")" = True ] || fail "session TSIH"
[ "$(js "$W/s1" "len($S[\"isid\"])")" = 12 ] || fail "session ISID"
[ "$(js "$W/s1" "$S[\"connections\"][0][\"transport\"]")" = tcp ] || fail "session transport"
[ "$(js "$W/s1" "$S[\"connections\"][0][\"portal\"]")" = "$PORTAL" ] || fail "session portal"

scrape() { curl -sf --max-time 10 "http://$ADDR/metrics" >"$1" || fail "scrape failed"; }
# metric FILE NAME LABELS: the sample's value as an integer (0 when absent).
metric() { awk -v n="$2{$3}" '$1 == n { printf "%.0f\n", $2; f=1 } END { if (!f) print 0 }' "$1"; }
scrape "$W/m0"
grep -q '^# TYPE iserkit_target_scsi_command_duration_seconds histogram' "$W/m0" || fail "no latency histogram"
[ "$(metric "$W/m0" iserkit_target_sessions 'tenant="",transport="tcp"')" -ge 1 ] || fail "session gauge"
w0=$(metric "$W/m0" iserkit_target_scsi_bytes_total 'kind="write"')
r0=$(metric "$W/m0" iserkit_target_scsi_bytes_total 'kind="read"')
nf0=$(metric "$W/m0" iserkit_target_login_failures_total 'reason="target_not_found"')

# Real I/O: 3 MiB written at 1 MiB, 2 MiB read back.
head -c 3145728 /dev/urandom >"$W/data"
timeout 60 "$B/iserkit" write "$URL" --offset 1048576 -i "$W/data" >/dev/null || fail "iserkit write failed"
timeout 60 "$B/iserkit" read "$URL" --offset 1048576 --length 2097152 -o "$W/back" >/dev/null || fail "iserkit read failed"
cmp -n 2097152 "$W/data" "$W/back" || fail "data read back differs"
# A login to a target that does not exist.
"$B/iserkit" inquiry "iscsi://$PORTAL/iqn.2026-11.org.example:nope/0" >/dev/null 2>&1 && fail "login to a missing target"
# While a client holds the metrics port open and says nothing, another scrape is answered.
exec 3<>"/dev/tcp/${ADDR%:*}/${ADDR##*:}"
scrape "$W/m1"
exec 3>&-
w1=$(metric "$W/m1" iserkit_target_scsi_bytes_total 'kind="write"')
r1=$(metric "$W/m1" iserkit_target_scsi_bytes_total 'kind="read"')
[ $((w1 - w0)) = 3145728 ] || fail "write bytes grew by $((w1 - w0)), not the 3145728 written"
[ $((r1 - r0)) = 2097152 ] || fail "read bytes grew by $((r1 - r0)), not the 2097152 read"
[ $(($(metric "$W/m1" iserkit_target_login_failures_total 'reason="target_not_found"') - nf0)) = 1 ] ||
  fail "the failed login is not counted as target_not_found"
for k in read write other; do
  n=$(metric "$W/m1" iserkit_target_scsi_commands_total "kind=\"$k\"")
  c=$(metric "$W/m1" iserkit_target_scsi_command_duration_seconds_count "kind=\"$k\"")
  [ "$n" -gt 0 ] || fail "no $k commands counted"
  [ "$n" = "$c" ] || fail "$k: $n commands but $c latency observations"
done
[ "$(metric "$W/m1" iserkit_target_payload_budget_limit_bytes 'tenant=""')" = 536870912 ] || fail "budget limit"
grep -q '^iserkit_target_backend_errors_total{error="EIO"} 0' "$W/m1" || fail "no backend error counters"
# Each new session meets POWER ON/RESET (SAM-5 §5.14): a unit attention, not an error.
ua=$(awk '$1 == "iserkit_target_scsi_unit_attentions_total" { printf "%.0f\n", $2 }' "$W/m1")
[ "${ua:-0}" -ge 2 ] || fail "unit attentions not counted: ${ua:-none}"
grep -q 'sense_key="unit_attention"' "$W/m1" && fail "unit attentions counted among the errors"

# A status client that connects and says nothing does not block `iserkit status`.
"$PY" -c 'import socket,sys,time; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); time.sleep(30)' \
  "$W/target.sock" &
SILENT=$!; PIDS+=($SILENT)
sleep 0.2
timeout 5 "$B/iserkit" status "$W/target.sock" --json >"$W/s2" || fail "a silent status client blocked another"
kill "$SILENT" 2>/dev/null
[ "$(js "$W/s2" "$S[\"bytes\"][\"write\"] >= 0")" = True ] || fail "per-session counters"

# Logout: the session is no longer listed.
kill -TERM "$NBD"
wait "$NBD" 2>/dev/null
listed_sessions "$W/s3" 0 || { cat "$W/s3"; fail "the session is still listed after logout"; }
kill -TERM "$TARGET"
for _ in $(seq 100); do kill -0 "$TARGET" 2>/dev/null || break; sleep 0.1; done
kill -0 "$TARGET" 2>/dev/null && fail "target did not stop"
[ -e "$W/target.sock" ] && fail "status socket left behind"
echo "PASS: iserkit-target status and metrics"
