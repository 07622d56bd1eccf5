# Failed CHAP logins are slowed per source address: a burst of wrong-secret logins from 127.0.0.2
# gets its credentials checked only a bounded number of times (the rest are refused at once with
# 0x0301), while a right login from 127.0.0.1 works throughout, and 127.0.0.2 logs in again once
# its block is over. Raw sockets (acl_login.py), SHA-256 CHAP.
source "$(dirname "$0")/../target/lib.sh"
source "$(dirname "$0")/../../support/target_toml.sh"
require python3
T=iqn.2026-11.org.iserkit:throttled
{
  toml_table login_throttle free_failures=3 base_delay_ms=1000 max_delay_ms=2000
  toml_target "$T" mem:16M 'chap_users=[{ user = "alice", secret = "alice-secret-1234" }]'
} >"$WORK/target.toml"
start_target --lun mem:16M --config "$WORK/target.toml" --log-level debug
chap() { timeout 30 python3 "$(dirname "$0")/acl_login.py" chap "$PORT" "$T" "$@"; }
[[ $(chap 127.0.0.1 alice alice-secret-1234) == 0000 ]] || fail "right secret refused before the burst"
# A 3-second burst of wrong secrets, as fast as one client can go.
read -r checked refused < <(timeout 30 python3 "$(dirname "$0")/acl_login.py" burst "$PORT" "$T" 127.0.0.2 alice \
  wrong-secret-0000 3) || fail "burst"
echo "burst: credentials checked $checked times, refused unchecked $refused times"
# 3 free failures, then one check per block (1 s, then 2 s): at most 3 + 2 in 3 seconds, plus one
# at the very end of the window.
(( checked <= 6 )) || fail "$checked wrong secrets checked in 3 s: not throttled"
(( refused >= 5 )) || fail "only $refused attempts refused: the burst was not throttled"
# During a fresh block (2 s, the cap): another address logs in; the blocked address is refused even
# with the right secret; after the block it logs in.
read -r other blocked after < <(timeout 60 python3 "$(dirname "$0")/acl_login.py" penalty "$PORT" "$T" 127.0.0.2 \
  127.0.0.1 alice alice-secret-1234 wrong-secret-0000 2) || fail "penalty"
echo "during the block: other address $other, blocked address $blocked; after it: $after"
[[ $other == 0000 ]] || fail "a right login from another address was refused"
[[ $blocked == 0301 ]] || fail "the blocked address was not refused"
[[ $after == 0000 ]] || fail "the right secret was refused after the block"
kill -0 "$TARGET_PID" || fail "target died"
stop_target_log
grep -q 'status=0x0201.*(logins from 127.0.0.2 refused for 1000 ms)' "$WORK/target.all" || fail "no log line for the block"
grep -q '\[debug\] login 127.0.0.2:[0-9]*: rejected: status=0x0301: too many failed logins from 127.0.0.2' "$WORK/target.all" ||
  fail "no debug line for a throttled login"
echo PASS
