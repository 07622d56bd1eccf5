#!/usr/bin/env bash
# Token copy through real sessions (tests/integration/target_tokencopy/CMakeLists.txt): starts one
# iserkit-target from a configuration file with two tenants — blue (portal 127.0.0.2) with the
# target :src (LUN 0 a.img, LUN 1 b.img) and the target :peer (c.img), red (127.0.0.3) with :red
# (d.img), all sparse 64M files (io_uring backend) — and a second iserkit-target process
# (--export-dir, e.img), then runs tokencopy_client_test.cpp. Afterwards the files themselves are
# checked: b.img (twice: once with IMMED) and c.img hold the copied range of a.img (b.img with the
# zeroed blocks), the cancelled token wrote nothing, d.img and e.img were not written. Before that
# the status socket must say that the copies moved inside the kernel (io_uring splice through
# O_DIRECT, the token checked per part; totals.copy_bytes) and none through a user-space buffer.
# Usage: tokencopy_test.sh CLIENT_PROGRAM. Exit 77 when iserkit-target is not built.
source "$(dirname "$0")/../target_client_lib.sh"
source "$(dirname "$0")/../../support/target_toml.sh"
fail() { echo "FAIL: $*"; echo "--- target log"; cat "$WORK/target.log"; echo "--- other target log"; cat "$WORK/other.log"; exit 1; }
mkdir -p "$WORK/other/vol"
for f in a b c d; do truncate -s 64M "$WORK/$f.img"; done
truncate -s 64M "$WORK/other/vol/e.img"
BASE="iqn.2026-11.org.iserkit.test.tokencopy$$"
{
  toml_keys 'listen=["127.0.0.1:0"]'
  toml_tenant blue 127.0.0.2:0
  toml_tenant red 127.0.0.3:0
  toml_target "$BASE:src" "$WORK/a.img $WORK/b.img" tenant=blue
  toml_target "$BASE:peer" "$WORK/c.img" tenant=blue
  toml_target "$BASE:red" "$WORK/d.img" tenant=red
} >"$WORK/target.toml"
"$BIN/iserkit-target" --config "$WORK/target.toml" --port-file "$WORK/port" --status-socket "$WORK/status.sock" --log-level info >"$WORK/target.log" 2>&1 &
PID=$!
"$BIN/iserkit-target" --iqn "$BASE.other" --export-dir "$WORK/other" --listen 127.0.0.1:0 --port-file "$WORK/port2" \
  --log-level warn >"$WORK/other.log" 2>&1 &
PID2=$!
wait_ports port port2 || fail "the targets did not start"
BLUE=$(tenant_portal "$WORK/target.log" blue) RED=$(tenant_portal "$WORK/target.log" red)
[[ -n $BLUE && -n $RED ]] || fail "no tenant portals in the log"
ISERKIT_TEST_SOURCE_URL="iscsi://$BLUE/$BASE:src/0" ISERKIT_TEST_PEER_URL="iscsi://$BLUE/$BASE:peer/0" \
  ISERKIT_TEST_RED_URL="iscsi://$RED/$BASE:red/0" ISERKIT_TEST_OTHER_URL="iscsi://127.0.0.1:$(cat "$WORK/port2")/$BASE.other:vol/0" \
  "$CLIENT" || fail "the client failed"
python3 - "$WORK/status.sock" $((3 * 4100 * 512)) <<'PY' || fail "the token copies did not move in the kernel"
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
copied = json.loads(b"".join(iter(lambda: s.recv(65536), b"")))["totals"]["copy_bytes"]
print("status: totals.copy_bytes", copied)
assert copied["in_kernel"] >= int(sys.argv[2]) and copied["user_space"] == 0, copied
PY
kill -TERM "$PID" "$PID2"; wait "$PID" "$PID2"; PID="" PID2=""
blocks() { dd if="$1" bs=512 skip="$2" count="$3" status=none; }
# The client copied 4100 blocks from LBA 100 of a.img to LBA 5000 of b.img (then zeroed the first
# 100 there) and to LBA 20000 of c.img.
cmp -s <(blocks "$WORK/a.img" 200 4000) <(blocks "$WORK/b.img" 5100 4000) || fail "b.img does not hold the copied range of a.img"
cmp -s <(blocks "$WORK/b.img" 5000 100) <(head -c $((100 * 512)) /dev/zero) || fail "the zero ROD token did not zero b.img"
cmp -s <(blocks "$WORK/a.img" 100 4100) <(blocks "$WORK/c.img" 20000 4100) || fail "c.img (the peer target) does not hold the copy"
cmp -s <(blocks "$WORK/a.img" 100 4100) <(blocks "$WORK/b.img" 60000 4100) || fail "b.img does not hold the background (IMMED) copy"
[[ -n $(blocks "$WORK/a.img" 100 1 | tr -d '\0') ]] || fail "a.img holds no pattern: the comparison proves nothing"
cmp -s <(blocks "$WORK/b.img" 30000 16) <(head -c $((16 * 512)) /dev/zero) || fail "the cancelled token wrote b.img"
for f in "$WORK/d.img" "$WORK/other/vol/e.img"; do
  cmp -s "$f" <(head -c $((64 << 20)) /dev/zero) || fail "$f (another tenant / process) was written"
done
echo "PASS: token copy between LUNs and targets of one tenant, byte for byte; other tenants and processes refused"
