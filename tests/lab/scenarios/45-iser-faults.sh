#!/bin/bash
# iSER faults on Soft-RoCE: kill -9 of the target and rxe netdev down/up under fio verify via iserkit-nbd
# lab: opt-in (258 s in the VM under TCG, over the lab's ~3 min budget per default scenario): scripts/lab.sh --only iser-faults
# Issue 11 item 5. iserkit-target on the rxe device's address with iSER; iserkit-nbd over iser://
# (replacement timeout 60 s, NOP-Out ping after 1 s of silence, 2 s to answer) behind the kernel
# nbd client (nbd-client -unix, /dev/nbd0). Each fault runs under its own fio job (24 MiB of random
# 64 KiB writes at 2 MiB/s, 8 in flight, crc32c verify of every block after the writes), started
# first and faulted once it has written 4 MiB:
#   kill-restart: kill -9 of iserkit-target, restarted 3 s later on the same portal and file;
#   link-flap:    the dummy netdev under the rxe device down for 5 s, then up.
# Each must end with fio's exit 0, err=0 and every block verified, and the bridge must have counted
# a lost connection and a recovery (--stats-file) and logged "connection lost" and "recovered".
# After the flap, a control (rping, no iserkit code) must connect over the device: if it cannot,
# Soft-RoCE itself is wedged and the link-flap I/O checks are SKIPped with that reason (a CM
# message sent while the port was down does that on Linux 6.1, which is why the iSER datamover
# sends none then). At exit iserkit-nbd must log "copied payload bytes: 0" (zero copy held
# through the recoveries).
source "$LAB_SOURCE/tests/lab/guest/lib.sh"
plan soft-roce target bridge nbd-attach kill-restart-io kill-restart-recovery link-flap-fault \
  link-flap-control link-flap-io link-flap-recovery nbd-detach bridge-exit bridge-zero-copy target-exit

check soft-roce rxe_up || give_up "no Soft-RoCE device"
if reason=$(iser_missing); then give_up "$reason"; fi

iqn=iqn.2026-11.org.iserkit.lab:iser-faults
portal=$LAB_RDMA_IP:3260
truncate -s 256M "$work/lun.img"
# start_target NAME: iserkit-target on $portal and $work/lun.img (log logs/iser-faults.NAME.log)
start_target() {
  rm -f "$work/port"
  daemon "$1" iserkit-target --iqn "$iqn" --lun "$work/lun.img" --listen "$portal" --port-file "$work/port" \
    --log-level info
  target_name=$1
}
start_target target
check target serving iserkit-target "$work/port" 120 || give_up "iserkit-target did not start"

url=iser://$portal/$iqn/0
stats=$work/bridge.stats
daemon bridge iserkit-nbd "$url" --socket "$work/nbd.sock" --initiator-name "$LAB_INITIATOR_IQN" \
  --replacement-timeout 60 --nop-interval 1 --nop-timeout 2 --stats-file "$stats" --log-level info
bridge_on_nbd0 120 30
command -v fio >/dev/null || give_up "fio is not installed in the guest (the host's userland)"

# fio_start NAME OFFSET: a fio verify job at OFFSET in the background (24 MiB at 2 MiB/s: ~12 s of
# writes, then the read-back); returns once it has written 4 MiB through /dev/nbd0. Sets fio_pid and
# keeps the bridge's counters before the fault in $lost_before/$rec_before.
fio_start() {
  local before
  fio_name=$1
  lost_before=$(stat_of connections_lost) rec_before=$(stat_of recoveries)
  before=$(written_sectors)
  fio_paced_start "$1" "$dev" "$2" 24m
  wait_until 120 wrote_since "$before" 8192 ||
    { echo "fio wrote less than 4 MiB in 120 s"; cat "$work/$1.fio.txt"; fio_stop; return 1; }
  echo "fio has written $((($(written_sectors) - before) / 2048)) MiB: fault"
  fault_start=$EPOCHREALTIME
}
fio_stop() { kill "$fio_pid" 2>/dev/null; wait "$fio_pid" 2>/dev/null; }
# fio_finish: fio must end within 300 s with status 0, err=0 and every block verified
fio_finish() {
  fio_paced_end "$fio_name" "of the fault" || return 1
  echo "fio: 24 MiB of random 64 KiB writes, every block verified (crc32c), $(seconds_since "$fault_start") s from the fault to the end"
}
# fio_fault_start NAME OFFSET FAULT...: fio_start, then FAULT (fio goes on)
fio_fault_start() {
  fio_start "$1" "$2" || return 1
  shift 2
  "$@" || { echo "the fault could not be made"; fio_stop; return 1; }
}
# fio_fault NAME OFFSET FAULT...: fio_start, FAULT, fio_finish
fio_fault() {
  fio_start "$1" "$2" || return 1
  shift 2
  "$@" || { echo "the fault could not be made"; fio_stop; return 1; }
  kill -0 "$fio_pid" 2>/dev/null || echo "warning: fio ended before the fault was over"
  fio_finish
}
# recovered_since LABEL: the bridge counted one more lost connection and recovery, is connected, logged both
recovered_since() {
  local lost rec
  bridge_counted_recovery "$1" || return 1
  grep -c "connection lost" "$bridge_log" | grep -qv '^0$' || { echo "no 'connection lost' in the bridge's log"; return 1; }
  grep -c "recovered" "$bridge_log" | grep -qv '^0$' || { echo "no 'recovered' in the bridge's log"; return 1; }
  echo "$1: the bridge lost the iSER connection and recovered (connections_lost $lost, recoveries $rec)"
}

kill_restart() {
  local pid=${_daemons[$target_name]}
  kill -9 "$pid" || return 1
  wait "$pid" 2>/dev/null
  unset "_daemons[$target_name]"
  echo "iserkit-target (PID $pid) killed with SIGKILL"
  nap 3
  start_target target2
  serving iserkit-target "$work/port" 120
}
check kill-restart-io fio_fault kill-restart 0 kill_restart
check kill-restart-recovery recovered_since "kill -9 and restart"

link_flap() {
  ip link set "$LAB_RDMA_NETDEV" down || return 1
  echo "$LAB_RDMA_NETDEV down, $LAB_RDMA_DEV port $(cat "/sys/class/infiniband/$LAB_RDMA_DEV/ports/1/state")"
  nap 5
  ip link set "$LAB_RDMA_NETDEV" up || return 1
  wait_until 30 grep -q ACTIVE "/sys/class/infiniband/$LAB_RDMA_DEV/ports/1/state" ||
    { echo "$LAB_RDMA_DEV is not ACTIVE 30 s after the link came up"; return 1; }
  echo "$LAB_RDMA_NETDEV up again after 5 s, $LAB_RDMA_DEV port $(cat "/sys/class/infiniband/$LAB_RDMA_DEV/ports/1/state")"
}
# The control: after the flap, can two programs that are not ours (librdmacm's rping) still make a new
# rdma_cm connection on this device? If not, the bridge cannot either, and the checks after it are
# the lab's failure, not ours.
rping_control() {
  local port=7100 i server rc
  for i in 1 2 3; do
    rping -s -a "$LAB_RDMA_IP" -p $port -C 2 >"$work/rping-server.txt" 2>&1 &
    server=$!
    nap 1
    timeout 15 rping -c -a "$LAB_RDMA_IP" -p $port -C 2 -v
    rc=$?
    kill "$server" 2>/dev/null; wait "$server" 2>/dev/null
    ((rc == 0)) && { echo "rping (librdmacm, no iserkit code) connects over $LAB_RDMA_DEV after the flap"; return 0; }
    port=$((port + 1))
  done
  echo "Soft-RoCE takes no new rdma_cm connection after its netdev went down and up: rping (no iserkit code) timed out 3 times"
  return 1
}
if check link-flap-fault fio_fault_start link-flap 64m link_flap; then
  if check link-flap-control rping_control; then
    check link-flap-io fio_finish
    check link-flap-recovery recovered_since "link down/up"
  else
    noticed() {
      local lost
      lost=$(stat_of connections_lost)
      cat "$stats"
      ((lost > lost_before)) || { echo "the bridge did not notice the link going down"; return 1; }
      grep -q "connection lost" "$bridge_log" || { echo "no 'connection lost' in the bridge's log"; return 1; }
      echo "the bridge noticed the lost iSER connection (connections_lost $lost, state $(stat_of state))"
    }
    check link-flap-noticed noticed
    fio_stop
    why="the lab's Soft-RoCE takes no new rdma_cm connection after a link flap (link-flap-control)"
    skip link-flap-io "$why"
    skip link-flap-recovery "$why"
  fi
else
  fio_stop
fi

check nbd-detach nbd_detach "$dev"
check bridge-exit stop_daemon bridge
zero_copy_check bridge-zero-copy iserkit-nbd "$bridge_log"
check target-exit stop_daemon "$target_name"
