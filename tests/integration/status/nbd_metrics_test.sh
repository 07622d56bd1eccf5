#!/bin/bash
# iserkit-nbd --metrics HOST:PORT: Prometheus text on GET /metrics, scraped with curl during real
# I/O. The write byte counter grows by exactly the bytes nbdcopy wrote, the read counter by the
# bytes it read back, request counters match the latency histograms' counts, flushes are counted,
# a malformed or busy address is refused with a clear message, and after kill -9 and a restart
# of the target the lost connection, the reconnect attempts, the recovery and the unit attention
# the reinstated session met (not a request error) are counted; lost again for good, the bridge
# stopped while it reconnects exits 0.
source "$(dirname "$0")/lib.sh" metrics nbdcopy curl
start_target

if timeout 30 "$B/iserkit-nbd" "$URL" --socket "$W/x.sock" --metrics "nonsense" 2>"$W/bad.err" >/dev/null; then
  fail "--metrics nonsense accepted"
fi
grep -q 'metrics: .*address=nonsense' "$W/bad.err" || { cat "$W/bad.err"; fail "unclear message for a bad --metrics"; }

"$B/iserkit-nbd" "$URL" --socket "$W/nbd.sock" --metrics 127.0.0.1:0 >"$W/nbd.out" 2>"$W/nbd.err" &
NBD=$!; PIDS+=($NBD)
for _ in $(seq 100); do grep -q '^metrics on' "$W/nbd.out" && [ -S "$W/nbd.sock" ] && break; sleep 0.1; done
ADDR=$(sed -n 's/^metrics on //p' "$W/nbd.out")
[ -n "$ADDR" ] || { cat "$W/nbd.out" "$W/nbd.err"; fail "no 'metrics on' line"; }
case "$ADDR" in 127.0.0.1:[1-9]*) ;; *) fail "metrics bound to $ADDR";; esac

# A busy port is refused.
if timeout 30 "$B/iserkit-nbd" "$URL" --socket "$W/y.sock" --metrics "$ADDR" 2>"$W/busy.err" >/dev/null; then
  fail "a second bridge bound the same metrics port"
fi
grep -q 'metrics: ' "$W/busy.err" || { cat "$W/busy.err"; fail "unclear message for a busy port"; }

scrape() { curl -sf --max-time 10 "http://$ADDR/metrics" >"$1" || fail "scrape failed"; }
# metric FILE NAME KIND: the sample's value as an integer (0 when absent).
metric() { awk -v n="$2{kind=\"$3\"}" '$1 == n { printf "%.0f\n", $2; f=1 } END { if (!f) print 0 }' "$1"; }

scrape "$W/m0"
grep -q '^# TYPE iserkit_nbd_request_duration_seconds histogram' "$W/m0" || fail "no latency histogram"
w0=$(metric "$W/m0" iserkit_nbd_request_bytes_total write)
r0=$(metric "$W/m0" iserkit_nbd_request_bytes_total read)

head -c 4194304 /dev/urandom >"$W/data"
timeout 60 nbdcopy --flush "$W/data" "nbd+unix:///?socket=$W/nbd.sock" || fail "nbdcopy write failed"
timeout 60 nbdcopy --no-extents "nbd+unix:///?socket=$W/nbd.sock" "$W/back" || fail "nbdcopy read failed"  # --no-extents: read every byte, holes too (BLOCK_STATUS would skip them)
cmp -n 4194304 "$W/data" "$W/back" || fail "data read back differs"
scrape "$W/m1"
grep '^iserkit_nbd_request' "$W/m1" | grep -v '_bucket' | head -30
w1=$(metric "$W/m1" iserkit_nbd_request_bytes_total write)
r1=$(metric "$W/m1" iserkit_nbd_request_bytes_total read)
[ $((w1 - w0)) = 4194304 ] || fail "write bytes grew by $((w1 - w0)), not the 4194304 written"
[ $((r1 - r0)) = 67108864 ] || fail "read bytes grew by $((r1 - r0)), not the 64 MiB nbdcopy read"
for k in read write; do
  n=$(metric "$W/m1" iserkit_nbd_requests_total $k)
  c=$(metric "$W/m1" iserkit_nbd_request_duration_seconds_count $k)
  [ "$n" -gt 0 ] || fail "no $k requests counted"
  [ "$n" = "$c" ] || fail "$k: $n requests but $c latency observations"
done
[ "$(metric "$W/m1" iserkit_nbd_requests_total flush)" -ge 1 ] || fail "nbdcopy's flush was not counted"
[ "$(metric "$W/m1" iserkit_nbd_request_errors_total write)" = 0 ] || fail "write errors counted"
# plain: a sample without labels as an integer.
plain() { awk -v n="$2" '$1 == n { printf "%.0f\n", $2; f=1 } END { if (!f) print -1 }' "$1"; }
[ "$(plain "$W/m1" iserkit_nbd_connected)" = 1 ] || fail "not connected"
[ "$(plain "$W/m1" iserkit_nbd_copied_payload_bytes_total)" = 0 ] || fail "payload copied over TCP"
# Lose the target and bring it back on the same portal: the session counters follow.
kill -9 "$TARGET"
# Its listening socket is gone only once the process is (a restart before that met "Address
# already in use" once under a loaded parallel ctest).
# The port came from the ephemeral range, so another test's outgoing connection may hold it for a
# moment: a few tries.
wait "$TARGET" 2>/dev/null
for try in 1 2 3 4 5; do
  "$B/iserkit-target" --listen "$PORTAL" --lun mem:64M >"$W/target2.log" 2>&1 &
  TARGET2=$!; PIDS+=($TARGET2)
  for _ in $(seq 50); do grep -q 'listening on' "$W/target2.log" && break; kill -0 "$TARGET2" 2>/dev/null || break; sleep 0.1; done
  grep -q 'listening on' "$W/target2.log" && break
  echo "restart try $try: $(tail -1 "$W/target2.log")"
  kill -9 "$TARGET2" 2>/dev/null; wait "$TARGET2" 2>/dev/null
  sleep 1
done
grep -q 'listening on' "$W/target2.log" || { cat "$W/target2.log"; fail "iserkit-target did not restart on $PORTAL"; }
timeout 60 nbdcopy "nbd+unix:///?socket=$W/nbd.sock" "$W/back2" || fail "nbdcopy after the restart failed"
ok=""
for _ in $(seq 50); do
  scrape "$W/m2"
  if [ "$(plain "$W/m2" iserkit_nbd_recoveries_total)" -ge 1 ] && [ "$(plain "$W/m2" iserkit_nbd_connected)" = 1 ]; then
    ok=1; break
  fi
  sleep 0.2
done
grep '^iserkit_nbd_[a-z_]* ' "$W/m2"
[ -n "$ok" ] || fail "no recovery counted after the target came back"
[ "$(plain "$W/m2" iserkit_nbd_connections_lost_total)" -ge 1 ] || fail "no lost connection counted"
[ "$(plain "$W/m2" iserkit_nbd_reconnect_attempts_total)" -ge 1 ] || fail "no reconnect attempt counted"
# The reinstated session met UNIT ATTENTION 29h: counted as a unit attention, not as an error.
[ "$(plain "$W/m2" iserkit_nbd_unit_attentions_total)" -ge 1 ] || fail "no unit attention counted"
[ "$(metric "$W/m2" iserkit_nbd_request_errors_total read)" = 0 ] || fail "read errors counted after the restart"
# Lose the target for good and stop the bridge while it reconnects: it exits 0.
kill -9 "$TARGET2"
for _ in $(seq 100); do
  scrape "$W/m3"
  [ "$(plain "$W/m3" iserkit_nbd_connected)" = 0 ] && break
  sleep 0.1
done
[ "$(plain "$W/m3" iserkit_nbd_connected)" = 0 ] || fail "still connected after the second kill"
stop_bridge "$NBD" "iserkit-nbd (recovering)"
echo "PASS: iserkit-nbd metrics"
