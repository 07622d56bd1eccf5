#!/usr/bin/env bash
# Shared by the recovery fault tests: start/kill/restart iserkit-target on a fixed file and port,
# start iserkit-nbd on a Unix socket, mount iserkit-fuse on a directory. Every process started here
# is stopped on exit (SIGCONT first, for a target left frozen) and every mount unmounted.
set -euo pipefail
skip() { echo "SKIP: $*" >&2; exit 77; }
BIN=${ISERKIT_BIN:?ISERKIT_BIN must name the bin directory of the build}
export PATH=/usr/bin:$PATH   # nbdsh needs the system python3 with libnbd's bindings
tmp=$(mktemp -d /tmp/iserkit-recovery.XXXXXX)
pids=()
mounts=()
target_pid=
cleanup() {
  [[ -n $target_pid ]] && kill -CONT "$target_pid" 2>/dev/null || true
  # Lazily, so a mount whose daemon died (or hangs) never stays behind.
  for m in "${mounts[@]}"; do fusermount3 -u -z "$m" 2>/dev/null || true; done
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$tmp"/*.log; do echo "--- $(basename "$f")"; tail -n ${LOG_TAIL_LINES:-40} "$f"; done
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

# need_fuse: skips (77) unless FUSE mounts can be made here and iserkit-fuse is built.
need_fuse() {
  [[ -c /dev/fuse ]] || skip "/dev/fuse is missing"
  command -v fusermount3 >/dev/null || skip "fusermount3 is not installed (package fuse3)"
  [[ -x $BIN/iserkit-fuse ]] || skip "iserkit-fuse is not built (libfuse3-dev missing at configure time)"
}

# mount_fuse NAME ARGS...: iserkit-fuse of the target on $tmp/NAME (log $tmp/NAME.log, level info,
# which shows the session's "connection lost" / "recovered" lines); sets fuse_pid and lun_file
# (the LUN 0 file of the view). $fuse_urls (an array; default the target on 127.0.0.1:$port) are
# the URLs given, and $fuse_prefix (an array, e.g. nsenter into a network namespace; default none)
# runs before it; it must exec iserkit-fuse, so that $fuse_pid is the view's.
mount_fuse() {
  local name=$1; shift
  local urls=("iscsi://127.0.0.1:$port/$iqn")
  [[ -n ${fuse_urls+x} ]] && urls=("${fuse_urls[@]}")
  mkdir -p "$tmp/$name"
  ${fuse_prefix+"${fuse_prefix[@]}"} "$BIN/iserkit-fuse" "${urls[@]}" "$tmp/$name" --foreground --log-level info "$@" \
    >"$tmp/$name.log" 2>&1 &
  fuse_pid=$!; pids+=($fuse_pid); mounts+=("$tmp/$name")
  lun_file=$tmp/$name/$iqn/lun0
  for _ in $(seq 100); do
    mountpoint -q "$tmp/$name" && [[ -f $lun_file ]] && return 0
    kill -0 $fuse_pid 2>/dev/null || break
    sleep 0.1
  done
  fail "iserkit-fuse $name did not mount $lun_file"
}

# unmount_fuse NAME: SIGTERM to iserkit-fuse, which must exit 0 and leave no mount.
unmount_fuse() {
  kill -TERM $fuse_pid
  wait $fuse_pid || fail "iserkit-fuse exited with $? on SIGTERM"
  ! mountpoint -q "$tmp/$1" || fail "$tmp/$1 still mounted after SIGTERM"
}

# fio_name PATH: PATH with ':' escaped (fio splits --filename on ':'; IQNs have colons).
fio_name() { printf '%s' "${1//:/\\:}"; }

# wait_for PID SECONDS WHAT: waits for PID to end, failing the test if it takes longer.
wait_for() {
  local pid=$1 guard=$((SECONDS + $2))
  while kill -0 "$pid" 2>/dev/null; do
    ((SECONDS < guard)) || fail "$3 did not finish within $2 s (a request hangs)"
    sleep 0.5
  done
}

# wait_fio PID SECONDS: wait_for the fio job PID, then fails unless it exited 0 and reported
# err= 0 in $tmp/fio.log; prints fio's WRITE/READ summary.
wait_fio() {
  wait_for "$1" "$2" fio
  wait "$1" || fail "fio failed: $(grep -iE 'err|verify' "$tmp/fio.log" | head -5)"
  grep -q "err= 0" "$tmp/fio.log" || fail "fio reported errors"
  echo "  fio: $(grep -E 'WRITE:|READ:' "$tmp/fio.log" | tr -s ' ' | head -2 | tr '\n' ' ')"
}

# wait_mark MARK PID SECONDS WHAT: waits until the client PID (a script that touches $tmp/MARK
# when it reached a step) made the mark; fails if the client ended first or SECONDS passed, with
# WHAT ("the reader saw no EIO") and the client's log ($tmp/client.log).
wait_mark() {
  local guard=$((SECONDS + $3))
  until [[ -e $tmp/$1 ]]; do
    kill -0 "$2" 2>/dev/null || fail "the client ended early: $(cat "$tmp/client.log")"
    ((SECONDS < guard)) || fail "$4 within $3 s: $(cat "$tmp/client.log")"
    sleep 0.1
  done
}

# wait_count FILE PATTERN N SECONDS: waits until FILE has N lines matching PATTERN (e.g. the
# front end's "recovered" lines, so the next fault does not land in the middle of a recovery).
wait_count() {
  local guard=$((SECONDS + $4)) n
  until n=$(grep -c -- "$2" "$1" 2>/dev/null) || true; ((${n:-0} >= $3)); do
    ((SECONDS < guard)) || fail "no $3 lines '$2' in $(basename "$1") within $4 s"
    sleep 0.2
  done
}

# bridge_recovered N: waits (30 s at most) until the bridge nbd is connected after N recoveries.
bridge_recovered() {
  local guard=$((SECONDS + 30)) r
  until r=$(stat_of nbd recoveries); [[ $(stat_of nbd state) == connected ]] && ((${r:-0} >= $1)); do
    ((SECONDS < guard)) || fail "the bridge did not recover $1 times within 30 s"
    sleep 0.2
  done
}

# view_recovered N: waits (30 s at most) until the view mnt logged N recoveries.
view_recovered() { wait_count "$tmp/mnt.log" "session: recovered: target=" "$1" 30; }

# kill_restart_rounds ROUNDS LOAD_PID LOAD SETTLE RECOVERED: ROUNDS times, under the load LOAD_PID
# (named LOAD, e.g. fio), which must still run at each kill: `RECOVERED K` (bridge_recovered or
# view_recovered) until the front end recovered from the K kills so far (a kill while it is still
# logging in again would not be a lost connection of its own), SETTLE s more of load, then kill -9
# the target and restart it 3 s later on the same port and file.
kill_restart_rounds() {
  local rounds=$1 load_pid=$2 load=$3 settle=$4 recovered=$5 round
  for round in $(seq "$rounds"); do
    "$recovered" $((round - 1))
    sleep "$settle"
    kill -0 "$load_pid" 2>/dev/null || fail "$load ended before kill $round"
    echo "== round $round: kill -9 the target, restart it 3 s later on port $port"
    kill -9 "$target_pid"; wait "$target_pid" 2>/dev/null || true
    sleep 3
    start_target
  done
}

# start_checker CHECKER WHERE...: CHECKER (ack_checker.py) run on WHERE (--file PATH or --socket
# PATH) for $duration s at $rate writes/s over 8192 blocks, journal $tmp/journal, log
# $tmp/checker.log; sets checker_pid.
start_checker() {
  python3 "$1" run "${@:2}" --journal "$tmp/journal" --blocks 8192 --duration "$duration" --rate "$rate" \
    >"$tmp/checker.log" 2>&1 &
  checker_pid=$!; pids+=("$checker_pid")
}

# wait_checker PID DURATION THROUGH: waits for the ack_checker.py run PID (DURATION s of writing,
# log $tmp/checker.log), shows its log but the generations, fails unless it exited 0 (THROUGH: the
# front end, for the message).
wait_checker() {
  wait_for "$1" $(($2 + 90)) "the checker"
  local rc=0; wait "$1" || rc=$?
  grep -v "generation" "$tmp/checker.log" | sed 's/^/  /' || true
  ((rc == 0)) || fail "the checker failed (exit $rc) through $3"
}

# verify_offline CHECKER: stops the target (SIGTERM, must exit 0), then CHECKER (ack_checker.py)
# checks its data file $tmp/lun.img against the journal $tmp/journal.
verify_offline() {
  echo "== the target's data file, offline"
  kill -TERM "$target_pid"; wait "$target_pid" || fail "iserkit-target exited with $? on SIGTERM"
  local rc=0; python3 "$1" verify --file "$tmp/lun.img" --journal "$tmp/journal" >"$tmp/verify.log" 2>&1 || rc=$?
  sed 's/^/  /' "$tmp/verify.log"
  ((rc == 0)) || fail "the target's data file lost an acknowledged and flushed write (or holds torn/foreign blocks)"
}

# two_links: two network namespaces, $ns_target and $ns_initiator, joined by two veth pairs:
# 10.201.N.1 (vtN, target side) and 10.201.N.2 (viN, initiator side) for N = 1, 2; the addresses
# exist only inside the namespaces. Both namespaces (and so the veths) are deleted on exit. Skips
# (77) without ip or the right to create namespaces. Take link N down with link_down N, up with
# link_up N.
two_links() {
  command -v ip >/dev/null || skip "ip (iproute2) is not installed"
  ns_target=iserkit-mpt-$$
  ns_initiator=iserkit-mpi-$$
  trap two_links_cleanup EXIT
  ip netns add "$ns_target" 2>/dev/null || skip "cannot create a network namespace here (ip netns add needs CAP_SYS_ADMIN)"
  ip netns add "$ns_initiator" || fail "ip netns add $ns_initiator"
  ip -n "$ns_target" link set lo up
  ip -n "$ns_initiator" link set lo up
  local n
  for n in 1 2; do
    ip -n "$ns_initiator" link add "vi$n" type veth peer name "vt$n" netns "$ns_target" || fail "veth pair $n"
    ip -n "$ns_target" addr add "10.201.$n.1/24" dev "vt$n"
    ip -n "$ns_initiator" addr add "10.201.$n.2/24" dev "vi$n"
    ip -n "$ns_target" link set "vt$n" up
    ip -n "$ns_initiator" link set "vi$n" up
  done
}
two_links_cleanup() {
  cleanup
  ip netns del "$ns_initiator" 2>/dev/null || true  # deleting a namespace deletes its veth ends
  ip netns del "$ns_target" 2>/dev/null || true
}
link_down() { ip -n "$ns_initiator" link set "vi$1" down; }
link_up() { ip -n "$ns_initiator" link set "vi$1" up; }

# start_target_two_portals: iserkit-target in $ns_target on $tmp/lun.img, listening on
# 10.201.1.1:3260 (portal group 1) and 10.201.2.1:3260 (portal group 2), TCP only.
start_target_two_portals() {
  rm -f "$tmp/port"
  ip netns exec "$ns_target" "$BIN/iserkit-target" --iqn $iqn --lun "$tmp/lun.img" --no-iser \
    --listen 10.201.1.1:3260 --listen 10.201.2.1:3260,tpgt=2 --port-file "$tmp/port" >>"$tmp/target.log" 2>&1 &
  target_pid=$!; pids+=($target_pid)
  for _ in $(seq 100); do [[ -s $tmp/port ]] && break; sleep 0.1; done
  [[ -s $tmp/port ]] || fail "target did not start"
}

# start_multipath_bridge ARGS...: iserkit-nbd in $ns_initiator over both portals of
# start_target_two_portals (--multipath failover, NOP-Out every second with a 1 s timeout) on
# $tmp/mp.sock, stats in $tmp/mp.stats, log in $tmp/mp.log; ARGS add to or override its options.
# Sets bridge_pid.
start_multipath_bridge() {
  ip netns exec "$ns_initiator" "$BIN/iserkit-nbd" "iscsi://10.201.1.1:3260/$iqn/0" "iscsi://10.201.2.1:3260/$iqn/0" \
    --multipath failover --socket "$tmp/mp.sock" --stats-file "$tmp/mp.stats" --nop-interval 1 --nop-timeout 1 \
    --log-level info "$@" >"$tmp/mp.log" 2>&1 &
  bridge_pid=$!; pids+=($bridge_pid)
  for _ in $(seq 100); do [[ -S $tmp/mp.sock ]] && break; sleep 0.1; done
  [[ -S $tmp/mp.sock ]] || fail "iserkit-nbd did not start"
}
