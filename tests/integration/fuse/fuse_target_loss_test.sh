#!/usr/bin/env bash
# A target that disappears gives EIO, not a hang, and the mount stays usable for the others.
# Three iserkit-target processes in one mount (--timeout 3):
#  - "killed": SIGKILL while a reader is mid-way through the LUN → that read fails with EIO within
#    the timeout; later reads fail fast with EIO; its directory stays listed;
#  - "hung": SIGSTOP (the TCP connection stays up, nothing answers) → a read fails with EIO within
#    the timeout; after SIGCONT the LUN reads again;
#  - "other": keeps working throughout (ls, write, read back), and the mount unmounts cleanly.
source "$(dirname "$0")/lib.sh"
timeout_s=3
base=iqn.2026-11.org.iserkit
for t in killed hung other; do
  truncate -s 1G "$tmp/$t.img"
  start_target $t --iqn $base:$t --lun "$tmp/$t.img"
done
mount_view "$tmp/mnt" "iscsi://127.0.0.1:${target_port[killed]}" "iscsi://127.0.0.1:${target_port[hung]}" \
  "iscsi://127.0.0.1:${target_port[other]}" --timeout $timeout_s --cache-time 0.5
pid=$fuse_pid
m=$tmp/mnt

# reader FILE OUT: reads FILE in 1 MiB O_DIRECT chunks until the end or an error; writes
# "ok BYTES" or "errno N BYTES SECONDS-SINCE-START-OF-FAILING-READ" to OUT.
reader() {
  python3 - "$1" "$2" <<'PY'
import mmap, os, sys, time
path, out = sys.argv[1:]
fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 1 << 20)
done = 0
while True:
    t0 = time.monotonic()
    try:
        n = os.preadv(fd, [buf], done)
    except OSError as e:
        open(out, "w").write("errno %d %d %.3f\n" % (e.errno, done, time.monotonic() - t0))
        break
    if n == 0:
        open(out, "w").write("ok %d\n" % done)
        break
    done += n
    time.sleep(0.002)   # stretch the read over a few seconds
PY
}

echo "== SIGKILL mid-read"
dd if=/dev/urandom of="$m/$base:killed/lun0" bs=1M count=4 oflag=direct conv=notrunc status=none || fail "prefill"
reader "$m/$base:killed/lun0" "$tmp/killed.result" &
reader_pid=$!
sleep 0.5
kill -KILL "${target_pid[killed]}"
killed_at=$SECONDS
wait $reader_pid || true
read -r kind code bytes secs <"$tmp/killed.result"
[[ $kind == errno && $code == 5 ]] || fail "reader of the killed target ended with: $(cat "$tmp/killed.result")"
((bytes > 0)) || fail "the read was not under way when the target died"
((SECONDS - killed_at <= timeout_s + 2)) || fail "EIO took $((SECONDS - killed_at)) s after the kill"
echo "  EIO (errno $code) after $bytes bytes, failing read took ${secs}s"
start=$SECONDS
if dd if="$m/$base:killed/lun0" of=/dev/null bs=4k count=1 iflag=direct status=none 2>"$tmp/dd.err"; then
  fail "read of the killed target succeeded"
fi
grep -q "Input/output error" "$tmp/dd.err" || fail "read of the killed target: $(cat "$tmp/dd.err")"
((SECONDS - start <= timeout_s + 1)) || fail "second read of the killed target took $((SECONDS - start)) s"
ls "$m" | grep -qx "$base:killed" || fail "the killed target's directory vanished while its portal is down"

echo "== the other target is unaffected"
head -c 3000001 /dev/urandom >"$tmp/data.bin"
dd if="$tmp/data.bin" of="$m/$base:other/lun0" bs=65536 seek=12345 oflag=seek_bytes conv=notrunc,fsync status=none ||
  fail "write to the other target"
cmp <(dd if="$m/$base:other/lun0" bs=65536 skip=12345 count=3000001 iflag=skip_bytes,count_bytes status=none) \
  "$tmp/data.bin" || fail "other target: read back differs"
[[ $(ls "$m/$base:other" | tr '\n' ' ') == "info lun0 " ]] || fail "other target listing: $(ls "$m/$base:other")"
echo "  write + read back of 3000001 bytes: identical"

echo "== SIGSTOP: a target that stops answering"
dd if="$m/$base:hung/lun0" of=/dev/null bs=1M count=1 iflag=direct status=none || fail "hung target: first read"
kill -STOP "${target_pid[hung]}"
start=$SECONDS
if dd if="$m/$base:hung/lun0" of=/dev/null bs=1M count=1 skip=7 iflag=direct status=none 2>"$tmp/dd.err"; then
  fail "read of a stopped target succeeded"
fi
elapsed=$((SECONDS - start))
grep -q "Input/output error" "$tmp/dd.err" || fail "stopped target: $(cat "$tmp/dd.err")"
((elapsed <= timeout_s + 2)) || fail "EIO from the stopped target took ${elapsed}s (timeout ${timeout_s}s)"
echo "  EIO after ${elapsed}s (timeout ${timeout_s}s)"
cmp <(dd if="$m/$base:other/lun0" bs=65536 skip=12345 count=3000001 iflag=skip_bytes,count_bytes status=none) \
  "$tmp/data.bin" || fail "other target while one is stopped"
kill -CONT "${target_pid[hung]}"
ok=0
for _ in $(seq 20); do
  dd if="$m/$base:hung/lun0" of=/dev/null bs=1M count=1 skip=9 iflag=direct status=none 2>/dev/null && { ok=1; break; }
  sleep 0.5
done
((ok)) || fail "the resumed target never read again"
echo "  after SIGCONT: reads again"

echo "== clean unmount with a dead target"
start=$SECONDS
unmount_view "$m" $pid
((SECONDS - start <= timeout_s + 5)) || fail "unmount took $((SECONDS - start)) s"
echo "PASS"
