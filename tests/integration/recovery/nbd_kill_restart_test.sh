#!/usr/bin/env bash
# kill -9 of iserkit-target during an fio write + verify job through iserkit-nbd, the target
# restarted on the same port and file 3 s later, twice: fio ends with no error and every block
# verifies (fio's own crc32c verify of every block it wrote); the bridge reports two lost
# connections and two recoveries. Bounded: the test fails if fio is not done within 120 s of the second restart.
source "$(dirname "$0")/lib.sh"
command -v fio >/dev/null || skip "fio is not installed"
fio --enghelp 2>/dev/null | grep -qw nbd || skip "this fio has no nbd ioengine"

truncate -s 256M "$tmp/lun.img"
start_target
start_bridge nbd --replacement-timeout 30 --nop-interval 1 --nop-timeout 2

# ~12 s of writes (96 MiB at 8 MiB/s), each block checksummed, then read back and checked.
fio --name=recovery --ioengine=nbd --uri="nbd+unix:///?socket=$tmp/nbd.sock" --rw=randwrite --bs=64k \
  --iodepth=8 --size=96m --rate=8m --verify=crc32c --do_verify=1 --verify_fatal=1 --randrepeat=0 \
  >"$tmp/fio.log" 2>&1 &
fio_pid=$!; pids+=($fio_pid)

kill_restart_rounds 2 $fio_pid fio 2 bridge_recovered

wait_fio $fio_pid 120
lost=$(stat_of nbd connections_lost); recovered=$(stat_of nbd recoveries)
echo "  bridge: state=$(stat_of nbd state) connections_lost=$lost recoveries=$recovered reissued=$(stat_of nbd commands_reissued)"
[[ $(stat_of nbd state) == connected ]] || fail "the bridge is not connected at the end"
((lost >= 2 && recovered >= 2)) || fail "expected two lost connections and two recoveries"
kill -TERM $bridge_pid; wait $bridge_pid || fail "iserkit-nbd exited with $?"
echo PASS
