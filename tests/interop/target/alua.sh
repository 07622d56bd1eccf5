# ALUA (target/README.md "ALUA"): two portal groups on 127.0.0.1 (tpgt 1, active/optimized) and
# 127.0.0.2 (tpgt 2, standby), checked with a raw-iSCSI peer (alua.py) and, when installed,
# libiscsi's iscsi-inq (VPD 0x83 through each portal).
source "$(dirname "$0")/lib.sh"
require python3
start_target --lun mem:16M --listen 127.0.0.2:0,tpgt=2 --alua-state 2=standby --no-iser
PORT2=$(sed -n 's/^listening on 127\.0\.0\.2:\([0-9]*\)$/\1/p' "$WORK/target.out")
[[ -n "$PORT2" ]] || fail "no second portal: $(cat "$WORK/target.out")"
timeout 60 python3 "$(dirname "$0")/alua.py" "$PORT" "$IQN" "$PORT2" || fail "alua.py"
kill -0 "$TARGET_PID" || fail "target died"
stop_target
# Two gateways (target/README.md "Two gateways, one RBD image"): the same checks when each portal
# group is its own process, each naming the other's group with --alua-peer. A mem: LUN keeps no
# data in common, and each process would give its own an identity of its own (docs/lu-identity.md):
# both name it with the same ,uuid= so that they report one logical unit.
LU_UUID=0b6f1d7e-3c2a-4e59-8a41-7d9c2e5f6a13
start_target --lun "mem:16M,uuid=$LU_UUID" --alua-peer 2=standby --no-iser
grep -q "portal group 2: ALUA standby (a peer gateway's)" "$WORK/target.err" "$WORK/target.out" ||
  fail "gateway A does not log its peer's group: $(cat "$WORK/target.err")"
"$BIN/iserkit-target" --iqn "$IQN" --lun "mem:16M,uuid=$LU_UUID" --listen 127.0.0.2:0,tpgt=2 --alua-state 2=standby \
  --alua-peer 1=active/optimized --no-iser --port-file "$WORK/port2" >"$WORK/b.out" 2>"$WORK/b.err" &
PEER_PID=$!
trap 'kill -9 $PEER_PID 2>/dev/null || true; cleanup' EXIT
for _ in $(seq 100); do [[ -s "$WORK/port2" ]] && break; sleep 0.1; done
[[ -s "$WORK/port2" ]] || fail "gateway B did not start: $(cat "$WORK/b.err")"
timeout 60 python3 "$(dirname "$0")/alua.py" "$PORT" "$IQN" "$(cat "$WORK/port2")" || fail "alua.py, two gateways"
kill -0 "$TARGET_PID" && kill -0 "$PEER_PID" || fail "a gateway died"
kill -TERM "$PEER_PID"; wait "$PEER_PID" || true
stop_target
# A peer group that this process serves itself is refused at start-up, naming the tag.
if "$BIN/iserkit-target" --iqn "$IQN" --lun mem:1M --listen 127.0.0.1:0 --alua-peer 1=standby --no-iser \
    >"$WORK/bad.out" 2>&1; then
  fail "the target started with --alua-peer naming its own portal group"
fi
grep -q "peer portal group 1 is also served here" "$WORK/bad.out" || fail "no clear error: $(cat "$WORK/bad.out")"
echo "ok: two processes as two gateways list each other's group in RTPG and report one logical unit"
# libiscsi's iscsi-inq logs in, sends TEST UNIT READY (which a standby port refuses with NOT READY,
# as SPC-5 wants), then reads VPD 0x83: both groups active here, one non-optimized.
if command -v iscsi-inq >/dev/null 2>&1; then
  start_target --lun mem:16M --listen 127.0.0.2:0,tpgt=2 --alua-state 2=active/non-optimized --no-iser
  PORT2=$(sed -n 's/^listening on 127\.0\.0\.2:\([0-9]*\)$/\1/p' "$WORK/target.out")
  for url in "iscsi://127.0.0.1:$PORT/$IQN/0" "iscsi://127.0.0.2:$PORT2/$IQN/0"; do
    out=$(timeout 20 iscsi-inq -e 1 -c 131 "$url") || fail "iscsi-inq $url"
    echo "$out" | grep -q "RELATIVE_TARGET_PORT" || fail "iscsi-inq $url: no relative target port designator: $out"
    echo "$out" | grep -q "TARGET_PORT_GROUP" || fail "iscsi-inq $url: no target port group designator: $out"
  done
  echo "ok: iscsi-inq reads the target port designators through both portal groups"
  stop_target
else
  echo "iscsi-inq not installed: libiscsi check skipped"
fi
echo PASS
