#!/bin/bash
# ALUA that moves, Linux as the client: open-iscsi on two gateways, multipathd prio alua, kill -9 + sg_stpg
# lab: opt-in (two fio runs and a failover under TCG, several minutes): scripts/lab.sh --only alua-multipathd
# Issue 24 item 4 in the lab. Two iserkit-target gateways serve one file (/run/lab/…/lun.img):
# A on 127.0.0.1:3260 (portal group 1), B on 127.0.0.1:3261 (group 2), each naming the other with
# --alua-peer and both locking the LUN file itself (--alua-lock; target/README.md "ALUA failover").
# open-iscsi (iscsi_tcp) logs in to both portals (replacement_timeout 10 s), scsi_dh_alua is loaded
# first so it attaches to both disks, systemd-udevd runs for this scenario only (multipathd takes
# only devices udev has initialised), and multipathd runs with prio alua, path_grouping_policy
# group_by_prio, hardware_handler "1 alua", failback immediate, path_checker tur, no_path_retry 30
# (so a lost device ends as I/O errors after 60 s rather than a hang). Checked:
#  - the two disks carry the same WWID (one LU through two gateways) and multipathd makes one map of
#    them: A's path group active (prio 50, path ready), B's enabled (prio 1, path ghost = standby);
#  - fio verify on /dev/mapper/WWID (random 64 KiB writes at 2 MiB/s, crc32c) while gateway A is
#    killed with kill -9 and restarted 3 s later on the same portal: B takes the lock (its log), fio
#    ends with no error and every block verified, multipath -ll then shows B's group active (prio
#    50, ready) and A's path back as ghost in the enabled group, sg_rtpg through either disk says
#    group 1 standby, group 2 active/optimized, and the kernel's access_state agrees;
#  - sg_stpg --optimized through A's disk (SET TARGET PORT GROUPS) under a second fio verify: both
#    gateways report group 1 active/optimized, multipathd fails back to A's group (prio 50), fio
#    ends clean;
#  - the dm device saw no I/O error (dmesg), the map is flushed, both sessions log out, both
#    gateways exit 0 on SIGTERM.
source "$LAB_SOURCE/tests/lab/guest/lib.sh"
plan modules gateways initial-rtpg iscsid login same-wwid udevd multipathd map-initial \
  failover.takeover failover.restart failover.fio failover.io-moved failover.rtpg failover.map failover.access-state \
  stpg.command stpg.rtpg stpg.fio stpg.map no-io-error flush logout gateways-exit

command -v multipathd >/dev/null || give_up "multipath-tools is not installed on the host (packaging/install-deps.sh lab)"
command -v sg_stpg >/dev/null || give_up "sg3-utils is not installed on the host (packaging/install-deps.sh lab)"
command -v fio >/dev/null || give_up "fio is not installed in the guest (the host's userland)"
udevd_bin=""
for f in /lib/systemd/systemd-udevd /usr/lib/systemd/systemd-udevd; do [[ -x $f ]] && udevd_bin=$f && break; done
[[ -n $udevd_bin ]] || give_up "no systemd-udevd on the host (multipathd takes only udev-initialised devices)"

load_modules() {
  local m
  for m in iscsi_tcp sd_mod sg scsi_dh_alua dm_multipath dm_service_time dm_round_robin; do
    modprobe "$m" || { echo "modprobe $m failed"; return 1; }
  done
  echo "iscsi_tcp, sd_mod, sg, scsi_dh_alua, dm_multipath, dm_service_time loaded"
}
check modules load_modules || give_up "kernel modules missing"

iqn=iqn.2026-11.org.iserkit.lab:alua
lun=$work/lun.img
truncate -s 256M "$lun"
port_a=3260
port_b=3261
# gateway NAME PORT TPGT PEER: an iserkit-target on 127.0.0.1:PORT, portal group TPGT, peer group PEER
gateway() {
  rm -f "$work/$1.port"
  daemon "gw_$1" iserkit-target --iqn "$iqn" --lun "$lun" --no-iser --listen "127.0.0.1:$2,tpgt=$3" \
    --alua-peer "$4" --alua-lock "$lun" --port-file "$work/$1.port" --log-level info
}
gw_log() { echo "$logdir/$scenario.gw_$1.log"; }
start_gateways() {
  gateway a $port_a 1 2
  serving "gateway A" "$work/a.port" 120 || return 1
  wait_until 30 grep -q "this gateway is active" "$(gw_log a)" || { echo "gateway A did not take the lock"; return 1; }
  gateway b $port_b 2 1
  serving "gateway B" "$work/b.port" 120 || return 1
  nap 1
  if grep -q "this gateway is active" "$(gw_log b)"; then echo "gateway B went active while A holds the lock"; return 1; fi
  echo "gateway A (127.0.0.1:$port_a, group 1) active, gateway B (127.0.0.1:$port_b, group 2) standby"
}
check gateways start_gateways || give_up "the gateways did not start"

check iscsid iscsid_up || give_up "iscsid did not start"
log_in() {
  local p
  for p in $port_a $port_b; do
    timeout 120 iscsiadm -m discovery -t sendtargets -p "127.0.0.1:$p" -I default || return 1
    iscsiadm -m node -T "$iqn" -p "127.0.0.1:$p" >/dev/null || { echo "$iqn not discovered at 127.0.0.1:$p"; return 1; }
    # the default 120 s would hold I/O on a dead gateway's path that long before dm-multipath may retry it elsewhere
    iscsiadm -m node -T "$iqn" -p "127.0.0.1:$p" -o update -n node.session.timeo.replacement_timeout -v 10 || return 1
    timeout 180 iscsiadm -m node -T "$iqn" -p "127.0.0.1:$p" --login || return 1
  done
  echo "logged in to $iqn through 127.0.0.1:$port_a and 127.0.0.1:$port_b"
}
check login log_in || give_up "login failed"

# disk_of PORT: the sdX (no /dev/) of the session through 127.0.0.1:PORT
disk_of() { local d; d=$(scsi_disk_of "$iqn" "$1") && echo "${d#/dev/}"; }
find_disks() {
  wait_until 60 disk_of $port_a && wait_until 60 disk_of $port_b || { echo "no SCSI disk for both sessions"; return 1; }
  sd_a=$(disk_of $port_a)
  sd_b=$(disk_of $port_b)
  local wa wb
  wa=$(cat "/sys/block/$sd_a/device/wwid")
  wb=$(cat "/sys/block/$sd_b/device/wwid")
  [[ -n $wa && $wa == "$wb" ]] || { echo "$sd_a: $wa, $sd_b: $wb"; return 1; }
  echo "$sd_a (A) and $sd_b (B): one LU, wwid $wa; handler $(cat "/sys/block/$sd_a/device/dh_state")/$(cat "/sys/block/$sd_b/device/dh_state")"
}
sd_a="" sd_b=""
check same-wwid find_disks || give_up "the two paths are not one logical unit"

# rtpg DISK: "1=STATE 2=STATE" from REPORT TARGET PORT GROUPS (sg_rtpg --decode) through /dev/DISK
rtpg() {
  local line g="" st res="" sep=""
  while IFS= read -r line; do
    case $line in
      *"target port group id :"*) g=${line#*: 0x}; g=$((16#${g%% *})) ;;
      *"asymmetric access state :"*) st=${line##*(}; res+="$sep$g=${st%%)*}"; sep=" " ;;
    esac
  done < <(sg_rtpg --decode "/dev/$1")
  echo "$res"
}
# want_rtpg WANT: both disks report WANT (polled for 15 s)
want_rtpg() {
  local got_a got_b until=$((SECONDS + 15))
  while :; do
    got_a=$(rtpg "$sd_a") got_b=$(rtpg "$sd_b")
    [[ $got_a == "$1" && $got_b == "$1" ]] && { echo "REPORT TARGET PORT GROUPS through $sd_a and $sd_b: $1"; return 0; }
    ((SECONDS < until)) || break
    nap 0.2
  done
  echo "through $sd_a: '$got_a', through $sd_b: '$got_b', want '$1'"
  return 1
}
check initial-rtpg want_rtpg "1=active/optimized 2=standby"

# ---- udev (for this scenario only) and multipathd
udevd_up() {
  daemon udevd "$udevd_bin" --resolve-names=never
  wait_until 30 test -S /run/udev/control || { echo "systemd-udevd did not start"; return 1; }
  udevadm trigger --action=add --subsystem-match=block --subsystem-match=scsi_disk || return 1
  timeout 120 udevadm settle || { echo "udevadm settle timed out"; return 1; }
  local d
  for d in "$sd_a" "$sd_b"; do
    [[ -e /run/udev/data/b$(cat "/sys/block/$d/dev") ]] || { echo "udev has no record of $d"; return 1; }
  done
  echo "systemd-udevd running, $sd_a and $sd_b initialised: ID_SERIAL $(udevadm info -q property -n "/dev/$sd_a" | sed -n 's/^ID_SERIAL=//p')"
}
check udevd udevd_up || give_up "udev did not come up"

mkdir -p /etc/multipath
cat >/etc/multipath.conf <<'EOF'
# iserkit lab (tests/lab/scenarios/55-alua-multipathd.sh): the VM's own copy
defaults {
    user_friendly_names no
    find_multipaths no
    polling_interval 2
}
blacklist {
    devnode "^(nbd|loop|ram|zram|sr|vd)[0-9]*"
}
devices {
    device {
        vendor "ISERKIT"
        product ".*"
        path_grouping_policy group_by_prio
        # without this, multipath-tools 0.9.4 replaces prio alua by prio sysfs when scsi_dh_alua
        # is attached (detect_prio yes): both rank AO 50, standby 1; the brief asks for alua (RTPG)
        detect_prio no
        prio alua
        hardware_handler "1 alua"
        failback immediate
        path_checker tur
        no_path_retry 30
    }
}
EOF
multipathd_up() {
  daemon multipathd multipathd -d -s -v3
  wait_until 60 bash -c '[[ -n $(dmsetup ls --target multipath 2>/dev/null | grep -v "No devices") ]]' ||
    { echo "multipathd made no map in 60 s"; multipath -v3 -ll 2>&1 | tail -n 20; return 1; }
  map=$(dmsetup ls --target multipath | awk 'NR == 1 { print $1 }')
  wait_until 30 test -b "/dev/mapper/$map" || { echo "no /dev/mapper/$map"; return 1; }
  echo "multipathd made /dev/mapper/$map ($(blockdev --getsize64 "/dev/mapper/$map") bytes)"
}
map=""
check multipathd multipathd_up || give_up "multipathd made no map"

# mp_path DISK: "group=STATUS prio=N path=DM/CHECKER/ONLINE" of DISK's line in multipath -ll (stdin)
mp_path() {
  awk -v d="$1" '
    /policy=/ { for (i = 1; i <= NF; i++) { if ($i ~ /^prio=/) p = substr($i, 6); if ($i ~ /^status=/) s = substr($i, 8) } }
    p != "" && $0 ~ (" " d " ") { n = NF; print "group=" s " prio=" p " path=" $(n - 2) "/" $(n - 1) "/" $n }'
}
# want_map SEC A_WANT B_WANT: multipath -ll shows these for A's and B's disks within SEC seconds
want_map() {
  local got_a got_b until=$((SECONDS + $1))
  while :; do
    multipath -ll "$map" >"$work/mp.txt" 2>/dev/null
    got_a=$(mp_path "$sd_a" <"$work/mp.txt") got_b=$(mp_path "$sd_b" <"$work/mp.txt")
    [[ $got_a == "$2" && $got_b == "$3" ]] && break
    ((SECONDS < until)) || break
    nap 1
  done
  cat "$work/mp.txt"
  [[ $got_a == "$2" && $got_b == "$3" ]] || { echo "A ($sd_a): '$got_a' (want '$2'); B ($sd_b): '$got_b' (want '$3')"; return 1; }
  echo "A ($sd_a): $got_a; B ($sd_b): $got_b"
}
ACTIVE_READY="group=active prio=50 path=active/ready/running"
ENABLED_GHOST="group=enabled prio=1 path=active/ghost/running"
check map-initial want_map 60 "$ACTIVE_READY" "$ENABLED_GHOST"

# fio_start NAME SIZE: random 64 KiB writes at 2 MiB/s on the dm device, every block checked after
fio_start() {
  fio_paced_start "$1" "/dev/mapper/$map" 0 "$2"
  fio_started=$EPOCHREALTIME
}
fio_end() {
  local rc
  wait "$fio_pid"
  rc=$?
  cat "$work/$1.fio.stderr"
  grep -E 'err=|WRITE:|READ:|verify' "$work/$1.fio.txt"
  ((rc == 0)) || { echo "fio exited with $rc"; return 1; }
  grep -q 'err= 0' "$work/$1.fio.txt" || { echo "fio reported an error"; return 1; }
  echo "fio: $2 of random 64 KiB writes on /dev/mapper/$map, every block verified (crc32c), $(seconds_since "$fio_started") s"
}

# ---- kill -9 of the active gateway A under fio, restart 3 s later
written() { awk '{ print $7 }' "/sys/block/$1/stat"; }   # sectors written through a path
b_written=$(written "$sd_b")
fio_start failover 40m
nap 6
kill -KILL "$gw_a_pid"
killed=$EPOCHREALTIME
takeover() {
  wait_until 10 grep -q "this gateway is active" "$(gw_log b)" || { echo "gateway B did not take the lock within 10 s"; return 1; }
  echo "gateway B active $(seconds_since "$killed") s after kill -9 of A (log polled every 0.2 s)"
}
check failover.takeover takeover
nap 3
restart_a() {
  unset "_daemons[gw_a]"
  wait "$gw_a_pid" 2>/dev/null
  # the restarted gateway's log (a new file) replaces the killed one's: keep that one
  cp "$(gw_log a)" "$logdir/$scenario.gw_a.killed.log"
  gateway a $port_a 1 2
  serving "gateway A (restarted)" "$work/a.port" 120 || return 1
  nap 1
  if grep -q "this gateway is active" "$(gw_log a)"; then echo "restarted A went active"; return 1; fi
  echo "gateway A restarted on 127.0.0.1:$port_a $(seconds_since "$killed") s after the kill, standby"
}
check failover.restart restart_a
check failover.fio fio_end failover 40M
via_b() {
  local n=$(($(written "$sd_b") - b_written))
  ((n > 0)) || { echo "no write went through B's path ($sd_b) while A was dead"; return 1; }
  echo "$((n / 2048)) MiB written through B's path ($sd_b) since the kill: dm-multipath moved the I/O to B"
}
check failover.io-moved via_b

# Which gateway is active now? B took over; but scsi_dh_alua sends SET TARGET PORT GROUPS through a
# standby path whenever dm-multipath initialises a path group holding one, and multipathd puts both
# paths in one group for a reload after a priority change: Linux may have moved the LU back to A by
# itself (docs/notes/lab-alua-multipathd.md). The checks follow what the gateways report, and say
# which moves Linux made.
# settled: RTPG through both disks agrees on one active/optimized group, twice 2 s apart
settled() {
  local one two
  one=$(rtpg "$sd_a")
  [[ $one == "1=active/optimized 2=standby" || $one == "1=standby 2=active/optimized" ]] || return 1
  [[ $(rtpg "$sd_b") == "$one" ]] || return 1
  nap 2
  two=$(rtpg "$sd_a")
  [[ $two == "$one" && $(rtpg "$sd_b") == "$one" ]] || return 1
  echo "$one"
}
stpgs() { grep -c "SET TARGET PORT GROUPS" "$(gw_log "$1")"; }
which_active() {
  local states
  states=$(wait_until 30 settled && settled) || { echo "the ALUA states did not settle in 30 s: A says '$(rtpg "$sd_a")', B says '$(rtpg "$sd_b")'"; return 1; }
  if [[ $states == "1=standby 2=active/optimized" ]]; then active=b standby=a; else active=a standby=b; fi
  echo "REPORT TARGET PORT GROUPS through $sd_a and $sd_b: $states (gateway ${active^^} active); SET TARGET PORT GROUPS received from Linux so far: A $(stpgs a), B $(stpgs b)"
}
active="" standby=""
check failover.rtpg which_active || give_up "the ALUA states did not settle after the failover"
disk() { [[ $1 == a ]] && echo "$sd_a" || echo "$sd_b"; }
# map_follows SEC: multipath -ll shows the active gateway's path group active (prio 50, ready), the
# other enabled with its path ghost (prio 1)
map_follows() {
  if [[ $active == a ]]; then want_map "$1" "$ACTIVE_READY" "$ENABLED_GHOST"; else want_map "$1" "$ENABLED_GHOST" "$ACTIVE_READY"; fi
}
check failover.map map_follows 90
access_state() {
  local x y
  x=$(cat "/sys/block/$(disk "$active")/device/access_state") y=$(cat "/sys/block/$(disk "$standby")/device/access_state")
  [[ $x == active/optimized && $y == standby ]] || { echo "scsi_dh_alua: ${active^^} ($(disk "$active")) $x, ${standby^^} ($(disk "$standby")) $y"; return 1; }
  echo "scsi_dh_alua: ${active^^} ($(disk "$active")) $x, ${standby^^} ($(disk "$standby")) $y"
}
# the kernel's view (scsi_dh_alua, refreshed by the unit attention or the path group's activation)
access_state_settles() { wait_until 30 access_state; access_state; }
check failover.access-state access_state_settles

# ---- SET TARGET PORT GROUPS through the standby gateway's disk under a second fio verify
fio_start stpg 24m
nap 4
target_gw=$standby
stpg() {
  local d
  d=$(disk "$target_gw")
  sg_stpg -v --optimized "/dev/$d" || return 1
  echo "sg_stpg --optimized /dev/$d (gateway ${target_gw^^}) returned GOOD"
}
check stpg.command stpg
stpg_moved() {
  which_active || return 1
  [[ $active == "$target_gw" ]] || { echo "gateway ${target_gw^^} was asked to become active, ${active^^} is"; return 1; }
}
check stpg.rtpg stpg_moved
check stpg.fio fio_end stpg 24M
check stpg.map map_follows 90
moves() {
  echo "hand-overs: A $(grep -c "handed over" "$(gw_log a)"), B $(grep -c "handed over" "$(gw_log b)"); SET TARGET PORT GROUPS received: A $(stpgs a) (1 from sg_stpg if A was asked), B $(stpgs b)"
}
moves

dm_name=$(basename "$(readlink -f "/dev/mapper/$map")")
no_io_error() {
  dmesg >"$work/dmesg.txt"
  if grep -E "I/O error|Buffer I/O|blk_update_request" "$work/dmesg.txt" | grep -E "$dm_name|dm-"; then
    echo "the dm device saw I/O errors"
    return 1
  fi
  grep -E "alua|multipath|device-mapper" "$work/dmesg.txt" | tail -n 30
  echo "no I/O error on $dm_name (/dev/mapper/$map) in dmesg; path errors below it: $(grep -cE "Failing path|failing path" "$work/dmesg.txt")"
}
check no-io-error no_io_error

flush() {
  stop_daemon multipathd 30 || true
  multipath -f "$map" || return 1
  echo "map $map flushed"
}
check flush flush
log_out() {
  timeout 120 iscsiadm -m node -T "$iqn" --logout || return 1
  echo "both sessions logged out"
}
check logout log_out
stop_daemon udevd 20 >/dev/null
stop_daemon iscsid 20 >/dev/null
gateways_exit() {
  stop_daemon gw_a || return 1
  stop_daemon gw_b || return 1
  echo "both gateways exited 0 on SIGTERM"
}
check gateways-exit gateways_exit
