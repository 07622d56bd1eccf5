#!/usr/bin/env bash
# Where WRITE payload comes from in the FUSE view (fuse_fs/README.md "Write payload"):
#  - default (--splice-writes=auto) with a TCP portal, and --splice-writes=never: libfuse reads each
#    request into its own buffer and the WRITE goes from there;
#  - --splice-writes (the old flag, = always): libfuse splices requests into its pipe and the view
#    read(2)s the payload of a page or more straight into a buffer leased from the session's pool
#    (Session::buffer_pool(); registered memory on iSER), then writes from that buffer and replies
#    from the loop. (auto with an iser:// portal splices too; no RDMA device here: unit-tested in
#    tests/unit/fuse/write_payload_test.cpp.)
# Every mount takes the same writes (O_DIRECT 1 MiB, buffered 64 KiB, an unaligned 1000-byte write
# that is a read-modify-write, a sub-page write that libfuse keeps in memory); the LUN must read
# back what was written, iserkit-fuse must report no copied payload bytes over TCP beyond the
# unaligned write's edge bytes merged into their blocks, and only the splicing mount may have
# writes that came through the pipe (it must have some). A bad --splice-writes value is refused.
source "$(dirname "$0")/lib.sh"

base=iqn.2026-11.org.iserkit:payload
truncate -s 16M "$tmp/lun.img"
start_target payload --iqn $base --lun "$tmp/lun.img"
url="iscsi://127.0.0.1:${target_port[payload]}"
head -c 8M /dev/urandom >"$tmp/random"

# libfuse's pipe must hold max_write + 4 KiB: 1 MiB with --splice-writes' 512 KiB max_write.
splice_possible=1
if (( $(cat /proc/sys/fs/pipe-max-size) < 1048576 )); then splice_possible=0; fi

# The one copy of ours over TCP: the unaligned write's bytes in its partial edge blocks (RMW).
rmw_bytes() {  # BLOCK_SIZE
  local bs=$1 offset=12345 length=1000
  local head=$(( (bs - offset % bs) % bs )) tail=$(( (offset + length) % bs ))
  echo $((head + tail))
}

run_writes() {  # MOUNTPOINT: the writes, then compare the LUN file with the expected image
  local lun=$1/$base/lun0
  cp --sparse=always "$tmp/lun.img" "$tmp/expect.img" 2>/dev/null || truncate -s 16M "$tmp/expect.img"
  python3 - "$lun" "$tmp/expect.img" "$tmp/random" <<'PY' || fail "writes through $lun failed"
import mmap, os, sys
lun, expect, random = sys.argv[1:]
src = open(random, "rb").read()
exp = os.open(expect, os.O_RDWR)
def both(offset, data, direct=False):
    if direct:
        fd = os.open(lun, os.O_WRONLY | os.O_DIRECT)
        buf = mmap.mmap(-1, len(data))  # page-aligned, as O_DIRECT wants
        buf.write(data)
        assert os.pwritev(fd, [buf], offset) == len(data)
    else:
        fd = os.open(lun, os.O_WRONLY)
        assert os.pwrite(fd, data, offset) == len(data)
        os.fsync(fd)
    os.close(fd)
    os.pwrite(exp, data, offset)
for i in range(4):                      # O_DIRECT, 1 MiB each
    both(i << 20, src[i << 20:(i + 1) << 20], direct=True)
for i in range(16):                     # buffered, 64 KiB each
    both((6 << 20) + i * 65536, src[(4 << 20) + i * 65536:(4 << 20) + (i + 1) * 65536])
both(12345, src[:1000])                 # unaligned: read-modify-write of two blocks
both((10 << 20) + 512, src[7 << 20:(7 << 20) + 512])  # under a page: stays in libfuse's memory
fd = os.open(lun, os.O_RDONLY)
got = os.pread(fd, 16 << 20, 0)
want = os.pread(exp, 16 << 20, 0)
assert got == want, "the LUN does not read back what was written"
print("  16 MiB read back as written")
PY
}

report() {  # LOG: "copied payload bytes: N; writes through splice: M" → sets copied, spliced
  local line
  line=$(grep -o 'copied payload bytes: [0-9]*; writes through splice: [0-9]*' "$1") || fail "no payload report in $1"
  copied=$(sed 's/copied payload bytes: \([0-9]*\);.*/\1/' <<<"$line")
  spliced=$(sed 's/.*writes through splice: \([0-9]*\)/\1/' <<<"$line")
}

echo "== a bad --splice-writes value: usage error (2) before anything is mounted"
mkdir -p "$tmp/bad"
rc=0
"$BIN/iserkit-fuse" "$url" "$tmp/bad" --foreground --splice-writes=sometimes >"$tmp/fuse-bad.log" 2>&1 || rc=$?
((rc == 2)) || fail "--splice-writes=sometimes: exit status $rc, want 2"
grep -q -- "--splice-writes sometimes: want one of always, never, auto" "$tmp/fuse-bad.log" || fail "no usage message: $(cat "$tmp/fuse-bad.log")"
! mountpoint -q "$tmp/bad" || fail "mounted despite a bad option"

# mount_and_write NAME MODE WHAT ARGS...: mounts $tmp/NAME with ARGS, checks that its log names
# --splice-writes=MODE and what it decided (WHAT), runs the writes, unmounts; sets copied and
# spliced from its exit report and checks that no payload was copied beyond the RMW edges.
mount_and_write() {
  local name=$1 mode=$2 what=$3; shift 3
  mount_view "$tmp/$name" "$url" --timeout 30 "$@"
  grep -q -- "--splice-writes=$mode: $what" "$tmp/fuse-$name.log" || fail "$name: the log does not say --splice-writes=$mode: $what"
  if [[ -z ${expected_copies:-} ]]; then
    block_size=$(python3 -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.iscsi.block_size").decode())' \
      "$tmp/$name/$base/lun0") || fail "no block size xattr"
    expected_copies=$(rmw_bytes "$block_size")
  fi
  run_writes "$tmp/$name"
  unmount_view "$tmp/$name" "$fuse_pid"
  report "$tmp/fuse-$name.log"
  echo "  copied=$copied (RMW edges: $expected_copies) spliced=$spliced"
  ((copied == expected_copies)) || fail "$name: copied $copied payload bytes over TCP, want $expected_copies (RMW edges)"
}

echo "== default (auto) over TCP: writes from libfuse's buffer"
mount_and_write plain auto "WRITEs go from libfuse's buffer"
((spliced == 0)) || fail "$spliced writes came through splice with --splice-writes=auto over TCP"

echo "== --splice-writes=never: writes from libfuse's buffer"
mount_and_write never never "WRITEs go from libfuse's buffer" --splice-writes=never
((spliced == 0)) || fail "$spliced writes came through splice with --splice-writes=never"

echo "== --splice-writes (= always): payload read from libfuse's pipe into session-pool buffers"
mount_and_write splice always "requests are spliced" --splice-writes
if ((splice_possible)); then
  # 4 O_DIRECT + 16 buffered writes of a page or more (the kernel may split or merge buffered ones).
  ((spliced >= 4)) || fail "only $spliced writes came through splice"
else
  echo "  (fs.pipe-max-size is under 1 MiB: libfuse falls back to its buffer; not checked)"
fi
echo "PASS"
