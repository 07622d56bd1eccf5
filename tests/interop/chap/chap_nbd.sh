# iserkit-nbd with CHAP against iserkit-target --config (issue 26 item 5), read and written with
# libnbd's nbdinfo and nbdcopy: credentials from --chap-file (also as a key of --config) and from
# libiscsi's LIBISCSI_CHAP_* variables, one-way and mutual; a --chap-file others may read is
# refused; a wrong secret, a missing secret and a wrong target secret end the bridge with a message
# saying what to do; the secret is in neither /proc/PID/cmdline nor the environment of --run's
# command; no secret in any output.
source "$(dirname "$0")/lib.sh"
require nbdinfo nbdcopy cmp
NBD="$BIN/iserkit-nbd"
[[ -x $NBD ]] || fail "$NBD not built"
write_config
start_target
H=127.0.0.1:$PORT
OUTS=()
BRIDGE_PID=""
stop_bridge() {
  [[ -n $BRIDGE_PID ]] || return 0
  kill -TERM "$BRIDGE_PID" 2>/dev/null
  wait "$BRIDGE_PID" || fail "iserkit-nbd exited with $? on SIGTERM"
  BRIDGE_PID=""
}
trap '[[ -n $BRIDGE_PID ]] && kill "$BRIDGE_PID" 2>/dev/null; cleanup' EXIT
# start_bridge NAME ARGS...: iserkit-nbd ARGS --socket $WORK/NAME.sock in the background (with
# $CHAP_ENV in a clean CHAP environment); waits for the socket.
start_bridge() {
  local name=$1; shift
  OUTS+=("$WORK/$name.log")
  "${clean_env[@]}" ${CHAP_ENV:+$CHAP_ENV} "$NBD" "$@" --socket "$WORK/$name.sock" >"$WORK/$name.log" 2>&1 &
  BRIDGE_PID=$!
  for _ in $(seq 150); do
    [[ -S $WORK/$name.sock ]] && return 0
    kill -0 "$BRIDGE_PID" 2>/dev/null || { cat "$WORK/$name.log" >&2; fail "$name: iserkit-nbd exited at startup"; }
    sleep 0.1
  done
  fail "$name: iserkit-nbd did not create its socket"
}
# bridge_fails NAME PATTERN ARGS...: iserkit-nbd must exit non-zero with PATTERN in its output.
bridge_fails() {
  local name=$1 pattern=$2; shift 2
  OUTS+=("$WORK/$name.log")
  if "${clean_env[@]}" ${CHAP_ENV:+$CHAP_ENV} timeout 60 "$NBD" "$@" --socket "$WORK/$name.sock" >"$WORK/$name.log" 2>&1; then
    fail "$name: iserkit-nbd started"
  fi
  cat "$WORK/$name.log"
  grep -qF -- "$pattern" "$WORK/$name.log" || fail "$name: expected: $pattern"
}
uri() { echo "nbd+unix:///?socket=$WORK/$1.sock"; }
round_trip() {  # NAME: random data through the export and back
  local name=$1
  [[ $(nbdinfo --size "$(uri "$name")") == 67108864 ]] || fail "$name: nbdinfo: size is not 64 MiB"
  head -c $((4 << 20)) /dev/urandom >"$WORK/$name.in"
  nbdcopy "$WORK/$name.in" "$(uri "$name")" || fail "$name: nbdcopy in"
  nbdcopy "$(uri "$name")" "$WORK/$name.back" || fail "$name: nbdcopy out"
  cmp -n $((4 << 20)) "$WORK/$name.in" "$WORK/$name.back" || fail "$name: data read back differs"
  rm -f "$WORK/$name.back"
}
chap_file() {  # NAME MODE LINES...
  local name=$1 mode=$2; shift 2
  printf '%s\n' "$@" >"$WORK/$name"
  chmod "$mode" "$WORK/$name"
}
chap_file alice.chap 600 "username = alice" "secret = $ALICE_SECRET"
chap_file mutual.chap 600 "username = alice" "secret = $ALICE_SECRET" "target_username = mutualtarget" \
  "target_secret = $TARGET_SECRET"

echo "== --chap-file, one-way: nbdinfo and nbdcopy"
start_bridge file --chap-file "$WORK/alice.chap" "iscsi://$H/$SECURE/0"
round_trip file
line=$(tr '\0' ' ' </proc/$BRIDGE_PID/cmdline)
[[ $line != *"$ALICE_SECRET"* ]] || fail "a secret in /proc/PID/cmdline"
stop_bridge

echo "== --chap-file, mutual, as a key of --config"
printf 'url = "iscsi://%s/%s/0"\nchap-file = "%s"\n' "$H" "$MUTUAL" "$WORK/mutual.chap" >"$WORK/bridge.toml"
start_bridge config --config "$WORK/bridge.toml"
round_trip config
stop_bridge

echo "== environment (libiscsi's variables), mutual"
CHAP_ENV="LIBISCSI_CHAP_USERNAME=alice LIBISCSI_CHAP_PASSWORD=$ALICE_SECRET LIBISCSI_CHAP_TARGET_USERNAME=mutualtarget LIBISCSI_CHAP_TARGET_PASSWORD=$TARGET_SECRET" \
  start_bridge env "iscsi://$H/$MUTUAL/0"
round_trip env
stop_bridge

echo "== a URL's secret is hidden from /proc/PID/cmdline"
start_bridge url "iscsi://alice%$ALICE_SECRET@$H/$SECURE/0"
url_secret_masked "$BRIDGE_PID"
[[ $(ps -o args= -p "$BRIDGE_PID") != *"$ALICE_SECRET"* ]] || fail "the URL's secret is visible in ps"
[[ $(nbdinfo --size "$(uri url)") == 67108864 ]] || fail "url: nbdinfo after hiding the secret"
stop_bridge

echo "== --run: the command's environment holds no secret"
"${clean_env[@]}" LIBISCSI_CHAP_USERNAME=alice LIBISCSI_CHAP_PASSWORD="$ALICE_SECRET" timeout 60 "$NBD" \
  "iscsi://$H/$SECURE/0" --run "env >'$WORK/run.env'; nbdinfo --size \"\$uri\" >'$WORK/run.size'" >"$WORK/run.log" 2>&1 ||
  { cat "$WORK/run.log"; fail "--run with the environment's credentials exited $?"; }
OUTS+=("$WORK/run.log" "$WORK/run.env")
[[ $(cat "$WORK/run.size") == 67108864 ]] || fail "--run: nbdinfo did not see the export"
grep -q LIBISCSI_CHAP "$WORK/run.env" && fail "--run's command inherited the CHAP variables"

echo "== refusals with clear messages"
chap_file open.chap 644 "username = alice" "secret = $ALICE_SECRET"
bridge_fails too-open "iserkit-nbd: --chap-file: $WORK/open.chap: permissions 0644 are too open" \
  --chap-file "$WORK/open.chap" "iscsi://$H/$SECURE/0"
chap_file wrong.chap 600 "username = alice" "secret = wrong-secret-0000"
bridge_fails wrong "the target refused CHAP user 'alice': check the user name and the secret" \
  --chap-file "$WORK/wrong.chap" "iscsi://$H/$SECURE/0"
bridge_fails none "the target requires CHAP authentication: give a user and a secret" "iscsi://$H/$SECURE/0"
bridge_fails no-secret "iserkit-nbd: CHAP user 'alice' has no secret: put \`secret = ...\` in a --chap-file" \
  "iscsi://alice@$H/$SECURE/0"
chap_file mutual-wrong.chap 600 "username = alice" "secret = $ALICE_SECRET" "target_secret = wrong-secret-0000"
bridge_fails mutual-wrong "the target failed mutual CHAP" --chap-file "$WORK/mutual-wrong.chap" "iscsi://$H/$MUTUAL/0"

check_no_secrets "${OUTS[@]}"
echo PASS
