#!/bin/bash
# iserkit lab guest, stage 2: PID 1 in the overlay root (the host's tree, writes go to RAM).
# Makes the few mounts a system without systemd/udev lacks, runs each scenario of the job in turn
# (own log, own time limit), records a FAIL for a scenario that dies without reporting, saves dmesg,
# marks the run finished and powers off. Results: /lab/out/results.tsv (see guest/lib.sh).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=dumb
bb=/lab/busybox
out=/lab/out

# shellcheck disable=SC1091
source $out/job.env
export LAB_SOURCE LAB_BIN LAB_KVER

$bb mkdir -p /dev/pts /dev/shm
$bb mount -t devpts -o mode=620,ptmxmode=666 devpts /dev/pts
$bb mount -t tmpfs -o mode=1777 shm /dev/shm
$bb mount -t tmpfs -o mode=0755,size=85% run /run   # LUN images live here: up to 1 GiB
$bb mount -t tmpfs -o mode=1777 tmp /tmp   # not the host's /tmp
$bb mkdir -p /run/lock /run/lab
[[ -e /dev/fd ]] || $bb ln -s /proc/self/fd /dev/fd
$bb mount -t configfs configfs /sys/kernel/config 2>/dev/null
$bb ip link set lo up
$bb hostname lab
echo 1 >/proc/sys/kernel/printk   # kernel messages go to dmesg.txt, not between our lines
ulimit -l unlimited               # RDMA memory registration
ulimit -n 65536

read -r up _ </proc/uptime
kernel=$(uname -r)   # every result row and line names it (the lab boots 6.1 or 7.x: --kernel)
echo "lab: guest ready at ${up}s (kernel $kernel: $(cat /proc/version))"
mkdir -p $out/logs
: >$out/results.tsv
: >$out/scenarios.tsv
for file in $LAB_SCENARIOS; do
  name=${file%.sh}
  name=${name#[0-9][0-9]-}
  echo "lab: --- $name"
  before=$(grep -c "^$name"$'\t' $out/results.tsv)
  start=$EPOCHREALTIME
  LAB_SCENARIO=$name timeout -k 20 "$LAB_SCENARIO_TIMEOUT" \
    bash "$LAB_SOURCE/tests/lab/scenarios/$file" </dev/null >>$out/logs/$name.log 2>&1
  rc=$?
  # daemons a killed scenario could not stop itself (guest/lib.sh lists their PIDs)
  if [[ -s /run/lab/$name.pids ]]; then
    while read -r pid; do kill -9 "$pid" 2>/dev/null; done </run/lab/$name.pids
  fi
  took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  after=$(grep -c "^$name"$'\t' $out/results.tsv)
  if ((rc == 124 || rc == 137)); then
    printf '%s\tscenario\tFAIL\t%s\t%s\t%s\n' "$name" "$took" "timed out after ${LAB_SCENARIO_TIMEOUT}s" "$kernel" >>$out/results.tsv
    echo "lab: FAIL $name: timed out after ${LAB_SCENARIO_TIMEOUT}s (kernel $kernel)"
  elif ((after == before)); then
    printf '%s\tscenario\tFAIL\t%s\t%s\t%s\n' "$name" "$took" "exited with status $rc without reporting a result" "$kernel" >>$out/results.tsv
    echo "lab: FAIL $name: exited with status $rc without reporting a result (kernel $kernel)"
  fi
  rm -rf "/run/lab/$name"   # its LUN images: RAM
  gave_up=""
  [[ ! -s /run/lab/$name.gave-up ]] || gave_up=$(head -n 1 /run/lab/$name.gave-up)
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$took" "$rc" "$gave_up" "$kernel" >>$out/scenarios.tsv
  echo "lab: --- $name done in ${took}s (kernel $kernel)"
done

$bb dmesg >$out/dmesg.txt 2>&1
echo done >$out/finished
$bb sync
echo "lab: powering off"
echo o >/proc/sysrq-trigger
$bb sleep 60
