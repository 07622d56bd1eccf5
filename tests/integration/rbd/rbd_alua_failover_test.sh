#!/usr/bin/env bash
# ALUA failover with an RBD image (target/README.md "ALUA failover", "Two gateways, one RBD
# image"): two gateways on one host serving one image, both locking one local file
# (--alua-lock), which decides who is active/optimized; librbd's exclusive lock still orders the
# writes underneath. Checked: one gateway active/optimized, the other standby; fio write + verify
# through a two-path iserkit-nbd while the active gateway is killed with kill -9: the standby one
# goes active/optimized within 2 s, its writes wait for librbd to break the dead gateway's lock
# (osd_client_watch_timeout, 5 s here), fio ends with no error and every block verifies; the
# restarted gateway comes back standby and SET TARGET PORT GROUPS through it moves the active side
# back. Skips (77) without the Ceph packages, a build without librbd, or fio without its nbd engine.
source "$(dirname "$0")/lib.sh"
rbd_failover_init rbd-alua
rbd create rbd/shared --size 64M

iqn=iqn.2026-11.org.iserkit:rbdalua
a_port=0
b_port=0
start_gateway() {
  local name=$1 tpgt=$2 peer=$3 port_var=${1}_port
  rm -f "$tmp/$name.port"
  "$BIN/iserkit-target" --iqn $iqn --ceph-conf "$CEPH_CONF" --lun rbd:rbd/shared --no-iser \
    --listen "127.0.0.1:${!port_var},tpgt=$tpgt" --alua-peer "$peer" --alua-lock "$tmp/gateways.lock" \
    --port-file "$tmp/$name.port" >>"$tmp/$name.log" 2>&1 &
  pids+=($!)
  eval "${name}_pid=$!"
  wait_gateway "$name" "$!"
}
source "$(dirname "$0")/../alua/lib.sh"
AO=active/optimized
SB=standby

start_gateway a 1 2
for _ in $(seq 50); do grep -q "this gateway is active" "$tmp/a.log" && break; sleep 0.1; done
start_gateway b 2 1
url_a=iscsi://127.0.0.1:$a_port/$iqn/0
url_b=iscsi://127.0.0.1:$b_port/$iqn/0
wait_states "$url_a" "1=$AO 2=$SB" 5
wait_states "$url_b" "1=$AO 2=$SB" 5
echo "ok: gateway A active/optimized, B standby"

start_mp_bridge "$url_a" "$url_b"
fio --name=rbd-alua --ioengine=nbd --uri="nbd+unix:///?socket=$tmp/mp.sock" --rw=randwrite --bs=64k --iodepth=8 \
  --size=48m --rate=8m --verify=crc32c --do_verify=1 --verify_fatal=1 --randrepeat=0 --verify_state_save=0 \
  >"$tmp/fio.log" 2>&1 &
fio_pid=$!; pids+=($fio_pid)
sleep 2
kill -0 $fio_pid 2>/dev/null || fail "fio ended before the fault"
echo "== kill -9 gateway A"
kill -9 "$a_pid"
for _ in $(seq 100); do grep -q "this gateway is active" "$tmp/b.log" && break; sleep 0.02; done
grep -q "this gateway is active" "$tmp/b.log" || fail "gateway B did not go active within 2 s of A's death"
fio_after_fault "$tmp/fio.log"
wait_states "$url_b" "1=$SB 2=$AO" 5
echo "ok: kill -9 of the active gateway under fio verify: B took over, every block verified"

start_gateway a 1 2
wait_states "$url_a" "1=$SB 2=$AO" 5
out=$(timeout 30 "$BIN/iserkit-alua-probe" "$url_a" stpg:1=$AO) || fail "SET TARGET PORT GROUPS through A: $out"
[[ $out == "stpg status=0x00" ]] || fail "SET TARGET PORT GROUPS through A: $out"
wait_states "$url_b" "1=$AO 2=$SB" 2
echo "ok: A restarted standby; SET TARGET PORT GROUPS through it made it active/optimized again"
kill -TERM $bridge_pid; wait $bridge_pid || fail "iserkit-nbd exited with $?"
echo "PASS: $(( $(date +%s) - start )) s"
