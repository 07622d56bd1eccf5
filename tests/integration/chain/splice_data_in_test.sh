#!/usr/bin/env bash
# Zero-copy READ Data-In (target/src/data_in_pipes.hpp; opt-in, ISERKIT_SPLICE_DATA_IN=1): a LUN
# file on tmpfs (/dev/shm), whose large READs the target then splices from the page cache to the
# socket, read through the whole chain
# (iserkit-target ← iSCSI/TCP ← iserkit-nbd → libnbd) and checked byte for byte:
#  - nbdcopy out of the export: the same SHA-256 as the file, and the target's status counts
#    spliced Data-In bytes (totals.spliced_data_in_bytes > 0) while copied_payload_bytes stays 0;
#  - reads the splice must not take (a 1 MiB read 512 bytes into a page spans more pages than a
#    pipe holds; small reads) and overwrites between reads of one range: every read sees the
#    bytes last written, never older ones held in a pipe;
#  - 48 concurrent 1 MiB reads at once (every MiB of the LUN; more than the 16 pipes of a
#    connection): all correct;
#  - a bridge with a CRC32C data digest reads the same bytes, with no splice (the digest needs
#    the bytes); without ISERKIT_SPLICE_DATA_IN=1 (the default) nothing is spliced, same bytes.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need nbdcopy nbdsh sha256sum python3
export PATH=/usr/bin:$PATH   # nbdsh needs the system python3 with libnbd's bindings, not a pyenv one
[[ $(stat -f -c %T /dev/shm 2>/dev/null) == tmpfs ]] || skip "/dev/shm is not a tmpfs"

size=$((48 << 20))
lun=$(mktemp /dev/shm/iserkit-splice.XXXXXX)
trap 'rm -f "$lun"; cleanup' EXIT
head -c $size /dev/urandom >"$lun"
iqn=iqn.2026-11.org.iserkit:splice

# spliced: the target's totals.spliced_data_in_bytes (status socket $tmp/status.sock).
spliced() {
  "$BIN/iserkit" status "$tmp/status.sock" --json >"$tmp/status.json" || fail "iserkit status failed"
  python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["totals"]; print(t["spliced_data_in_bytes"], t["copied_payload_bytes"])' "$tmp/status.json"
}
# bridge [OPTION...]: iserkit-nbd on $tmp/nbd.sock in front of the target; sets uri.
bridge() {
  rm -f "$tmp/nbd.sock"
  "$BIN/iserkit-nbd" "$url" --socket "$tmp/nbd.sock" "$@" >"$tmp/nbd.log" 2>&1 &
  nbd_pid=$!; pids+=($nbd_pid)
  for _ in $(seq 100); do [[ -S $tmp/nbd.sock ]] && break; sleep 0.1; done
  [[ -S $tmp/nbd.sock ]] || fail "iserkit-nbd did not start"
  uri="nbd+unix:///?socket=$tmp/nbd.sock"
}
stop_bridge() { kill "$nbd_pid"; wait "$nbd_pid" 2>/dev/null || true; }
# copy_out: nbdcopy of the whole export; fails unless it has the LUN file's SHA-256.
copy_out() {
  nbdcopy --request-size=$((1 << 20)) "$uri" "$tmp/out.img"
  [[ $(sha256sum <"$tmp/out.img" | cut -d' ' -f1) == $(sha256sum <"$lun" | cut -d' ' -f1) ]] ||
    fail "the export's bytes differ from the LUN file's ($*)"
}

ISERKIT_SPLICE_DATA_IN=1 start_target "$lun" --status-socket "$tmp/status.sock"
for _ in $(seq 50); do [[ -S $tmp/status.sock ]] && break; sleep 0.1; done

echo "== nbdcopy out: spliced"
bridge
copy_out "spliced"
read -r s copied < <(spliced)
echo "  spliced_data_in_bytes=$s copied_payload_bytes=$copied"
(( s >= size / 2 )) || fail "the 1 MiB READs were not spliced (spliced_data_in_bytes=$s)"
[[ $copied == 0 ]] || fail "payload copied in user space: $copied"

echo "== unaligned and small reads, overwrites between reads, 48 concurrent 1 MiB reads"
nbdsh -u "$uri" -c - <<'PY' || fail "nbdsh checks failed"
import os
mib = 1 << 20
size = h.get_size()
# A range read, overwritten, read again (three times): never the older bytes.
for i in range(3):
    data = os.urandom(mib)
    h.pwrite(data, 5 * mib)
    assert h.pread(mib, 5 * mib) == data, "read %d of an overwritten range saw other bytes" % i
# 1 MiB starting 512 bytes into a page (buffer path), a 64 KiB and a 4 KiB read, after writes.
for off, n in ((7 * mib + 512, mib), (9 * mib, 65536), (10 * mib + 4096, 4096)):
    data = os.urandom(n)
    h.pwrite(data, off)
    assert h.pread(n, off) == data, "read of %d bytes at %d differs" % (n, off)
# A READ of every MiB of the LUN (48) in flight together (the connection has 16 pipes: the rest
# use buffers).
want = {off: os.urandom(mib) for off in range(0, size, mib)}
for off, data in want.items():
    h.pwrite(data, off)
offs = list(want)
bufs = [nbd.Buffer(mib) for _ in offs]
cookies = [h.aio_pread(bufs[i], offs[i]) for i in range(len(offs))]
while h.aio_in_flight() > 0:
    h.poll(-1)
for i, off in enumerate(offs):
    assert h.aio_command_completed(cookies[i])
    assert bufs[i].to_bytearray() == want[off], "concurrent read at %d differs" % off
print("  %d concurrent 1 MiB reads checked" % len(offs))
PY
stop_bridge

echo "== a bridge with a CRC32C data digest: no splice, same bytes"
read -r before _ < <(spliced)
bridge --digest crc32c
copy_out "with a data digest"
read -r after _ < <(spliced)
[[ $after == "$before" ]] || fail "Data-In was spliced under a data digest ($before -> $after)"
stop_bridge

echo "== by default (no ISERKIT_SPLICE_DATA_IN=1): nothing spliced, same bytes"
kill "$target_pid"; wait "$target_pid" 2>/dev/null || true
rm -f "$tmp/port" "$tmp/status.sock"
start_target "$lun" --status-socket "$tmp/status.sock"
for _ in $(seq 50); do [[ -S $tmp/status.sock ]] && break; sleep 0.1; done
bridge
copy_out "without splice"
read -r s _ < <(spliced)
[[ $s == 0 ]] || fail "spliced $s bytes without ISERKIT_SPLICE_DATA_IN=1"
stop_bridge
echo "PASS"
