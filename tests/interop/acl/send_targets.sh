# SendTargets lists only the targets whose ACL admits the discovering initiator (iscsi-ls -i sets
# the InitiatorName of libiscsi's discovery session).
source "$(dirname "$0")/../target/lib.sh"
source "$(dirname "$0")/../../support/target_toml.sh"
require iscsi-ls
{
  toml_target iqn.2026-11.org.iserkit:alice-only mem:16M 'allowed_initiators=["iqn.2026-11.org.test:alice"]'
  toml_target iqn.2026-11.org.iserkit:bob-only mem:16M 'allowed_initiators=["iqn.2026-11.org.test:bob"]'
} >"$WORK/target.toml"
start_target --lun mem:16M --config "$WORK/target.toml"
ls_as() { timeout 30 iscsi-ls -i "$1" "iscsi://127.0.0.1:$PORT" >"$WORK/ls" 2>&1 || { cat "$WORK/ls"; fail "iscsi-ls -i $1"; }; }
ls_as iqn.2026-11.org.test:alice
grep -q "$IQN" "$WORK/ls" || { cat "$WORK/ls"; fail "alice: the open target is missing"; }
grep -q "alice-only" "$WORK/ls" || { cat "$WORK/ls"; fail "alice: her target is missing"; }
if grep -q "bob-only" "$WORK/ls"; then cat "$WORK/ls"; fail "alice was shown bob's target"; fi
ls_as iqn.2026-11.org.test:mallory
grep -q "$IQN" "$WORK/ls" || { cat "$WORK/ls"; fail "mallory: the open target is missing"; }
if grep -q "only" "$WORK/ls"; then cat "$WORK/ls"; fail "mallory was shown a target whose ACL refuses her"; fi
stop_target
echo PASS
