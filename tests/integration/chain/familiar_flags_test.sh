#!/usr/bin/env bash
# The flags people already type (qemu-nbd's and nbdkit's spellings) and the one value grammar, with
# the real programs against iserkit-target (memory LUN):
#  - iserkit-nbd -p/-b/-x/-r/-t/-e (nbdinfo shows the export read-only under its name), -b alone
#    listens on 10809 (checked only when that port is free), -k SOCKET, --print-uri (with --fork and
#    --pid-file: the URI on stdout before the parent returns), --run exits with the command's
#    status, --exit-with-parent (the bridge goes when the shell that started it is killed), -e 1
#    (a second client is refused while one is connected), --name still works (deprecated, warns),
#    -s/-n/-l (qemu-nbd's --snapshot/--nocache/--load-snapshot) refused; no address at all refused
#    before the login (no qemu-nbd-style 0.0.0.0:10809 default);
#  - typos refused with the accepted values listed: --log-level verbos, --digest/--header-digest
#    foo, --nop-timeout 5x, --offset 1Q; case-insensitive words accepted (--digest CRC32C);
#  - iserkit read --offset 1M --length 4K (sizes), --command-timeout 30s;
#  - iserkit-target --iqn "my target" and a CHAP user with a control character refused.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need nbdinfo cmp

# refused CMD... : CMD must fail (not crash) and say what it accepts ($want, a fixed string).
refused() {
  local rc=0
  "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [[ $rc -ne 0 && $rc -lt 128 ]] || fail "$* exited $rc: $(cat "$tmp/err")"
  grep -qF -- "$want" "$tmp/err" || fail "$*: the error does not list '$want': $(cat "$tmp/err")"
  echo "  refused: $(head -1 "$tmp/err")"
}

iqn=iqn.2026-11.org.iserkit:flags
start_target mem:16M
nbd() { "$BIN/iserkit-nbd" "$url" "$@"; }  # in the foreground only ($! of `nbd &` would be a subshell)

echo "== iserkit-nbd -p 0 -b 127.0.0.1 -x vol -r -t -e 4: nbdinfo nbd://127.0.0.1:PORT/vol"
"$BIN/iserkit-nbd" "$url" -p 0 -b 127.0.0.1 -x vol -r -t -e 4 --port-file "$tmp/nbd.port" >>"$tmp/nbd.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [[ -s $tmp/nbd.port ]] && break; sleep 0.05; done
[[ -s $tmp/nbd.port ]] || fail "-p 0 -b 127.0.0.1: no port file"
port=$(cat "$tmp/nbd.port")
json=$(nbdinfo --json "nbd://127.0.0.1:$port/vol") || fail "nbdinfo nbd://127.0.0.1:$port/vol"
grep -q '"is_read_only": true' <<<"$json" || fail "-r: not read-only: $json"
grep -q '"export-name": "vol"' <<<"$json" || fail "-x vol: $json"
grep -q '"export-size": 16777216' <<<"$json" || fail "size: $json"
kill -TERM "${pids[-1]}"; wait "${pids[-1]}" || fail "-p server exited with $? on SIGTERM"
unset 'pids[-1]'

echo "== -b without -p listens on 10809 (qemu-nbd's default port)"
if (exec 3<>/dev/tcp/127.0.0.1/10809) 2>/dev/null; then
  echo "  port 10809 is in use here: not checked"
else
  out=$(nbd -b 127.0.0.1 --print-uri --run 'echo "port=$port"' 2>>"$tmp/nbd.log") || fail "-b alone: $?"
  grep -qx "nbd://127.0.0.1:10809/" <<<"$out" || fail "-b alone: --print-uri printed: $out"
  grep -qx "port=10809" <<<"$out" || fail "-b alone: \$port: $out"
fi

echo "== -k SOCKET --print-uri --fork --pid-file"
uri=$(timeout 30 "$BIN/iserkit-nbd" "$url" -k "$tmp/k.sock" --print-uri --fork --pid-file "$tmp/pid" 2>>"$tmp/nbd.log") \
  || fail "--fork parent: $?"
pids+=($(cat "$tmp/pid"))
[[ $uri == "nbd+unix:///?socket=$tmp/k.sock" ]] || fail "--print-uri printed '$uri'"
[[ $(nbdinfo --size "$uri") == $((16 << 20)) ]] || fail "nbdinfo on the printed URI"

echo "== -e 1: a second client is refused while one is connected"
"$BIN/iserkit-nbd" "$url" -k "$tmp/e1.sock" -e 1 >>"$tmp/nbd.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [[ -S $tmp/e1.sock ]] && break; sleep 0.05; done
[[ -S $tmp/e1.sock ]] || fail "-e 1: no socket"
python3 - "$tmp/e1.sock" <<'PY' || fail "-e 1: a second client was served while the first was connected"
import socket, subprocess, sys, time
first = socket.socket(socket.AF_UNIX); first.connect(sys.argv[1]); first.recv(18)  # NBD greeting: one client held
time.sleep(0.2)
second = subprocess.run(["nbdinfo", "--size", "nbd+unix:///?socket=" + sys.argv[1]], capture_output=True)
first.close()
time.sleep(0.3)
third = subprocess.run(["nbdinfo", "--size", "nbd+unix:///?socket=" + sys.argv[1]], capture_output=True)
sys.exit(0 if second.returncode != 0 and third.returncode == 0 else 1)
PY

echo "== --run exits with the command's status"
rc=0; nbd --run 'nbdinfo --size "$uri" >/dev/null || exit 1; exit 5' >>"$tmp/nbd.log" 2>&1 || rc=$?
[[ $rc -eq 5 ]] || fail "--run ... exit 5 gave $rc"
nbd --run 'nbdinfo "$uri" >/dev/null' >>"$tmp/nbd.log" 2>&1 || fail "--run nbdinfo \$uri gave $?"

echo "== --exit-with-parent: the bridge exits when the shell that started it is killed"
bash -c '"$@" & echo $! >"'"$tmp"'/ewp.pid"; wait' sh "$BIN/iserkit-nbd" "$url" -k "$tmp/ewp.sock" --exit-with-parent \
  >>"$tmp/nbd.log" 2>&1 &
shell=$!
for _ in $(seq 100); do [[ -S $tmp/ewp.sock ]] && break; sleep 0.05; done
[[ -S $tmp/ewp.sock ]] || fail "--exit-with-parent: no socket"
bridge=$(cat "$tmp/ewp.pid"); pids+=($bridge)
kill -KILL "$shell"; wait "$shell" 2>/dev/null || true
for _ in $(seq 100); do kill -0 "$bridge" 2>/dev/null || break; sleep 0.05; done
kill -0 "$bridge" 2>/dev/null && fail "--exit-with-parent: the bridge outlived its parent"
want="exclude each other" refused nbd -k "$tmp/x.sock" --exit-with-parent --fork

echo "== --name (deprecated) still works, with a warning"
out=$(nbd --name old --run 'nbdinfo --json "$uri"' 2>"$tmp/err") || fail "--name: $?"
grep -q '"export-name": "old"' <<<"$out" || fail "--name old: $out"
grep -q "deprecated" "$tmp/err" || fail "--name: no deprecation warning"

echo "== qemu-nbd's -s, -n, -l mean something else: refused"
for flag in -s -n -l; do
  want="" refused nbd $flag "$tmp/z"
done

echo "== no address at all: refused before the login (no 0.0.0.0:10809 by default)"
want="nothing to listen on: give -k/--socket PATH, -p/--port PORT" refused nbd

echo "== typos: refused with the accepted values listed; any case accepted"
want="want one of trace, debug, info, warn, error, off" refused nbd -k "$tmp/t.sock" --log-level verbos
want="want one of none, crc32c" refused nbd -k "$tmp/t.sock" --digest foo
want="500ms, 1.5s, 2m, 1h" refused nbd -k "$tmp/t.sock" --nop-timeout 5x
want="want one of failover, round-robin" refused nbd -k "$tmp/t.sock" --multipath rr
want="want a TCP port 0..65535" refused nbd -p 70000
want="want one of none, crc32c" refused "$BIN/iserkit" readcap "$url" --header-digest foo
want="want one of trace, debug, info, warn, error, off" refused "$BIN/iserkit" readcap "$url" --log-level verbos
want="4K, 1M, 2G" refused "$BIN/iserkit" read "$url" --offset 1Q
want="want one of trace, debug, info, warn, error, off" refused "$BIN/iserkit-target" --lun mem:1M --log-level verbos
want="500ms, 1.5s, 2m, 1h" refused "$BIN/iserkit-target" --lun mem:1M --login-timeout 5x
want="4K, 1M, 2G" refused "$BIN/iserkit-target" --lun mem:1M --connection-payload-budget 1Q
want="want one of none, crc32c" refused "$BIN/iserkit-fuse" --digest foo "${url%/*}" "$tmp"
want="500ms, 1.5s, 2m, 1h" refused "$BIN/iserkit-fuse" --timeout 5x "${url%/*}" "$tmp"
nbd --digest CRC32C --log-level WARN --nop-interval 500ms --replacement-timeout 2m \
  --run 'nbdinfo --size "$uri" >/dev/null' >>"$tmp/nbd.log" 2>&1 || fail "--digest CRC32C (any case) gave $?"

echo "== iserkit: sizes (--offset 1M --length 4K) and durations (--command-timeout 30s)"
head -c 4096 /dev/urandom >"$tmp/block"
"$BIN/iserkit" write "$url" --offset 1M -i "$tmp/block" >>"$tmp/nbd.log" 2>&1 || fail "iserkit write --offset 1M"
"$BIN/iserkit" read "$url" --offset 1M --length 4K --command-timeout 30s --header-digest CRC32C -o "$tmp/back" \
  >>"$tmp/nbd.log" 2>&1 || fail "iserkit read --offset 1M --length 4K"
cmp "$tmp/block" "$tmp/back" || fail "--offset 1M: read back something else"
"$BIN/iserkit" readcap "$url" --timeout 5000 >/dev/null 2>"$tmp/err" || fail "--timeout 5000 (deprecated)"
grep -q "deprecated" "$tmp/err" || fail "--timeout 5000: no deprecation warning"

echo "== names: iserkit-target --iqn \"my target\", --allow-initiator, CHAP user names; --initiator-name"
want="no iqn., eui. or naa. prefix" refused "$BIN/iserkit-target" --lun mem:1M --iqn "my target"
want="iqn.YYYY-MM.reversed.domain" refused "$BIN/iserkit-target" --lun mem:1M --allow-initiator "host one"
want="without control characters" refused env ISERKIT_TARGET_CHAP_SECRET=0123456789ab \
  "$BIN/iserkit-target" --lun mem:1M --chap-user "$(printf 'al\tice')"
want="iqn.YYYY-MM.reversed.domain" refused nbd -k "$tmp/t.sock" --initiator-name "my host"
want="iqn.YYYY-MM.reversed.domain" refused "$BIN/iserkit" readcap "$url" --initiator-name "my host"
want="iqn.YYYY-MM.reversed.domain" refused "$BIN/iserkit-fuse" --initiator-name "my host" "${url%/*}" "$tmp"
echo PASS
