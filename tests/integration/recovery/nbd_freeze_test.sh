#!/usr/bin/env bash
# iserkit-target frozen (SIGSTOP: the TCP connection stays up, nothing answers) under I/O through
# iserkit-nbd (--nop-interval 1 --nop-timeout 1, so a frozen target is noticed within 2 s):
#  - frozen for 3 s with --replacement-timeout 10: fio write + verify resumes and ends with no error,
#    the writes stuck on the frozen connection having been sent again on the new one;
#  - frozen for good with --replacement-timeout 3: every request in flight, and every later one,
#    fails with EIO (never EINVAL) within 2 s (detection) + 3 s (replacement timeout) + 4 s of stated
#    slack (backoff, scheduling on a loaded machine); none hangs; the status file says gave_up;
#    a second bridge with --on-give-up exit exits with status 3.
source "$(dirname "$0")/lib.sh"
command -v nbdsh >/dev/null || skip "nbdsh is not installed"
command -v fio >/dev/null || skip "fio is not installed"
fio --enghelp 2>/dev/null | grep -qw nbd || skip "this fio has no nbd ioengine"

truncate -s 64M "$tmp/lun.img"
start_target

echo "== frozen shorter than the replacement timeout"
start_bridge short --replacement-timeout 10 --nop-interval 1 --nop-timeout 1
fio --name=freeze --ioengine=nbd --uri="nbd+unix:///?socket=$tmp/short.sock" --rw=randwrite --bs=64k \
  --iodepth=4 --size=32m --rate=4m --verify=crc32c --do_verify=1 --verify_fatal=1 --randrepeat=0 \
  >"$tmp/fio.log" 2>&1 &
fio_pid=$!; pids+=($fio_pid)
sleep 2
kill -STOP $target_pid
sleep 3
kill -CONT $target_pid
wait_fio $fio_pid 60
echo "  fio ok; bridge: state=$(stat_of short state) connections_lost=$(stat_of short connections_lost) recoveries=$(stat_of short recoveries) reissued=$(stat_of short commands_reissued)"
[[ $(stat_of short state) == connected ]] || fail "the bridge did not end up connected"
# fio kept writing while the target was frozen: those requests were on the dead connection.
(($(stat_of short commands_reissued) >= 1)) || fail "no command was sent again after the recovery"
kill -TERM $bridge_pid; wait $bridge_pid || fail "iserkit-nbd exited with $?"

echo "== frozen longer than the replacement timeout"
start_bridge long --replacement-timeout 3 --nop-interval 1 --nop-timeout 1 --on-give-up error
long_pid=$bridge_pid
start_bridge exiting --replacement-timeout 3 --nop-interval 1 --nop-timeout 1 --on-give-up exit
exiting_pid=$bridge_pid
kill -STOP $target_pid
python3 - "$tmp/long.sock" <<'PY' || fail "requests did not all fail with EIO in time"
import errno, sys, time
import nbd
h = nbd.NBD()
h.connect_unix(sys.argv[1])
bound = 2 + 3 + 4   # detection (ping interval + timeout) + replacement timeout + stated slack
start = time.monotonic()
buffers = [nbd.Buffer(65536) for _ in range(8)]
cookies = [h.aio_pread(buffers[i], i * 65536) for i in range(8)]
cookies.append(h.aio_pwrite(nbd.Buffer.from_bytearray(bytearray(b"x" * 65536)), 1 << 20))
while h.aio_in_flight() > 0:
    if time.monotonic() - start > bound:
        sys.exit("requests still in flight after %d s" % bound)
    h.poll(100)
failed = 0
for c in cookies:
    try:
        h.aio_command_completed(c)
        sys.exit("a request succeeded against a frozen target")
    except nbd.Error as e:
        if e.errnum != errno.EIO:
            sys.exit("expected EIO, got %s" % e)
        failed += 1
print("  %d requests failed with EIO after %.1f s (bound %d s)" % (failed, time.monotonic() - start, bound))
t = time.monotonic()
try:
    h.pread(512, 0)
    sys.exit("a request after giving up succeeded")
except nbd.Error as e:
    if e.errnum != errno.EIO:
        sys.exit("after giving up: expected EIO, got %s" % e)
if time.monotonic() - t > 1:
    sys.exit("a request after giving up was not failed at once")
print("  a new request fails at once with EIO")
PY
[[ $(stat_of long state) == gave_up ]] || fail "status file says $(stat_of long state), not gave_up"
kill -0 $long_pid || fail "--on-give-up error: the bridge should keep serving"
for _ in $(seq 100); do kill -0 $exiting_pid 2>/dev/null || break; sleep 0.1; done
rc=0; wait $exiting_pid || rc=$?
((rc == 3)) || fail "--on-give-up exit: expected exit status 3, got $rc"
echo "  --on-give-up exit: exited with 3"
kill -USR1 $long_pid
sleep 0.3
grep -q "status: state=gave_up" "$tmp/long.log" || fail "SIGUSR1 printed no status line"
kill -CONT $target_pid
kill -TERM $long_pid; wait $long_pid || fail "iserkit-nbd (gave up) exited with $? on SIGTERM"
echo PASS
