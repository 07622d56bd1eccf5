#!/bin/bash
# Linux iSER initiator (open-iscsi, ib_iser) -> iserkit-target on Soft-RoCE: login, /dev/sdX, dd
# SendTargets discovery over iSER, login through the iser iface, the session's transport is iser,
# the LUN appears as a SCSI disk of the right size, 64 MiB of random data round-trips with O_DIRECT
# (SHA-256 compared, and with the target's backing file), logout, the disk is gone.
# Issue 13 item 5: large I/O — ib_iser's max_sectors raised to 8192 (4 MiB) before the login and the
# disk's max_sectors_kb to its max_hw_sectors_kb, 64 MiB in 4 MiB O_DIRECT requests round-trip, and
# the target's counter of the largest command over iSER (--stats-file) proves commands above 512 KiB
# arrived; several sessions at once — a second iser iface logs in to the same target, data written
# through one session's disk reads back through the other's; logout under load — fio runs on the
# second session's disk while `iscsiadm -m node -u` logs it out: the target stays up, the first
# session still round-trips, and a new login through the second iface serves I/O. The target exits 0
# on SIGTERM (with an ASan build, ISERKIT_BUILD=build-asan, no sanitizer report in its log).
# Without iSER in iserkit-target: SKIP.
source "$LAB_SOURCE/tests/lab/guest/lib.sh"
plan soft-roce target iscsid discovery login transport disk dd-roundtrip backing-file large-io second-session \
  cross-session-data logout-under-load target-survives relogin logout target-exit large-commands-over-iser no-sanitizer-report

check soft-roce rxe_up || give_up "no Soft-RoCE device"
if reason=$(iser_missing); then give_up "$reason"; fi

iqn=iqn.2026-11.org.iserkit.lab:iser-kernel
portal=$LAB_RDMA_IP:3260
size_mib=256
truncate -s "${size_mib}M" "$work/lun.img"
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=0
daemon target iserkit-target --iqn "$iqn" --lun "$work/lun.img" --listen "$portal" --port-file "$work/port" \
  --stats-file "$work/target.stats" --log-level info
target_log=$logdir/$scenario.target.log
check target serving iserkit-target "$work/port" 120 || give_up "iserkit-target did not start"

modprobe ib_iser || give_up "modprobe ib_iser failed"
# Large I/O: ib_iser sizes each new SCSI host from max_sectors (default 1024 = 512 KiB); raise it
# before the login (the module may already be loaded by an earlier scenario: the parameter is writable).
if ! echo 8192 >/sys/module/ib_iser/parameters/max_sectors 2>/dev/null; then
  # not writable in this kernel: load the module again with it (no iSER session is open here yet)
  modprobe -r ib_iser && modprobe ib_iser max_sectors=8192 ||
    echo "cannot set ib_iser's max_sectors: $(cat /sys/module/ib_iser/parameters/max_sectors 2>&1)"
fi
check iscsid iscsid_up || give_up "iscsid did not start"

iser_node_login
find_disk() {
  wait_until 60 scsi_disk_of "$iqn" || { echo "no SCSI disk for the session"; return 1; }
  disk=$(scsi_disk_of "$iqn")
  local bytes
  bytes=$(blockdev --getsize64 "$disk")
  ((bytes == size_mib << 20)) || { echo "$disk has $bytes bytes, the LUN $((size_mib << 20))"; return 1; }
  echo "$disk: $bytes bytes over iSER"
}
disk=""
check disk find_disk || give_up "the LUN did not appear as a disk"
check dd-roundtrip roundtrip "$disk" 64
check backing-file disk_holds_backing "$disk" "$work/lun.img" 64
large_io() {
  local q=/sys/block/${disk#/dev/}/queue hw
  hw=$(cat "$q/max_hw_sectors_kb")
  echo "ib_iser max_sectors=$(cat /sys/module/ib_iser/parameters/max_sectors), $disk max_hw_sectors_kb=$hw max_segments=$(cat "$q/max_segments")"
  ((hw > 512)) || { echo "$disk allows at most $hw KiB per command: ib_iser did not take max_sectors=8192"; return 1; }
  echo "$hw" >"$q/max_sectors_kb" || return 1
  head -c "$(mib 64)" /dev/urandom >"$work/big" || return 1
  dd if="$work/big" of="$disk" bs=4M seek=16 oflag=direct conv=fsync status=none || return 1
  echo 3 >/proc/sys/vm/drop_caches
  cmp <(dd if="$disk" bs=4M skip=16 count=16 iflag=direct status=none) "$work/big" || return 1
  cmp <(dd if="$work/lun.img" bs=4M skip=16 count=16 status=none) "$work/big" || { echo "the backing file differs"; return 1; }
  rm -f "$work/big"
  echo "max_sectors_kb=$(cat "$q/max_sectors_kb"): 64 MiB in 4 MiB O_DIRECT requests round-tripped (disk and backing file)"
}
check large-io large_io

# Several sessions at once: a second iface bound to the iser transport, logged in to the same target.
disk_of_iface() {  # disk_of_iface IFACE: the /dev/sdX of the session made through IFACE
  local s d
  for s in /sys/class/iscsi_session/session*; do
    [[ $(cat "$s/targetname" 2>/dev/null) == "$iqn" && $(cat "$s/ifacename" 2>/dev/null) == "$1" ]] || continue
    for d in "$s"/device/target*/*/block/*; do [[ -e $d ]] && { echo "/dev/${d##*/}"; return 0; }; done
  done
  return 1
}
second_session() {
  iscsiadm -m iface -I iser2 >/dev/null 2>&1 || iscsiadm -m iface -I iser2 -o new >/dev/null || return 1
  iscsiadm -m iface -I iser2 -o update -n iface.transport_name -v iser >/dev/null || return 1
  iscsiadm -m node -T "$iqn" -p "$portal" -I iser2 >/dev/null 2>&1 ||
    iscsiadm -m node -o new -T "$iqn" -p "$portal,1" -I iser2 >/dev/null || return 1
  timeout 300 iscsiadm -m node -T "$iqn" -p "$portal" -I iser2 --login || return 1
  wait_until 60 disk_of_iface iser2 || { echo "no SCSI disk for the second session"; return 1; }
  disk2=$(disk_of_iface iser2)
  local n
  n=$(iscsiadm -m session 2>/dev/null | grep -c "$iqn")
  ((n == 2)) || { iscsiadm -m session; echo "$n sessions to $iqn, want 2"; return 1; }
  echo "two iSER sessions to $iqn at once: $disk (iface iser) and $disk2 (iface iser2)"
}
disk2=""
cross_session() {
  head -c "$(mib 16)" /dev/urandom >"$work/x1" && head -c "$(mib 16)" /dev/urandom >"$work/x2" || return 1
  dd if="$work/x1" of="$disk" bs=1M seek=128 oflag=direct conv=fsync status=none &
  dd if="$work/x2" of="$disk2" bs=1M seek=160 oflag=direct conv=fsync status=none
  wait $! || return 1
  cmp <(dd if="$disk2" bs=1M skip=128 count=16 iflag=direct status=none) "$work/x1" || return 1
  cmp <(dd if="$disk" bs=1M skip=160 count=16 iflag=direct status=none) "$work/x2" || return 1
  echo "16 MiB written through each session at once, each read back through the other session: identical"
}
if check second-session second_session; then
  check cross-session-data cross_session
  # Logout under load: fio on the second session's disk while it is logged out.
  logout_under_load() {
    local before after
    timeout 120 fio --name=load --filename="$disk2" --direct=1 --ioengine=libaio --iodepth=16 --rw=randrw \
      --bs=256k --size=64m --offset=192m --time_based --runtime=60 --output="$work/load.fio.txt" \
      >"$work/load.fio.stderr" 2>&1 &
    fio_pid=$!
    before=$(awk '{ print $1 + $5 }' "/sys/block/${disk2#/dev/}/stat")
    wait_until 60 bash -c "(( \$(awk '{ print \$1 + \$5 }' /sys/block/${disk2#/dev/}/stat) > $before + 64 ))" ||
      { echo "fio did not start on $disk2"; kill "$fio_pid"; return 1; }
    after=$(awk '{ print $1 + $5 }' "/sys/block/${disk2#/dev/}/stat")
    timeout 180 iscsiadm -m node -T "$iqn" -p "$portal" -I iser2 --logout || { kill "$fio_pid"; return 1; }
    wait_until 60 bash -c "! kill -0 $fio_pid" || { echo "fio still runs 60 s after the logout"; kill -9 "$fio_pid"; return 1; }
    wait "$fio_pid"
    echo "fio exit $? (errors expected: its disk went away); $((after - before)) requests done before the logout"
    [[ ! -e /sys/block/${disk2#/dev/} ]] || { echo "$disk2 still there after logout"; return 1; }
    echo "logged out of the second session with fio running on $disk2: the logout completed, the disk is gone"
  }
  check logout-under-load logout_under_load
  survives() {
    kill -0 "$target_pid" || { echo "iserkit-target died"; return 1; }
    roundtrip "$disk" 16 || return 1
    echo "iserkit-target still serves the first session after the logout under load"
  }
  check target-survives survives
  relogin() {
    timeout 300 iscsiadm -m node -T "$iqn" -p "$portal" -I iser2 --login || return 1
    wait_until 60 disk_of_iface iser2 || { echo "no SCSI disk after the new login"; return 1; }
    disk2=$(disk_of_iface iser2)
    roundtrip "$disk2" 16 || return 1
    timeout 180 iscsiadm -m node -T "$iqn" -p "$portal" -I iser2 --logout || return 1
    echo "a new login through iser2 served 16 MiB ($disk2) and logged out"
  }
  check relogin relogin
else
  for c in cross-session-data logout-under-load target-survives relogin; do skip "$c" "no second session"; done
fi
iser_node_logout
check target-exit stop_daemon target
large_commands() {
  iser_command_above_512k "from ib_iser" || return 1
  echo "largest command the Linux iSER initiator sent: $largest_iser bytes (> 512 KiB)"
}
check large-commands-over-iser large_commands
if grep -qa __asan_init "$(command -v iserkit-target)"; then  # GCC links libasan, clang its runtime statically
  check no-sanitizer-report bash -c "! grep -n 'LeakSanitizer\|AddressSanitizer\|runtime error:' '$target_log' && echo 'no sanitizer report in the target log'"
else
  skip no-sanitizer-report "iserkit-target is not an AddressSanitizer build (run with ISERKIT_BUILD=build-asan)"
fi
