#!/usr/bin/env bash
# iserkit-target frozen (SIGSTOP: the TCP connection stays up, nothing answers) under I/O on the
# LUN file of a mounted iserkit-fuse view (--nop-interval 1 --nop-timeout 1: a frozen target is
# noticed within 2 s by the session's NOP-Out ping, and its connection replaced):
#  - frozen for 3 s with --replacement-timeout 10: an fio write + verify job (libaio, O_DIRECT)
#    resumes and ends with no error; the view's log shows the connection lost and recovered;
#  - frozen for good with --replacement-timeout 3 --timeout 5: every read in flight fails with EIO
#    within 2 s (detection) + 3 s (replacement timeout) + 4 s of stated slack (backoff, a loaded
#    machine); writes within 5 s more (the kernel sends one synchronous write per file at a time;
#    the bound dates from when a queued one waited for a new login, bounded by --timeout — now the
#    given-up session fails it at once); new requests within 5 s + 4 s (writes: + 5 s), in fact at
#    once (the session logs in again in the background, not on use); none hangs.
#    After SIGCONT the same mount reads and writes again (the given-up session, which kept logging
#    in in the background, is logged in again).
# Longer runs: ISERKIT_FAULT_FREEZE (3 s, must stay below 10), ISERKIT_FAULT_SIZE (32m).
source "$(dirname "$0")/lib.sh"
need_fuse
command -v fio >/dev/null || skip "fio is not installed"
freeze=${ISERKIT_FAULT_FREEZE:-3}
size=${ISERKIT_FAULT_SIZE:-32m}

rc=0; "$BIN/iserkit-fuse" iscsi://127.0.0.1:1 "$tmp" --nop-timeout 0 2>"$tmp/usage.err" || rc=$?
((rc == 2)) && grep -q -- "--nop-timeout" "$tmp/usage.err" || fail "--nop-timeout 0 was not refused: rc=$rc $(cat "$tmp/usage.err")"

truncate -s 64M "$tmp/lun.img"
start_target

echo "== frozen ${freeze} s, shorter than the replacement timeout (10 s)"
mount_fuse short --replacement-timeout 10 --timeout 10 --nop-interval 1 --nop-timeout 1
fio --name=freeze --filename="$(fio_name "$lun_file")" --ioengine=libaio --direct=1 --rw=randwrite --bs=64k \
  --iodepth=4 --size="$size" --rate=4m --verify=crc32c --do_verify=1 --verify_fatal=1 --randrepeat=0 \
  >"$tmp/fio.log" 2>&1 &
fio_pid=$!; pids+=($fio_pid)
sleep 2
kill -0 $fio_pid 2>/dev/null || fail "fio ended before the freeze"
kill -STOP $target_pid
sleep "$freeze"
kill -CONT $target_pid
wait_fio $fio_pid 60
! grep -qiE "verify.*bad|crc32c.*wanted" "$tmp/fio.log" || fail "fio found bad data"
lost=$(grep -c "session: connection lost: target=" "$tmp/short.log" || true)
recovered=$(grep -c "session: recovered: target=" "$tmp/short.log" || true)
reissued=$(awk '/session: recovered: [0-9]+ commands to send again/ {n += $(NF-4)} END {print n+0}' "$tmp/short.log")
echo "  fio ok; iserkit-fuse: connections lost $lost, recoveries $recovered, commands sent again $reissued"
((lost >= 1 && recovered >= 1)) || fail "the frozen connection was not noticed and replaced"
# fio kept writing while the target was frozen: those writes were on the dead connection.
(($reissued >= 1)) || fail "no command was sent again after the recovery"
unmount_fuse short

echo "== frozen for good, longer than the replacement timeout (3 s)"
mount_fuse long --replacement-timeout 3 --timeout 5 --nop-interval 1 --nop-timeout 1
dd if=/dev/urandom of="$lun_file" bs=1M count=4 oflag=direct conv=notrunc status=none || fail "prefill"
kill -STOP $target_pid
python3 - "$lun_file" <<'PY' || fail "requests did not all fail with EIO in time"
import errno, mmap, os, sys, threading, time
path = sys.argv[1]
results = {}

def request(name, write, offset):
    fd = os.open(path, os.O_RDWR | os.O_DIRECT)
    buf = mmap.mmap(-1, 65536)
    t0 = time.monotonic()
    try:
        (os.pwritev if write else os.preadv)(fd, [buf], offset)
        results[name] = ("ok", time.monotonic() - t0)
    except OSError as e:
        results[name] = (e.errno, time.monotonic() - t0)
    os.close(fd)

def batch(prefix, read_bound, write_bound):
    threads = [threading.Thread(target=request, args=("%s%d" % (prefix, i), i % 2 == 1, i * 65536), daemon=True)
               for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(write_bound + 5)
    for i in range(8):
        name = "%s%d" % (prefix, i)
        bound = write_bound if i % 2 == 1 else read_bound
        if name not in results:
            sys.exit("%s still hangs after %d s" % (name, write_bound + 5))
        what, took = results[name]
        if what != errno.EIO:
            sys.exit("%s: expected EIO, got %s after %.1f s" % (name, what, took))
        if took > bound:
            sys.exit("%s: EIO after %.1f s, bound %d s" % (name, took, bound))
    print("  %s: 4 reads failed with EIO after at most %.1f s (bound %d s), 4 writes after at most %.1f s (bound %d s)"
          % (prefix, max(results["%s%d" % (prefix, i)][1] for i in range(0, 8, 2)), read_bound,
             max(results["%s%d" % (prefix, i)][1] for i in range(1, 8, 2)), write_bound))

# Reads: detection (ping interval + timeout) + replacement timeout + slack. Writes: the kernel lets
# one synchronous write per file into the view at a time (no FOPEN_PARALLEL_DIRECT_WRITES with
# libfuse 3.14), so a write queued behind the first reaches the view after the session gave up (it
# then fails at once; the bound keeps room for one login, bounded by --timeout 5, as before).
batch("in flight", 2 + 3 + 4, 2 + 3 + 5 + 4)
# New requests: EIO at once (the given-up session logs in again in the background, not on use);
# the bounds keep the older room for a login on use (--timeout) + slack.
batch("after giving up", 5 + 4, 5 + 5 + 4)
PY
grep -q "giving up\|gave up" "$tmp/long.log" || fail "the view's log does not say the session gave up"
kill -CONT $target_pid
ok=0
for _ in $(seq 30); do
  dd if="$lun_file" of=/dev/null bs=64k count=1 iflag=direct status=none 2>/dev/null && { ok=1; break; }
  sleep 0.5
done
((ok)) || fail "after SIGCONT the view never read again (the given-up session did not log in again)"
head -c 65536 /dev/urandom >"$tmp/block"
dd if="$tmp/block" of="$lun_file" bs=64k seek=10 oflag=direct conv=notrunc status=none || fail "write after SIGCONT"
cmp <(dd if="$lun_file" bs=64k skip=10 count=1 iflag=direct status=none) "$tmp/block" || fail "read back after SIGCONT differs"
echo "  after SIGCONT: reads and writes again"
unmount_fuse long
echo PASS
