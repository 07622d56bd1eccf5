#!/bin/bash
# iSER device loss: `rdma link delete` of the rxe device under fio verify via iserkit-nbd, then `rdma link add`
# lab: opt-in (several minutes under TCG, more with an ASan build): ISERKIT_BUILD=build-asan scripts/lab.sh --only iser-device-loss
# Issue 13 item 4. iserkit-target on the rxe device's address (iSER and TCP on one portal)
# and on a second rxe device's (labrxe1 on dummy netdev labnet1, 10.212.0.1), and iserkit-nbd over
# iser:// to the first (replacement timeout 120 s, NOP-Out after 1 s, 2 s to answer) behind the
# kernel nbd client. The second device is needed, not only a second path: librdmacm (rdma-core 44
# and its master today) drops a removed device's context only when it re-reads a device list that
# is not empty (librdmacm/cma.c sync_devices_list returns ENODEV first), so the removal of a host's
# last RDMA device waits for the processes using it to exit, whatever they release. Under a fio job (24 MiB of random 64 KiB writes at 2 MiB/s, 8 in flight, crc32c
# verify of every block) the rxe device is deleted with `rdma link delete`. The kernel finishes that
# only once every process has released every verbs object on the device (QPs, CQs, completion
# channels, MRs, PDs, cm_ids): the command must return within 30 s while both programs keep running.
# While the device is gone the target must still serve TCP (an `iserkit write`/`read iscsi://`
# round trip at 192 MiB, away from fio's range) and iSER on the other device (the same at 160 MiB
# over iser://10.212.0.1). Then the device is added again: the target must
# listen on it again (its log says so) and the bridge must recover (fio ends with every block
# verified; the bridge counted a lost connection and a recovery). Both programs must exit 0 on
# SIGTERM; with an AddressSanitizer build (ISERKIT_BUILD=build-asan, -DISERKIT_SANITIZE=ON) neither
# may print a LeakSanitizer or AddressSanitizer report (SKIP when the binaries are not ASan builds).
# After the recovery the bridge's NBD connection must take its buffers from the new session's
# registered pool: 32 MiB of O_DIRECT writes and reads through nbd0 add 0 to its copied-payload
# counter (read live from its --status-socket).
source "$LAB_SOURCE/tests/lab/guest/lib.sh"
plan soft-roce second-device target bridge nbd-attach delete-under-io delete-prompt tcp-during-loss \
  iser-other-device-during-loss device-back target-relisten io-verified bridge-recovery no-copy-after-recovery \
  nbd-detach bridge-exit \
  target-exit no-sanitizer-report second-device-removed

check soft-roce rxe_up || give_up "no Soft-RoCE device"
if reason=$(iser_missing); then give_up "$reason"; fi
other_ip=10.212.0.1
check second-device rxe_second_up "$other_ip" || give_up "no second Soft-RoCE device"

iqn=iqn.2026-11.org.iserkit.lab:iser-device-loss
portal=$LAB_RDMA_IP:3260
truncate -s 256M "$work/lun.img"
# ASan reports go to the daemons' logs (stderr); leaks are checked at exit.
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=0
daemon target iserkit-target --iqn "$iqn" --lun "$work/lun.img" --listen "$portal" --listen "$other_ip:3260" \
  --port-file "$work/port" --log-level info
check target serving iserkit-target "$work/port" 180 || give_up "iserkit-target did not start"
target_log=$logdir/$scenario.target.log

url=iser://$portal/$iqn/0
stats=$work/bridge.stats
daemon bridge iserkit-nbd "$url" --socket "$work/nbd.sock" --initiator-name "$LAB_INITIATOR_IQN" \
  --replacement-timeout 120 --nop-interval 1 --nop-timeout 2 --stats-file "$stats" --log-level info \
  --status-socket "$work/status.sock"
bridge_on_nbd0 180 60
command -v fio >/dev/null || give_up "fio is not installed in the guest (the host's userland)"

# fio in the background; returns once it has written 4 MiB
fio_start() {
  local before
  lost_before=$(stat_of connections_lost) rec_before=$(stat_of recoveries)
  before=$(written_sectors)
  fio_paced_start loss "$dev" 0 24m
  wait_until 180 wrote_since "$before" 8192 ||
    { echo "fio wrote less than 4 MiB in 180 s"; cat "$work/loss.fio.txt"; return 1; }
  echo "fio has written $((($(written_sectors) - before) / 2048)) MiB: deleting $LAB_RDMA_DEV"
}

# rdma link delete in the background: the kernel blocks it until user space let go of the device,
# and a blocked one cannot be killed, so it is waited for with a limit instead of run under timeout.
delete_device() {
  fio_start || return 1
  delete_start=$EPOCHREALTIME
  rdma link delete "$LAB_RDMA_DEV" >"$work/delete.txt" 2>&1 &
  delete_pid=$!
  echo "rdma link delete $LAB_RDMA_DEV started"
}
delete_prompt() {
  if ! wait_until 30 bash -c "! kill -0 $delete_pid"; then
    echo "rdma link delete $LAB_RDMA_DEV still blocked after 30 s: a process holds the device"
    ls -l /proc/"$target_pid"/fd /proc/"$bridge_pid"/fd 2>/dev/null | grep -i infiniband
    return 1
  fi
  wait "$delete_pid" || { echo "rdma link delete failed: $(cat "$work/delete.txt")"; return 1; }
  [[ ! -e /sys/class/infiniband/$LAB_RDMA_DEV ]] || { echo "$LAB_RDMA_DEV is still there"; return 1; }
  kill -0 "$target_pid" && kill -0 "$bridge_pid" || { echo "a program died with the device"; return 1; }
  echo "rdma link delete returned after $(seconds_since "$delete_start") s; iserkit-target and iserkit-nbd still run"
}
if check delete-under-io delete_device; then
  if ! check delete-prompt delete_prompt; then
    # Unblock the kernel (it waits for the processes holding the device) so the lab can go on.
    kill -9 "$bridge_pid" "$target_pid" 2>/dev/null
    unset "_daemons[bridge]" "_daemons[target]"
    wait_until 60 bash -c "! kill -0 $delete_pid"
    kill "$fio_pid" 2>/dev/null
    give_up "rdma link delete blocked: the rest needs the programs alive"
  fi
else
  give_up "fio did not start writing"
fi

tcp_roundtrip() {
  head -c $((4 << 20)) /dev/urandom >"$work/tcp.in"
  iserkit write "iscsi://$portal/$iqn/0" --offset $((192 << 20)) -i "$work/tcp.in" --initiator-name "$LAB_INITIATOR_IQN" ||
    return 1
  iserkit read "iscsi://$portal/$iqn/0" --offset $((192 << 20)) --length $((4 << 20)) -o "$work/tcp.out" \
    --initiator-name "$LAB_INITIATOR_IQN" || return 1
  cmp "$work/tcp.in" "$work/tcp.out" || return 1
  echo "4 MiB written and read back over iSCSI/TCP while $LAB_RDMA_DEV is gone: identical"
}
check tcp-during-loss tcp_roundtrip

other_iser_roundtrip() {
  head -c $((4 << 20)) /dev/urandom >"$work/iser.in"
  iserkit write "iser://$other_ip:3260/$iqn/0" --offset $((160 << 20)) -i "$work/iser.in" \
    --initiator-name "$LAB_INITIATOR_IQN" || return 1
  iserkit read "iser://$other_ip:3260/$iqn/0" --offset $((160 << 20)) --length $((4 << 20)) -o "$work/iser.out" \
    --initiator-name "$LAB_INITIATOR_IQN" || return 1
  cmp "$work/iser.in" "$work/iser.out" || return 1
  echo "4 MiB written and read back over iSER on labrxe1 while $LAB_RDMA_DEV is gone: identical"
}
check iser-other-device-during-loss other_iser_roundtrip

device_back() {
  rdma link add "$LAB_RDMA_DEV" type rxe netdev "$LAB_RDMA_NETDEV" || return 1
  wait_until 30 grep -q ACTIVE "/sys/class/infiniband/$LAB_RDMA_DEV/ports/1/state" ||
    { echo "$LAB_RDMA_DEV is not ACTIVE 30 s after rdma link add"; return 1; }
  echo "$LAB_RDMA_DEV added again on $LAB_RDMA_NETDEV, $(seconds_since "$delete_start") s after the delete"
}
check device-back device_back

relisten() {
  wait_until 60 grep -q "listening again" "$target_log" || { echo "no 'listening again' in the target's log"; return 1; }
  grep "RDMA device removed\|listening again\|released" "$target_log" | head -n 8
}
check target-relisten relisten

fio_finish() {
  fio_paced_end loss || return 1
  echo "fio: 24 MiB of random 64 KiB writes across the device loss, every block verified (crc32c)"
}
check io-verified fio_finish

recovered() {
  local lost rec
  bridge_counted_recovery || return 1
  grep "device removed\|released\|recovered" "$bridge_log" | head -n 8
  echo "the bridge lost the iSER connection with the device and recovered on the new one"
}
check bridge-recovery recovered
copied_now() { iserkit status "$work/status.sock" | sed -n 's/^copied_payload_bytes: *//p'; }
no_copy_after() {
  local before after
  before=$(copied_now)
  [[ -n $before ]] || { echo "the bridge's status socket gave no copied_payload_bytes"; return 1; }
  head -c "$(mib 16)" /dev/urandom >"$work/after.in"
  dd if="$work/after.in" of="$dev" bs=1M seek=64 oflag=direct conv=fsync status=none || return 1
  cmp <(dd if="$dev" bs=1M skip=64 count=16 iflag=direct status=none) "$work/after.in" || return 1
  after=$(copied_now)
  echo "copied payload bytes: $before before, $after after 32 MiB of I/O on the recovered session"
  ((after == before)) || { echo "the bridge copied $((after - before)) payload bytes after the recovery (stale pool)"; return 1; }
  echo "after the recovery: 16 MiB written and read back through nbd0, 0 payload bytes copied (the new session's pool)"
}
check no-copy-after-recovery no_copy_after

check nbd-detach nbd_detach "$dev"
check bridge-exit stop_daemon bridge 120
check target-exit stop_daemon target 120

sanitizer_check() {
  if grep -n "LeakSanitizer\|AddressSanitizer\|runtime error:" "$bridge_log" "$target_log"; then
    echo "a sanitizer report in the programs' logs (above)"
    return 1
  fi
  echo "AddressSanitizer/LeakSanitizer builds of iserkit-target and iserkit-nbd: no report at exit"
}
if grep -qa __asan_init "$(command -v iserkit-target)"; then  # GCC links libasan, clang its runtime statically
  check no-sanitizer-report sanitizer_check
else
  skip no-sanitizer-report "iserkit-target is not an AddressSanitizer build (run with ISERKIT_BUILD=build-asan)"
fi

second_device_removed() {
  rdma link delete labrxe1 && ip link del labnet1 && echo "labrxe1 and labnet1 removed"
}
check second-device-removed second_device_removed
