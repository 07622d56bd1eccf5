#!/usr/bin/env bash
# Whole chain, checksummed: iserkit-target (io_uring file LUN) ← iSCSI/TCP ← iserkit-nbd → libnbd.
#  - nbdinfo sees the LUN's size and block size;
#  - nbdcopy writes 48 MiB of random data in and reads it back out: same SHA-256, and the target's
#    backing file holds exactly those bytes (the data really crossed the chain);
#  - nbdsh: 64 concurrent async writes/reads, FUA, FLUSH, TRIM and WRITE_ZEROES read back as zeroes,
#    a request past the end gets an NBD error and the connection keeps working;
#  - a bridge with CRC32C header and data digests reads back the same bytes;
#  - iserkit-nbd and iserkit-target both exit cleanly on SIGTERM;
#  - zero copies: both report copied_payload_bytes=0 (common/copy_counter.hpp) — over TCP the only
#    copies of payload are the kernel's socket copies;
#  - the target's largest command over TCP is 8 MiB (a 24 MiB NBD request split by the initiator).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need nbdinfo nbdcopy nbdsh sha256sum
export PATH=/usr/bin:$PATH   # nbdsh needs the system python3 with libnbd's bindings, not a pyenv one

size=$((64 << 20))
truncate -s $size "$tmp/lun.img"
iqn=iqn.2026-11.org.iserkit:chain
start_target "$tmp/lun.img" --stats-file "$tmp/target.stats"

"$BIN/iserkit-nbd" "iscsi://127.0.0.1:$port/$iqn/0" --socket "$tmp/nbd.sock" --stats-file "$tmp/nbd.stats" \
  >"$tmp/nbd.log" 2>&1 &
nbd_pid=$!; pids+=($nbd_pid)
for _ in $(seq 100); do [[ -S $tmp/nbd.sock ]] && break; sleep 0.1; done
[[ -S $tmp/nbd.sock ]] || fail "iserkit-nbd did not start"
uri="nbd+unix:///?socket=$tmp/nbd.sock"

echo "== nbdinfo"
nbdinfo --json "$uri" >"$tmp/info.json"
# LunHandle splits what one SCSI command can't carry, so the bridge takes the NBD 32 MiB maximum.
python3 "$(dirname "${BASH_SOURCE[0]}")/../../support/nbdinfo_export.py" "$tmp/info.json" $size \
  --block-size-maximum $((32 << 20)) || fail "nbdinfo reported the wrong export"

echo "== nbdcopy in and out"
head -c $((48 << 20)) /dev/urandom >"$tmp/random.img"
truncate -s $size "$tmp/random.img"   # 16 MiB of zeroes at the end
round_trip "$uri" "$tmp/lun.img" --requests=16

echo "== nbdsh: concurrency, FUA, flush, trim, zero, out of range"
nbdsh -u "$uri" -c - <<'PY' || fail "nbdsh checks failed"
import os
size = h.get_size()
blk = 65536
n = 64
data = [os.urandom(blk) for _ in range(n)]
# 64 writes in flight at once, at scattered offsets.
offsets = [(i * 7919 % (size // blk)) * blk for i in range(n)]
assert len(set(offsets)) == n
cookies = [h.aio_pwrite(data[i], offsets[i]) for i in range(n)]
assert h.aio_in_flight() > 1, "requests were not in flight together"
while h.aio_in_flight() > 0:
    h.poll(-1)
for c in cookies:
    assert h.aio_command_completed(c)
# 64 reads in flight, each checked.
bufs = [nbd.Buffer(blk) for _ in range(n)]
cookies = [h.aio_pread(bufs[i], offsets[i]) for i in range(n)]
while h.aio_in_flight() > 0:
    h.poll(-1)
for i in range(n):
    assert h.aio_command_completed(cookies[i])
    assert bufs[i].to_bytearray() == data[i], "read %d differs" % i
# FUA write and flush.
h.pwrite(b"\x5a" * 4096, 8192, nbd.CMD_FLAG_FUA)
h.flush()
assert h.pread(4096, 8192) == b"\x5a" * 4096
# WRITE_ZEROES (→ WRITE SAME) and TRIM (→ UNMAP) read back as zeroes.
h.pwrite(b"\x11" * (1 << 20), 1 << 20)
h.zero(1 << 20, 1 << 20)
assert h.pread(1 << 20, 1 << 20) == bytes(1 << 20)
if h.can_trim():
    h.pwrite(b"\x22" * (1 << 20), 4 << 20)
    h.trim(1 << 20, 4 << 20)
    assert h.pread(1 << 20, 4 << 20) == bytes(1 << 20)
# 24 MiB in one NBD request: more than one SCSI command carries (8 MiB), split by LunHandle.
big = os.urandom(24 << 20)
h.pwrite(big, 8 << 20)
assert h.pread(24 << 20, 8 << 20) == big
# A request past the end gets an error and the connection keeps working.
h.set_strict_mode(0)
try:
    h.pread(4096, size - 2048)
    raise SystemExit("read past the end succeeded")
except nbd.Error as e:
    print("  past-the-end read refused:", e.string)
assert h.pread(512, 0) is not None
print("  64 in flight, FUA, flush, zero, trim: ok")
PY

echo "== a second bridge with CRC32C header and data digests reads the same bytes"
"$BIN/iserkit-nbd" "iscsi://127.0.0.1:$port/$iqn/0" --digest crc32c --socket "$tmp/nbd2.sock" >"$tmp/nbd2.log" 2>&1 &
nbd2_pid=$!; pids+=($nbd2_pid)
for _ in $(seq 100); do [[ -S $tmp/nbd2.sock ]] && break; sleep 0.1; done
[[ -S $tmp/nbd2.sock ]] || fail "second iserkit-nbd did not start"
grep -q "digests=crc32c/crc32c" "$tmp/target.log" || fail "the target did not log a session with digests"
nbdcopy "nbd+unix:///?socket=$tmp/nbd2.sock" "$tmp/back2.img"
cmp -s "$tmp/lun.img" "$tmp/back2.img" || fail "read back with digests differs from the target's file"
kill -TERM $nbd2_pid; wait $nbd2_pid || fail "second iserkit-nbd exited with $?"

echo "== shutdown"
kill -TERM $nbd_pid; wait $nbd_pid || fail "iserkit-nbd exited with $?"
kill -TERM $target_pid; wait $target_pid || fail "iserkit-target exited with $?"
pids=()

echo "== zero copies in user space"
for f in nbd target; do
  [[ -s $tmp/$f.stats ]] || fail "iserkit-$f wrote no --stats-file"
  echo "  iserkit-$f: $(cat "$tmp/$f.stats")"
  grep -qx 'copied_payload_bytes=0' "$tmp/$f.stats" || fail "iserkit-$f copied payload: $(cat "$tmp/$f.stats")"
done
# The largest command the target saw: nbdsh's 24 MiB request split at 8 MiB (the initiator's cap,
# below the target's 32 MiB MAXIMUM TRANSFER LENGTH), all over TCP, none over iSER.
grep -qx "largest_command_bytes_tcp=$((8 << 20))" "$tmp/target.stats" ||
  fail "the target's largest TCP command is not 8 MiB: $(cat "$tmp/target.stats")"
grep -qx 'largest_command_bytes_iser=0' "$tmp/target.stats" || fail "an iSER command counted: $(cat "$tmp/target.stats")"
grep -q "largest command bytes: iser=0 tcp=$((8 << 20))" "$tmp/target.log" || fail "the target did not log its largest command"
echo "PASS"
