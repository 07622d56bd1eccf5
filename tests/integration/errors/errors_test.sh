#!/usr/bin/env bash
# Errors that say what happened and what to do (issue 26 item 3), with the real programs against
# real iserkit-target processes: for each usual mistake — a refused connection, an unknown target, a
# wrong CHAP secret, a LUN that does not exist, a read-only LUN, a write past the end, a bad URL —
# the message names what happened, the object (portal, target, LUN, bytes) and the next step, the
# sense is decoded (libsgutils2's texts), and the exit status is the documented one (0 ok, 1 other,
# 2 usage, 3 gave up, 4 portal unreachable, 5 login refused, 6 the LUN refused).
# Usage: errors_test.sh cli|nbd|fuse   (ISERKIT_BIN = the build's bin directory)
#   cli   iserkit: every mistake, message on stderr and exit status;
#   nbd   iserkit-nbd: start-up mistakes (message, exit status); a read-only LUN and a write past
#         the end sent by an NBD client (nbdsh): the client gets an error, the bridge says why;
#   fuse  iserkit-fuse: discovery refused (exit status), URL mistakes (usage); an unknown target and
#         a wrong secret leave the target's directory failing with a log line saying why; dd to a
#         read-only LUN file and past the end of a LUN file fail with the log saying why.
# Skips (77) where a tool is missing (nbdsh for nbd; /dev/fuse, fusermount3 for fuse).
set -euo pipefail
program=${1:?usage: errors_test.sh cli|nbd|fuse}
BIN=${ISERKIT_BIN:?ISERKIT_BIN must name the build bin directory}
export PATH=/usr/bin:/usr/sbin:/bin:$PATH   # nbdsh needs the system python3 with libnbd's bindings
skip() { echo "SKIP: $*" >&2; exit 77; }
case $program in
  nbd) command -v nbdsh >/dev/null || skip "nbdsh is not installed (libnbd-bin, python3-libnbd)" ;;
  fuse)
    [[ -c /dev/fuse ]] || skip "/dev/fuse is missing"
    command -v fusermount3 >/dev/null || skip "fusermount3 is not installed (package fuse3)"
    [[ -x $BIN/iserkit-fuse ]] || skip "iserkit-fuse is not built" ;;
  cli) ;;
  *) echo "usage: errors_test.sh cli|nbd|fuse" >&2; exit 2 ;;
esac

source "$(dirname "$0")/../../support/scratch.sh"
source "$(dirname "$0")/../../support/target_toml.sh"
scratch_init errors

PLAIN=iqn.2026-11.org.iserkit:plain    # 16 MiB, writable
SECURE=iqn.2026-11.org.iserkit:secure  # CHAP user alice
RO=iqn.2026-11.org.iserkit:ro          # read-only
CAPACITY=$((16 << 20))
umask 077
echo alice-secret-1234 >"$W/alice.secret"
printf 'username = alice\nsecret = wrong-secret-0000\n' >"$W/wrong.chap"
head -c 4096 /dev/urandom >"$W/4k.bin"

{
  toml_target "$PLAIN" mem:16M
  toml_target "$SECURE" mem:16M 'chap_users=[{ user = "alice", secret_file = "alice.secret" }]'
} >"$W/rw.toml"
serve rw --config "$W/rw.toml"
serve ro --lun mem:16M --iqn "$RO" --read-only
H=127.0.0.1:$(cat "$W/rw.port")
R=127.0.0.1:$(cat "$W/ro.port")
REFUSED=127.0.0.1:1   # nothing listens on port 1

# expect NAME STATUS TEXT...: the run NAME exited with STATUS and $W/NAME.err holds every TEXT.
expect() {
  local name=$1 want=$2; shift 2
  local got; got=$(cat "$W/$name.rc")
  sed 's/^/    /' "$W/$name.err"
  [[ $got == "$want" ]] || fail "$name: exit status $got, want $want"
  for text in "$@"; do grep -qF -- "$text" "$W/$name.err" || fail "$name: the message lacks: $text"; done
}
# run NAME COMMAND...: runs COMMAND without CHAP variables; stderr in $W/NAME.err, status in .rc.
run() {
  local name=$1; shift
  local rc=0
  env -u LIBISCSI_CHAP_USERNAME -u LIBISCSI_CHAP_PASSWORD timeout 60 "$@" >"$W/$name.out" 2>"$W/$name.err" || rc=$?
  echo "$rc" >"$W/$name.rc"
}

# The words every program uses for the start-up mistakes (initiator/diagnosis.hpp).
refused_text="connection refused by $REFUSED: is iserkit-target (or the iSCSI target) running there, and is the port right?"
unknown_text="target iqn.2026-11.org.iserkit:typo unknown at portal $H (login rejected: status=0x0203 target not found"
chap_text="CHAP secret refused for user 'alice' by $SECURE at $H"
chap_step="check the user name and the secret (--chap-file, LIBISCSI_CHAP_PASSWORD or the URL)"
nolun_text="LUN 3 does not exist on $PLAIN (ILLEGAL REQUEST 25/00: Logical unit not supported): \`iserkit luns iscsi://$H/$PLAIN\` lists its LUNs"
ro_text="the LUN is read-only: LUN 0 of $RO (DATA PROTECT 27/00: Write protected)"
past_text="write past the end: offset+length > capacity $CAPACITY bytes"

cli() {
  local c=$BIN/iserkit
  echo "== refused connection"
  run refused "$c" readcap "iscsi://$REFUSED/$PLAIN/0"
  expect refused 4 "readcap: $refused_text"
  echo "== unknown target"
  run unknown "$c" readcap "iscsi://$H/iqn.2026-11.org.iserkit:typo/0"
  expect unknown 5 "readcap: $unknown_text" "discovery lists: " "$PLAIN"
  echo "== wrong CHAP secret"
  run chap "$c" --chap-file "$W/wrong.chap" readcap "iscsi://$H/$SECURE/0"
  expect chap 5 "readcap: $chap_text" "$chap_step"
  grep -q wrong-secret "$W/chap.err" && fail "the secret is in the message"
  echo "== LUN out of range"
  run nolun "$c" inquiry "iscsi://$H/$PLAIN/3"
  expect nolun 6 "inquiry: $nolun_text"
  echo "== read-only LUN"
  run ro "$c" write "iscsi://$R/$RO/0" -i "$W/4k.bin"
  expect ro 6 "write: $ro_text (nothing written): write to a writable LUN, or make this one writable on the target"
  echo "== write past the end"
  run past "$c" write "iscsi://$H/$PLAIN/0" --offset $((CAPACITY - 512)) -i "$W/4k.bin"
  expect past 6 "write: $past_text (offset $((CAPACITY - 512)) + length 4096) (nothing written): at most 512 bytes fit from offset $((CAPACITY - 512))"
  run readpast "$c" read "iscsi://$H/$PLAIN/0" --offset $CAPACITY --length 1 -o "$W/x"
  expect readpast 6 "read: read past the end: offset+length > capacity $CAPACITY bytes" "offsets go up to $((CAPACITY - 1))"
  echo "== usage"
  run badurl "$c" readcap "iscsi://$H/$PLAIN/lun0"
  expect badurl 2 "readcap: bad URL: the LUN is not a number 0..16383: want iscsi://[USER@]HOST[:PORT]/TARGET-IQN/LUN"
  run badopt "$c" --no-such-option readcap "iscsi://$H/$PLAIN/0"
  expect badopt 2 "iserkit: bad arguments"
  echo "== and when nothing is wrong"
  run good "$c" readcap "iscsi://$H/$PLAIN/0"
  expect good 0
}

nbd() {
  local n=$BIN/iserkit-nbd
  echo "== start-up mistakes"
  run refused "$n" "iscsi://$REFUSED/$PLAIN/0" -k "$W/n.sock"
  expect refused 4 "iserkit-nbd: $refused_text"
  run unknown "$n" "iscsi://$H/iqn.2026-11.org.iserkit:typo/0" -k "$W/n.sock"
  expect unknown 5 "iserkit-nbd: $unknown_text" "discovery lists: " "$PLAIN"
  run chap "$n" --chap-file "$W/wrong.chap" "iscsi://$H/$SECURE/0" -k "$W/n.sock"
  expect chap 5 "iserkit-nbd: $chap_text" "$chap_step"
  run nolun "$n" "iscsi://$H/$PLAIN/3" -k "$W/n.sock"
  expect nolun 6 "iserkit-nbd: $nolun_text"
  run badurl "$n" "iscsi://$H" -k "$W/n.sock"
  expect badurl 2 "iserkit-nbd: bad URL: it names no target: want iscsi://[USER@]HOST[:PORT]/TARGET-IQN/LUN"
  echo "== a read-only LUN and a write past the end, from an NBD client"
  "$n" "iscsi://$R/$RO/0" -k "$W/ro.sock" >"$W/bridge-ro.out" 2>"$W/bridge-ro.err" &
  local ro_pid=$!; started+=($ro_pid)
  "$n" "iscsi://$H/$PLAIN/0" -k "$W/rw.sock" >"$W/bridge-rw.out" 2>"$W/bridge-rw.err" &
  local rw_pid=$!; started+=($rw_pid)
  for _ in $(seq 100); do [[ -S $W/ro.sock && -S $W/rw.sock ]] && break; sleep 0.05; done
  [[ -S $W/ro.sock && -S $W/rw.sock ]] || fail "the bridges did not start"
  nbdsh -u "nbd+unix:///?socket=$W/ro.sock" -c - <<'PY' || fail "nbdsh: the read-only LUN"
try:
    h.pwrite(b"x" * 4096, 0)
    raise SystemExit("a write to a read-only LUN succeeded")
except nbd.Error as e:
    print("    client:", e)
PY
  nbdsh -u "nbd+unix:///?socket=$W/rw.sock" -c - <<PY || fail "nbdsh: the write past the end"
h.set_strict_mode(0)   # let the request reach the bridge: libnbd would refuse it itself
try:
    h.pwrite(b"x" * 4096, $CAPACITY - 512)
    raise SystemExit("a write past the end succeeded")
except nbd.Error as e:
    print("    client:", e)
    assert "ENOSPC" in str(e), e
PY
  kill -TERM $ro_pid $rw_pid
  local rc=0
  wait $ro_pid || rc=$?
  wait $rw_pid || rc=$?
  [[ $rc == 0 ]] || fail "a bridge exited $rc on SIGTERM"
  cp "$W/bridge-ro.err" "$W/ro.err"; echo 0 >"$W/ro.rc"
  expect ro 0 "iserkit-nbd: $ro_text: serve it with -r/--read-only, or make it writable on the target: offset=0 length=4096"
  cp "$W/bridge-rw.err" "$W/past.err"; echo 0 >"$W/past.rc"
  expect past 0 "$past_text (offset $((CAPACITY - 512)) + length 4096): at most 512 bytes fit from offset $((CAPACITY - 512)): refused with NBD_ENOSPC"
}

# mount_at NAME ARGS...: iserkit-fuse ARGS on $W/NAME in the foreground (a background job; PID in
# fuse_pid, log in $W/NAME.err), back once mounted.
mount_at() {
  local name=$1; shift
  mkdir -p "$W/$name"
  env -u LIBISCSI_CHAP_USERNAME -u LIBISCSI_CHAP_PASSWORD "$BIN/iserkit-fuse" "$@" "$W/$name" --foreground \
    >"$W/$name.out" 2>"$W/$name.err" &
  fuse_pid=$!; started+=($fuse_pid); mounted+=("$W/$name")
  for _ in $(seq 100); do mountpoint -q "$W/$name" && return 0; kill -0 $fuse_pid 2>/dev/null || break; sleep 0.1; done
  fail "iserkit-fuse did not mount $W/$name"
}
# unmount_ok NAME: SIGTERM; a clean exit (0) is expected; the status goes to $W/NAME.rc.
unmount_ok() {
  kill -TERM "$fuse_pid"
  local rc=0
  wait "$fuse_pid" || rc=$?
  echo "$rc" >"$W/$1.rc"
}

fuse() {
  local f=$BIN/iserkit-fuse
  mkdir -p "$W/never"
  echo "== refused connection (discovery before mounting)"
  run refused "$f" "iscsi://$REFUSED" "$W/never" --foreground
  expect refused 4 "iserkit-fuse: discovery: $refused_text"
  echo "== URL mistakes"
  run lun "$f" "iscsi://$H/$PLAIN/3" "$W/never" --foreground
  expect lun 2 "iserkit-fuse: the URL names LUN 3: give the portal or the target (iscsi://$H/$PLAIN): each of its LUNs becomes a file lun<N>"
  run badurl "$f" "iscsi://$H:0" "$W/never" --foreground
  expect badurl 2 "iserkit-fuse: bad URL: the port is not a number 1..65535: want iscsi://[USER@]HOST[:PORT][/TARGET-IQN]"
  mountpoint -q "$W/never" && fail "mounted although refused"
  echo "== unknown target: its directory fails, the log says why"
  mount_at unknown "iscsi://$H/iqn.2026-11.org.iserkit:typo"
  ls "$W/unknown/iqn.2026-11.org.iserkit:typo/" >/dev/null 2>&1 && fail "an unknown target listed its LUNs"
  unmount_ok unknown
  expect unknown 0 "fuse: login: $unknown_text" "discovery lists: " "$PLAIN"
  echo "== wrong CHAP secret"
  mount_at chap --chap-file "$W/wrong.chap" "iscsi://$H/$SECURE"
  ls "$W/chap/$SECURE/" >/dev/null 2>&1 && fail "the target listed its LUNs with a wrong secret"
  unmount_ok chap
  expect chap 0 "fuse: login: $chap_text" "$chap_step"
  echo "== a read-only LUN"
  mount_at ro "iscsi://$R"
  dd if="$W/4k.bin" of="$W/ro/$RO/lun0" bs=4096 count=1 conv=notrunc 2>"$W/ro.dd" && fail "dd to a read-only LUN succeeded"
  sed 's/^/    dd: /' "$W/ro.dd"
  unmount_ok ro
  expect ro 0 "fuse: $ro_text: mount with -r/--read-only, or make it writable on the target: file=lun0"
  echo "== a write past the end"
  mount_at past "iscsi://$H"
  dd if="$W/4k.bin" of="$W/past/$PLAIN/lun0" bs=4096 count=1 seek=$((CAPACITY / 4096)) conv=notrunc 2>"$W/past.dd" &&
    fail "dd past the end succeeded"
  sed 's/^/    dd: /' "$W/past.dd"
  grep -q "No space left on device" "$W/past.dd" || fail "dd past the end: not ENOSPC"
  unmount_ok past
  expect past 0 "fuse: $past_text (offset $CAPACITY + length 4096): offsets go up to $((CAPACITY - 1)): file=lun0"
}

"$program"
echo "PASS: $program says what happened and what to do"
