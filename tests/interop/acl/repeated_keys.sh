# A login that repeats a key is refused with 0x0200 (RFC 7143 §6.2), whatever PDU carries the
# copy; the name the ACL checked is the name the session uses; a peer's newline stays escaped in
# the target's log (raw sockets: acl_login.py).
source "$(dirname "$0")/../target/lib.sh"
source "$(dirname "$0")/../../support/target_toml.sh"
require python3
ALLOWED=iqn.2026-11.org.test:allowed
toml_target iqn.2026-11.org.iserkit:acl mem:16M "allowed_initiators=[\"$ALLOWED\"]" >"$WORK/target.toml"
start_target --lun mem:16M --config "$WORK/target.toml" --log-level debug
timeout 60 python3 "$(dirname "$0")/acl_login.py" repeat "$PORT" iqn.2026-11.org.iserkit:acl "$ALLOWED" ||
  fail "acl_login.py repeat"
kill -0 "$TARGET_PID" || fail "target died"
stop_target_log
grep -q 'status=0x0200: key repeated in one Login Request: key=InitiatorName' "$LOG" || fail "no log of the repeated key"
grep -q 'status=0x0200: key sent again in a later Login Request: key=InitiatorName' "$LOG" || fail "no log of the changed name"
grep -q 'evil\\x0aFORGED log line' "$LOG" || fail "the peer's newline was not escaped in the log"
if grep -q '^FORGED' "$LOG"; then fail "a peer string forged a log line"; fi
echo PASS
