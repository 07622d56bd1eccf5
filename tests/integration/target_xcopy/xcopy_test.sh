#!/usr/bin/env bash
# EXTENDED COPY through a real session (tests/integration/target_xcopy/CMakeLists.txt): starts one
# iserkit-target with --export-dir over two folders — target :one with two sparse 64M files (LUN 0
# a.img, LUN 1 b.img), target :two with one (c.img) — and runs xcopy_client_test.cpp: it copies
# about 2 MiB from LUN 0 to LUN 1 of :one with one EXTENDED COPY and checks it through READ, sees a
# copy into :two's LUN refused (UNREACHABLE COPY TARGET) while it has no session to :two, then
# copies into it with sessions to both. Then the copies are checked on the files themselves (the
# io_uring backend wrote them), and the target's status socket must say that every copied byte moved
# inside the kernel (totals.copy_bytes.in_kernel: io_uring splice, file → pipe → file) and none
# through a user-space buffer (user_space 0; issue 25 item 1).
# Usage: xcopy_test.sh CLIENT_PROGRAM. Exit 77 when iserkit-target is not built.
source "$(dirname "$0")/../target_client_lib.sh"
mkdir -p "$WORK/volumes/one" "$WORK/volumes/two"
for f in one/a.img one/b.img two/c.img; do truncate -s 64M "$WORK/volumes/$f"; done
BASE="iqn.2026-11.org.iserkit.test.xcopy$$"
"$BIN/iserkit-target" --iqn "$BASE" --export-dir "$WORK/volumes" --listen 127.0.0.1:0 --port-file "$WORK/port" \
  --status-socket "$WORK/status.sock" --log-level warn >"$WORK/target.log" 2>&1 &
PID=$!
wait_ports port || { cat "$WORK/target.log"; echo "FAIL: the target did not start"; exit 1; }
PORT=$(cat "$WORK/port")
ISERKIT_TEST_URL="iscsi://127.0.0.1:$PORT/$BASE:one/0" ISERKIT_TEST_FOREIGN_URL="iscsi://127.0.0.1:$PORT/$BASE:two/0" \
  "$CLIENT" || { cat "$WORK/target.log"; exit 1; }
# Two copies of 4100 blocks (into b.img and c.img): in the kernel, per LU and in all.
python3 - "$WORK/status.sock" $((2 * 4100 * 512)) <<'PY' || { cat "$WORK/target.log"; echo "FAIL: the copies did not move in the kernel"; exit 1; }
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
doc = json.loads(b"".join(iter(lambda: s.recv(65536), b"")))
copied = doc["totals"]["copy_bytes"]
print("status: totals.copy_bytes", copied)
assert copied["in_kernel"] == int(sys.argv[2]) and copied["user_space"] == 0, copied
luns = {(t["name"].rsplit(":", 1)[1], l["lun"]): l["copy_bytes"] for t in doc["targets"] for l in t["luns"]}
assert luns[("one", 1)] == {"in_kernel": 4100 * 512, "user_space": 0}, luns
assert luns[("two", 0)] == {"in_kernel": 4100 * 512, "user_space": 0}, luns
assert luns[("one", 0)] == {"in_kernel": 0, "user_space": 0}, luns
PY
kill -TERM "$PID"; wait "$PID"; PID=""
# The client copied 4100 blocks of 512 bytes from LBA 100 of a.img to LBA 5000 of b.img.
cmp -s <(dd if="$WORK/volumes/one/a.img" bs=512 skip=100 count=4100 status=none) \
       <(dd if="$WORK/volumes/one/b.img" bs=512 skip=5000 count=4100 status=none) ||
  { echo "FAIL: b.img does not hold the copied range of a.img"; exit 1; }
cmp -s <(dd if="$WORK/volumes/two/c.img" bs=512 skip=5000 count=4100 status=none) <(head -c $((4100 * 512)) /dev/zero) ||
  { echo "FAIL: c.img (the other target's LUN) was written by the refused copy"; exit 1; }
cmp -s <(dd if="$WORK/volumes/one/a.img" bs=512 skip=100 count=4100 status=none) \
       <(dd if="$WORK/volumes/two/c.img" bs=512 skip=20000 count=4100 status=none) ||
  { echo "FAIL: c.img does not hold the copy made while the initiator was logged in to both targets"; exit 1; }
echo "PASS: EXTENDED COPY between two file LUNs of one target, in the kernel; into the other target only while logged in there"
