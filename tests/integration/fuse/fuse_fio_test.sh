#!/usr/bin/env bash
# fio on a LUN file of the FUSE view, data verified with crc32c, several jobs at once:
#  - psync, buffered, random mixed sizes (4 jobs on disjoint regions);
#  - io_uring, O_DIRECT, 4 KiB random writes, 4 jobs × iodepth 16;
#  - io_uring, O_DIRECT, 1000-byte writes at 1000-byte alignment, iodepth 32: neighbouring writes
#    share 512-byte blocks, so each is a read-modify-write racing its neighbours — this fails
#    verification unless the view serializes overlapping RMW (fuse_fs/lun_io.hpp);
# and the target's backing file holds what fio read back.
source "$(dirname "$0")/lib.sh"
command -v fio >/dev/null || skip "fio is not installed"

base=iqn.2026-11.org.iserkit:fio
truncate -s 64M "$tmp/lun.img"
start_target fio --iqn $base --lun "$tmp/lun.img"
mount_view "$tmp/mnt" "iscsi://127.0.0.1:${target_port[fio]}" --timeout 30
lun=$(fio_name "$tmp/mnt/$base/lun0")

run_fio() {  # NAME ARGS...
  local name=$1; shift
  local rc=0
  fio --name="$name" --filename="$lun" --verify=crc32c --verify_fatal=1 --do_verify=1 --group_reporting \
    --output="$tmp/$name.out" "$@" || rc=$?
  ((rc == 0)) || { cat "$tmp/$name.out"; fail "fio $name exited with $rc"; }
  grep -q "err= 0" "$tmp/$name.out" || { cat "$tmp/$name.out"; fail "fio $name reported errors"; }
  ! grep -qi "verify.*bad\|crc32c.*wanted" "$tmp/$name.out" || { cat "$tmp/$name.out"; fail "fio $name: bad data"; }
  echo "  $name: $(grep -E '^ +(write|read):' "$tmp/$name.out" | sed 's/^ *//' | cut -d, -f1,2 | tr '\n' ';')"
}

echo "== psync, buffered, 4 jobs, random 1k..64k"
run_fio psync --ioengine=psync --rw=randwrite --bsrange=1k-64k --size=8M --numjobs=4 --offset_increment=8M
echo "== io_uring, O_DIRECT, 4 KiB, 4 jobs × iodepth 16"
run_fio uring4k --ioengine=io_uring --direct=1 --rw=randwrite --bs=4k --size=8M --numjobs=4 \
  --offset=32M --offset_increment=8M --iodepth=16
echo "== io_uring, O_DIRECT, 1000-byte writes sharing blocks, iodepth 32"
run_fio uring1000 --ioengine=io_uring --direct=1 --rw=randwrite --bs=1000 --blockalign=1000 --size=2000000 \
  --numjobs=2 --offset=16000000 --offset_increment=2000000 --iodepth=32

echo "== the target's file holds what the LUN file reads"
python3 - "$tmp/mnt/$base/lun0" "$tmp/lun.img" <<'PY' || fail "backing file differs"
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.fsync(os.open(sys.argv[1], os.O_RDWR))
with open(sys.argv[2], "rb") as f:
    assert os.pread(fd, 64 << 20, 0) == f.read(), "LUN file and backing file differ"
print("  64 MiB identical")
PY
echo "PASS"
