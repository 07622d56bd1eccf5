#!/bin/bash
# The metrics both daemons share (docs/metrics.md, issue 26 item 7), scraped with curl from the
# real iserkit-target and iserkit-nbd:
# - iserkit_build_info{version,commit,compiler} 1 in both, the same version as --version prints;
# - process_* read from /proc: resident memory > 0, open fds > 0 and <= max fds, a start time in
#   the last hour, CPU seconds that grow across 80 MiB of I/O through the chain;
# - the target's per-LUN series carry target (the IQN) and lun labels for every configured LU, the
#   bridge names its target and LUN in iserkit_nbd_export_info; the initiator name a peer sends
#   appears in no series;
# - a UNIT ATTENTION lands in the unit-attention counters, not in the error counters: on the
#   target, the POWER ON/RESET a fresh session meets on LUN 1; on the bridge, the one after the
#   target was killed and restarted (session reinstatement);
# - every metric either daemon serves is listed in docs/metrics.md.
source "$(dirname "$0")/lib.sh" daemon-metrics nbdcopy curl

"$B/iserkit-target" --listen 127.0.0.1:0 --lun mem:64M --lun mem:16M --metrics 127.0.0.1:0 >"$W/target.log" 2>&1 &
TARGET=$!; PIDS+=($TARGET)
for _ in $(seq 100); do grep -q '^metrics on' "$W/target.log" && grep -q 'listening on' "$W/target.log" && break; sleep 0.1; done
TADDR=$(sed -n 's/^metrics on //p' "$W/target.log")
PORTAL=$(grep -o 'listening on [0-9.]*:[0-9]*' "$W/target.log" | head -1 | cut -d' ' -f3)
[ -n "$TADDR" ] && [ -n "$PORTAL" ] || fail "target did not start"
IQN=$("$B/iserkit" discover "iscsi://$PORTAL" | head -1)
[ -n "$IQN" ] || fail "no target discovered"

scrape() { curl -sf --max-time 10 "http://$1/metrics" >"$2" || fail "scrape of $1 failed"; }
# value FILE NAME [LABEL...]: the first sample of NAME whose labels hold every LABEL (k="v"), as
# printed; "none" when there is none.
value() {
  local f=$1 n=$2; shift 2
  awk -v n="$n" -v want="$*" '
    { split($1, a, "{"); if (a[1] != n) next
      k = split(want, w, " "); ok = 1
      for (i = 1; i <= k; i++) if (index($1, w[i]) == 0) ok = 0
      if (ok) { print $2; found = 1; exit } }
    END { if (!found) print "none" }' "$f"
}
# ivalue FILE NAME [LABEL...]: the same as an integer (0 when there is none).
ivalue() { local v; v=$(value "$@"); [ "$v" = none ] && v=0; printf '%.0f\n' "$v"; }
# check_common FILE WHO PROGRAM: build info and sane process metrics.
check_common() {
  local f=$1 who=$2 version
  version=$("$B/$3" --version | awk '{print $2}')
  grep -q "^iserkit_build_info{version=\"$version\",commit=\"[0-9a-f]\{12\}\(-dirty\)\?\",compiler=\"[a-z]* [0-9.]*\"} 1$" "$f" ||
    { grep iserkit_build_info "$f"; fail "$who: no iserkit_build_info for version $version"; }
  "$B/$3" --version | grep -q "commit $(sed -n 's/.*commit="\([^"]*\)".*/\1/p' "$f")" || fail "$who: --version names another commit"
  local rss fds max start now
  rss=$(value "$f" process_resident_memory_bytes); fds=$(value "$f" process_open_fds)
  max=$(value "$f" process_max_fds); start=$(value "$f" process_start_time_seconds); now=$(date +%s)
  [ "$(value "$f" process_virtual_memory_bytes)" != none ] || fail "$who: no process_virtual_memory_bytes"
  awk -v r="$rss" -v o="$fds" -v m="$max" -v s="$start" -v now="$now" \
    'BEGIN { exit !(r > 1e6 && o > 3 && m >= o && s > now - 3600 && s <= now + 1) }' ||
    fail "$who: insane process metrics: rss=$rss open_fds=$fds max_fds=$max start=$start now=$now"
}

scrape "$TADDR" "$W/t0"
check_common "$W/t0" target iserkit-target
for lun in 0 1; do
  [ "$(value "$W/t0" iserkit_target_lun_capacity_bytes "target=\"$IQN\"" "lun=\"$lun\"")" != none ] ||
    { grep iserkit_target_lun "$W/t0"; fail "no series for $IQN LUN $lun"; }
done
[ "$(value "$W/t0" iserkit_target_lun_capacity_bytes "lun=\"1\"")" = 16777216 ] || fail "LUN 1 capacity"
grep -q 'sense_key="unit_attention"' "$W/t0" && fail "unit attentions still listed among the errors"

# The bridge on LUN 0, with an initiator name no series may carry.
"$B/iserkit-nbd" "iscsi://$PORTAL/$IQN/0" --socket "$W/nbd.sock" --metrics 127.0.0.1:0 \
  --initiator-name iqn.2026-11.org.example:peer-chosen-name >"$W/nbd.out" 2>"$W/nbd.err" &
NBD=$!; PIDS+=($NBD)
for _ in $(seq 100); do grep -q '^metrics on' "$W/nbd.out" && [ -S "$W/nbd.sock" ] && break; sleep 0.1; done
NADDR=$(sed -n 's/^metrics on //p' "$W/nbd.out")
[ -n "$NADDR" ] || fail "bridge did not start"
scrape "$NADDR" "$W/n0"
check_common "$W/n0" bridge iserkit-nbd
[ "$(value "$W/n0" iserkit_nbd_export_info "target=\"$IQN\"" 'lun="0"')" = 1 ] ||
  { grep export_info "$W/n0"; fail "bridge: no iserkit_nbd_export_info for $IQN LUN 0"; }
scrape "$TADDR" "$W/t1"
[ "$(value "$W/t1" iserkit_target_node_sessions "target=\"$IQN\"")" = 1 ] || fail "target: the bridge's session not counted for $IQN"
grep -q peer-chosen-name "$W/t1" "$W/n0" && fail "a peer's initiator name became a label"

# 16 MiB written, 64 MiB read through the chain: CPU seconds grow in both, LUN 0's counters by the bytes.
cpu_t0=$(value "$W/t1" process_cpu_seconds_total); cpu_n0=$(value "$W/n0" process_cpu_seconds_total)
w0=$(ivalue "$W/t1" iserkit_target_lun_bytes_total 'lun="0"' 'kind="write"')
head -c 16777216 /dev/urandom >"$W/data"
timeout 60 nbdcopy --flush "$W/data" "nbd+unix:///?socket=$W/nbd.sock" || fail "nbdcopy write failed"
timeout 60 nbdcopy --no-extents "nbd+unix:///?socket=$W/nbd.sock" "$W/back" || fail "nbdcopy read failed"
cmp -n 16777216 "$W/data" "$W/back" || fail "data read back differs"
scrape "$TADDR" "$W/t2"; scrape "$NADDR" "$W/n2"
cpu_t1=$(value "$W/t2" process_cpu_seconds_total); cpu_n1=$(value "$W/n2" process_cpu_seconds_total)
echo "cpu seconds: target $cpu_t0 -> $cpu_t1, bridge $cpu_n0 -> $cpu_n1"
awk -v a="$cpu_t0" -v b="$cpu_t1" 'BEGIN { exit !(b > a) }' || fail "target: CPU seconds did not grow with I/O"
awk -v a="$cpu_n0" -v b="$cpu_n1" 'BEGIN { exit !(b > a) }' || fail "bridge: CPU seconds did not grow with I/O"
w1=$(ivalue "$W/t2" iserkit_target_lun_bytes_total 'lun="0"' 'kind="write"')
[ $((w1 - w0)) = 16777216 ] || fail "LUN 0 write bytes grew by $((w1 - w0)), not 16777216"
[ "$(value "$W/t2" iserkit_target_lun_bytes_total 'lun="1"' 'kind="write"')" = 0 ] || fail "LUN 1 got LUN 0's writes"

# Target: a fresh session meets POWER ON/RESET on LUN 1 — a unit attention, not an error.
ua0=$(ivalue "$W/t2" iserkit_target_lun_unit_attentions_total 'lun="1"')
err0=$(ivalue "$W/t2" iserkit_target_lun_errors_total 'lun="1"')
tua0=$(ivalue "$W/t2" iserkit_target_scsi_unit_attentions_total)
timeout 30 "$B/iserkit" read "iscsi://$PORTAL/$IQN/1" --length 4096 >/dev/null || fail "iserkit read of LUN 1 failed"
scrape "$TADDR" "$W/t3"
ua1=$(ivalue "$W/t3" iserkit_target_lun_unit_attentions_total 'lun="1"')
err1=$(ivalue "$W/t3" iserkit_target_lun_errors_total 'lun="1"')
tua1=$(ivalue "$W/t3" iserkit_target_scsi_unit_attentions_total)
grep '^iserkit_target_lun_\(unit_attentions\|errors\)_total\|^iserkit_target_scsi_unit' "$W/t3"
[ $((ua1 - ua0)) -ge 1 ] || fail "target: LUN 1's unit attention not counted ($ua0 -> $ua1)"
[ $((tua1 - tua0)) -ge 1 ] || fail "target: unit attention total did not grow ($tua0 -> $tua1)"
[ "$err1" = "$err0" ] || fail "target: the unit attention was counted as an error ($err0 -> $err1)"
grep -q 'sense_key="unit_attention"' "$W/t3" && fail "unit attentions listed among the errors"

# Bridge: kill -9 and restart the target on the same portal; the reinstated session meets a unit
# attention that the initiator absorbs: counted as one, no request fails.
nua0=$(ivalue "$W/n2" iserkit_nbd_unit_attentions_total)
kill -9 "$TARGET"
"$B/iserkit-target" --listen "$PORTAL" --lun mem:64M --lun mem:16M >"$W/target2.log" 2>&1 &
TARGET2=$!; PIDS+=($TARGET2)
timeout 60 nbdcopy --no-extents "nbd+unix:///?socket=$W/nbd.sock" "$W/back2" || fail "nbdcopy after the restart failed"
ok=""
for _ in $(seq 50); do
  scrape "$NADDR" "$W/n3"
  [ "$(value "$W/n3" iserkit_nbd_recoveries_total)" != 0 ] && [ "$(ivalue "$W/n3" iserkit_nbd_unit_attentions_total)" != "$nua0" ] &&
    { ok=1; break; }
  sleep 0.2
done
grep '^iserkit_nbd_\(unit_attentions\|recoveries\|request_errors\)' "$W/n3"
[ -n "$ok" ] || fail "bridge: no unit attention counted after the reinstatement ($nua0 -> $(value "$W/n3" iserkit_nbd_unit_attentions_total))"
for k in read write flush; do
  [ "$(value "$W/n3" iserkit_nbd_request_errors_total "kind=\"$k\"")" = 0 ] || fail "bridge: $k errors counted"
done
# Every family either daemon serves is in the one table of docs/metrics.md.
for f in "$W/t3" "$W/n3"; do
  for name in $(sed -n 's/^# TYPE \([a-z_]*\) .*/\1/p' "$f"); do
    grep -q "\`$name\`" "$ISERKIT_SOURCE/docs/metrics.md" || fail "$name is not in docs/metrics.md"
  done
done
stop_bridge "$NBD" iserkit-nbd
echo "PASS: build info, process metrics, per-LUN labels and unit attentions in both daemons"
