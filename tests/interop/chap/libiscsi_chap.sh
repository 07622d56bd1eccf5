# libiscsi's tools against iserkit-target --config with CHAP (RFC 7143 §12.1.3): right, wrong and
# missing secrets (login fails with 0x0201 "Authentication failure" and the daemon keeps serving),
# mutual CHAP via libiscsi's target_user/target_password URL arguments, an ACL refusing the
# initiator (0x0202), discovery sessions with their own CHAP user (iscsi-ls), and MD5 refused
# (0x0201, with a log line saying why) on a target whose chap_algorithms do not list it.
source "$(dirname "$0")/lib.sh"
require iscsi-inq iscsi-ls
write_config
start_target --log-level debug
H=127.0.0.1:$PORT
inq() { timeout 30 iscsi-inq "$@" >"$WORK/out" 2>&1; }

inq "iscsi://alice%$ALICE_SECRET@$H/$SECURE/0" || { cat "$WORK/out"; fail "right secret: iscsi-inq failed"; }
grep -q 'Peripheral Device Type:DIRECT_ACCESS' "$WORK/out" || fail "right secret: no INQUIRY data"

for url in "iscsi://alice%wrong-secret-0000@$H/$SECURE/0" "iscsi://$H/$SECURE/0" "iscsi://mallory%$ALICE_SECRET@$H/$SECURE/0"; do
  if inq "$url"; then fail "login succeeded: ${url%%@*}@…"; fi
  grep -q 'Authentication failure(513)' "$WORK/out" || { cat "$WORK/out"; fail "expected status 0x0201 (513)"; }
done

mutual="iscsi://alice%$ALICE_SECRET@$H/$MUTUAL/0"
inq "$mutual?target_user=mutualtarget&target_password=$TARGET_SECRET" || { cat "$WORK/out"; fail "mutual CHAP failed"; }
if inq "$mutual?target_user=mutualtarget&target_password=wrong-secret-0000"; then fail "mutual with a wrong target secret succeeded"; fi
grep -qi 'CHAP_R' "$WORK/out" || { cat "$WORK/out"; fail "mutual, wrong secret: libiscsi did not reject the target's CHAP_R"; }

# MD5 only where configured: libiscsi offers CHAP_A=5 alone and is refused, with a log line saying why.
if inq "iscsi://alice%$ALICE_SECRET@$H/$SHAONLY/0"; then fail "MD5 CHAP accepted on a target that does not list it"; fi
grep -q 'Authentication failure(513)' "$WORK/out" || { cat "$WORK/out"; fail "MD5 refused: expected status 0x0201 (513)"; }
grep -q 'status=0x0201: no CHAP algorithm in common: offered=MD5 accepted=SHA-256,SHA3-256,SHA-1 (MD5 is accepted only where configured' \
  "$WORK/target.err" "$WORK/target.out" || fail "no log line saying MD5 is not configured"

if inq "iscsi://$H/$LOCKED/0"; then fail "the ACL let us in"; fi
grep -q 'Authorization failure(514)' "$WORK/out" || { cat "$WORK/out"; fail "ACL: expected status 0x0202 (514)"; }

# Discovery needs the discovery user; the targets' users do not open it.
timeout 30 iscsi-ls "iscsi://disco%$DISCO_SECRET@$H" >"$WORK/ls" 2>&1 || { cat "$WORK/ls"; fail "iscsi-ls with discovery CHAP failed"; }
grep -q "$SECURE" "$WORK/ls" || { cat "$WORK/ls"; fail "iscsi-ls did not list $SECURE"; }
if timeout 30 iscsi-ls "iscsi://$H" >"$WORK/ls2" 2>&1; then fail "discovery without CHAP succeeded"; fi
if timeout 30 iscsi-ls "iscsi://alice%$ALICE_SECRET@$H" >"$WORK/ls3" 2>&1; then fail "discovery with a target's user succeeded"; fi

# Still serving after every failure above.
inq "iscsi://alice%$ALICE_SECRET@$H/$SECURE/0" || fail "the target stopped serving after failed logins"
cat "$WORK/target.out" "$WORK/target.err" | grep -q 'status=0x0201' || fail "the target logged no authentication failure"
check_no_secrets "$WORK/out" "$WORK/ls" "$WORK/ls2" "$WORK/ls3"
echo PASS
