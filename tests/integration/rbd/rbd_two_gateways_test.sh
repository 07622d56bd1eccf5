#!/usr/bin/env bash
# Two gateways, one RBD image (issue 12 item 3; target/README.md "Two gateways, one RBD image"):
# a throwaway cluster (tests/support/ceph_cluster.sh), one image, two iserkit-target processes
# serving it on two loopback ports: gateway A portal group 1 active/optimized, gateway B portal
# group 2 active/non-optimized, each naming the other with --alua-peer. Checked:
#  - both gateways report the same logical unit (serial, NAA and T10 designators of VPD 0x80/0x83),
#    derived from the image, and their own target port designators; a gateway with peers reports
#    WCE=0 in the Caching mode page (librbd's cache off), a target serving the image alone WCE=1;
#  - iserkit-nbd with both URLs (--multipath failover) sees path 0 active/optimized and path 1
#    active/non-optimized (each gateway's REPORT TARGET PORT GROUPS lists both groups);
#  - fio writes and verifies through the bridge while gateway A is killed with kill -9: I/O moves
#    to gateway B (whose librbd takes the image's exclusive lock from the dead client once its
#    watch expires, fencing it with a blocklist entry), fio ends with no error and every block
#    verifies, including those A acknowledged before it died (librbd's cache is off on gateways);
#  - a split: A restarted and both gateways written at once (a bridge each): fio verifies, and both
#    gateways read the same bytes.
# Skips (77) without the Ceph packages, a build without librbd, or fio without its nbd engine.
source "$(dirname "$0")/lib.sh"
rbd_failover_init rbd-gw
# Default features (exclusive-lock among them), as `rbd create` makes images.
rbd create rbd/shared --size 128M
rbd info rbd/shared | grep -q exclusive-lock || fail "the image has no exclusive-lock feature"

iqn=iqn.2026-11.org.iserkit:gw
# start_gateway NAME TPGT ARGS...: iserkit-target serving rbd/shared on 127.0.0.1, portal group TPGT.
start_gateway() {
  local name=$1 tpgt=$2; shift 2
  "$BIN/iserkit-target" --iqn $iqn --ceph-conf "$CEPH_CONF" --lun rbd:rbd/shared --no-iser \
    --listen "127.0.0.1:0,tpgt=$tpgt" --port-file "$tmp/$name.port" "$@" >>"$tmp/$name.log" 2>&1 &
  pids+=($!)
  eval "${name}_pid=$!"
  wait_gateway "$name" "$!"
}
start_gateway a 1 --alua-peer 2=active/non-optimized
start_gateway b 2 --alua-state 2=active/non-optimized --alua-peer 1=active/optimized
url_a=iscsi://127.0.0.1:$a_port/$iqn/0
url_b=iscsi://127.0.0.1:$b_port/$iqn/0

# One logical unit: the same serial and LU designators through both gateways (target port
# designators differ: relative port 1 and 2).
"$BIN/iserkit" inquiry "$url_a" >"$tmp/inq_a" || fail "inquiry through gateway A"
"$BIN/iserkit" inquiry "$url_b" >"$tmp/inq_b" || fail "inquiry through gateway B"
lu_ids() { grep -E '^(serial|designator):' "$1" | grep -viE 'relative|target-port|port.group' || true; }
lu_ids "$tmp/inq_a" >"$tmp/lu_a"
lu_ids "$tmp/inq_b" >"$tmp/lu_b"
grep -q '^serial:' "$tmp/lu_a" && grep -qi 'naa' "$tmp/lu_a" || { cat "$tmp/inq_a"; fail "no serial or NAA designator"; }
cmp -s "$tmp/lu_a" "$tmp/lu_b" || { diff "$tmp/lu_a" "$tmp/lu_b"; fail "the gateways report different logical units"; }
# ... derived from the image, not from the target name: the target name differs, the identity not.
"$BIN/iserkit-target" --iqn $iqn:other --ceph-conf "$CEPH_CONF" --lun rbd:rbd/shared --no-iser \
  --listen 127.0.0.1:0,tpgt=3 --port-file "$tmp/c.port" >>"$tmp/c.log" 2>&1 &
c_pid=$!; pids+=($c_pid)
for _ in $(seq 150); do [[ -s $tmp/c.port ]] && break; sleep 0.1; done
[[ -s $tmp/c.port ]] || fail "gateway C did not start"
"$BIN/iserkit" inquiry "iscsi://127.0.0.1:$(cat "$tmp/c.port")/$iqn:other/0" >"$tmp/inq_c" || fail "inquiry C"
lu_ids "$tmp/inq_c" >"$tmp/lu_c"
cmp -s "$tmp/lu_a" "$tmp/lu_c" || { diff "$tmp/lu_a" "$tmp/lu_c"; fail "the LU identity depends on the target name"; }
# librbd's cache: off on a gateway with peers (WCE=0: nothing acknowledged only in its memory),
# on (WCE=1) for a target serving the image alone, as C does.
wce_a=$(timeout 30 python3 "$SRC/tests/integration/rbd/caching_page.py" "$a_port" $iqn) || fail "MODE SENSE via A"
wce_c=$(timeout 30 python3 "$SRC/tests/integration/rbd/caching_page.py" "$(cat "$tmp/c.port")" $iqn:other) ||
  fail "MODE SENSE via C"
[[ $wce_a == wce=0 && $wce_c == wce=1 ]] || fail "Caching page: gateway with peers $wce_a (want wce=0), alone $wce_c (want wce=1)"
kill -9 $c_pid
echo "ok: one logical unit through both gateways: $(grep '^serial' "$tmp/lu_a")"

source "$(dirname "$0")/../alua/lib.sh"
start_mp_bridge "$url_a" "$url_b"
[[ $(current path.0.alua) == active/optimized ]] || fail "path 0 (gateway A) is not active/optimized"
[[ $(stat_of path.1.alua) == active/non-optimized ]] || fail "path 1 (gateway B) is not active/non-optimized"

# ~12 s of writes (96 MiB at 8 MiB/s), each block checksummed, then read back and checked.
fio --name=gateways --ioengine=nbd --uri="nbd+unix:///?socket=$tmp/mp.sock" --rw=randwrite --bs=64k \
  --iodepth=8 --size=96m --rate=8m --verify=crc32c --do_verify=1 --verify_fatal=1 --randrepeat=0 --verify_state_save=0 \
  >"$tmp/fio.log" 2>&1 &
fio_pid=$!; pids+=($fio_pid)
before_fault
kill -9 "$a_pid"
fio_after_fault "$tmp/fio.log"
path1_after=$(current path.1.commands)
echo "  bridge: state=$(stat_of state) path_downs=$(stat_of path_downs) path.0.state=$(stat_of path.0.state)" \
  "path.1.commands=$path1_after"
[[ $(stat_of state) == connected ]] || fail "the bridge is not connected at the end"
((path1_after > path1_before)) || fail "no I/O moved to gateway B after gateway A died"
[[ $(stat_of path.0.state) != up ]] || fail "path 0 still up with its gateway dead"
# Gateway B took the exclusive lock by breaking the dead gateway's, which fences it.
# (The list is read whole first: grep -q stops reading at the entry, and with pipefail the ceph
# tool's broken pipe writing the rest failed the test although the entry was there.)
blocklist=$(ceph osd blocklist ls 2>&1) || true
grep -q '127.0.0.1' <<<"$blocklist" || { echo "$blocklist" >&2; fail "gateway A's client was not blocklisted"; }
kill -TERM $bridge_pid; wait $bridge_pid || fail "iserkit-nbd exited with $?"

# A split: both gateways written at once, as by two uncoordinated hosts (one bridge per gateway,
# A restarted; fio writes and verifies one half through each, concurrently). The exclusive lock
# moves to whichever gateway writes; every block verifies, and both gateways then read the same
# bytes over the whole range.
rm -f "$tmp/a.port"
start_gateway a 1 --alua-peer 2=active/non-optimized
for g in a b; do
  port_var=${g}_port
  "$BIN/iserkit-nbd" "iscsi://127.0.0.1:${!port_var}/$iqn/0" --socket "$tmp/$g.sock" --replacement-timeout 60 \
    >"$tmp/nbd-$g.log" 2>&1 &
  pids+=($!); eval "nbd_${g}_pid=$!"
  for _ in $(seq 100); do [[ -S $tmp/$g.sock ]] && break; sleep 0.1; done
  [[ -S $tmp/$g.sock ]] || fail "iserkit-nbd to gateway $g did not start"
done
fio --ioengine=nbd --rw=randwrite --bs=64k --iodepth=4 --size=8m --verify=crc32c --do_verify=1 --verify_fatal=1 \
  --randrepeat=0 --verify_state_save=0 \
  --name=via-a --uri="nbd+unix:///?socket=$tmp/a.sock" --offset=0 \
  --name=via-b --uri="nbd+unix:///?socket=$tmp/b.sock" --offset=8m \
  >"$tmp/fio-split.log" 2>&1 || fail "fio through both gateways failed: $(grep -iE 'err|verify' "$tmp/fio-split.log" | head -5)"
(( $(grep -c "err= 0" "$tmp/fio-split.log") == 2 )) || fail "fio through both gateways reported errors"
"$BIN/iserkit" read "iscsi://127.0.0.1:$a_port/$iqn/0" --length $((16 << 20)) -o "$tmp/split-a.bin" || fail "read via A"
"$BIN/iserkit" read "$url_b" --length $((16 << 20)) -o "$tmp/split-b.bin" || fail "read via B"
cmp "$tmp/split-a.bin" "$tmp/split-b.bin" || fail "the gateways read different data after a split"
echo "ok: split: both gateways written at once, fio verified each half, both read the same 16 MiB"
kill -TERM "$nbd_a_pid" "$nbd_b_pid"; wait "$nbd_a_pid" "$nbd_b_pid" || fail "iserkit-nbd exited with $?"
kill -TERM "$a_pid" "$b_pid"; wait "$a_pid" "$b_pid" 2>/dev/null || true
echo "PASS: $(( $(date +%s) - start )) s"
