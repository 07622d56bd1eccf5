#!/bin/bash
# Multipath over iSER and mixed TCP + iSER: one path's rxe netdev down 10 s under fio verify via iserkit-nbd
# lab: opt-in (two fio fault runs under TCG, several minutes): scripts/lab.sh --only iser-multipath
# Issue 24 item 3 (issue 11's path faults over iSER). iserkit-target listens on labrxe0's address
# (10.211.0.1, dummy labnet0) and on a second rxe device's (labrxe1 on dummy labnet1, 10.212.0.1),
# one LUN. Two cases, each an iserkit-nbd with two URLs (--multipath round-robin, 2 s path
# replacement timeout, NOP-Out after 1 s, 2 s to answer) behind the kernel nbd client:
#   two-iser: iser://10.211.0.1 (labrxe0) + iser://10.212.0.1 (labrxe1);
#   mixed:    iscsi://10.211.0.1 (TCP)    + iser://10.212.0.1 (labrxe1).
# Under a fio job (24 MiB of random 64 KiB writes at 2 MiB/s, 8 in flight, crc32c verify of every
# block), once it has written 4 MiB, labnet1 (path 1's netdev) goes down for 10 s and comes back:
# fio must end with exit 0, err=0 and every block verified; the bridge must have seen path 1 go
# down (--stats-file path.1.downs) and reinstate it (path.1.state=up, path.1.reinstatements);
# then a second fio verify (4 MiB) must send commands on path 1 again (its commands, read from --status-socket, grow).
# Copies: mixed must log "copied payload bytes: 0" (the NBD buffers come from the iSER path's
# registered pool, the TCP path sends them as they are); two-iser reports its count (path 1 is on
# another RDMA device than the pool's and bounces through its own pool: docs/iser.md).
# Then iserkit-fuse with the two iser:// portals (--multipath round-robin): the same fio job on its
# LUN file (O_DIRECT; started 3 s before the flap), path 1 down and reinstated in its info file.
source "$LAB_SOURCE/tests/lab/guest/lib.sh"
plan soft-roce second-device target \
  two-iser.bridge two-iser.attach two-iser.flap-io two-iser.path-down two-iser.reinstated two-iser.path-used \
  two-iser.detach two-iser.exit two-iser.copies \
  mixed.bridge mixed.attach mixed.flap-io mixed.path-down mixed.reinstated mixed.path-used \
  mixed.detach mixed.exit mixed.zero-copy fuse.mount fuse.flap-io fuse.paths fuse.exit target-exit

check soft-roce rxe_up || give_up "no Soft-RoCE device"
if reason=$(iser_missing); then give_up "$reason"; fi
command -v fio >/dev/null || give_up "fio is not installed in the guest (the host's userland)"
other_ip=10.212.0.1
check second-device rxe_second_up "$other_ip" || give_up "no second Soft-RoCE device"

iqn=iqn.2026-11.org.iserkit.lab:iser-multipath
truncate -s 256M "$work/lun.img"
daemon target iserkit-target --iqn "$iqn" --lun "$work/lun.img" --listen "$LAB_RDMA_IP:3260" --listen "$other_ip:3260" \
  --port-file "$work/port" --log-level info
check target serving iserkit-target "$work/port" 180 || give_up "iserkit-target did not start"
modprobe nbd nbds_max=4 || give_up "modprobe nbd failed"

# flap_io: fio verify with labnet1 down for 10 s once 4 MiB are written
flap_io() {
  local before fio_pid start
  before=$(written_sectors)
  fio_paced_start "$case_name" "${fio_file:-/dev/$nbd}" 0 24m
  if [[ -n ${fio_file:-} ]]; then
    nap 3  # FUSE: no block device statistics to watch; fio writes 2 MiB/s
  else
    wait_until 120 wrote_since "$before" 8192 ||
      { echo "fio wrote less than 4 MiB in 120 s"; kill "$fio_pid"; wait "$fio_pid"; return 1; }
  fi
  start=$EPOCHREALTIME
  ip link set labnet1 down || { kill "$fio_pid"; wait "$fio_pid"; return 1; }
  echo "labnet1 down, labrxe1 port $(cat /sys/class/infiniband/labrxe1/ports/1/state)"
  nap 10
  [[ -n ${fio_file:-} ]] && echo "path 1 after 10 s down: $(fuse_path 1 state)" || grep '^path\.1\.state=' "$stats"
  ip link set labnet1 up || return 1
  wait_until 30 grep -q ACTIVE /sys/class/infiniband/labrxe1/ports/1/state ||
    { echo "labrxe1 is not ACTIVE 30 s after labnet1 came up"; }
  echo "labnet1 up again after 10 s"
  fio_paced_end "$case_name" "of the fault" || return 1
  echo "fio: 24 MiB of random 64 KiB writes, every block verified (crc32c), $(seconds_since "$start") s from the fault to the end"
}
path_down() {
  grep '^path\.' "$stats"
  (($(stat_of path.1.downs) >= 1)) || { echo "the bridge never saw path 1 go down"; return 1; }
  echo "path 1 went down $(stat_of path.1.downs) time(s); its failed commands were sent again on path 0 (path_retries=$(stat_of path_retries))"
}
reinstated() {
  wait_until 90 bash -c "grep -q '^path\.1\.reinstatements=[1-9]' '$stats' && grep -q '^path\.1\.state=up' '$stats'" ||
    { grep '^path\.' "$stats"; echo "path 1 is not reinstated 90 s after the link"; return 1; }
  (($(stat_of path.1.reinstatements) >= 1)) || { echo "path 1 up but no reinstatement counted"; return 1; }
  echo "path 1 reinstated ($(stat_of path.1.reinstatements) time(s)), state up"
}
# path1_commands: commands sent on path 1 so far, live from the bridge's --status-socket (the
# stats file is rewritten on events, not on every command)
path1_commands() {
  iserkit status --json "$status_sock" | python3 -c 'import json, sys; print(json.load(sys.stdin)["multipath"]["paths"][1]["commands"])'
}
path_used() {
  local before after
  before=$(path1_commands)
  [[ -n $before ]] || { echo "the bridge's status socket gave no path 1 commands"; return 1; }
  fio_verify "/dev/$nbd" 64m 4m || return 1
  after=$(path1_commands)
  ((after > before)) || { echo "no command went on path 1 after its reinstatement ($before -> $after)"; return 1; }
  echo "4 MiB verified after the reinstatement; path 1 commands $before -> $after"
}

# run_case NAME NBD URL0 URL1
run_case() {
  case_name=$1 nbd=$2
  sock=$work/$1.sock stats=$work/$1.stats status_sock=$work/$1.status.sock
  daemon "$1-bridge" iserkit-nbd "$3" "$4" --multipath round-robin --socket "$sock" \
    --initiator-name "$LAB_INITIATOR_IQN" --replacement-timeout 60 --path-replacement-timeout 2 \
    --nop-interval 1 --nop-timeout 2 --stats-file "$stats" --log-level info \
    --status-socket "$status_sock"
  bridge_log=$logdir/$scenario.$1-bridge.log
  if ! check "$1.bridge" serving iserkit-nbd "$sock" 180; then
    for c in attach flap-io path-down reinstated path-used detach exit; do skip "$1.$c" "the bridge did not start"; done
    return 1
  fi
  wait_until 60 grep -q '^path\.1\.state=up' "$stats"
  grep '^path\.' "$stats"
  if check "$1.attach" nbd_attach "$sock" "$nbd"; then
    check "$1.flap-io" flap_io
    check "$1.path-down" path_down
    check "$1.reinstated" reinstated
    check "$1.path-used" path_used
    check "$1.detach" nbd_detach "/dev/$nbd"
  fi
  check "$1.exit" stop_daemon "$1-bridge"
}

run_case two-iser nbd0 "iser://$LAB_RDMA_IP:3260/$iqn/0" "iser://$other_ip:3260/$iqn/0"
n=$(copied_bytes "$bridge_log")
if [[ -z $n ]]; then
  skip two-iser.copies "no 'copied payload bytes' line at exit (no copy counter in this build)"
else
  pass two-iser.copies "iserkit-nbd copied $n payload bytes: path 1 (labrxe1) bounces the pool's (labrxe0) buffers, counted (docs/iser.md)"
fi
run_case mixed nbd1 "iscsi://$LAB_RDMA_IP:3260/$iqn/0" "iser://$other_ip:3260/$iqn/0"
zero_copy_check mixed.zero-copy iserkit-nbd "$bridge_log"
# iserkit-fuse: the same two iSER paths, one directory per target; fio on its LUN file (O_DIRECT)
fuse_path() {  # fuse_path I FIELD: FIELD of path I of LUN 0's device, from the info file
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["luns"][0]["paths"][int(sys.argv[2])][sys.argv[3]])' \
    "$mnt/$iqn/info" "$1" "$2"
}
fuse_mount() {
  mkdir -p "$mnt"
  modprobe fuse 2>/dev/null
  daemon fuse iserkit-fuse "iser://$LAB_RDMA_IP:3260/$iqn" "iser://$other_ip:3260/$iqn" "$mnt" --multipath round-robin \
    --initiator-name "$LAB_INITIATOR_IQN" --nop-interval 1 --nop-timeout 1 --path-replacement-timeout 2 \
    --replacement-timeout 60 --timeout 10 --foreground --log-level info
  wait_until 120 test -f "$mnt/$iqn/lun0" || { echo "no $mnt/$iqn/lun0 after 120 s"; return 1; }
  wait_until 60 bash -c "[[ \$(python3 -c 'import json, sys; print([p[\"state\"] for p in json.load(open(sys.argv[1]))[\"luns\"][0][\"paths\"]])' '$mnt/$iqn/info') == \"['up', 'up']\" ]]" ||
    { cat "$mnt/$iqn/info"; echo "the two paths are not both up"; return 1; }
  echo "$mnt/$iqn/lun0: $(stat -c %s "$mnt/$iqn/lun0") bytes, paths $(fuse_path 0 state) $(fuse_path 1 state)"
}
fuse_flap_paths() {
  (($(fuse_path 1 downs) >= 1)) || { cat "$mnt/$iqn/info"; echo "path 1 never went down"; return 1; }
  wait_until 90 bash -c "[[ \$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[\"luns\"][0][\"paths\"][1][\"state\"])' '$mnt/$iqn/info') == up ]]" ||
    { cat "$mnt/$iqn/info"; echo "path 1 is not up 90 s after the link"; return 1; }
  (($(fuse_path 1 reinstatements) >= 1)) || { echo "path 1 up but no reinstatement counted"; return 1; }
  echo "path 1 went down $(fuse_path 1 downs) time(s) and was reinstated ($(fuse_path 1 reinstatements)); commands: path 0 $(fuse_path 0 commands), path 1 $(fuse_path 1 commands)"
}
mnt=$work/mnt
if check fuse.mount fuse_mount; then
  case_name=fuse fio_file=${mnt//:/\\:}/${iqn//:/\\:}/lun0
  check fuse.flap-io flap_io
  check fuse.paths fuse_flap_paths
else
  skip fuse.flap-io "iserkit-fuse did not mount"
  skip fuse.paths "iserkit-fuse did not mount"
fi
check fuse.exit stop_daemon fuse
check target-exit stop_daemon target
