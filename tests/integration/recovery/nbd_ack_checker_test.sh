#!/usr/bin/env bash
# The acknowledged-flush checker (ack_checker.py) through iserkit-nbd while the target is killed -9
# and restarted twice (3 s later, same port and file), frozen once (SIGSTOP 3 s), and the bridge
# itself killed -9 and restarted once (the checker reconnects; what was in flight counts as not
# acknowledged). The checker writes generations of checksummed 4 KiB blocks, some with FUA, with
# flushes between, journals every acknowledgement, and at the end reads every block back through
# the bridge: no acknowledged-and-flushed (or FUA) write lost, no torn or foreign block. Then, with
# the target stopped, the same check offline on the target's data file (verify --file), and the
# corrupt-test on a copy of it (a durable block zeroed, rolled back, replaced by another LBA's,
# one bit flipped: each must be reported, naming the LBA).
# Longer runs: ISERKIT_FAULT_DURATION (25 s of writing), ISERKIT_FAULT_RATE (400 writes/s).
source "$(dirname "$0")/lib.sh"
checker=$(dirname "$0")/ack_checker.py
python3 -c "import nbd" 2>/dev/null || skip "python3-libnbd is not installed"
duration=${ISERKIT_FAULT_DURATION:-25}
rate=${ISERKIT_FAULT_RATE:-400}

truncate -s 64M "$tmp/lun.img"
start_target
start_bridge nbd --replacement-timeout 30 --nop-interval 1 --nop-timeout 1

start_checker "$checker" --socket "$tmp/nbd.sock"

kill_restart_rounds 2 $checker_pid "the checker" 3 bridge_recovered
# Freeze a working session, not one still logging in again after the second kill.
bridge_recovered 2
sleep 1
echo "== SIGSTOP the target for 3 s"
kill -STOP $target_pid; sleep 3; kill -CONT $target_pid
sleep 2
echo "== kill -9 the bridge, restart it"
kill -0 $checker_pid 2>/dev/null || fail "the checker ended before the bridge was killed"
kill -9 $bridge_pid; wait $bridge_pid 2>/dev/null || true
cp "$tmp/nbd.stats" "$tmp/nbd-first.stats"
rm -f "$tmp/nbd.sock"   # so start_bridge waits for the new bridge's socket, not the dead one's
start_bridge nbd --replacement-timeout 30 --nop-interval 1 --nop-timeout 1

wait_checker $checker_pid "$duration" "the bridge"
grep -q "reconnected to" "$tmp/checker.log" || fail "the checker never reconnected after the bridge was killed"
lost=$(sed -n 's/^connections_lost=//p' "$tmp/nbd-first.stats"); recovered=$(sed -n 's/^recoveries=//p' "$tmp/nbd-first.stats")
echo "  first bridge: connections_lost=$lost recoveries=$recovered"
((lost >= 3 && recovered >= 3)) || fail "expected three lost connections and three recoveries (two kills, one freeze)"
kill -TERM $bridge_pid; wait $bridge_pid || fail "iserkit-nbd exited with $?"

verify_offline "$checker"
echo "== the checker can fail: corrupted copies of the data file"
rc=0; python3 "$checker" corrupt-test --file "$tmp/lun.img" --journal "$tmp/journal" >"$tmp/corrupt.log" 2>&1 || rc=$?
grep -E "corrupt-test: (detected|NOT)" "$tmp/corrupt.log" | sed 's/^/  /' || true
((rc == 0)) || fail "the checker missed a corrupted block: $(tail -3 "$tmp/corrupt.log")"
echo PASS
