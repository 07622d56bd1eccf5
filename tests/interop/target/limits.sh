# Resource bounds under attack (limits.py): one scenario per run, each with the target options it
# needs (short timeouts so the test takes seconds), a legitimate session checked during each attack.
# Usage: limits.sh SCENARIO
source "$(dirname "$0")/lib.sh"
require python3
scenario=${1:?scenario}
# The attacks open many sockets (the target's side and ours): take the whole descriptor allowance.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if [[ "$scenario" == oversize_headers && "$(ulimit -n)" != unlimited && "$(ulimit -n)" -lt 2200 ]]; then
  echo "SKIP: oversize_headers needs about 2200 file descriptors (ulimit -Hn is $(ulimit -Hn))" >&2
  exit 77
fi
case "$scenario" in
  login_timeout)    args=(--login-timeout 1) ;;
  logging_in_cap)   args=(--max-logging-in 8 --login-timeout 30) ;;
  fd_reserve)       args=(--max-logging-in 1000 --fd-reserve 64 --login-timeout 30) ;;
  oversize_headers) args=(--max-logging-in 2000) ;;
  idle_ping)        args=(--idle-interval 1 --ping-timeout 1) ;;
  tmf_flood)        args=() ;;
  write_staging)    args=(--connection-payload-budget 1M) ;;
  read_budget|immediate_reads) args=(--connection-payload-budget 64M --global-payload-budget 512M --pool-idle-cap 64M) ;;
  initiator_answers_ping) args=(--idle-interval 0.5 --ping-timeout 1 --log-level debug) ;;
  *) echo "unknown scenario $scenario" >&2; exit 2 ;;
esac
# LIMITS_EXTRA_ARGS (e.g. "--max-immediate-commands 1000000") lifts a bound by hand, to see that
# the scenario fails without it.
read -r -a extra <<<"${LIMITS_EXTRA_ARGS:-}"
args+=("${extra[@]}")
if [[ "$scenario" == fd_reserve ]]; then
  # A 256-descriptor limit (soft and hard) for the target only.
  ( ulimit -n 256; exec "$BIN/iserkit-target" --iqn "$IQN" --listen 127.0.0.1:0 --port-file "$WORK/port" \
      --lun mem:1G "${args[@]}" >"$WORK/target.out" 2>"$WORK/target.err" ) &
  TARGET_PID=$!
  for _ in $(seq 100); do [[ -s "$WORK/port" ]] && break; sleep 0.05; done
  PORT=$(cat "$WORK/port")
else
  start_target --lun mem:1G "${args[@]}"
fi
if [[ "$scenario" == initiator_answers_ping ]]; then
  # Our initiator (BlockingClient's receive loop) answers the target's pings while the CLI sits
  # idle waiting for its input: the WRITE after 3 s of silence still succeeds.
  [[ -x "$BIN/iserkit" ]] || { echo "SKIP: iserkit CLI not built" >&2; exit 77; }
  head -c 65536 /dev/urandom >"$WORK/data"
  (sleep 3; cat "$WORK/data") | timeout 30 "$BIN/iserkit" write --nop-interval 0 "$URL/0" || fail "iserkit write after idle"
  timeout 30 "$BIN/iserkit" read --length 65536 "$URL/0" >"$WORK/back" || fail "iserkit read"
  cmp -s "$WORK/data" "$WORK/back" || fail "read back other data"
  grep -q "NOP-In ping" "$WORK/target.out" "$WORK/target.err" || fail "the target sent no ping during 3 s of silence"
  grep -q "no answer to a NOP-In ping" "$WORK/target.out" "$WORK/target.err" && fail "our initiator did not answer a ping"
  echo "ok: the iserkit CLI answered the target's NOP-In pings while idle"
else
  timeout 120 python3 "$(dirname "$0")/limits.py" "$PORT" "$IQN" "$TARGET_PID" "$scenario" || fail "limits.py $scenario"
fi
kill -0 "$TARGET_PID" || fail "target died"
if command -v iscsi-inq >/dev/null 2>&1; then
  iscsi-inq "iscsi://127.0.0.1:$PORT/$IQN/0" >/dev/null || fail "iscsi-inq after the attack"
  echo "ok: iscsi-inq works after the attack"
fi
grep -q "accept failed" "$WORK/target.out" "$WORK/target.err" && fail "the target ran out of descriptors (accept failed)"
stop_target
echo PASS
