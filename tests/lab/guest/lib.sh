# iserkit lab guest: what every scenario sources. Runs inside the VM as root (bash).
#
# Results: one line per check in /lab/out/results.tsv,
#   scenario TAB check TAB PASS|FAIL|SKIP TAB seconds TAB reason TAB kernel (uname -r)
# and the same line on the console, with the kernel. A scenario declares its checks first
# (`plan a b c`); any it never reaches (an earlier step failed, the feature is missing) are reported
# as SKIP with the reason given to `give_up`, so the summary always shows every check.
#
#   plan CHECK...            the checks this scenario reports, in order
#   check CHECK CMD...       run CMD (output to the scenario log); PASS if it exits 0, else FAIL
#                            with its last output line as the reason. Returns CMD's status.
#   pass|fail|skip CHECK REASON [SECONDS]   record a result directly
#   give_up REASON           SKIP every planned check not reported yet, then exit
#   daemon NAME CMD...       start CMD in its own session (log: logs/SCENARIO.NAME.log), PID in $NAME_pid
#   stop_daemon NAME [SEC]   SIGTERM it, wait up to SEC (default 60) s; returns its exit status
#   wait_until SEC CMD...    poll CMD every 0.2 s until it succeeds; 1 after SEC seconds
#   rxe_up                   Soft-RoCE device labrxe0 on dummy netdev labnet0 ($LAB_RDMA_IP)
#   rxe_second_up IP         a second one, labrxe1 on dummy netdev labnet1 (IP)
#   nbd_attach SOCKET NBD    the kernel nbd client on /dev/NBD through iserkit-nbd's Unix SOCKET
#   bridge_on_nbd0 SEC SEC   checks bridge and nbd-attach: iserkit-nbd serving, connected, on /dev/nbd0
#   fio_paced_start/_end     a paced fio verify job in the background while a scenario makes a fault
#   fs_copy_remount DEV DIR  files copied onto DEV's file system mounted on DIR, checked after a remount
#   iser_missing             prints why iSER cannot be tried with our binaries; 1 when it can
set -u
scenario=${LAB_SCENARIO:?run by guest/main.sh}
out=/lab/out
results=$out/results.tsv
logdir=$out/logs
work=/run/lab/$scenario
pidlist=/run/lab/$scenario.pids
bb=/lab/busybox
mkdir -p "$work"
: >"$pidlist"
export PATH=$LAB_BIN:$PATH
# How iserkit initiators expose buffers over iSER (initiator/src/transport_select.cpp), when the
# lab run asks for a mode: ISERKIT_LAB_ISER_STAGS=per-command scripts/lab.sh --only iser-chain
lab_iser_stags=$(sed -n 's/^ISERKIT_LAB_ISER_STAGS=//p' "$out/job.env" 2>/dev/null)
[[ -n $lab_iser_stags ]] && export ISERKIT_ISER_STAGS=$lab_iser_stags
# Whether iserkit programs chain RDMA Writes and Bind MWs with their SENDs (issue 23 item 7):
# ISERKIT_LAB_ISER_CHAIN=off scripts/lab.sh --only bench-iser measures the unchained posting.
lab_iser_chain=$(sed -n 's/^ISERKIT_LAB_ISER_CHAIN=//p' "$out/job.env" 2>/dev/null)
[[ -n $lab_iser_chain ]] && export ISERKIT_ISER_CHAIN=$lab_iser_chain
# Soft-RoCE needs an address on the netdev it is bound to (rdma_cm cannot resolve routes on lo):
# a dummy interface with a private address, reachable only inside the VM.
LAB_RDMA_IP=10.211.0.1
LAB_RDMA_NETDEV=labnet0
LAB_RDMA_DEV=labrxe0
LAB_INITIATOR_IQN=iqn.2026-11.org.iserkit.lab:initiator

planned=()
declare -A reported=()

nap() { $bb sleep "$1"; }
mib() { echo $(($1 << 20)); }
seconds_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

lab_kernel=$(uname -r)
record() {  # record CHECK STATUS SECONDS REASON
  local reason=${4//$'\t'/ }
  reason=${reason//$'\n'/ }
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$scenario" "$1" "$2" "$3" "$reason" "$lab_kernel" >>"$results"
  printf 'lab: %-4s %s/%s (%ss, kernel %s) %s\n' "$2" "$scenario" "$1" "$3" "$lab_kernel" "$reason" >/dev/console
  printf '=== %s %s (%ss, kernel %s) %s\n' "$2" "$1" "$3" "$lab_kernel" "$reason"
  reported[$1]=1
}
pass() { record "$1" PASS "${3:-0.0}" "$2"; }
fail() { record "$1" FAIL "${3:-0.0}" "$2"; }
skip() { record "$1" SKIP "${3:-0.0}" "$2"; }
plan() { planned+=("$@"); }

# check CHECK CMD...: the command's output goes to the scenario log; its last line is the reason.
check() {
  local name=$1 start rc last
  shift
  echo "### $name: $*"
  start=$EPOCHREALTIME
  "$@" >"$work/last.out" 2>&1
  rc=$?
  cat "$work/last.out"
  last=$(grep -v '^[[:space:]]*$' "$work/last.out" | tail -n 1)
  if ((rc == 0)); then
    pass "$name" "${last:-ok}" "$(seconds_since "$start")"
  else
    fail "$name" "exit $rc: ${last:-no output}" "$(seconds_since "$start")"
  fi
  return $rc
}

give_up() {
  local c
  echo "$1" >"/run/lab/$scenario.gave-up"
  for c in "${planned[@]}"; do
    [[ -n ${reported[$c]:-} ]] || skip "$c" "$1"
  done
  exit 0
}
# the checks left unreported when the scenario ends some other way
_lab_exit() {
  local rc=$? c n
  for n in "${!_daemons[@]}"; do stop_daemon "$n" 10 >/dev/null 2>&1; done
  for c in "${planned[@]}"; do
    [[ -n ${reported[$c]:-} ]] || skip "$c" "not reached (the scenario stopped with status $rc)"
  done
}
trap _lab_exit EXIT

declare -A _daemons=()
daemon() {
  local name=$1
  shift
  echo "### start $name: $*"
  setsid "$@" </dev/null >"$logdir/$scenario.$name.log" 2>&1 &
  _daemons[$name]=$!
  printf -v "${name//-/_}_pid" '%s' $!
  echo $! >>"$pidlist"
}
stop_daemon() {
  local name=$1 limit=${2:-60} pid=${_daemons[$1]:-} i rc
  [[ -n $pid ]] || return 0
  unset "_daemons[$name]"
  kill -TERM "$pid" 2>/dev/null
  for ((i = 0; i < limit * 5; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    nap 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "$name did not stop within ${limit}s of SIGTERM: killed"
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    return 137
  fi
  wait "$pid"
  rc=$?
  echo "$name exited with status $rc after SIGTERM"
  return $rc
}

# serving WHAT PATH SEC: wait until PATH (a port file or a socket) exists; says what serves where
serving() {
  wait_until "$3" test -s "$2" -o -S "$2" || { echo "$1 did not start within $3 s"; return 1; }
  if [[ -S $2 ]]; then echo "$1 serving on $2"; else echo "$1 listening on port $(cat "$2")"; fi
}

wait_until() {
  local limit=$1 i
  shift
  for ((i = 0; i < limit * 5; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    nap 0.2
  done
  return 1
}

# sha FILE_OR_DEVICE [BYTES]: SHA-256 of the first BYTES (default: all)
sha() {
  if (($# > 1)); then
    head -c "$2" "$1" | sha256sum | cut -d' ' -f1
  else
    sha256sum <"$1" | cut -d' ' -f1
  fi
}

rxe_up() {
  modprobe rdma_rxe && modprobe rdma_ucm || return 1
  if ! ip link show "$LAB_RDMA_NETDEV" >/dev/null 2>&1; then
    ip link add "$LAB_RDMA_NETDEV" type dummy &&
      ip addr add "$LAB_RDMA_IP/24" dev "$LAB_RDMA_NETDEV" &&
      ip link set "$LAB_RDMA_NETDEV" up || return 1
  fi
  [[ -e /sys/class/infiniband/$LAB_RDMA_DEV ]] ||
    rdma link add "$LAB_RDMA_DEV" type rxe netdev "$LAB_RDMA_NETDEV" || return 1
  wait_until 20 grep -q ACTIVE "/sys/class/infiniband/$LAB_RDMA_DEV/ports/1/state" || return 1
  echo "$LAB_RDMA_DEV on $LAB_RDMA_NETDEV ($LAB_RDMA_IP): $(cat "/sys/class/infiniband/$LAB_RDMA_DEV/ports/1/state")"
}

# rxe_second_up IP: a second Soft-RoCE device, labrxe1 on dummy netdev labnet1 with IP/24.
rxe_second_up() {
  ip link show labnet1 >/dev/null 2>&1 ||
    { ip link add labnet1 type dummy && ip addr add "$1/24" dev labnet1 && ip link set labnet1 up; } || return 1
  [[ -e /sys/class/infiniband/labrxe1 ]] || rdma link add labrxe1 type rxe netdev labnet1 || return 1
  wait_until 20 grep -q ACTIVE /sys/class/infiniband/labrxe1/ports/1/state || return 1
  echo "labrxe1 on labnet1 ($1): $(cat /sys/class/infiniband/labrxe1/ports/1/state)"
}

# nbd_attach SOCKET NBD: nbd-client -unix SOCKET on /dev/NBD (nbd0, nbd1…) with 4 KiB blocks and no
# -t (the kernel then never fails a request on its own timer: it warns and keeps waiting, so what
# the caller sees is what the bridge answers); waits until the device has a size.
nbd_attach() {
  nbd-client -unix "$1" "/dev/$2" -b 4096 || return 1
  wait_until 30 test "$(cat "/sys/block/$2/size")" -gt 0 || { echo "$2 has no size"; return 1; }
  echo "/dev/$2: $(blockdev --getsize64 "/dev/$2") bytes through nbd-client -unix"
}

# bridge_on_nbd0 SERVE_SEC CONNECT_SEC: after `daemon bridge iserkit-nbd $url --socket
# $work/nbd.sock --stats-file $stats ...`: check bridge (it serves within SERVE_SEC s; then it may
# take CONNECT_SEC s more to say state=connected) and check nbd-attach (the kernel nbd client on it
# as /dev/nbd0, in $dev); gives up when either fails. Sets bridge_log.
bridge_on_nbd0() {
  bridge_log=$logdir/$scenario.bridge.log
  check bridge serving iserkit-nbd "$work/nbd.sock" "$1" || give_up "iserkit-nbd did not serve $url"
  grep -q "^state=connected" "$stats" 2>/dev/null || wait_until "$2" grep -q "^state=connected" "$stats"
  modprobe nbd nbds_max=4 || give_up "modprobe nbd failed"
  dev=/dev/nbd0
  check nbd-attach nbd_attach "$work/nbd.sock" nbd0 || give_up "the kernel nbd client could not attach"
}
# stat_of NAME: NAME's value in the bridge's --stats-file $stats
stat_of() { sed -n "s/^$1=//p" "$stats"; }
# written_sectors: the 512-byte sectors written through /dev/$nbd (nbd0 unless the scenario sets nbd)
written_sectors() { awk '{ print $7 }' "/sys/block/${nbd:-nbd0}/stat"; }
# wrote_since SECTORS MIN: /dev/$nbd has written MIN sectors more than SECTORS
wrote_since() { (($(written_sectors) - $1 >= $2)); }

# bridge_counted_recovery [LABEL]: the bridge (--stats-file $stats, printed) counted a lost connection
# and a recovery more than $lost_before/$rec_before (stat_of before the fault), and is connected
# again within 60 s; sets lost and rec. LABEL starts the messages.
bridge_counted_recovery() {
  wait_until 60 grep -q "^state=connected" "$stats"
  lost=$(stat_of connections_lost) rec=$(stat_of recoveries)
  cat "$stats"
  ((lost > lost_before && rec > rec_before)) ||
    { echo "${1:+$1: }the bridge counted connections_lost $lost_before -> $lost, recoveries $rec_before -> $rec"; return 1; }
  grep -q "^state=connected" "$stats" || { echo "${1:+$1: }the bridge is not connected"; return 1; }
}

# fio_paced_start NAME FILE OFFSET SIZE: in the background, fio verify on FILE at OFFSET (SIZE of
# random 64 KiB writes at 2 MiB/s, 8 in flight, every block checked with crc32c after the writes,
# the first mismatch fatal), output in $work/NAME.fio.txt and $work/NAME.fio.stderr; sets fio_pid.
fio_paced_start() {
  fio --name="$1" --filename="$2" --direct=1 --ioengine=libaio --iodepth=8 --rw=randwrite --bs=64k \
    --offset="$3" --size="$4" --rate=2m --verify=crc32c --do_verify=1 --verify_fatal=1 --randrepeat=0 \
    --output="$work/$1.fio.txt" >"$work/$1.fio.stderr" 2>&1 &
  fio_pid=$!
}
# fio_paced_end NAME [WHEN]: that job must end within 300 s (WHEN, e.g. "of the fault", says from
# when in the message) with exit status 0 and err= 0; prints its summary lines and stderr.
fio_paced_end() {
  local rc
  wait_until 300 bash -c "! kill -0 $fio_pid" ||
    { echo "fio did not finish within 300 s${2:+ $2} (a request hangs)"; kill -9 "$fio_pid"; return 1; }
  wait "$fio_pid"
  rc=$?
  grep -E 'err=|verify|WRITE:|READ:' "$work/$1.fio.txt"
  head -n 20 "$work/$1.fio.stderr"
  ((rc == 0)) || { echo "fio exited with $rc"; return 1; }
  grep -q 'err= 0' "$work/$1.fio.txt" || { echo "fio reported errors"; return 1; }
}

# fs_copy_remount DEV DIR: mounts DEV (a file system made on it) on DIR, copies /usr/include/linux
# and 32 MiB of random bytes there, remounts it with the page cache dropped and checks every file's
# SHA-256 (list in $work/sums), unmounts.
fs_copy_remount() {
  local dev=$1 dir=$2
  mkdir -p "$dir" && mount "$dev" "$dir" || return 1
  cp -a /usr/include/linux "$dir/" && head -c "$(mib 32)" /dev/urandom >"$dir/random.bin" || return 1
  (cd "$dir" && find . -type f -print0 | sort -z | xargs -0 sha256sum >"$work/sums") || return 1
  umount "$dir" && echo 3 >/proc/sys/vm/drop_caches && mount "$dev" "$dir" || return 1
  (cd "$dir" && sha256sum --quiet -c "$work/sums") || return 1
  umount "$dir" && echo "mounted, $(wc -l <"$work/sums") files copied, remounted, all checksums match"
}

# Does the build speak iSER? The target's --help names iSER, RDMA or a --transport flag once the iSER
# datamover is in; until then the scenarios that need it report SKIP with this reason.
iser_missing() {
  if ! iserkit-target --help 2>&1 | grep -Eiq '(^|[^a-z])(iser|rdma)([^a-z]|$)|--transport'; then
    echo "this build has no iSER: iserkit-target --help mentions neither iSER, RDMA nor --transport"
    return 0
  fi
  # iSER is a build option (it needs rdma-core's libraries): a binary without it names the flag
  # but cannot serve iSER
  if ! ldd "$(command -v iserkit-target)" 2>/dev/null | grep -q 'librdmacm'; then
    echo "iserkit-target was built without iSER (not linked with librdmacm: WITH_ISER off?)"
    return 0
  fi
  return 1
}
# initiator_refuses_iser OUTPUT_FILE: did the initiator say iser:// is not supported?
initiator_refuses_iser() { grep -Eiq 'not supported|not_supported|unsupported' "$1"; }

# tgtd_iser_up IQN IMAGE: tgtd with one iSER target IQN, LUN 1 = a fresh 256 MiB file IMAGE.
# tgtd admits an iSER login (and lists the target in SendTargets) only when both its address ACL
# and its initiator-name ACL match: bind ALL addresses and $LAB_INITIATOR_IQN.
tgtd_iser_up() {
  daemon tgtd tgtd -f >/dev/null
  wait_until 60 tgtadm --op show --mode sys || { echo "tgtadm cannot reach tgtd"; return 1; }
  truncate -s 256M "$2" || return 1
  tgtadm --lld iser --op new --mode target --tid 1 -T "$1" &&
    tgtadm --lld iser --op new --mode logicalunit --tid 1 --lun 1 -b "$2" &&
    tgtadm --lld iser --op bind --mode target --tid 1 -I ALL &&
    tgtadm --lld iser --op bind --mode target --tid 1 -Q "$LAB_INITIATOR_IQN" || return 1
  echo "tgtd: $1, LUN 1 = 256 MiB file, iSER portal on $LAB_RDMA_IP:3260"
}

# ---- open-iscsi without systemd or udev
iscsid_up() {
  modprobe sd_mod || return 1   # no udev: the disk driver is not loaded on demand
  echo "InitiatorName=$LAB_INITIATOR_IQN" >/etc/iscsi/initiatorname.iscsi
  [[ -n ${_daemons[iscsid]:-} ]] && return 0
  # open-iscsi's defaults (15 s login, 5 s NOP-Out) are made for real machines; under TCG on a
  # busy host a peer can stall longer than that, and a timed-out iSER connect request crashes
  # tgtd (rdma_create_qp on a cm_id the initiator already dropped). Give every peer a minute.
  # (The file is the host's, seen through the overlay: the edit stays in the VM.)
  grep -q '^# iserkit lab' /etc/iscsi/iscsid.conf ||
    { sed -i -E -e 's/^(node\.conn\[0\]\.timeo\.(login|logout)_timeout) = .*/\1 = 60/' \
      -e 's/^(node\.conn\[0\]\.timeo\.noop_out_(interval|timeout)) = .*/\1 = 60/' /etc/iscsi/iscsid.conf &&
      printf '%s\n' '# iserkit lab: slow peers under TCG' 'discovery.sendtargets.timeo.login_timeout = 60' \
        'discovery.sendtargets.timeo.active_timeout = 60' >>/etc/iscsi/iscsid.conf; } || return 1
  # own session: iscsid signals its process group when it stops
  daemon iscsid iscsid -f >/dev/null
  # iscsiadm -m session: 0 = sessions, 21 = none; anything else = iscsid is not answering yet
  wait_until 30 bash -c 'iscsiadm -m session >/dev/null 2>&1; rc=$?; ((rc == 0 || rc == 21))' ||
    { echo "iscsid does not answer iscsiadm"; return 1; }
  echo "iscsid running (no systemd: started by hand in its own session), sd_mod loaded"
}
# scsi_disk_of IQN [PORT]: the /dev/sdX of the first LUN of the open-iscsi session with target IQN
# (and, with PORT, whose connection goes to that TCP port: one session per gateway)
scsi_disk_of() {
  local s d
  for s in /sys/class/iscsi_session/session*; do
    [[ $(cat "$s/targetname" 2>/dev/null) == "$1" ]] || continue
    [[ -z ${2:-} || $(cat "/sys/class/iscsi_connection/connection${s##*session}:0/persistent_port" 2>/dev/null) == "$2" ]] || continue
    for d in "$s"/device/target*/*/block/*; do
      [[ -e $d ]] && { echo "/dev/${d##*/}"; return 0; }
    done
  done
  return 1
}
# roundtrip DEVICE MIB: random data written with O_DIRECT, read back with O_DIRECT, SHA-256 compared
roundtrip() {
  local dev=$1 n=$2 want got
  head -c "$(mib "$n")" /dev/urandom >"$work/pattern" || return 1
  want=$(sha "$work/pattern")
  dd if="$work/pattern" of="$dev" bs=1M oflag=direct conv=fsync status=none || return 1
  echo 3 >/proc/sys/vm/drop_caches
  got=$(dd if="$dev" bs=1M count="$n" iflag=direct status=none | sha256sum | cut -d' ' -f1)
  rm -f "$work/pattern"
  [[ $want == "$got" ]] || { echo "read back $got, wrote $want"; return 1; }
  echo "$n MiB through $dev, sha256 ${want:0:16}… matches"
}
# cli_roundtrip URL MIB BACKING [OFFSET_MIB]: MIB MiB of random data written with the scenario's `cli`
# function (`iserkit --json write URL`, its JSON in $work/write.json, which must report 0 copied
# payload bytes) and read back with `iserkit read` to standard output (with info logging on: log
# lines must go to stderr); both must exit 0 and the data must match. BACKING (the target's backing file, or -
# for none) must hold it too, checked right after the write, before the read. On a mismatch it says
# which side is wrong (the target's copy, the read, or both), reads once more to tell a lasting
# error from a passing one, and prints what the wrong blocks hold (diff_blocks.py). The CLI's
# stderr is kept in $logdir/$scenario.cli.log. Leaves $work/pattern.sha on success.
# ISERKIT_LAB_ROUNDTRIPS=N (job.env) repeats it N times with fresh data, to hunt an intermittent
# error; the first failure ends it.
lab_roundtrips=$(sed -n 's/^ISERKIT_LAB_ROUNDTRIPS=//p' "$out/job.env" 2>/dev/null)
cli_roundtrip() {
  local i
  for ((i = 1; i < ${lab_roundtrips:-1}; i++)); do
    _cli_roundtrip "$@" || { echo "round trip $i of $lab_roundtrips failed"; return 1; }
  done
  _cli_roundtrip "$@"
}
_cli_roundtrip() {
  local url=$1 n=$2 backing=$3 off=$(mib "${4:-0}") want got stored=unchecked clilog=$logdir/$scenario.cli.log
  rm -f "$work/pattern.sha"
  head -c "$(mib "$n")" /dev/urandom >"$work/pattern" || return 1
  want=$(sha "$work/pattern")
  echo "### write $n MiB at $off to $url" >>"$clilog"
  cli --log-level info --json write "$url" --offset "$off" -i "$work/pattern" >"$work/write.json" 2>>"$clilog" ||
    { echo "iserkit write failed: $(tail -n 1 "$clilog")"; return 1; }
  # the CLI's buffer comes from the session's registered pool: no payload copy over iSER either
  local copied
  copied=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("copied_payload_bytes", "?"))' "$work/write.json")
  if [[ $copied != 0 ]]; then echo "iserkit write copied $copied payload bytes (want 0: $n MiB, block-aligned)"; return 1; fi
  if [[ $backing != - ]]; then
    sync
    if [[ $(tail -c +$((off + 1)) "$backing" | head -c "$(mib "$n")" | sha256sum | cut -d' ' -f1) == "$want" ]]; then
      stored=same
    else
      stored=different
      tail -c +$((off + 1)) "$backing" | head -c "$(mib "$n")" >"$work/backing.part"
      echo "the target's backing file differs from what was written:"
      python3 "$LAB_SOURCE/tests/lab/guest/diff_blocks.py" "$work/pattern" "$work/backing.part"
      rm -f "$work/backing.part"
    fi
  fi
  echo "### read $n MiB at $off from $url" >>"$clilog"
  # to standard output, as `iserkit read URL | …` is used: log lines must never mix into the data
  cli --log-level info read "$url" --offset "$off" --length "$(mib "$n")" >"$work/readback" 2>>"$clilog" ||
    { echo "iserkit read failed: $(tail -n 1 "$clilog")"; return 1; }
  got=$(sha "$work/readback")
  if [[ $want != "$got" ]]; then
    echo "the read differs from what was written (backing file: $stored):"
    python3 "$LAB_SOURCE/tests/lab/guest/diff_blocks.py" "$work/pattern" "$work/readback"
    echo "### read again $n MiB at $off from $url" >>"$clilog"
    if cli --log-level info read "$url" --offset "$off" --length "$(mib "$n")" -o "$work/readback2" 2>>"$clilog"; then
      if [[ $(sha "$work/readback2") == "$want" ]]; then echo "a second read matches: the first read was wrong"
      else echo "a second read differs too:"; python3 "$LAB_SOURCE/tests/lab/guest/diff_blocks.py" "$work/pattern" "$work/readback2"; fi
    fi
    grep -iE 'warn|error|recover|lost|timed out' "$clilog" | tail -n 20
    rm -f "$work/readback" "$work/readback2"
    echo "read back $got, wrote $want (backing file: $stored)"
    return 1
  fi
  rm -f "$work/pattern" "$work/readback"
  [[ $stored == different ]] && { echo "read back what was written, but the backing file differs"; return 1; }
  printf '%s\n' "$want" >"$work/pattern.sha"
  echo "$n MiB written and read back, sha256 ${want:0:16}… matches (backing file: $stored)"
}
# backing_holds_written FILE MIB WHOSE: the first MIB MiB of FILE (WHOSE backing file, e.g. "LIO's")
# are what cli_roundtrip wrote ($work/pattern.sha).
backing_holds_written() {
  [[ -s $work/pattern.sha ]] || { echo "nothing was written"; return 1; }
  [[ $(sha "$1" "$(mib "$2")") == "$(cat "$work/pattern.sha")" ]] ||
    { echo "$3 backing file differs from what was written"; return 1; }
  echo "$3 backing file holds the same $2 MiB"
}
# disk_holds_backing DISK FILE MIB: the first MIB MiB of DISK (read with O_DIRECT) are FILE's.
disk_holds_backing() {
  local a b
  a=$(dd if="$1" bs=1M count="$3" iflag=direct status=none | sha256sum | cut -d' ' -f1)
  b=$(sha "$2" "$(mib "$3")")
  [[ $a == "$b" ]] || { echo "disk $a, backing file $b"; return 1; }
  echo "the target's backing file holds the same $3 MiB"
}
# iser_command_above_512k FROM: the target's --stats-file $work/target.stats (printed) has a
# largest_command_bytes_iser above 512 KiB, kept in $largest_iser; FROM says where the commands
# came from in the message ("over iSER", "from ib_iser").
iser_command_above_512k() {
  cat "$work/target.stats"
  largest_iser=$(sed -n 's/^largest_command_bytes_iser=//p' "$work/target.stats")
  [[ -n $largest_iser ]] || { echo "the target's stats have no largest_command_bytes_iser"; return 1; }
  ((largest_iser > 512 * 1024)) ||
    { echo "the largest command $1 was $largest_iser bytes: nothing above 512 KiB"; return 1; }
}

# iser_node_login: open-iscsi (iscsid running) to $iqn at $portal over iSER: check discovery
# (SendTargets over iSER lists it; when not, a static node record is made so that the login is
# still tried), check login (gives up when it fails), check transport (the session is over iser).
iser_node_login() {
  if ! check discovery _iser_discover; then
    iscsiadm -m node -o new -T "$iqn" -p "$portal,1" -I iser || give_up "cannot create a node record"
  fi
  check login timeout 300 iscsiadm -m node -T "$iqn" -p "$portal" -I iser --login || give_up "login over iSER failed"
  check transport _iser_transport
}
_iser_discover() {
  timeout 180 iscsiadm -m discovery -t sendtargets -p "$portal" -I iser || return 1
  iscsiadm -m node -T "$iqn" -p "$portal" -I iser >/dev/null || { echo "$iqn not among the discovered nodes"; return 1; }
  echo "SendTargets over iSER found $iqn"
}
_iser_transport() {
  iscsiadm -m session -P 1 >"$work/session.txt" 2>&1
  grep -q 'Iface Transport: iser' "$work/session.txt" || { cat "$work/session.txt"; echo "the session is not over iser"; return 1; }
  echo "session transport: iser ($(grep -m1 'Current Portal' "$work/session.txt" | xargs))"
}

# iser_node_logout: check logout (open-iscsi logs out of $iqn at $portal over iSER and $disk goes
# away), then iscsid is stopped.
iser_node_logout() {
  check logout _iser_logout
  stop_daemon iscsid 20 >/dev/null
}
_iser_logout() {
  timeout 180 iscsiadm -m node -T "$iqn" -p "$portal" -I iser --logout || return 1
  wait_until 30 bash -c "[[ ! -e /sys/block/${disk#/dev/} ]]" || { echo "$disk still there after logout"; return 1; }
  echo "logged out, $disk gone"
}

# bridge_fs_then_exit DIR: on the bridge's /dev/nbd0 ($dev): check mkfs (gives up when it fails),
# mount-copy (fs_copy_remount on DIR), e2fsck, nbd-detach; then bridge-exit (stop_daemon bridge),
# bridge-zero-copy and bridge-stags from its log ($bridge_log).
bridge_fs_then_exit() {
  check mkfs mkfs_ext4 "$dev" || give_up "mkfs.ext4 failed"
  check mount-copy fs_copy_remount "$dev" "$1"
  check e2fsck e2fsck -fn "$dev"
  check nbd-detach nbd_detach "$dev"
  check bridge-exit stop_daemon bridge
  zero_copy_check bridge-zero-copy iserkit-nbd "$bridge_log"
  stags_check bridge-stags "$bridge_log"
}

# remount_verify DEV DIR: with the page cache dropped, DEV mounted on DIR again holds every file
# with the SHA-256 in $work/sums (sha256sum output, paths relative to DIR); unmounted after.
# copy_tree_in DEV MNT MIB: mounts DEV on MNT, copies $tree and MIB MiB of random bytes into it,
# writes every file's SHA-256 to $work/sums (for remount_verify) and unmounts
copy_tree_in() {
  mount "$1" "$2" || return 1
  mkdir "$2/tree" && cp -a "$tree/." "$2/tree/" || { umount "$2"; return 1; }
  head -c "$(mib "$3")" /dev/urandom >"$2/random.bin" || { umount "$2"; return 1; }
  (cd "$2" && find . -type f -print0 | sort -z | xargs -0 sha256sum >"$work/sums") || { umount "$2"; return 1; }
  umount "$2" || return 1
  echo "$(wc -l <"$work/sums") files copied ($(du -sh "$tree" | cut -f1) tree + $3 MiB random), unmounted"
}

# remount_verify DEV MNT: drops the page cache, mounts DEV again and checks every file against
# $work/sums (copy_tree_in), then unmounts
remount_verify() {
  echo 3 >/proc/sys/vm/drop_caches
  mount "$1" "$2" || return 1
  (cd "$2" && sha256sum --quiet -c "$work/sums") || { umount "$2"; return 1; }
  umount "$2" || return 1
  echo "remounted: all $(wc -l <"$work/sums") files have their SHA-256"
}

# stags_check CHECK LOG: the initiator that wrote LOG must say it used per-command STags ("STags:
# per command"): the default (automatic) on labrxe0, which binds type 2 windows, and what
# ISERKIT_LAB_ISER_STAGS=per-command asks; SKIP when the run asked for another mode
stags_check() {
  local mode=${ISERKIT_ISER_STAGS:-automatic (the default)}
  if [[ -n ${ISERKIT_ISER_STAGS:-} && $ISERKIT_ISER_STAGS != per-command && $ISERKIT_ISER_STAGS != automatic ]]; then
    skip "$1" "the run asked for ISERKIT_ISER_STAGS=$ISERKIT_ISER_STAGS"
  elif grep -q 'STags: per command' "$2"; then
    pass "$1" "$mode: $(grep -o 'STags: per command[^)]*' "$2" | head -n 1), $(grep -c 'STags: per command' "$2") connection(s)"
  else
    fail "$1" "$mode, but $(basename "$2") shows no per-command STags: $(grep -o 'STags: [^)]*' "$2" | head -n 1)"
  fi
}
# copied_bytes LOG: the N of the last "copied payload bytes: N" line, or nothing
copied_bytes() { sed -n 's/.*copied payload bytes: *\([0-9][0-9]*\).*/\1/p' "$1" | tail -n 1; }
# zero_copy_check CHECK NAME LOG: assert the process logged copied payload bytes: 0, or SKIP
zero_copy_check() {
  local n
  n=$(copied_bytes "$3")
  if [[ -z $n ]]; then
    skip "$1" "$2 logged no 'copied payload bytes' line at exit (no copy counter in this build)"
  elif ((n == 0)); then
    pass "$1" "$2: copied payload bytes: 0"
  else
    fail "$1" "$2 copied $n payload bytes (expected 0)"
  fi
}
# fio_verify DEVICE OFFSET SIZE: random 4 KiB writes, 16 in flight, each block read back and checked
fio_verify() {
  fio --name=verify --filename="$1" --direct=1 --ioengine=libaio --iodepth=16 --rw=randwrite --bs=4k \
    --offset="$2" --size="$3" --verify=crc32c --do_verify=1 --output="$work/fio.txt" || {
    tail -n 5 "$work/fio.txt"
    return 1
  }
  grep -q 'err= 0' "$work/fio.txt" || { grep 'err=' "$work/fio.txt"; return 1; }
  echo "fio: $3 of random 4 KiB writes at $2, every block verified (crc32c)"
}
nbd_detach() { nbd-client -d "$1" && echo "$1 disconnected"; }
mkfs_ext4() { mkfs.ext4 -q -F "$1" && echo "ext4 on $1 ($(blockdev --getsize64 "$1") bytes)"; }
