#!/usr/bin/env bash
# Two paths through two veth pairs under the FUSE view (issue 11 items 3-4): iserkit-target in a
# network namespace of its own listens on two addresses (portal groups 1 and 2, one file LUN);
# iserkit-fuse runs in a second namespace's network (nsenter --net: the mount stays in the host's
# mount namespace, where fio runs) with ONE discovery URL and --multipath failover, so the target's
# two TargetAddresses from SendTargets are its two paths: the root shows the target once. fio
# (libaio, O_DIRECT) writes and verifies the LUN file while link 1 goes down and up again, then
# link 2: fio ends with no error, every block verifies, and the target's info file shows each
# path's state change (not up while its link is down, up again after) and the I/O moving between
# the paths. Bounded: fio must finish within 60 s of the last fault.
source "$(dirname "$0")/lib.sh"
need_fuse
command -v fio >/dev/null || skip "fio is not installed"
command -v nsenter >/dev/null || skip "nsenter (util-linux) is not installed"
two_links
truncate -s 256M "$tmp/lun.img"
start_target_two_portals

fuse_prefix=(nsenter "--net=/run/netns/$ns_initiator")
fuse_urls=("iscsi://10.201.1.1:3260")
mount_fuse mnt --multipath failover --nop-interval 1 --nop-timeout 1 --path-replacement-timeout 2 \
  --replacement-timeout 60 --timeout 10
info=$tmp/mnt/$iqn/info
listed=$(ls "$tmp/mnt")
[[ $listed == "$iqn" ]] || fail "the root should list the target once, lists: $listed"

# path I FIELD: FIELD of path I of LUN 0's device, from the info file (read afresh each time).
path() {
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["luns"][0]["paths"][int(sys.argv[2])][sys.argv[3]])' \
    "$info" "$1" "$2"
}
wait_state() {  # wait_state I STATE|not-up
  local s
  for _ in $(seq 100); do
    s=$(path "$1" state)
    [[ $2 == not-up && $s != up ]] && return 0
    [[ $s == "$2" ]] && return 0
    sleep 0.2
  done
  fail "path $1 is $s, not $2, after 20 s"
}
python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); assert j["multipath"]["policy"] == "failover", j' "$info" ||
  fail "the info file is not JSON with the multipath policy"
[[ $(path 0 url) == "iscsi://10.201.1.1/$iqn" && $(path 1 url) == "iscsi://10.201.2.1/$iqn" ]] ||
  fail "the paths are not the two TargetAddresses: $(path 0 url) $(path 1 url)"
wait_state 0 up
wait_state 1 up

# ~24 s of writes (192 MiB at 8 MiB/s), each block checksummed, then read back and checked.
fio --name=multipath --filename="$(fio_name "$tmp/mnt/$iqn/lun0")" --ioengine=libaio --direct=1 --rw=randwrite \
  --bs=64k --iodepth=8 --size=192m --rate=8m --verify=crc32c --do_verify=1 --verify_fatal=1 --randrepeat=0 \
  >"$tmp/fio.log" 2>&1 &
fio_pid=$!; pids+=($fio_pid)

sleep 2
kill -0 $fio_pid 2>/dev/null || fail "fio ended before the first fault"
path1_before=$(path 1 commands)
echo "== link 1 down for 5 s"
link_down 1
sleep 5
state0_down=$(path 0 state)
path1_during=$(path 1 commands)
echo "   path 0: $state0_down; path 1: $(path 1 state), commands $path1_before -> $path1_during"
[[ $state0_down != up ]] || fail "path 0 still shows up with its link down for 5 s"
link_up 1
wait_state 0 up
path0_before=$(path 0 commands)
kill -0 $fio_pid 2>/dev/null || fail "fio ended before the second fault"
echo "== link 2 down for 5 s"
link_down 2
sleep 5
state1_down=$(path 1 state)
echo "   path 1: $state1_down; path 0: $(path 0 state)"
[[ $state1_down != up ]] || fail "path 1 still shows up with its link down for 5 s"
link_up 2
wait_state 1 up

wait_fio $fio_pid 60
path0_after=$(path 0 commands)
echo "  paths: 0 $(path 0 state) commands=$path0_after downs=$(path 0 downs); 1 $(path 1 state)" \
  "commands=$(path 1 commands) downs=$(path 1 downs)"
((path1_during > path1_before)) || fail "no I/O moved to path 1 while link 1 was down"
((path0_after > path0_before)) || fail "no I/O moved back to path 0 while link 2 was down"
(($(path 0 downs) >= 1 && $(path 1 downs) >= 1)) || fail "each path should have gone down once"
(($(path 0 reinstatements) >= 1 && $(path 1 reinstatements) >= 1)) || fail "each path should have come back"
grep -q "fuse: multipath: path down: target=$iqn lun=0 path=0" "$tmp/mnt.log" || fail "the view did not log path 0 going down"
unmount_fuse mnt
echo PASS
