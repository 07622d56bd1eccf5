#!/usr/bin/env bash
# kill -9 of iserkit-target during an fio write + verify job on the LUN file of a mounted
# iserkit-fuse view (libaio, O_DIRECT: the view passes direct I/O through as async SCSI commands, so
# no page cache hides what reached the target), the target restarted on the same port and file 3 s
# later, twice: fio ends with no error and every block it wrote verifies (crc32c, read back after
# the writes); the view's log shows each lost connection and each recovery (same session, commands
# sent again), and it unmounts cleanly. Bounded: fails if fio is not done within
# ISERKIT_FAULT_GUARD (120) s of the last restart.
# Longer runs: ISERKIT_FAULT_ROUNDS (2), ISERKIT_FAULT_SIZE (96m), ISERKIT_FAULT_RATE (8m per second).
source "$(dirname "$0")/lib.sh"
need_fuse
command -v fio >/dev/null || skip "fio is not installed"
rounds=${ISERKIT_FAULT_ROUNDS:-2}
size=${ISERKIT_FAULT_SIZE:-96m}
rate=${ISERKIT_FAULT_RATE:-8m}
guard=${ISERKIT_FAULT_GUARD:-120}

truncate -s 256M "$tmp/lun.img"
start_target
# --timeout 10 per command once sent; --replacement-timeout 30 rides through the restarts.
mount_fuse mnt --replacement-timeout 30 --timeout 10 --nop-interval 1 --nop-timeout 2

fio --name=recovery --filename="$(fio_name "$lun_file")" --ioengine=libaio --direct=1 --rw=randwrite --bs=64k \
  --iodepth=8 --size="$size" --rate="$rate" --verify=crc32c --do_verify=1 --verify_fatal=1 --randrepeat=0 \
  >"$tmp/fio.log" 2>&1 &
fio_pid=$!; pids+=($fio_pid)

kill_restart_rounds "$rounds" $fio_pid fio 2 view_recovered

wait_fio $fio_pid "$guard"
! grep -qiE "verify.*bad|crc32c.*wanted" "$tmp/fio.log" || fail "fio found bad data"
lost=$(grep -c "session: connection lost: target=" "$tmp/mnt.log" || true)
recovered=$(grep -c "session: recovered: target=" "$tmp/mnt.log" || true)
reissued=$(awk '/session: recovered: [0-9]+ commands to send again/ {n += $(NF-4)} END {print n+0}' "$tmp/mnt.log")
echo "  iserkit-fuse: connections lost $lost, recoveries $recovered, commands sent again $reissued"
((lost >= rounds && recovered >= rounds)) || fail "expected $rounds lost connections and $rounds recoveries in the view's log"
! grep -q "session: failed" "$tmp/mnt.log" || fail "a session failed instead of recovering"
unmount_fuse mnt
echo PASS
