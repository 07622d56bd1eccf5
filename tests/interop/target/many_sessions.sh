# Many sessions at once: 8 parallel iscsi-inq, 8 parallel iscsi-readcapacity16 and 4 parallel
# qemu-img readers/writers on distinct regions, on a target with 2 I/O threads.
source "$(dirname "$0")/lib.sh"
require iscsi-inq iscsi-readcapacity16
start_target --lun mem:256M --threads 2
pids=()
for i in $(seq 8); do
  (iscsi-inq "$URL/0" | grep -q "Vendor:ISERKIT") & pids+=($!)
  (iscsi-readcapacity16 "$URL/0" | grep -q "Total size:268435456") & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a parallel iscsi-inq/readcapacity16 failed"; done
if command -v qemu-img >/dev/null && qemu-img --help 2>/dev/null | grep -qw iscsi; then
  pids=()
  for i in 0 1 2 3; do
    head -c $((8 << 20)) /dev/urandom >"$WORK/part$i"
  done
  # Write four 8 MiB regions concurrently (qemu-img --target-image-opts with an offset driver).
  for i in 0 1 2 3; do
    qemu-img convert -n -f raw --target-image-opts "$WORK/part$i" \
      "driver=raw,offset=$((i * (8 << 20))),size=$((8 << 20)),file.driver=iscsi,file.transport=tcp,file.portal=127.0.0.1:$PORT,file.target=$IQN,file.lun=0" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || fail "a parallel qemu-img writer failed"; done
  qemu-img convert -f raw -O raw "$URL/0" "$WORK/all.img" || fail "read back"
  for i in 0 1 2 3; do
    cmp -n $((8 << 20)) -i $((i * (8 << 20))):0 "$WORK/all.img" "$WORK/part$i" || fail "region $i differs"
  done
else
  echo "note: qemu-img with iscsi missing; parallel writer part not run"
fi
stop_target
echo PASS
