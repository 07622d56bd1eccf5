# Session reinstatement with a backend that never completes (target/README.md "Session
# reinstatement", --reinstate-timeout): the LUN under test is a file on a FUSE mount
# (iserkit-fuse of a second iserkit-target's memory LUN), frozen with SIGSTOP while a WRITE is on
# it. A reinstating login is refused with 0x0301 after 1 s instead of waiting out the 30 s login
# timeout, and keeps being refused until the backend comes back; then it succeeds (reinstate.py
# hung). Uses the FUSE tests' helpers (skips without /dev/fuse or fusermount3); every process it
# started is continued and stopped at exit.
source "$(dirname "$0")/../../integration/fuse/lib.sh"
backing=iqn.2026-11.org.iserkit:backing
under_test=iqn.2026-11.org.iserkit:interop
start_target backing --iqn $backing --lun mem:16M
mount_view "$tmp/mnt" "iscsi://127.0.0.1:${target_port[backing]}/$backing" --timeout 60
lun=$tmp/mnt/$backing/lun0
[[ -f $lun ]] || fail "no $lun on the FUSE mount"
start_target under_test --iqn $under_test --lun "$lun" --reinstate-timeout 1 --login-timeout 30 --log-level info \
  --shutdown-timeout 2
timeout 90 python3 "$(dirname "$0")/reinstate.py" "${target_port[under_test]}" $under_test hung "$fuse_pid" ||
  fail "reinstate.py hung"
grep -q "has not ended within 1000 ms" "$tmp/under_test.log" || fail "no refusal in the target log"
kill -0 "${target_pid[under_test]}" || fail "the target died"
echo PASS
