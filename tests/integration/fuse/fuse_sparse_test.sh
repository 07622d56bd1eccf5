#!/usr/bin/env bash
# Holes through the FUSE view on a real mount (issue 26 item 6), against iserkit-target serving a
# sparse file (thin, LBPRZ: GET LBA STATUS answers from the file's own holes):
#  - SEEK_DATA / SEEK_HOLE on the LUN file agree with the backing file's own answers, at every
#    edge of the blocks written; ENXIO past the end and for SEEK_DATA in the last hole;
#  - st_blocks (stat -c %b) and du count the mapped blocks only, not the capacity;
#  - our own writes and hole punches through the view show at the next stat (no stale count);
#  - cp --sparse=always and --sparse=auto (and qemu-img convert, where installed) give a sparse copy
#    with the same content;
#  - a LUN without provisioning management (a --read-only target) answers as a fully allocated
#    file: SEEK_DATA the offset, SEEK_HOLE the size, st_blocks the capacity; no error but ENXIO.
source "$(dirname "$0")/lib.sh"
command -v cp >/dev/null && command -v du >/dev/null || skip "coreutils missing"

base=iqn.2026-11.org.iserkit
size=$((64 << 20))
truncate -s $size "$tmp/sparse.img"
truncate -s $((8 << 20)) "$tmp/ro.img"
printf 'not a hole' | dd of="$tmp/ro.img" bs=1 seek=4096 conv=notrunc status=none
# Does the backing file system report holes at all (SEEK_HOLE)? Without it the target says "mapped".
python3 - "$tmp/sparse.img" <<'PY' || skip "the file system under $tmp does not report holes (SEEK_HOLE)"
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
sys.exit(0 if os.lseek(fd, 0, os.SEEK_HOLE) == 0 else 1)
PY
start_target sparse --iqn $base:sparse --lun "$tmp/sparse.img"
start_target ro --iqn $base:ro --lun "$tmp/ro.img" --read-only
mnt=$tmp/mnt
# --attr-timeout 0: every stat reaches the view (the kernel keeps no attributes), so each check
# below sees what the view answers now.
mount_view "$mnt" "iscsi://127.0.0.1:${target_port[sparse]}" "iscsi://127.0.0.1:${target_port[ro]}" --attr-timeout 0
lun=$mnt/$base:sparse/lun0
ro=$mnt/$base:ro/lun0
[[ $(stat -c %s "$lun") == "$size" ]] || fail "size $(stat -c %s "$lun")"

# seek_check FILE BACKING: SEEK_DATA/SEEK_HOLE on FILE at every run edge of BACKING (and ±1 byte,
# and 0, the end) give what BACKING's own lseek gives (ENXIO as "ENXIO").
seek_check() {
  python3 - "$1" "$2" <<'PY'
import errno, os, sys
view, backing = sys.argv[1:]
fv, fb = os.open(view, os.O_RDONLY), os.open(backing, os.O_RDONLY)
size = os.fstat(fb).st_size
def seek(fd, off, whence):
    try:
        return os.lseek(fd, off, whence)
    except OSError as e:
        if e.errno == errno.ENXIO: return "ENXIO"
        raise
edges, off = {0, size - 1, size}, 0
while off < size:  # the backing file's runs
    d = seek(fb, off, os.SEEK_DATA)
    if d == "ENXIO": break
    h = seek(fb, d, os.SEEK_HOLE)
    edges |= {d, h}
    off = h
points = sorted({max(0, min(size + 1, e + k)) for e in edges for k in (-1, 0, 1)})
for p in points:
    for whence, name in ((os.SEEK_DATA, "SEEK_DATA"), (os.SEEK_HOLE, "SEEK_HOLE")):
        got, want = seek(fv, p, whence), seek(fb, p, whence)
        assert got == want, "%s(%d): view %s, backing file %s" % (name, p, got, want)
print("  %d offsets agree; runs of the backing file: %s" % (len(points), sorted(edges)))
PY
}
# blocks FILE: st_blocks of FILE (512-byte units).
blocks() { stat -c %b "$1"; }
# mapped_blocks BACKING: the bytes in BACKING's data runs, in 512-byte units (what the view shows).
mapped_blocks() {
  python3 - "$1" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
size, off, n = os.fstat(fd).st_size, 0, 0
while off < size:
    try:
        d = os.lseek(fd, off, os.SEEK_DATA)
    except OSError:
        break
    h = os.lseek(fd, d, os.SEEK_HOLE)
    n, off = n + h - d, h
print(n // 512)
PY
}

echo "== an empty sparse LUN: all hole"
python3 - "$lun" <<'PY' || fail "seek on the empty LUN"
import errno, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
assert os.lseek(fd, 0, os.SEEK_HOLE) == 0
for off in (0, 12345):
    try:
        os.lseek(fd, off, os.SEEK_DATA); raise SystemExit("SEEK_DATA(%d) found data" % off)
    except OSError as e:
        assert e.errno == errno.ENXIO, e
PY
[[ $(blocks "$lun") == 0 ]] || fail "st_blocks of an empty LUN: $(blocks "$lun"), want 0"

echo "== a few blocks written through the view"
head -c 4096 /dev/urandom >"$tmp/a.bin"
head -c 65536 /dev/urandom >"$tmp/b.bin"
dd if="$tmp/a.bin" of="$lun" bs=4096 seek=256 conv=notrunc oflag=direct status=none || fail "dd at 1 MiB"
dd if="$tmp/b.bin" of="$lun" bs=65536 seek=160 conv=notrunc oflag=direct status=none || fail "dd at 10 MiB"
dd if="$tmp/a.bin" of="$lun" bs=4096 seek=$((size / 4096 - 1)) conv=notrunc oflag=direct status=none ||
  fail "dd at the last block"
seek_check "$lun" "$tmp/sparse.img" || fail "SEEK_DATA/SEEK_HOLE differ from the backing file's"
want=$(mapped_blocks "$tmp/sparse.img")
got=$(blocks "$lun")
echo "  st_blocks $got (backing file's data: $want; capacity $((size / 512)))"
((got == want)) || fail "st_blocks $got, want $want"
((got < size / 512 / 100)) || fail "st_blocks $got is not small"
du_k=$(du -k "$lun" | cut -f1)
((du_k * 1024 < (1 << 20))) || fail "du says $du_k KiB"
[[ $(du -k --apparent-size "$lun" | cut -f1) == $((size >> 10)) ]] || fail "du --apparent-size"
echo "  du: $du_k KiB of $((size >> 20)) MiB"

echo "== our writes and punches show at the next stat"
before=$(blocks "$lun")
dd if=/dev/urandom of="$lun" bs=1M count=1 seek=20 conv=notrunc oflag=direct status=none || fail "dd 1 MiB at 20 MiB"
after=$(blocks "$lun")
((after == before + 2048)) || fail "after a 1 MiB write st_blocks went $before -> $after, want +2048"
seek_check "$lun" "$tmp/sparse.img" || fail "seek after the write"
fallocate -p -o $((20 << 20)) -l $((1 << 20)) "$lun" || fail "punch hole through the view"
punched=$(blocks "$lun")
((punched == before)) || fail "after the punch st_blocks is $punched, want $before"
seek_check "$lun" "$tmp/sparse.img" || fail "seek after the punch"
echo "  $before -> $after -> $punched"

echo "== cp and qemu-img copy the holes as holes"
for mode in always auto; do
  cp --sparse=$mode "$lun" "$tmp/copy-$mode.img" || fail "cp --sparse=$mode"
  cmp "$tmp/copy-$mode.img" "$tmp/sparse.img" || fail "cp --sparse=$mode: content differs"
  copied=$(du -k "$tmp/copy-$mode.img" | cut -f1)
  ((copied * 1024 < (1 << 20))) || fail "cp --sparse=$mode: the copy takes $copied KiB"
  echo "  cp --sparse=$mode: $copied KiB on disk, same content"
done
if command -v qemu-img >/dev/null; then
  qemu-img convert -f raw -O raw "$lun" "$tmp/qemu.img" || fail "qemu-img convert"
  cmp "$tmp/qemu.img" "$tmp/sparse.img" || fail "qemu-img convert: content differs"
  copied=$(du -k "$tmp/qemu.img" | cut -f1)
  ((copied * 1024 < (1 << 20))) || fail "qemu-img convert: the copy takes $copied KiB"
  echo "  qemu-img convert: $copied KiB on disk, same content"
fi

echo "== a LUN without provisioning management: a fully allocated file"
python3 - "$ro" $((8 << 20)) <<'PY' || fail "seek on the read-only (not thin) LUN"
import errno, os, sys
fd, size = os.open(sys.argv[1], os.O_RDONLY), int(sys.argv[2])
for off in (0, 4096, 1 << 20, size - 1):
    assert os.lseek(fd, off, os.SEEK_DATA) == off, off
    assert os.lseek(fd, off, os.SEEK_HOLE) == size, off
for whence in (os.SEEK_DATA, os.SEEK_HOLE):
    try:
        os.lseek(fd, size, whence); raise SystemExit("lseek at the end succeeded")
    except OSError as e:
        assert e.errno == errno.ENXIO, e
PY
[[ $(blocks "$ro") == $(((8 << 20) / 512)) ]] || fail "st_blocks of the not-thin LUN: $(blocks "$ro")"
[[ $(head -c 4106 "$ro" | tail -c 10) == "not a hole" ]] || fail "read-only LUN content"

unmount_view "$mnt" $fuse_pid
echo "PASS"
