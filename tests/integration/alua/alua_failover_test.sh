#!/usr/bin/env bash
# ALUA failover (issue 24 item 4; target/README.md "ALUA failover"): two iserkit-target gateways
# serve one shared file, portal groups 1 (A) and 2 (B), each naming the other with --alua-peer and
# both locking the file itself (--alua-lock). Checked:
#  - exactly one gateway is active/optimized (the one that took the lock first), the other standby:
#    REPORT TARGET PORT GROUPS through either gateway says so, and the standby one refuses media
#    access with NOT READY 04h/0Bh (no write reaches the file through it);
#  - iserkit-nbd with both URLs (--multipath failover) sees path 0 active/optimized and path 1
#    standby; fio writes and verifies through it while gateway A is killed with kill -9 and
#    restarted: B takes the lock at its next poll (the kernel dropped A's), I/O moves to B, A comes
#    back standby, fio ends with no error and every block verifies;
#  - SET TARGET PORT GROUPS (iserkit-alua-probe, as sg_stpg would) through the standby gateway A
#    makes group 1 active/optimized: B drains and hands over, both gateways report the new states,
#    and the bridge follows (a second fio verify runs through path 0); SET TARGET PORT GROUPS
#    through the active gateway A asking for standby hands back to B.
# Skips (77) when fio has no nbd engine.
set -euo pipefail
skip() { echo "SKIP: $*" >&2; exit 77; }
BIN=${ISERKIT_BIN:?ISERKIT_BIN must name the bin directory of the build}
export PATH=/usr/bin:$PATH
command -v fio >/dev/null || skip "fio is not installed"
fio --enghelp 2>/dev/null | grep -qw nbd || skip "this fio has no nbd ioengine"
start=$(date +%s)
tmp=$(mktemp -d /tmp/iserkit-alua.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$tmp"/*.log; do echo "--- $(basename "$f")"; tail -n 30 "$f"; done
  exit 1
} >&2

iqn=iqn.2026-11.org.iserkit:alua
truncate -s 128M "$tmp/lun.img"
a_port=0
b_port=0
# start_gateway NAME TPGT PEER: iserkit-target on 127.0.0.1 (the same port again on a restart),
# portal group TPGT, the peer's group PEER, both locking the LUN file itself.
start_gateway() {
  local name=$1 tpgt=$2 peer=$3 port_var=${1}_port
  rm -f "$tmp/$name.port"
  "$BIN/iserkit-target" --iqn $iqn --lun "$tmp/lun.img" --no-iser --listen "127.0.0.1:${!port_var},tpgt=$tpgt" \
    --alua-peer "$peer" --alua-lock "$tmp/lun.img" --port-file "$tmp/$name.port" --log-level info \
    --status-socket "$tmp/$name.status" \
    >>"$tmp/$name.log" 2>&1 &
  pids+=($!)
  eval "${name}_pid=$!"
  for _ in $(seq 100); do [[ -s $tmp/$name.port ]] && break; sleep 0.1; done
  [[ -s $tmp/$name.port ]] || fail "gateway $name did not start"
  eval "${name}_port=$(cat "$tmp/$name.port")"
}
source "$(dirname "$0")/lib.sh"

start_gateway a 1 2
for _ in $(seq 50); do grep -q "this gateway is active" "$tmp/a.log" && break; sleep 0.1; done
grep -q "this gateway is active" "$tmp/a.log" || fail "gateway A did not take the lock"
start_gateway b 2 1
url_a=iscsi://127.0.0.1:$a_port/$iqn/0
url_b=iscsi://127.0.0.1:$b_port/$iqn/0
AO=active/optimized
SB=standby
wait_states "$url_a" "1=$AO 2=$SB" 5
wait_states "$url_b" "1=$AO 2=$SB" 5
grep -q "this gateway is active" "$tmp/b.log" && fail "gateway B went active while A holds the lock"
# Standby refuses media access (SPC-5 §5.16.2.4.4): NOT READY, TARGET PORT IN STANDBY STATE.
out=$(probe "$url_b" tur tur tur | tail -1)
[[ $out == "tur status=0x02 sense=2/04/0b" ]] || fail "TEST UNIT READY through standby B: $out"
out=$(probe "$url_a" tur tur tur | tail -1)
[[ $out == "tur status=0x00" ]] || fail "TEST UNIT READY through active A: $out"
# The status socket tells the operator the same: "alua": {"groups", "lock", "active"}.
alua_status() {
  "$BIN/iserkit" status "$tmp/$1.status" --json | python3 -c '
import json, sys
a = json.load(sys.stdin)["alua"]
print(" ".join("%d=%s" % (g["group"], g["state"]) for g in a["groups"]), "active" if a["active"] else "standby",
      "lock" if a["lock"] else "nolock")'
}
[[ $(alua_status a) == "1=$AO 2=$SB active lock" ]] || fail "status of A: $(alua_status a)"
[[ $(alua_status b) == "1=$AO 2=$SB standby lock" ]] || fail "status of B: $(alua_status b)"
echo "ok: A active/optimized, B standby (refuses media access with 04h/0Bh); both report it (RTPG, status)"

start_mp_bridge "$url_a" "$url_b"
[[ $(current path.0.alua) == "$AO" ]] || fail "path 0 (gateway A) is not active/optimized: $(stat_of path.0.alua)"
[[ $(stat_of path.1.alua) == "$SB" ]] || fail "path 1 (gateway B) is not standby: $(stat_of path.1.alua)"
[[ $(stat_of path.1.state) == up ]] || fail "path 1 is not up (a different logical unit?): $(stat_of path.1.state)"

# ~12 s of writes (96 MiB at 8 MiB/s), each block checksummed, then read back and checked.
fio_run() {
  local name=$1 size=$2
  fio --name="$name" --ioengine=nbd --uri="nbd+unix:///?socket=$tmp/mp.sock" --rw=randwrite --bs=64k \
    --iodepth=8 --size="$size" --rate=8m --verify=crc32c --do_verify=1 --verify_fatal=1 --randrepeat=0 \
    --verify_state_save=0 >"$tmp/fio-$name.log" 2>&1
}
fio_run failover 96m &
fio_pid=$!; pids+=($fio_pid)
before_fault
killed_ms=$(date +%s%3N)
kill -9 "$a_pid"
for _ in $(seq 100); do grep -q "this gateway is active" "$tmp/b.log" && break; sleep 0.02; done
took_ms=$(( $(date +%s%3N) - killed_ms ))
grep -q "this gateway is active" "$tmp/b.log" || fail "gateway B did not take over within 2 s of A's death"
echo "  gateway B active ${took_ms} ms after the kill (poll interval 100 ms)"
sleep 2
echo "== restart gateway A on port $a_port"
a_lines=$(wc -l <"$tmp/a.log")
start_gateway a 1 2
fio_after_fault "$tmp/fio-failover.log"
path1_after=$(current path.1.commands)
((path1_after > path1_before)) || fail "no I/O moved to gateway B after gateway A died"
[[ $(stat_of path.1.alua) == "$AO" ]] || fail "path 1 is not active/optimized after the failover: $(stat_of path.1.alua)"
tail -n +$((a_lines + 1)) "$tmp/a.log" | grep -q "this gateway is active" && fail "restarted A went active"
wait_states "$url_a" "1=$SB 2=$AO" 5
wait_states "$url_b" "1=$SB 2=$AO" 5
[[ $(alua_status b) == "1=$SB 2=$AO active lock" ]] || fail "status of B after the failover: $(alua_status b)"
for _ in $(seq 50); do [[ $(current path.0.state) == up ]] && break; sleep 0.2; done
[[ $(stat_of path.0.state) == up && $(stat_of path.0.alua) == "$SB" ]] ||
  fail "path 0 after A's restart: state=$(stat_of path.0.state) alua=$(stat_of path.0.alua), want up standby"
echo "ok: kill -9 of the active gateway under fio verify: B took over, A came back standby, every block verified"

# SET TARGET PORT GROUPS through the standby gateway A: group 1 active/optimized. B hands over.
out=$(probe "$url_a" stpg:1=$AO) || fail "SET TARGET PORT GROUPS through A: $out"
[[ $out == "stpg status=0x00" ]] || fail "SET TARGET PORT GROUPS through A: $out"
wait_states "$url_a" "1=$AO 2=$SB" 2
wait_states "$url_b" "1=$AO 2=$SB" 2
grep -q "handed over after" "$tmp/b.log" || fail "B did not log its hand-over"
path0_before=$(current path.0.commands)
fio_run after-stpg 16m || fail "fio after SET TARGET PORT GROUPS failed: $(grep -iE 'err|verify' "$tmp/fio-after-stpg.log" | head -5)"
grep -q "err= 0" "$tmp/fio-after-stpg.log" || fail "fio after SET TARGET PORT GROUPS reported errors"
path0_after=$(current path.0.commands)
((path0_after > path0_before + 100)) || fail "the bridge did not move its I/O to path 0 ($path0_before → $path0_after)"
[[ $(stat_of path.0.alua) == "$AO" ]] || fail "the bridge has path 0 as $(stat_of path.0.alua)"
echo "ok: SET TARGET PORT GROUPS through the standby gateway moved the active side; the bridge followed"
# ... and through the active gateway, asking for its own group to go standby: back to B.
out=$(probe "$url_a" stpg:1=$SB) || fail "SET TARGET PORT GROUPS (standby) through A: $out"
[[ $out == "stpg status=0x00" ]] || fail "SET TARGET PORT GROUPS (standby) through A: $out"
wait_states "$url_b" "1=$SB 2=$AO" 2
# Bad parameter lists: an unknown group, an unsupported state (SPC-4 §6.45: INVALID FIELD IN
# PARAMETER LIST).
[[ $(probe "$url_a" stpg:7=$AO) == "stpg status=0x02 sense=5/26/00" ]] || fail "unknown group not refused"
[[ $(probe "$url_a" stpg:1=unavailable) == "stpg status=0x02 sense=5/26/00" ]] || fail "unavailable not refused"
echo "ok: SET TARGET PORT GROUPS through the active gateway handed back; bad lists refused"

kill -TERM $bridge_pid; wait $bridge_pid || fail "iserkit-nbd exited with $?"
kill -TERM "$a_pid" "$b_pid"; wait "$a_pid" "$b_pid" 2>/dev/null || true
# Fixed states and the lock exclude each other: refused at start-up, saying why.
if "$BIN/iserkit-target" --iqn $iqn --lun "$tmp/lun.img" --no-iser --listen 127.0.0.1:0 --alua-state 1=standby \
    --alua-lock "$tmp/lun.img" >"$tmp/bad.out" 2>&1; then
  fail "the target started with --alua-state and --alua-lock"
fi
grep -q "exclude each other" "$tmp/bad.out" || fail "no clear error: $(cat "$tmp/bad.out")"
# An unopenable lock file is refused at start-up too.
if "$BIN/iserkit-target" --iqn $iqn --lun "$tmp/lun.img" --no-iser --listen 127.0.0.1:0 --alua-peer 2 \
    --alua-lock "$tmp/no/such/dir/lock" >"$tmp/bad2.out" 2>&1; then
  fail "the target started with a lock file it cannot open"
fi
grep -q "cannot open the lock file" "$tmp/bad2.out" || fail "no clear error: $(cat "$tmp/bad2.out")"
echo "ok: --alua-state with --alua-lock, and a lock file that cannot be opened, are refused at start-up"
echo "PASS: $(( $(date +%s) - start )) s"
