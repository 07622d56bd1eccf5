#!/usr/bin/env bash
# The Ceph RBD backend against a real cluster (issue 12): a throwaway one-monitor, one-OSD cluster
# (tests/support/ceph_cluster.sh), images created with the rbd CLI, served by iserkit-target as
# --lun rbd:POOL/IMAGE, and checked both ways: what our initiator writes, `rbd export` reads back
# byte for byte; what `rbd import` wrote, our initiator reads; a write acknowledged with FUA (and
# one followed by SYNCHRONIZE CACHE) survives kill -9 of the target; COMPARE AND WRITE (match,
# miscompare with its offset), WRITE SAME, VPD 0xb2 and `rbd resize` (unit attention, new size);
# a missing image or cluster is a clear start-up error; and a set of libiscsi iscsi-test-cu
# families passes on the RBD LUN.
# Skips (77) without the Ceph packages or a build without librbd.
source "$(dirname "$0")/lib.sh"
rbd_test_init rbd
rbd_cluster_up

iqn=iqn.2026-11.org.iserkit:rbd
rbd create rbd/vol --size 64M
head -c $((3 << 20)) /dev/urandom >"$tmp/seed.bin"
rbd import --no-progress "$tmp/seed.bin" rbd/seeded

# start_target ARGS...: iserkit-target on a free port with the test cluster's ceph.conf.
start_target() {
  rm -f "$tmp/port"
  "$BIN/iserkit-target" --iqn $iqn --ceph-conf "$CEPH_CONF" --listen 127.0.0.1:0 --port-file "$tmp/port" "$@" \
    >>"$tmp/target.log" 2>&1 &
  target_pid=$!
  for _ in $(seq 150); do
    [[ -s $tmp/port ]] && break
    kill -0 $target_pid 2>/dev/null || break
    sleep 0.1
  done
  if [[ ! -s $tmp/port ]]; then
    grep -q "no RBD backend" "$tmp/target.log" && skip "this build has no RBD backend (WITH_RBD=OFF)"
    fail "target did not start: $*"
  fi
  port=$(cat "$tmp/port")
}

# A missing image: the target refuses to start, naming the LUN and the reason.
if "$BIN/iserkit-target" --iqn $iqn --ceph-conf "$CEPH_CONF" --lun rbd:rbd/nosuch --listen 127.0.0.1:0 \
    >"$tmp/missing.log" 2>&1; then
  fail "the target started with a missing image"
fi
grep -q "no RBD backend" "$tmp/missing.log" && skip "this build has no RBD backend (WITH_RBD=OFF)"
grep -q "rbd:rbd/nosuch" "$tmp/missing.log" && grep -qi "no such file" "$tmp/missing.log" ||
  { cat "$tmp/missing.log" >&2; fail "no clear error for a missing image"; }
# A malformed name is a usage error.
if "$BIN/iserkit-target" --lun rbd:novolume --listen 127.0.0.1:0 >"$tmp/bad.log" 2>&1; then
  fail "the target accepted rbd:novolume"
fi
grep -q "rbd:POOL/IMAGE" "$tmp/bad.log" || fail "no usage hint for a malformed rbd: LUN"

start_target --lun rbd:rbd/vol --lun rbd:rbd/seeded
url=iscsi://127.0.0.1:$port/$iqn

# Capacity: READ CAPACITY reports the image's size.
"$BIN/iserkit" readcap "$url/0" >"$tmp/readcap" || fail "readcap"
grep -q "131072" "$tmp/readcap" || { cat "$tmp/readcap"; fail "lun0 does not report 131072 blocks of 512 bytes"; }

# Initiator → RBD: unaligned write through the target, read back by librbd's own CLI.
head -c $((1 << 20)) /dev/urandom >"$tmp/data.bin"
offset=$(( (5 << 20) + 777 ))
"$BIN/iserkit" write "$url/0" --offset $offset -i "$tmp/data.bin" || fail "iserkit write"
rbd export --no-progress rbd/vol "$tmp/vol.bin"
cmp -n $((1 << 20)) -i $offset:0 "$tmp/vol.bin" "$tmp/data.bin" || fail "rbd export differs from what was written"
# ... and the bytes around it are still zero (nothing written outside the range).
cmp -n 4096 -i $((offset - 4096)):0 "$tmp/vol.bin" /dev/zero || fail "bytes before the write changed"

# RBD → initiator: what rbd import wrote, the target serves.
"$BIN/iserkit" read "$url/1" --length $((3 << 20)) -o "$tmp/seeded.read" || fail "iserkit read"
cmp "$tmp/seeded.read" "$tmp/seed.bin" || fail "lun1 differs from the imported file"

# Durability: a FUA write and a write followed by SYNCHRONIZE CACHE (the CLI's default) both
# survive kill -9 of the target straight after the acknowledgement.
head -c 65536 /dev/urandom >"$tmp/fua.bin"
head -c 65536 /dev/urandom >"$tmp/sync.bin"
"$BIN/iserkit" write "$url/0" --offset $((20 << 20)) --fua -i "$tmp/fua.bin" || fail "FUA write"
"$BIN/iserkit" write "$url/0" --offset $((30 << 20)) -i "$tmp/sync.bin" || fail "write + SYNCHRONIZE CACHE"
kill -9 $target_pid; wait $target_pid 2>/dev/null || true; target_pid=
rbd export --no-progress rbd/vol "$tmp/vol2.bin"
cmp -n 65536 -i $((20 << 20)):0 "$tmp/vol2.bin" "$tmp/fua.bin" || fail "the FUA write was lost at kill -9"
cmp -n 65536 -i $((30 << 20)):0 "$tmp/vol2.bin" "$tmp/sync.bin" || fail "the flushed write was lost at kill -9"

# SCSI operations that go to librbd's own calls (issue 12 item 2), checked with librbd's CLI:
# COMPARE AND WRITE of one 512-byte block (rbd_aio_compare_and_write; librbd 16.2 does no more than
# one sector, so longer ones fall back to the target's read-compare-write), WRITE SAME with a
# non-zero block (rbd_aio_writesame), VPD 0xb2 and READ CAPACITY (16) thin provisioning, and
# `rbd resize`: CAPACITY DATA HAS CHANGED on every session, then the new size.
# iserkit-scsi-probe sends the raw commands.
probe=$BIN/iserkit-scsi-probe
[[ -x $probe ]] || fail "$probe is not built"
rbd create rbd/ops --size 16M
start_target --lun rbd:rbd/ops --log-level debug
ops=iscsi://127.0.0.1:$port/$iqn/0
# export_ops: a copy of the image through librbd's CLI; extract OFFSET LENGTH OUT: LENGTH bytes
# of that copy at OFFSET (both multiples of 512).
export_ops() { rm -f "$tmp/export.bin"; rbd export --no-progress rbd/ops "$tmp/export.bin" >/dev/null; }
extract() { dd if="$tmp/export.bin" of="$3" bs=512 skip=$(($1 / 512)) count=$(($2 / 512)) status=none; }
head -c 512 /dev/urandom >"$tmp/caw.old"
head -c 512 /dev/urandom >"$tmp/caw.new"
head -c 512 /dev/urandom >"$tmp/caw.third"
caw_lba=8195  # inside the second 4 MiB object, not at offset 0 of the image
"$BIN/iserkit" write "$ops" --offset $((caw_lba * 512)) -i "$tmp/caw.old" || fail "write before COMPARE AND WRITE"
"$probe" "$ops" "caw:$caw_lba:$tmp/caw.old:$tmp/caw.new" >"$tmp/caw.out" || fail "probe caw"
grep -qx "caw status=0x00" "$tmp/caw.out" || { cat "$tmp/caw.out"; fail "a matching COMPARE AND WRITE did not succeed"; }
# Miscompare: byte 234 of the verify data differs; nothing is written, INFORMATION = 234, and it
# was librbd that found it (its image offset is in the target's debug log).
python3 -c 'import sys; d=bytearray(open(sys.argv[1],"rb").read()); d[234]^=0xff; open(sys.argv[2],"wb").write(d)' \
  "$tmp/caw.new" "$tmp/caw.wrong"
"$probe" "$ops" "caw:$caw_lba:$tmp/caw.wrong:$tmp/caw.third" >"$tmp/caw2.out" || fail "probe caw (miscompare)"
grep -qx "caw status=0x02 sense=e/1d/00 information=234" "$tmp/caw2.out" ||
  { cat "$tmp/caw2.out"; fail "a miscompare is not MISCOMPARE / MISCOMPARE DURING VERIFY with INFORMATION 234"; }
grep -q "compare_and_write miscompare: offset=$((caw_lba * 512)) mismatch_off=" "$tmp/target.log" ||
  fail "the miscompare did not come from rbd_aio_compare_and_write"
# Eight blocks across the 4 MiB object boundary (LBA 8192): librbd cannot, the target's fallback does.
cross_lba=8186  # 8186..8193: across LBA 8192, clear of caw_lba
printf 'A%.0s' $(seq 4096) >"$tmp/a.bin"
printf 'C%.0s' $(seq 4096) >"$tmp/c.bin"
head -c 4096 /dev/urandom >"$tmp/r.bin"
"$BIN/iserkit" write "$ops" --offset $((cross_lba * 512)) -i "$tmp/a.bin" || fail "write before the long COMPARE AND WRITE"
"$probe" "$ops" "caw:$cross_lba:$tmp/a.bin:$tmp/c.bin" "caw:$cross_lba:$tmp/a.bin:$tmp/r.bin" >"$tmp/caw3.out" ||
  fail "probe caw (eight blocks)"
[[ $(cat "$tmp/caw3.out") == "caw status=0x00"$'\n'"caw status=0x02 sense=e/1d/00 information=0" ]] ||
  { cat "$tmp/caw3.out"; fail "COMPARE AND WRITE of eight blocks: wrong answers"; }
# WRITE SAME (16) of a non-zero block over 2048 blocks (1 MiB, three objects' worth of calls in one).
head -c 512 /dev/urandom >"$tmp/ws.block"
"$probe" "$ops" "writesame:16000:2048:$tmp/ws.block" >"$tmp/ws.out" || fail "probe writesame"
grep -qx "writesame status=0x00" "$tmp/ws.out" || { cat "$tmp/ws.out"; fail "WRITE SAME did not succeed"; }
python3 -c 'import sys; open(sys.argv[2],"wb").write(open(sys.argv[1],"rb").read() * 2048)' "$tmp/ws.block" "$tmp/ws.expected"
# One copy of the image checks them all: the matching COMPARE AND WRITE wrote, the miscompared
# one did not, the eight-block one wrote, WRITE SAME wrote its block 2048 times.
export_ops
extract $((caw_lba * 512)) 512 "$tmp/caw.got"
cmp "$tmp/caw.got" "$tmp/caw.new" || fail "the image does not hold what COMPARE AND WRITE wrote (or a miscompare wrote)"
extract $((cross_lba * 512)) 4096 "$tmp/caw.got3"
cmp "$tmp/caw.got3" "$tmp/c.bin" || fail "COMPARE AND WRITE of eight blocks wrote the wrong data"
extract $((16000 * 512)) $((2048 * 512)) "$tmp/ws.got"
cmp "$tmp/ws.got" "$tmp/ws.expected" || fail "the image does not hold the WRITE SAME block 2048 times"
# Thin provisioning: VPD 0xb2 (LBPU, LBPWS, LBPWS10, LBPRZ, provisioning type 2 = thin; iscsi-inq
# takes the page code in decimal); LBPME/LBPRZ of READ CAPACITY (16) are checked below.
if command -v iscsi-inq >/dev/null; then
  iscsi-inq -e 1 -c 178 "$ops" >"$tmp/b2.out" 2>&1 || { cat "$tmp/b2.out"; fail "iscsi-inq VPD 0xb2"; }
  for want in lbpu:1 lbpws:1 lbpws10:1 lbprz:1 "provisioning type:2"; do
    grep -qx "$want" "$tmp/b2.out" || { cat "$tmp/b2.out"; fail "VPD 0xb2 lacks '$want'"; }
  done
fi
# Resize: two sessions; after `rbd resize` both get CAPACITY DATA HAS CHANGED (2Ah/09h), then
# READ CAPACITY (16) reports the new size, and the new blocks take writes.
"$probe" --sessions 2 "$ops" readcap16 "exec:rbd resize --no-progress rbd/ops --size 24M" await-ua:2a:09:15 readcap16 \
  >"$tmp/resize.out" || { cat "$tmp/resize.out"; fail "probe resize"; }
[[ $(cat "$tmp/resize.out") == "readcap16 blocks=32768 block_size=512 lbpme=1 lbprz=1"$'\n'"ua session=0 seen"$'\n'"ua session=1 seen"$'\n'"readcap16 blocks=49152 block_size=512 lbpme=1 lbprz=1" ]] ||
  { cat "$tmp/resize.out"; fail "resize: no unit attention on every session, or the old size"; }
"$BIN/iserkit" write "$ops" --offset $((20 << 20)) -i "$tmp/caw.new" || fail "write past the old end after the resize"
export_ops
extract $((20 << 20)) 512 "$tmp/grown.got"
cmp "$tmp/grown.got" "$tmp/caw.new" || fail "a write to the grown image did not reach it"
kill -9 $target_pid; wait $target_pid 2>/dev/null || true; target_pid=
echo "COMPARE AND WRITE, WRITE SAME, VPD 0xb2, resize: OK"

# --export-rbd: the pool's images are targets <iqn>:<image>; a new image appears on SIGHUP (and by
# the periodic rescan), a renamed one moves, a name that makes no valid iSCSI name is skipped.
rbd create rbd/Bad_Name --size 8M
start_target --export-rbd rbd --rbd-rescan-interval 0
"$BIN/iserkit" discover "iscsi://127.0.0.1:$port" >"$tmp/disc1" || fail "discover"
grep -q "^$iqn:vol\b" "$tmp/disc1" && grep -q "^$iqn:seeded\b" "$tmp/disc1" ||
  { cat "$tmp/disc1"; fail "--export-rbd does not list the pool's images"; }
grep -qi "bad_name" "$tmp/disc1" && fail "an image whose name is no valid iSCSI name was exported"
grep -q "image Bad_Name skipped" "$tmp/target.log" || fail "no warning for the skipped image"
"$BIN/iserkit" read "iscsi://127.0.0.1:$port/$iqn:seeded/0" --length $((3 << 20)) -o "$tmp/seeded2.read" ||
  fail "read through the exported target"
cmp "$tmp/seeded2.read" "$tmp/seed.bin" || fail "the exported target serves other data"
rbd create rbd/fresh --size 16M
kill -HUP $target_pid
for _ in $(seq 100); do grep -q "added target $iqn:fresh" "$tmp/target.log" && break; sleep 0.1; done
"$BIN/iserkit" discover "iscsi://127.0.0.1:$port" >"$tmp/disc2" || fail "discover after SIGHUP"
grep -q "^$iqn:fresh\b" "$tmp/disc2" || { cat "$tmp/disc2"; fail "a new image is not a target after SIGHUP"; }
"$BIN/iserkit" write "iscsi://127.0.0.1:$port/$iqn:fresh/0" --offset 4096 -i "$tmp/fua.bin" || fail "write to the new target"
rbd rename rbd/fresh rbd/renamed 2>"$tmp/rename.err" || { cat "$tmp/rename.err"; fail "rbd rename"; }
kill -HUP $target_pid
for _ in $(seq 100); do grep -q "dropped target $iqn:fresh" "$tmp/target.log" && break; sleep 0.1; done
"$BIN/iserkit" discover "iscsi://127.0.0.1:$port" >"$tmp/disc3" || fail "discover after the rename"
grep -q "^$iqn:fresh\b" "$tmp/disc3" && { cat "$tmp/disc3"; fail "a renamed image still has its old target"; }
grep -q "^$iqn:renamed\b" "$tmp/disc3" || { cat "$tmp/disc3"; fail "a renamed image has no target under its new name"; }
if "$BIN/iserkit" readcap "iscsi://127.0.0.1:$port/$iqn:fresh/0" >"$tmp/gone.out" 2>&1; then
  fail "a login to a dropped target succeeded"
fi
grep -qi "not found\|0x0203\|0203" "$tmp/gone.out" || { cat "$tmp/gone.out"; fail "a dropped target is not 'not found'"; }
"$BIN/iserkit" read "iscsi://127.0.0.1:$port/$iqn:renamed/0" --offset 4096 --length 65536 -o "$tmp/renamed.read" ||
  fail "read through the renamed target"
cmp "$tmp/renamed.read" "$tmp/fua.bin" || fail "the renamed target lost the data written under the old name"
kill -9 $target_pid; wait $target_pid 2>/dev/null || true; target_pid=
# The periodic rescan finds a new image without a signal.
start_target --export-rbd rbd --rbd-rescan-interval 1
rbd create rbd/later --size 8M
for _ in $(seq 100); do grep -q "added target $iqn:later" "$tmp/target.log" && break; sleep 0.1; done
grep -q "added target $iqn:later" "$tmp/target.log" || fail "the periodic rescan did not add a new image"
kill -9 $target_pid; wait $target_pid 2>/dev/null || true; target_pid=

echo "export-rbd: discovery, SIGHUP add, rename, periodic rescan: OK"

# Conformance: iscsi-test-cu families that exercise the data path, thin provisioning and
# flushes; every test must pass, be skipped by the suite itself, or be an expected failure of
# every LUN kind.
if command -v iscsi-test-cu >/dev/null; then
  rbd create rbd/conf --size 64M
  start_target --lun rbd:rbd/conf
  for family in Read10 Read16 Write10 Write16 WriteVerify16 CompareAndWrite Unmap WriteSame16 GetLBAStatus \
      Verify16 ReadCapacity16 Inquiry; do
    log=$tmp/cu-$family.log
    timeout 300 iscsi-test-cu --dataloss --test "ALL.$family" \
      "iscsi://127.0.0.1:$port/$iqn/0" >"$log" 2>&1 || true
    run=$(awk '/tests +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+/ { print $3; exit }' "$log")
    failed=$(awk '/tests +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+/ { print $5; exit }' "$log")
    [[ -n $run ]] || { tail -n 20 "$log" >&2; fail "iscsi-test-cu ALL.$family printed no summary"; }
    echo "iscsi-test-cu ALL.$family: $run run, $failed failed"
    # Failures the conformance suite expects for every LUN kind (tests/conformance/expected-failures.txt,
    # kind "all") are libiscsi's, not the backend's; any other failure fails this test.
    while read -r name; do
      grep -q "^ALL\.$family\.$name all " "$SRC/tests/conformance/expected-failures.txt" && continue
      grep -B2 -A8 "FAILED" "$log" | head -60 >&2
      fail "iscsi-test-cu ALL.$family.$name failed on the RBD LUN"
    done < <(sed -n 's/^ *Test: \([A-Za-z0-9_]*\) \.\.\.FAILED.*/\1/p' "$log")
  done
else
  echo "note: iscsi-test-cu not installed; conformance part skipped"
fi
# Zero copy: reads and writes go between the task buffers and librbd's iovecs; the target copies
# no payload byte (its count at exit, after SIGTERM; a log of its own).
if [[ -n $target_pid ]]; then kill -9 $target_pid; wait $target_pid 2>/dev/null || true; target_pid=; fi
mv "$tmp/target.log" "$tmp/target-earlier.log"
start_target --lun rbd:rbd/vol
head -c $((4 << 20)) /dev/urandom >"$tmp/copy.bin"
"$BIN/iserkit" write "iscsi://127.0.0.1:$port/$iqn/0" --offset 0 -i "$tmp/copy.bin" || fail "iserkit write (zero copy)"
"$BIN/iserkit" read "iscsi://127.0.0.1:$port/$iqn/0" --length $((4 << 20)) -o "$tmp/copy.read" || fail "iserkit read (zero copy)"
cmp -s "$tmp/copy.bin" "$tmp/copy.read" || fail "4 MiB did not read back as written"
kill -TERM $target_pid; wait $target_pid || fail "the target did not exit cleanly on SIGTERM"; target_pid=
copied=$(sed -n 's/.*copied payload bytes: \([0-9]*\).*/\1/p' "$tmp/target.log" | tail -n 1)
[[ $copied == 0 ]] || fail "the target copied payload bytes on an RBD LUN: '${copied}' (want 0)"
echo "zero copy: 4 MiB written and read, copied payload bytes: 0"
echo "OK: the RBD backend against a real cluster"
