#!/usr/bin/env bash
# Two paths through two veth pairs (issue 11 item 5): iserkit-target in a network namespace of its
# own listens on two addresses (portal groups 1 and 2, one file LUN); iserkit-nbd, in a second
# namespace, reaches them over two veth pairs with both URLs (--multipath failover); fio on the host
# writes and verifies through the bridge's Unix socket. Under I/O link 1 goes down and up again,
# then link 2: fio ends with no error, every block verifies, and the bridge's counters show the I/O
# moved between the paths (path 1 used while link 1 was down, path 0 again while link 2 was down).
# Namespaces, veths and processes are removed on every exit. Addresses 10.201.{1,2}.0/24 exist only
# inside the two namespaces. Bounded: fio must finish within 120 s of the last fault.
source "$(dirname "$0")/lib.sh"
command -v fio >/dev/null || skip "fio is not installed"
fio --enghelp 2>/dev/null | grep -qw nbd || skip "this fio has no nbd ioengine"
two_links
truncate -s 256M "$tmp/lun.img"
start_target_two_portals

start_multipath_bridge --path-replacement-timeout 2 --replacement-timeout 60

# current COUNTER: the bridge's status now (SIGUSR1 rewrites the stats file).
current() {
  kill -USR1 $bridge_pid
  sleep 0.3
  stat_of mp "$1"
}
wait_path_up() {
  for _ in $(seq 150); do [[ $(current "path.$1.state") == up ]] && return 0; sleep 0.2; done
  fail "path $1 did not come back up"
}

# ~30 s of writes (240 MiB at 8 MiB/s), each block checksummed, then read back and checked.
fio --name=multipath --ioengine=nbd --uri="nbd+unix:///?socket=$tmp/mp.sock" --rw=randwrite --bs=64k \
  --iodepth=8 --size=240m --rate=8m --verify=crc32c --do_verify=1 --verify_fatal=1 --randrepeat=0 \
  >"$tmp/fio.log" 2>&1 &
fio_pid=$!; pids+=($fio_pid)

sleep 2
kill -0 $fio_pid 2>/dev/null || fail "fio ended before the first fault"
echo "== link 1 down for 5 s"
link_down 1
sleep 5
path1_during=$(current path.1.commands)
echo "   path.1.commands=$path1_during path.0.state=$(stat_of mp path.0.state)"
link_up 1
wait_path_up 0
path0_before=$(current path.0.commands)
kill -0 $fio_pid 2>/dev/null || fail "fio ended before the second fault"
echo "== link 2 down for 5 s (path.0.commands=$path0_before)"
link_down 2
sleep 5
link_up 2
wait_path_up 1

wait_fio $fio_pid 120
path0_after=$(current path.0.commands)
echo "  bridge: state=$(stat_of mp state) path_downs=$(stat_of mp path_downs) path_ups=$(stat_of mp path_ups)" \
  "path_retries=$(stat_of mp path_retries) path.0.commands=$path0_after path.1.commands=$(stat_of mp path.1.commands)"
[[ $(stat_of mp state) == connected ]] || fail "the bridge is not connected at the end"
(($(stat_of mp path_downs) >= 2)) || fail "expected both paths to have gone down once"
(($(stat_of mp path_ups) >= 2)) || fail "expected both paths to have come back"
((path1_during > 0)) || fail "no I/O moved to path 1 while link 1 was down"
((path0_after > path0_before)) || fail "no I/O moved back to path 0 while link 2 was down"
grep -q "path 0 down" "$tmp/mp.log" || fail "the bridge did not log path 0 going down"
kill -TERM $bridge_pid; wait $bridge_pid || fail "iserkit-nbd exited with $?"
echo PASS
