#!/bin/bash
# iSER teardown in the QEMU lab (Soft-RoCE): a peer that dies mid-I/O must not hang or wedge the
# other end. (1) kill -9 iserkit-nbd during a read: the target sees the disconnect, keeps serving
# (a new iSER session reads the same bytes) and exits cleanly on SIGTERM. (2) kill -9 the target
# under iserkit-nbd: the bridge's session fails, NBD reads get errors instead of hanging, and the
# bridge exits cleanly on SIGTERM.
# Run from the host:
#   /work/shared/lab/run-lab.sh -t 600 -e ISERKIT_BIN=$PWD/build/bin \
#       /work/shared/lab/scenarios/with-env.sh --rxe --nbd -- $PWD/docs/lab/iser_teardown.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
B=${ISERKIT_BIN:-$here/../../build/bin}
IP=${LAB_RXE_IP:?run under with-env.sh --rxe --nbd}
OUT=${LAB_OUT:-/lab/out}
IQN=iqn.2026-11.lab:teardown
W=/run/lab/td; mkdir -p "$W"
rc=0
fail() { echo "FAIL: $*"; rc=1; }
start_target() {
  rm -f "$W/port"
  "$B/iserkit-target" --lun "$W/lun.img" --listen "$IP:3260" --iqn $IQN --port-file "$W/port" --log-level debug \
      >"$OUT/td-target-$1.log" 2>&1 &
  TARGET=$!
  for _ in $(seq 200); do [[ -s $W/port ]] && break; sleep 0.1; done; sleep 0.5
}
start_nbd() {
  rm -f "$W/nbd.sock"
  "$B/iserkit-nbd" "iser://$IP/$IQN/0" --socket "$W/nbd.sock" --log-level info >"$OUT/td-nbd-$1.log" 2>&1 &
  NBD=$!
  for _ in $(seq 200); do [[ -S $W/nbd.sock ]] && break; sleep 0.1; done
}
head -c $((64 << 20)) /dev/urandom >"$W/lun.img"

echo "=== 1. initiator killed mid-read"
start_target 1
start_nbd 1
nbd-client -unix "$W/nbd.sock" /dev/nbd0 -b 4096 >/dev/null 2>&1 || fail "nbd-client"
dd if=/dev/nbd0 of=/dev/null bs=1M iflag=direct status=none &
DD=$!
sleep 2
kill -9 $NBD; wait $NBD 2>/dev/null
# The kernel's nbd client keeps dd's requests until the device is disconnected (its behaviour,
# not ours): disconnect it first, then dd ends with an I/O error.
nbd-client -d /dev/nbd0 >/dev/null 2>&1
timeout 30 tail --pid=$DD -f /dev/null || { echo "(dd still stuck in the kernel nbd driver)"; kill -9 $DD 2>/dev/null; }
for _ in $(seq 50); do grep -q 'connection .*closed' "$OUT/td-target-1.log" && break; sleep 0.2; done
grep -q 'connection .*closed' "$OUT/td-target-1.log" && echo "target saw the dead initiator's connection close" \
  || fail "target did not notice the dead initiator"
timeout 60 "$B/iserkit" read "iser://$IP/$IQN/0" --offset 1048576 --length 1048576 -o "$W/after" || fail "new session after crash"
cmp -s "$W/after" <(tail -c +1048577 "$W/lun.img" | head -c 1048576) && echo "target still serves iSER: same bytes" \
  || fail "data after crash differs"
kill -TERM $TARGET; timeout 30 tail --pid=$TARGET -f /dev/null; wait $TARGET && echo "target exited cleanly" || fail "target exit $?"

echo "=== 2. target killed under the bridge"
start_target 2
start_nbd 2
nbd-client -unix "$W/nbd.sock" /dev/nbd0 -b 4096 >/dev/null 2>&1 || fail "nbd-client"
dd if=/dev/nbd0 of=/dev/null bs=1M count=4 iflag=direct status=none || fail "read before the crash"
kill -9 $TARGET; wait $TARGET 2>/dev/null
if timeout 60 dd if=/dev/nbd0 of=/dev/null bs=1M count=4 skip=8 iflag=direct status=none 2>/dev/null; then
  fail "read after the target died succeeded"
else
  echo "read after the target died failed (as it must), rc=$?"
fi
nbd-client -d /dev/nbd0 >/dev/null 2>&1
grep -E 'session: failed|closed' "$OUT/td-nbd-2.log" | head -2
kill -TERM $NBD; timeout 30 tail --pid=$NBD -f /dev/null; wait $NBD; r=$?
[[ $r -le 1 ]] && echo "iserkit-nbd exited (rc=$r) after its target died" || fail "iserkit-nbd exit $r"
exit $rc
