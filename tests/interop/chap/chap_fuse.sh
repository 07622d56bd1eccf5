# iserkit-fuse with CHAP on a real FUSE mount against iserkit-target --config (issue 26 item 5):
# a target URL mounted with a --chap-file (one-way) and with libiscsi's LIBISCSI_CHAP_* variables
# (mutual), data written and read back through the LUN file; a --chap-file others may read and a
# user without a secret are refused before mounting; a wrong secret leaves the target's directory
# failing with a log line saying what to do; the secret is not in /proc/PID/cmdline; no secret in
# any output. Skips (77) without /dev/fuse or fusermount3.
source "$(dirname "$0")/lib.sh"
require fusermount3 mountpoint cmp dd
[[ -c /dev/fuse ]] || { echo "SKIP: /dev/fuse is missing" >&2; exit 77; }
FUSE="$BIN/iserkit-fuse"
[[ -x $FUSE ]] || { echo "SKIP: iserkit-fuse is not built" >&2; exit 77; }
write_config
start_target
H=127.0.0.1:$PORT
OUTS=()
FUSE_PID=""
MNT=""
unmount() {
  [[ -n $FUSE_PID ]] || return 0
  kill -TERM "$FUSE_PID" 2>/dev/null || true
  wait "$FUSE_PID" || true
  fusermount3 -u -z "$MNT" 2>/dev/null || true
  FUSE_PID=""
}
trap 'unmount; cleanup' EXIT
# mount_view NAME ARGS...: iserkit-fuse ARGS $WORK/NAME (foreground, background job; $CHAP_ENV in
# a clean CHAP environment); waits for the mount.
mount_view() {
  local name=$1; shift
  MNT=$WORK/$name
  mkdir -p "$MNT"
  OUTS+=("$WORK/$name.log")
  "${clean_env[@]}" ${CHAP_ENV:+$CHAP_ENV} "$FUSE" "$@" "$MNT" --foreground --log-level info >"$WORK/$name.log" 2>&1 &
  FUSE_PID=$!
  for _ in $(seq 100); do
    mountpoint -q "$MNT" && return 0
    kill -0 "$FUSE_PID" 2>/dev/null || { cat "$WORK/$name.log" >&2; fail "$name: iserkit-fuse exited before mounting"; }
    sleep 0.1
  done
  fail "$name: iserkit-fuse did not mount"
}
round_trip() {  # NAME IQN: data through the LUN file and back, with O_DIRECT reads
  local name=$1 iqn=$2 file
  file=$MNT/$iqn/lun0
  [[ $(stat -c %s "$file") == 67108864 ]] || fail "$name: $file is not 64 MiB"
  head -c $((2 << 20)) /dev/urandom >"$WORK/$name.in"
  dd if="$WORK/$name.in" of="$file" bs=1M seek=3 conv=notrunc,fsync status=none || fail "$name: dd write"
  dd if="$file" of="$WORK/$name.back" bs=1M skip=3 count=2 iflag=direct status=none || fail "$name: dd read"
  cmp "$WORK/$name.in" "$WORK/$name.back" || fail "$name: data read back differs"
}
chap_file() {  # NAME MODE LINES...
  local name=$1 mode=$2; shift 2
  printf '%s\n' "$@" >"$WORK/$name"
  chmod "$mode" "$WORK/$name"
}
chap_file alice.chap 600 "username = alice" "secret = $ALICE_SECRET"

echo "== --chap-file, one-way"
mount_view file --chap-file "$WORK/alice.chap" "iscsi://$H/$SECURE"
[[ $(ls "$MNT/$SECURE" | tr '\n' ' ') == "info lun0 " ]] || fail "file: the target lists $(ls "$MNT/$SECURE")"
round_trip file "$SECURE"
line=$(tr '\0' ' ' </proc/$FUSE_PID/cmdline)
[[ $line != *"$ALICE_SECRET"* ]] || fail "a secret in /proc/PID/cmdline"
unmount

echo "== environment (libiscsi's variables), mutual"
CHAP_ENV="LIBISCSI_CHAP_USERNAME=alice LIBISCSI_CHAP_PASSWORD=$ALICE_SECRET LIBISCSI_CHAP_TARGET_USERNAME=mutualtarget LIBISCSI_CHAP_TARGET_PASSWORD=$TARGET_SECRET" \
  mount_view env "iscsi://$H/$MUTUAL"
round_trip env "$MUTUAL"
unmount

echo "== a URL's secret is hidden from /proc/PID/cmdline"
mount_view url "iscsi://alice%$ALICE_SECRET@$H/$SECURE"
url_secret_masked "$FUSE_PID"
[[ $(stat -c %s "$MNT/$SECURE/lun0") == 67108864 ]] || fail "url: lun0 is not 64 MiB"
grep -F -- "$ALICE_SECRET" /proc/self/mountinfo && fail "the secret is in the mount table"
unmount

echo "== wrong secret: the directory fails, the log says why"
chap_file wrong.chap 600 "username = alice" "secret = wrong-secret-0000"
mount_view wrong --chap-file "$WORK/wrong.chap" "iscsi://$H/$SECURE"
if ls "$MNT/$SECURE/" >"$WORK/wrong.ls" 2>&1; then fail "wrong: the target's directory listed with a wrong secret"; fi
grep -q "the target refused CHAP user 'alice': check the user name and the secret" "$WORK/wrong.log" ||
  { cat "$WORK/wrong.log"; fail "wrong: no log line saying what to do"; }
unmount

echo "== refused before mounting"
chap_file open.chap 604 "username = alice" "secret = $ALICE_SECRET"
mkdir -p "$WORK/never"
OUTS+=("$WORK/open.log" "$WORK/nosecret.log")
if "${clean_env[@]}" "$FUSE" --chap-file "$WORK/open.chap" "iscsi://$H/$SECURE" "$WORK/never" --foreground >"$WORK/open.log" 2>&1; then
  fail "a --chap-file others may read was accepted"
fi
grep -qF "iserkit-fuse: --chap-file: $WORK/open.chap: permissions 0604 are too open" "$WORK/open.log" || { cat "$WORK/open.log"; fail "open: message"; }
if "${clean_env[@]}" "$FUSE" "iscsi://alice@$H/$SECURE" "$WORK/never" --foreground >"$WORK/nosecret.log" 2>&1; then
  fail "a user without a secret was accepted"
fi
grep -qF "iserkit-fuse: CHAP user 'alice' has no secret: put \`secret = ...\` in a --chap-file" "$WORK/nosecret.log" ||
  { cat "$WORK/nosecret.log"; fail "no secret: message"; }
mountpoint -q "$WORK/never" && fail "mounted although refused"

check_no_secrets "${OUTS[@]}"
echo PASS
