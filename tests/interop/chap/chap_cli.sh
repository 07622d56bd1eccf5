# The `iserkit` CLI with CHAP against iserkit-target --config (issue 26 item 5): credentials from a
# --chap-file (mode 0600; a file group or others may read is refused with a message saying
# chmod 600) and from libiscsi's LIBISCSI_CHAP_* variables, one-way and mutual; the precedence
# URL > --chap-file > environment; a wrong secret, no credentials, a user without a secret and a
# wrong target secret each fail with a message that says what to do; a URL's secret is hidden from
# /proc/PID/cmdline; no secret appears in any output.
source "$(dirname "$0")/lib.sh"
require python3
CLI="$BIN/iserkit"
[[ -x $CLI ]] || fail "$CLI not built"
write_config
start_target
H=127.0.0.1:$PORT
SEC="iscsi://$H/$SECURE/0"
MUT="iscsi://$H/$MUTUAL/0"
OUTS=()
# run NAME ARGS...: the CLI with a clean CHAP environment (plus what the caller exports); its
# stdout and stderr go to $WORK/NAME.out and .err.
run() {
  local name=$1; shift
  OUTS+=("$WORK/$name.out" "$WORK/$name.err")
  "${clean_env[@]}" ${CHAP_ENV:+$CHAP_ENV} timeout 60 "$CLI" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
}
ok() { local name=$1; run "$@" || { cat "$WORK/$name.err" >&2; fail "$name: exited $?"; }; }
refused() {  # NAME PATTERN ARGS...: must fail with PATTERN on stderr
  local name=$1 pattern=$2; shift 2
  if run "$name" "$@"; then fail "$name: succeeded"; fi
  cat "$WORK/$name.err"
  grep -qF -- "$pattern" "$WORK/$name.err" || fail "$name: expected: $pattern"
}
chap_file() {  # NAME MODE LINES...: a --chap-file
  local name=$1 mode=$2; shift 2
  printf '%s\n' "$@" >"$WORK/$name"
  chmod "$mode" "$WORK/$name"
}

echo "== --chap-file, one-way"
chap_file alice.chap 600 "# alice on $SECURE" "username = alice" "secret = \"$ALICE_SECRET\""
ok file-readcap --chap-file "$WORK/alice.chap" readcap "$SEC"
grep -qx 'bytes: 67108864' "$WORK/file-readcap.out" || fail "readcap over CHAP: expected 64 MiB"
head -c 3000000 /dev/urandom >"$WORK/data.bin"
ok file-write --chap-file "$WORK/alice.chap" write "$SEC" --offset 4096 -i "$WORK/data.bin"
ok file-read --chap-file "$WORK/alice.chap" read "$SEC" --offset 4096 --length 3000000 -o "$WORK/data.back"
cmp "$WORK/data.bin" "$WORK/data.back" || fail "data over CHAP (--chap-file) differs"

echo "== --chap-file that group or others may read: refused before connecting"
chap_file open.chap 644 "username = alice" "secret = $ALICE_SECRET"
refused too-open "permissions 0644 are too open: a CHAP secrets file must be readable by its owner only (chmod 600 $WORK/open.chap)" \
  --chap-file "$WORK/open.chap" readcap "$SEC"
chmod 640 "$WORK/open.chap"
refused too-open-group "permissions 0640 are too open" --chap-file "$WORK/open.chap" readcap "$SEC"
chap_file typo.chap 600 "user = alice"
refused bad-key "$WORK/typo.chap:1: unknown key \`user\`" --chap-file "$WORK/typo.chap" readcap "$SEC"

echo "== environment (libiscsi's variables)"
CHAP_ENV="LIBISCSI_CHAP_USERNAME=alice LIBISCSI_CHAP_PASSWORD=$ALICE_SECRET" ok env-readcap readcap "$SEC"
# libiscsi's own example: the user in the URL, the password in the environment.
CHAP_ENV="LIBISCSI_CHAP_PASSWORD=$ALICE_SECRET" ok env-url-user readcap "iscsi://alice@$H/$SECURE/0"

echo "== mutual CHAP"
chap_file mutual.chap 600 "username = alice" "secret = $ALICE_SECRET" "target_username = mutualtarget" \
  "target_secret = $TARGET_SECRET"
ok file-mutual --chap-file "$WORK/mutual.chap" readcap "$MUT"
CHAP_ENV="LIBISCSI_CHAP_USERNAME=alice LIBISCSI_CHAP_PASSWORD=$ALICE_SECRET LIBISCSI_CHAP_TARGET_USERNAME=mutualtarget LIBISCSI_CHAP_TARGET_PASSWORD=$TARGET_SECRET" \
  ok env-mutual readcap "$MUT"
chap_file mutual-wrong.chap 600 "username = alice" "secret = $ALICE_SECRET" "target_secret = wrong-secret-0000"
refused mutual-wrong "the target failed mutual CHAP" --chap-file "$WORK/mutual-wrong.chap" readcap "$MUT"
chap_file mutual-name.chap 600 "username = alice" "secret = $ALICE_SECRET" "target_username = someone-else" \
  "target_secret = $TARGET_SECRET"
refused mutual-name "the target failed mutual CHAP" --chap-file "$WORK/mutual-name.chap" readcap "$MUT"

echo "== wrong, missing secrets: clear errors"
chap_file wrong.chap 600 "username = alice" "secret = wrong-secret-0000"
refused wrong-file "the target refused CHAP user 'alice': check the user name and the secret" \
  --chap-file "$WORK/wrong.chap" readcap "$SEC"
grep -q "status=0x0201 authentication failure" "$WORK/wrong-file.err" || fail "wrong-file: no login status"
CHAP_ENV="LIBISCSI_CHAP_USERNAME=alice LIBISCSI_CHAP_PASSWORD=wrong-secret-0000" \
  refused wrong-env "the target refused CHAP user 'alice'" readcap "$SEC"
refused no-credentials "the target requires CHAP authentication: give a user and a secret (--chap-file FILE" readcap "$SEC"
refused no-secret "readcap: CHAP user 'alice' has no secret: put \`secret = ...\` in a --chap-file (mode 0600) or set LIBISCSI_CHAP_PASSWORD" \
  readcap "iscsi://alice@$H/$SECURE/0"
grep -q 'invalid argument' "$WORK/no-secret.err" && fail "a missing secret still says 'invalid argument'"

echo "== precedence: URL > --chap-file > environment"
CHAP_ENV="LIBISCSI_CHAP_USERNAME=alice LIBISCSI_CHAP_PASSWORD=wrong-secret-0000" \
  ok file-over-env --chap-file "$WORK/alice.chap" readcap "$SEC"
ok url-over-file --chap-file "$WORK/wrong.chap" readcap "iscsi://alice%$ALICE_SECRET@$H/$SECURE/0"
# The environment's password belongs to its user: not sent for the URL's other user.
CHAP_ENV="LIBISCSI_CHAP_USERNAME=alice LIBISCSI_CHAP_PASSWORD=$ALICE_SECRET" \
  refused env-other-user "CHAP user 'mallory' has no secret" readcap "iscsi://mallory@$H/$SECURE/0"

echo "== the secret is not on the command line of a running process"
# A write from a FIFO keeps the process alive while its command line is read.
cmdline_of_write() {  # NAME URL ARGS...: prints the command line of `iserkit write URL ARGS...`
  local name=$1 url=$2; shift 2
  rm -f "$WORK/fifo"; mkfifo "$WORK/fifo"
  "$CLI" write "$url" -i "$WORK/fifo" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  local pid=$!
  # Read-write: never blocks, even if the tool dies before opening its end. The tool opens the
  # FIFO after parsing its arguments, so once it holds it the command line is final.
  exec 7<>"$WORK/fifo"
  for _ in $(seq 200); do
    kill -0 "$pid" 2>/dev/null || { cat "$WORK/$name.err" >&2; fail "$name: write exited before opening the FIFO"; }
    ls -l /proc/$pid/fd 2>/dev/null | grep -qF "$WORK/fifo" && break
    sleep 0.05
  done
  local line ps_line
  line=$(tr '\0' ' ' </proc/$pid/cmdline)
  ps_line=$(ps -o args= -p "$pid")
  printf 'x' >&7
  exec 7>&-
  wait "$pid" || { cat "$WORK/$name.err" >&2; fail "$name: write exited $?"; }
  [[ $ps_line != *"$ALICE_SECRET"* ]] || fail "$name: the secret is visible in ps"
  echo "$line"
}
OUTS+=("$WORK/cmd-url.out" "$WORK/cmd-url.err" "$WORK/cmd-file.out" "$WORK/cmd-file.err")
line=$(cmdline_of_write cmd-url "iscsi://alice%$ALICE_SECRET@$H/$SECURE/0")
echo "  cmdline: $line"
[[ $line != *"$ALICE_SECRET"* ]] || fail "the URL's secret stays visible in /proc/PID/cmdline"
[[ $line == *"alice%*****************@"* ]] || fail "the URL's secret was not replaced by stars"
grep -q "the URL holds a CHAP secret" "$WORK/cmd-url.err" || fail "no warning about a secret in the URL"
line=$(cmdline_of_write cmd-file "$SEC" --chap-file "$WORK/alice.chap")
echo "  cmdline: $line"
[[ $line != *"$ALICE_SECRET"* ]] || fail "the secret is visible in /proc/PID/cmdline"

check_no_secrets "${OUTS[@]}"
echo PASS
