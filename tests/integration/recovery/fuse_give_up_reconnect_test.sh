#!/usr/bin/env bash
# Issue 24 item 6 through the FUSE view: iserkit-target killed (kill -9) under a mounted
# iserkit-fuse with --replacement-timeout 2, left down past it, then restarted on the same port and
# file — the mount is not touched:
#  - after the replacement timeout an O_DIRECT read of the LUN file fails with EIO, and the next
#    one at once;
#  - meanwhile the target's "info" file says "gave-up" with the background logins (attempts
#    growing, the last error);
#  - once the target is back the same open file descriptor reads the data written before the kill,
#    within the back-off's 5 s cap + slack, and "info" says logged-in; the view's log shows the
#    same session recovered (reinstated in the background, not replaced by a new login on use).
source "$(dirname "$0")/lib.sh"
need_fuse

truncate -s 16M "$tmp/lun.img"
start_target
mount_fuse mnt --replacement-timeout 2 --timeout 5 --nop-interval 1 --nop-timeout 1
info_file=$tmp/mnt/$iqn/info
head -c 1048576 /dev/urandom >"$tmp/data"
dd if="$tmp/data" of="$lun_file" bs=1M seek=4 oflag=direct conv=notrunc status=none || fail "write before the kill"

# One reader process, one descriptor, for the whole outage (it waits for the test's go-ahead files).
PYTHONPATH=$(dirname "$0") PYTHONDONTWRITEBYTECODE=1 python3 - "$lun_file" "$tmp/data" "$tmp" >"$tmp/client.log" 2>&1 <<'PY' &
import mmap, os, sys
from outage_client import mark, through_outage
path, data_path, tmp = sys.argv[1:4]
data = open(data_path, "rb").read()
fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
buf = mmap.mmap(-1, len(data))
def read():
    n = os.preadv(fd, [buf], 4 << 20)
    return buf[:n]
assert read() == data, "read before the kill differs"
mark(tmp, "ready")
through_outage(tmp, read, read, OSError, lambda e: e.errno, data, "view", "descriptor")
PY
client_pid=$!; pids+=($client_pid)

wait_mark ready $client_pid 30 "the reader did not start"
echo "== kill -9 the target on port $port; leave it down past the replacement timeout (2 s)"
kill -9 $target_pid; wait $target_pid 2>/dev/null || true
touch "$tmp/killed"
wait_mark gave_up $client_pid 60 "the reader saw no EIO"
cat "$tmp/client.log"
session_field() { python3 -c 'import json, sys; s = json.load(open(sys.argv[1]))["session"]; print(eval(sys.argv[2]))' "$info_file" "$1"; }
[[ $(session_field 's["state"]') == gave-up ]] || fail "info: session state is $(session_field 's["state"]'), not gave-up"
attempts1=$(session_field 's["reconnect"]["attempts"]')
[[ -n $(session_field 's["reconnect"]["last_error"]') ]] || fail "info: no last login error"
guard=$((SECONDS + 30))
until attempts2=$(session_field 's["reconnect"]["attempts"]'); ((attempts2 > attempts1)); do
  ((SECONDS < guard)) || fail "no login attempt within 30 s after the replacement timeout (attempts stay $attempts1)"
  sleep 0.5
done
echo "  info: gave-up, logins go on: attempts $attempts1 -> $attempts2"

echo "== restart the target on port $port (same file); the mount is not touched"
start_target
touch "$tmp/restarted"
wait_for $client_pid 90 "the reader"
wait $client_pid || fail "reader: $(tail -n 3 "$tmp/client.log")"
tail -n 1 "$tmp/client.log"
guard=$((SECONDS + 10))
until [[ $(session_field 's["state"]') == logged-in ]]; do
  ((SECONDS < guard)) || fail "info: session state $(session_field 's["state"]') after the recovery, not logged-in"
  sleep 0.2
done
grep -q 'session: recovered after the replacement timeout: target=' "$tmp/mnt.log" ||
  fail "the view's session was not reinstated in the background"
! grep -q 'fuse: logged in again' "$tmp/mnt.log" || fail "the session was replaced by a new login instead"
unmount_fuse mnt
echo PASS
