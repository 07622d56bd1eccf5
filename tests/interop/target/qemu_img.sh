# qemu-img (qemu's libiscsi block driver) round trip through iserkit-target: random data in,
# back out, byte-compared and checksummed, on a sparse file LUN and a memory LUN.
source "$(dirname "$0")/lib.sh"
require qemu-img sha256sum cmp
if ! qemu-img --help 2>/dev/null | grep -qw iscsi; then
  echo "SKIP: qemu-img has no iscsi block driver" >&2
  exit 77
fi
head -c $((48 << 20)) /dev/urandom >"$WORK/random.img"
truncate -s 64M "$WORK/disk.img"
start_target --lun "$WORK/disk.img" --lun mem:64M --threads 2
for lun in 0 1; do
  qemu-img convert -n -f raw -O raw "$WORK/random.img" "$URL/$lun" || fail "qemu-img convert in (lun $lun)"
  rm -f "$WORK/back.img"
  qemu-img convert -f raw -O raw "$URL/$lun" "$WORK/back.img" || fail "qemu-img convert out (lun $lun)"
  [[ $(stat -c %s "$WORK/back.img") -eq $((64 << 20)) ]] || fail "lun $lun: size $(stat -c %s "$WORK/back.img")"
  cmp -n $((48 << 20)) "$WORK/random.img" "$WORK/back.img" || fail "lun $lun: data differs"
  a=$(sha256sum <"$WORK/random.img" | cut -d' ' -f1)
  b=$(head -c $((48 << 20)) "$WORK/back.img" | sha256sum | cut -d' ' -f1)
  [[ "$a" == "$b" ]] || fail "lun $lun: checksum $a != $b"
  # The tail beyond the written data reads back as zeroes.
  cmp -n $((16 << 20)) -i $((48 << 20)):0 "$WORK/back.img" /dev/zero || fail "lun $lun: tail not zero"
done
# The file LUN holds the data on disk.
cmp -n $((48 << 20)) "$WORK/random.img" "$WORK/disk.img" || fail "file LUN content differs from what was written"
stop_target
# --read-only: writes are refused, reads still work.
start_target --lun "$WORK/disk.img" --read-only
if qemu-img convert -n -f raw -O raw "$WORK/random.img" "$URL/0" 2>"$WORK/ro.err"; then
  fail "a write to a --read-only target succeeded"
fi
rm -f "$WORK/back.img"
qemu-img convert -f raw -O raw "$URL/0" "$WORK/back.img" || fail "read from a --read-only target"
cmp -n $((48 << 20)) "$WORK/random.img" "$WORK/back.img" || fail "read-only target: data differs"
stop_target
echo PASS
