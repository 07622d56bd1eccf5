# Socket activation of iserkit-nbd without systemd as PID 1: systemd-socket-activate holds the
# listening Unix socket, as iserkit-nbd@.socket does, and starts `iserkit-nbd --config VOLUME.toml`
# (the way iserkit-nbd@.service does) with it as LISTEN_FDS; nbdinfo and nbdcopy then attach
# through that socket and the data round-trips to a real iserkit-target. A volume file with an
# unknown key or a wrong type is refused with a clear error, and the command line wins over the file.
# With --fork the child serves the passed socket.
source "$(dirname "$0")/../target/lib.sh"
require systemd-socket-activate nbdinfo nbdcopy
NBD_PID=""
stop_nbd() {
  if [[ -n $NBD_PID ]] && kill -0 "$NBD_PID" 2>/dev/null; then
    kill -TERM "$NBD_PID"
    wait "$NBD_PID" || true
  fi
  NBD_PID=""
}
trap 'stop_nbd; cleanup' EXIT

start_target --lun mem:16M
SOCK=$WORK/vol1.sock
cat >"$WORK/vol1.toml" <<TOML
# A volume file as /etc/iserkit/volumes/vol1.toml holds it: keys are iserkit-nbd's long options.
url = "$URL/0"
export-name = "vol1"
replacement_timeout = 5
log-level = "info"
TOML

systemd-socket-activate -l "$SOCK" "$BIN/iserkit-nbd" --config "$WORK/vol1.toml" \
  >"$WORK/nbd.out" 2>"$WORK/nbd.err" &
NBD_PID=$!
for _ in $(seq 100); do [[ -S $SOCK ]] && break; sleep 0.05; done
[[ -S $SOCK ]] || fail "systemd-socket-activate did not create $SOCK"
# The first connection starts iserkit-nbd (which logs in first, then serves the passed socket).
timeout 30 nbdinfo --json "nbd+unix:///vol1?socket=$SOCK" >"$WORK/info" || { cat "$WORK/nbd.err" >&2; fail "nbdinfo"; }
grep -q '"export-size": 16777216' "$WORK/info" || { cat "$WORK/info" >&2; fail "export size"; }
head -c 1048576 /dev/urandom >"$WORK/in"
timeout 30 nbdcopy "$WORK/in" "nbd+unix:///vol1?socket=$SOCK" || fail "nbdcopy in"
timeout 30 nbdcopy "nbd+unix:///vol1?socket=$SOCK" "$WORK/out" || fail "nbdcopy out"
cmp <(head -c 1048576 "$WORK/out") "$WORK/in" || fail "data read back through the activated socket differs"
grep -q "logged in over TCP" "$WORK/nbd.err" "$WORK/nbd.out" || { cat "$WORK/nbd.err" "$WORK/nbd.out" >&2; fail "log-level from the file not applied"; }
stop_nbd
echo "ok: socket activation: nbdinfo and nbdcopy through the passed socket"

# --fork under socket activation: the passed socket is taken before the fork (LISTEN_PID names the
# process systemd started, not the child that serves), the parent exits 0 once the child serves,
# the child answers on the passed socket and stops cleanly on SIGTERM.
FORKED=""
stop_forked() { [[ -n $FORKED ]] && kill -TERM "$FORKED" 2>/dev/null || true; }
trap 'stop_forked; stop_nbd; cleanup' EXIT
systemd-socket-activate -l "$SOCK.fork" "$BIN/iserkit-nbd" --config "$WORK/vol1.toml" --fork \
  --pid-file "$WORK/fork.pid" >"$WORK/fork.out" 2>"$WORK/fork.err" &
NBD_PID=$!
for _ in $(seq 100); do [[ -S $SOCK.fork ]] && break; sleep 0.05; done
[[ -S $SOCK.fork ]] || fail "systemd-socket-activate did not create $SOCK.fork"
timeout 30 nbdcopy "$WORK/in" "nbd+unix:///vol1?socket=$SOCK.fork" || { cat "$WORK/fork.err" >&2; fail "--fork: nbdcopy in"; }
rc=0; wait "$NBD_PID" || rc=$?
NBD_PID=""
[[ $rc -eq 0 ]] || { cat "$WORK/fork.err" >&2; fail "--fork: the parent exited with $rc"; }
FORKED=$(cat "$WORK/fork.pid" 2>/dev/null || true)
[[ -n $FORKED ]] && kill -0 "$FORKED" 2>/dev/null || fail "--fork: no serving child named by the pid file"
timeout 30 nbdcopy "nbd+unix:///vol1?socket=$SOCK.fork" "$WORK/out.fork" || fail "--fork: nbdcopy out"
cmp <(head -c 1048576 "$WORK/out.fork") "$WORK/in" || fail "--fork: data read back through the passed socket differs"
kill -TERM "$FORKED"
for _ in $(seq 100); do kill -0 "$FORKED" 2>/dev/null || break; sleep 0.1; done
kill -0 "$FORKED" 2>/dev/null && fail "--fork: the child did not stop on SIGTERM"
FORKED=""
# Not our child, so no exit status to wait for: its last words say it went through main's end.
grep -q "copied payload bytes: 0" "$WORK/fork.err" || { cat "$WORK/fork.err" >&2; fail "--fork: the child did not exit cleanly"; }
echo "ok: --fork with socket activation: the child serves the passed socket"

# The command line wins: -x on it replaces the file's export-name; and over a file that still has
# the former key, name (deprecated spelling of export-name).
sed 's/^export-name = /name = /' "$WORK/vol1.toml" >"$WORK/old.toml"
for file in vol1 old; do
  systemd-socket-activate -l "$SOCK.2" "$BIN/iserkit-nbd" --config "$WORK/$file.toml" -x other \
    >/dev/null 2>"$WORK/nbd2.err" &
  NBD_PID=$!
  for _ in $(seq 100); do [[ -S $SOCK.2 ]] && break; sleep 0.05; done
  timeout 30 nbdinfo --list "nbd+unix:///?socket=$SOCK.2" >"$WORK/list" 2>&1 || { cat "$WORK/list" >&2; fail "nbdinfo --list"; }
  grep -q 'export="other"' "$WORK/list" || { cat "$WORK/list" >&2; fail "$file.toml: -x on the command line did not win"; }
  stop_nbd
  rm -f "$SOCK.2"
done
echo "ok: the command line wins over the file"

# Bad files: exit status 2 and the file, line and key named.
bad() {
  local want=$1
  local rc=0
  "$BIN/iserkit-nbd" --config "$WORK/bad.toml" >"$WORK/bad.out" 2>&1 || rc=$?
  [[ $rc -eq 2 ]] || { cat "$WORK/bad.out" >&2; fail "bad file: status $rc, want 2"; }
  grep -q -- "$want" "$WORK/bad.out" || { cat "$WORK/bad.out" >&2; fail "bad file: no '$want' in the error"; }
}
printf 'url = "%s/0"\nsokcet = "/tmp/x"\n' "$URL" >"$WORK/bad.toml"
bad "bad.toml:2:1: unknown key sokcet"
printf 'url = "%s/0"\nread-only = "yes"\n' "$URL" >"$WORK/bad.toml"
bad "read-only: expected true or false"
printf 'url = "%s/0"\n[limits]\nx = 1\n' "$URL" >"$WORK/bad.toml"
bad "unknown key limits"
printf 'url = "%s/0\n' "$URL" >"$WORK/bad.toml"
bad "bad.toml:1:"
rc=0; "$BIN/iserkit-nbd" --config "$WORK/missing.toml" >"$WORK/bad.out" 2>&1 || rc=$?
[[ $rc -eq 2 ]] && grep -q "cannot read" "$WORK/bad.out" || fail "a missing file: status $rc: $(cat "$WORK/bad.out")"
echo "ok: bad volume files refused with the reason"

# A passed descriptor that is not a listening socket (here a file) is refused with the reason,
# not served. exec keeps the shell's pid, so LISTEN_PID names iserkit-nbd.
rc=0
bash -c 'export LISTEN_PID=$$ LISTEN_FDS=1; exec 3<"$1"; exec "$2" --config "$3"' _ "$WORK/vol1.toml" \
  "$BIN/iserkit-nbd" "$WORK/vol1.toml" >"$WORK/notsock.out" 2>&1 || rc=$?
[[ $rc -eq 1 ]] && grep -q "socket activation: .*listening stream sockets" "$WORK/notsock.out" ||
  fail "a passed file: status $rc: $(cat "$WORK/notsock.out")"
echo "ok: a passed descriptor that is no listening socket is refused"
stop_target
echo PASS
