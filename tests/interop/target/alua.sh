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
