#!/usr/bin/env bash
# BLOCK_STATUS through the whole chain: iserkit-target (sparse file LUN, thin: GET LBA STATUS from
# SEEK_DATA/SEEK_HOLE) ← iSCSI/TCP ← iserkit-nbd (base:allocation from GET LBA STATUS) → libnbd.
#  - nbdinfo --map of a sparse 1 GiB LUN with 4 MiB written in 4 places lists exactly those
#    extents as data and the rest as holes (HOLE|ZERO: the target reports LBPRZ);
#  - nbdcopy of the LUN to a file gives the same bytes as the LUN file, and reads only the allocated
#    extents from the LUN: the bridge's read_bytes counter is 4 MiB, against 1 GiB with
#    nbdcopy --no-extents (which ignores BLOCK_STATUS) — the figure in nbd_bridge/README.md.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need nbdinfo nbdcopy jq sha256sum

MiB=$((1 << 20))
size=$((1024 * MiB))
truncate -s $size "$tmp/lun.img"
# 1 MiB of data at 0, 100, 513 and 1023 MiB (the last MiB of the LUN).
for at in 0 100 513 1023; do
  head -c $MiB /dev/urandom | dd of="$tmp/lun.img" bs=$MiB seek=$at conv=notrunc status=none
done
python3 - "$tmp/lun.img" <<'PY' || skip "the file system of /tmp does not report holes (SEEK_HOLE)"
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
assert os.lseek(fd, 0, os.SEEK_HOLE) == 1 << 20
PY

iqn=iqn.2026-11.org.iserkit:bs
start_target "$tmp/lun.img"

start_bridge() {  # start_bridge NAME [OPTION...]: a bridge on $tmp/NAME.sock with stats in $tmp/NAME.stats
  "$BIN/iserkit-nbd" "iscsi://127.0.0.1:$port/$iqn/0" --socket "$tmp/$1.sock" --stats-file "$tmp/$1.stats" \
    "${@:2}" >>"$tmp/nbd.log" 2>&1 &
  bridge_pid=$!; pids+=($bridge_pid)
  for _ in $(seq 100); do [[ -S $tmp/$1.sock ]] && return 0; sleep 0.1; done
  fail "iserkit-nbd did not start"
}
stop_bridge() {  # stop_bridge: SIGTERM; the stats file then holds the final counters
  kill -TERM "$bridge_pid"; wait "$bridge_pid" || fail "iserkit-nbd exited with $?"
}
stat_of() { sed -n "s/^$2=//p" "$tmp/$1.stats"; }

echo "== nbdinfo --map (through the --metrics decorator, which must pass BLOCK_STATUS on)"
start_bridge map --metrics 127.0.0.1:0
map=$(nbdinfo --map --json "nbd+unix:///?socket=$tmp/map.sock")
got=$(jq -c '[.[] | [.offset, .length, .type]]' <<<"$map")
want="[[0,$MiB,0],[$MiB,$((99 * MiB)),3],[$((100 * MiB)),$MiB,0],[$((101 * MiB)),$((412 * MiB)),3],\
[$((513 * MiB)),$MiB,0],[$((514 * MiB)),$((509 * MiB)),3],[$((1023 * MiB)),$MiB,0]]"
[[ $got == "$want" ]] || fail "nbdinfo --map: got $got, want $want"
stop_bridge
[[ $(stat_of map lba_status_commands) -gt 0 ]] || fail "no GET LBA STATUS was sent"
echo "  7 extents: 4 x 1 MiB data, 3 holes"

echo "== nbdcopy with and without BLOCK_STATUS"
want_sum=$(sha256sum <"$tmp/lun.img" | cut -d' ' -f1)
start_bridge extents
nbdcopy "nbd+unix:///?socket=$tmp/extents.sock" "$tmp/copy1.img"
stop_bridge
start_bridge all
nbdcopy --no-extents "nbd+unix:///?socket=$tmp/all.sock" "$tmp/copy2.img"
stop_bridge
for f in copy1 copy2; do
  [[ $(sha256sum <"$tmp/$f.img" | cut -d' ' -f1) == "$want_sum" ]] || fail "$f differs from the LUN"
done
with=$(stat_of extents read_bytes)
without=$(stat_of all read_bytes)
echo "  read from the LUN: $with bytes with BLOCK_STATUS, $without bytes with --no-extents"
[[ $with -eq $((4 * MiB)) ]] || fail "nbdcopy read $with bytes from the LUN, want exactly the 4 MiB allocated"
[[ $without -eq $size ]] || fail "nbdcopy --no-extents read $without bytes, want the whole LUN"
echo PASS
