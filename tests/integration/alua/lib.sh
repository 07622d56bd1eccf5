#!/usr/bin/env bash
# ALUA helpers of the gateway failover tests (alua_failover_test.sh; rbd/rbd_alua_failover_test.sh
# and rbd/rbd_two_gateways_test.sh), sourced after the test's own set-up: they use its BIN, tmp,
# pids and fail.
#   probe URL COMMAND...: iserkit-alua-probe (30 s at most)
#   states URL: "1=STATE 2=STATE" from REPORT TARGET PORT GROUPS
#   wait_states URL WANT SECONDS: until states URL says WANT; fails after SECONDS
#   start_mp_bridge URL...: iserkit-nbd --multipath failover over the URLs on $tmp/mp.sock (stats
#     $tmp/mp.stats, log $tmp/mp.log; NOP-Out every second, 1 s timeout, a path given up after 2 s,
#     the session after 60 s); sets bridge_pid
#   stat_of KEY: KEY of the bridge's stats file; current KEY: the same, the file refreshed first
#   fio_after_fault LOG: fio ($fio_pid, its output in LOG) must end within 75 s of the fault, exit 0
#     and report err= 0; prints its summary
#   before_fault: 4 s of fio ($fio_pid, which must still run) through the bridge, then the commands
#     each path carried so far in path0_before, path1_before (path 0, gateway A, must have some)
probe() { timeout 30 "$BIN/iserkit-alua-probe" "$@"; }
states() { probe "$1" rtpg | sed -n 's/^group=\([0-9]*\) state=\(.*\)$/\1=\2/p' | sort | tr '\n' ' ' | sed 's/ $//'; }
wait_states() {
  local got=
  for _ in $(seq $((10 * $3))); do
    got=$(states "$1") || true
    [[ $got == "$2" ]] && return 0
    sleep 0.1
  done
  fail "states through $1: '$got', want '$2'"
}
start_mp_bridge() {
  "$BIN/iserkit-nbd" "$@" --multipath failover --socket "$tmp/mp.sock" --stats-file "$tmp/mp.stats" \
    --nop-interval 1 --nop-timeout 1 --path-replacement-timeout 2 --replacement-timeout 60 --log-level info \
    >"$tmp/mp.log" 2>&1 &
  bridge_pid=$!; pids+=("$bridge_pid")
  for _ in $(seq 100); do [[ -S $tmp/mp.sock ]] && break; sleep 0.1; done
  [[ -S $tmp/mp.sock ]] || fail "iserkit-nbd did not start"
}
stat_of() { sed -n "s/^$1=//p" "$tmp/mp.stats"; }
current() { kill -USR1 "$bridge_pid"; sleep 0.3; stat_of "$1"; }
before_fault() {
  sleep 4
  kill -0 "$fio_pid" 2>/dev/null || fail "fio ended before the fault"
  path0_before=$(current path.0.commands)
  ((path0_before > 0)) || fail "no I/O went to gateway A (active/optimized) before the fault"
  path1_before=$(stat_of path.1.commands)
  echo "== kill -9 gateway A (path.0.commands=$path0_before path.1.commands=$path1_before)"
}
fio_after_fault() {
  local guard=$((SECONDS + 75))
  while kill -0 "$fio_pid" 2>/dev/null; do
    ((SECONDS < guard)) || fail "fio did not finish within 75 s of the fault (a request hangs)"
    sleep 0.5
  done
  wait "$fio_pid" || fail "fio failed: $(grep -iE 'err|verify' "$1" | head -5)"
  grep -q "err= 0" "$1" || fail "fio reported errors"
  echo "  fio: $(grep -E 'WRITE:|READ:' "$1" | tr -s ' ' | head -2 | tr '\n' ' ')"
}
