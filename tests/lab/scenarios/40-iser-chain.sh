#!/bin/bash
# iSER chain on Soft-RoCE: iserkit <-> iserkit-target, then iserkit-nbd + kernel nbd client, zero copy
# Discovery and login over iSER, 256 MiB of random data written and read back with the CLI
# (SHA-256 compared, and with the target's backing file), then iserkit-nbd over iSER attached with
# the kernel's nbd client: 1 GiB written and 1 GiB read with O_DIRECT, mkfs.ext4, mount, a file
# copied in, e2fsck -fn clean. At exit iserkit-nbd and iserkit-target log
# "copied payload bytes: N" (the copy counter); N must be 0. Issue 13 item 3, large I/O: our target
# states a MAXIMUM TRANSFER LENGTH (Block Limits VPD), so the initiator's per-command cap is 8 MiB
# (inquiry says so), `--iser-max-transfer 1048576` lowers it (the CLI's --json says so, data verified),
# and the target's counter of the largest command that arrived over iSER (--stats-file,
# largest_command_bytes_iser) shows the CLI's 4 MiB writes went over iSER unsplit: > 512 KiB.
# CHAP over iSER: a second iserkit-target (port 3262) with --chap-user: no secret and a wrong one are
# refused, the right one logs in and round-trips 4 MiB. A command timeout (issue 13 item 2): a third
# target on a dm-delay LUN; the timed-out read is aborted, the connection stays, and the caller hears
# the timeout only after the target answered the ABORT TASK. Without iSER in the build: SKIP.
source "$LAB_SOURCE/tests/lab/guest/lib.sh"
plan soft-roce target discovery login large-io-limit write-read-256M backing-file iser-max-transfer-option bridge nbd-attach write-1G read-1G mkfs \
  mount-copy e2fsck nbd-detach bridge-exit bridge-zero-copy bridge-stags target-exit target-zero-copy large-commands-over-iser chap timeout-abort

check soft-roce rxe_up || give_up "no Soft-RoCE device"
if reason=$(iser_missing); then give_up "$reason"; fi

iqn=iqn.2026-11.org.iserkit.lab:iser-chain
portal=$LAB_RDMA_IP:3260
truncate -s 1G "$work/lun.img"
daemon target iserkit-target --iqn "$iqn" --lun "$work/lun.img" --listen "$portal" --port-file "$work/port" \
  --stats-file "$work/target.stats"
target_log=$logdir/$scenario.target.log
check target serving iserkit-target "$work/port" 120 || give_up "iserkit-target did not start"
url=iser://$portal/$iqn/0
cli() { timeout 900 iserkit --initiator-name "$LAB_INITIATOR_IQN" "$@"; }

discover() {
  cli discover "iser://$portal" >"$work/discover.txt" 2>&1
  local rc=$?
  cat "$work/discover.txt"
  if ((rc != 0)) && initiator_refuses_iser "$work/discover.txt"; then return 3; fi
  ((rc == 0)) || return 1
  grep -q "$iqn" "$work/discover.txt" || { echo "SendTargets over iSER did not list $iqn"; return 1; }
  echo "SendTargets over iSER lists $iqn"
}
start=$EPOCHREALTIME
discover >"$work/d.log" 2>&1
rc=$?
took=$(seconds_since "$start")
cat "$work/d.log"
case $rc in
  0) pass discovery "$(tail -n 1 "$work/d.log")" "$took" ;;
  3) skip discovery "iserkit refuses iser:// URLs: $(tail -n 1 "$work/d.log")" "$took"
     give_up "the initiator in this build has no iSER: $(tail -n 1 "$work/d.log")" ;;
  *) fail discovery "$(tail -n 1 "$work/d.log")" "$took" ;;
esac

login_inquiry() { cli inquiry "$url" >"$work/inquiry.txt" 2>&1; local rc=$?; cat "$work/inquiry.txt"; return $rc; }
check login login_inquiry || give_up "login over iSER failed"
# Our target states MAXIMUM TRANSFER LENGTH (32 MiB by default): the cap is the initiator's 8 MiB.
large_io_limit() {
  grep '^block limits:' "$work/inquiry.txt"
  grep -qx "max transfer per command: $(mib 8) bytes" "$work/inquiry.txt" ||
    { echo "per-command cap over iSER: $(grep '^max transfer' "$work/inquiry.txt"), want $(mib 8) bytes"; return 1; }
  echo "per-command cap over iSER to iserkit-target: 8 MiB (it states its MAXIMUM TRANSFER LENGTH)"
}
check large-io-limit large_io_limit

write_read() { cli_roundtrip "$url" 256 "$work/lun.img"; }
check write-read-256M write_read
check backing-file backing_holds_written "$work/lun.img" 256 "the target's"
# --iser-max-transfer lowers the cap: 8 MiB written and read back in 1 MiB commands, same data
max_transfer_option() {
  local cap
  head -c "$(mib 8)" /dev/urandom >"$work/small.in"
  cli --iser-max-transfer "$(mib 1)" --json write "$url" --offset "$(mib 512)" -i "$work/small.in" >"$work/small.json" || return 1
  cat "$work/small.json"
  cap=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["max_transfer_bytes"])' "$work/small.json")
  [[ $cap == "$(mib 1)" ]] || { echo "the write's cap is ${cap:-missing}, not 1 MiB"; return 1; }
  cli --iser-max-transfer "$(mib 1)" read "$url" --offset "$(mib 512)" --length "$(mib 8)" -o "$work/small.out" || return 1
  cmp "$work/small.in" "$work/small.out" || return 1
  echo "--iser-max-transfer 1048576: cap 1 MiB, 8 MiB written and read back identical"
}
check iser-max-transfer-option max_transfer_option

daemon bridge iserkit-nbd "$url" --socket "$work/nbd.sock" --initiator-name "$LAB_INITIATOR_IQN" --log-level info
bridge_log=$logdir/$scenario.bridge.log
check bridge serving iserkit-nbd "$work/nbd.sock" 120 || give_up "iserkit-nbd did not serve $url"
modprobe nbd nbds_max=4 || give_up "modprobe nbd failed"
dev=/dev/nbd1
check nbd-attach nbd_attach "$work/nbd.sock" nbd1 || give_up "the kernel nbd client could not attach"
# 1 GiB each way with O_DIRECT: the data the copy counter must not have copied
write_1g() {
  local start=$EPOCHREALTIME
  dd if=/dev/zero of="$dev" bs=1M count=1024 oflag=direct conv=fsync status=none || return 1
  echo "1 GiB written with O_DIRECT in $(seconds_since "$start") s"
}
read_1g() {
  local start=$EPOCHREALTIME
  head -c "$(mib 1)" /dev/urandom >"$work/marker"
  dd if="$work/marker" of="$dev" bs=1M seek=1023 oflag=direct status=none || return 1
  dd if="$dev" bs=1M count=1024 iflag=direct status=none | cmp -s - <(head -c "$(mib 1023)" /dev/zero; cat "$work/marker") ||
    { echo "1 GiB read back differs from what was written"; return 1; }
  echo "1 GiB read with O_DIRECT in $(seconds_since "$start") s, contents as written"
}
check write-1G write_1g
check read-1G read_1g
bridge_fs_then_exit /mnt/iser
check target-exit stop_daemon target
zero_copy_check target-zero-copy iserkit-target "$target_log"
# The CLI writes and reads in 4 MiB pieces: with an 8 MiB cap each is one SCSI command, which the
# target counted as arriving over iSER (not only the data was right: the commands were large).
large_commands() {
  iser_command_above_512k "over iSER" || return 1
  ((largest_iser <= $(mib 8))) || { echo "a $largest_iser-byte command over iSER: above the 8 MiB cap"; return 1; }
  echo "largest command that arrived over iSER: $largest_iser bytes (> 512 KiB, <= 8 MiB), data verified above"
}
check large-commands-over-iser large_commands
chap() {
  local secret=lab-chap-secret-1234 curl=iser://$LAB_RDMA_IP:3262/$iqn-chap/0
  truncate -s 64M "$work/chap.img"
  ISERKIT_TARGET_CHAP_SECRET=$secret daemon chap-target iserkit-target --iqn "$iqn-chap" --lun "$work/chap.img" \
    --listen "$LAB_RDMA_IP:3262" --port-file "$work/chap.port" --chap-user labuser
  serving iserkit-target "$work/chap.port" 120 || return 1
  if cli inquiry "$curl" >/dev/null 2>&1; then echo "a login without CHAP got in"; return 1; fi
  if ISERKIT_CHAP_SECRET=wrong-secret-5678 cli --chap-user labuser inquiry "$curl" >/dev/null 2>&1; then
    echo "a wrong CHAP secret got in"; return 1
  fi
  head -c "$(mib 4)" /dev/urandom >"$work/chap.in"
  ISERKIT_CHAP_SECRET=$secret cli --chap-user labuser write "$curl" -i "$work/chap.in" || return 1
  ISERKIT_CHAP_SECRET=$secret cli --chap-user labuser read "$curl" --length "$(mib 4)" -o "$work/chap.out" || return 1
  cmp "$work/chap.in" "$work/chap.out" || return 1
  stop_daemon chap-target >/dev/null || { echo "the CHAP target did not exit 0"; return 1; }
  echo "CHAP over iSER to iserkit-target: no secret and a wrong one refused, the right one logs in, 4 MiB round trip"
}
check chap chap
# A command timeout with per-command STags (issue 13 item 2): a third target whose LUN is a
# dm-delay device (reads take 4 s). `iserkit read --command-timeout 1s` times out after 1 s and sends
# ABORT TASK; the target answers it once the delayed read ended; only then may the caller hear the
# timeout (the target could RDMA-write into the buffer until it had ended the task), and the
# connection stays (no "connection lost"). The window's Local Invalidate follows.
timeout_abort() {
  local loop start secs log=$work/timeout.log curl=iser://$LAB_RDMA_IP:3263/$iqn-slow/0 rc=1 tmf_line err_line
  modprobe dm_delay && modprobe loop || { echo "no dm-delay or loop module"; return 1; }
  truncate -s 64M "$work/slow.img"
  loop=$(losetup -f --show "$work/slow.img") || return 1
  # no udev in the VM: dmsetup makes the /dev/mapper node itself
  if echo "0 $((64 * 2048)) delay $loop 0 4000 $loop 0 0" | dmsetup create --noudevsync lab-slow && dmsetup mknodes lab-slow; then
    daemon slow-target iserkit-target --iqn "$iqn-slow" --lun /dev/mapper/lab-slow --listen "$LAB_RDMA_IP:3263" \
      --port-file "$work/slow.port"
    if serving iserkit-target "$work/slow.port" 120; then
      start=$EPOCHREALTIME
      if cli --log-level info --command-timeout 1s read "$curl" --offset "$(mib 1)" --length 65536 >/dev/null 2>"$log"; then
        echo "the read did not time out"
      else
        secs=$(seconds_since "$start")
        tail -n 8 "$log"
        tmf_line=$(grep -n 'task management response: .* response=0' "$log" | head -n 1 | cut -d: -f1)
        err_line=$(grep -n '^read: ' "$log" | head -n 1 | cut -d: -f1)
        if ! grep -q 'STags: per command' "$log"; then echo "the CLI did not use per-command STags"
        elif ! grep -q 'command: timed out' "$log"; then echo "no command timed out"
        elif [[ -z $tmf_line ]]; then echo "the ABORT TASK was not answered 'function complete'"
        elif grep -q 'connection lost' "$log"; then echo "the connection was closed: it must survive the timeout"
        elif [[ -z $err_line ]] || ((err_line < tmf_line)); then echo "the caller heard the timeout before the ABORT TASK was answered"
        elif ! awk -v s="$secs" 'BEGIN { exit !(s >= 3.5) }'; then echo "the read returned after ${secs} s, before the delayed read (4 s) could end"
        else
          rc=0
          echo "timed out after 1 s, ABORT TASK answered when the 4 s read ended, the caller heard it then (${secs} s), connection kept"
        fi
      fi
    fi
    stop_daemon slow-target >/dev/null
  fi
  dmsetup remove lab-slow 2>/dev/null
  losetup -d "$loop"
  return $rc
}
if [[ ${ISERKIT_ISER_STAGS:-automatic} == whole-slab ]]; then
  skip timeout-abort "ISERKIT_ISER_STAGS=whole-slab: a timeout closes the connection by design"
else
  check timeout-abort timeout_abort
fi
