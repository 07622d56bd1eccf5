#!/usr/bin/env bash
# iserkit-nbd process modes against iserkit-target (memory LUN):
#  - --run CMD (nbdkit's captive mode): CMD sees $uri, $nbd, $unixsocket (a private socket when no
#    --socket/--listen is given; removed afterwards), $port with --listen; nbdinfo and nbdcopy work
#    through $uri; the bridge exits with CMD's status (0, 7, 128 + signal);
#  - --fork / --pid-file (qemu-nbd's): the parent returns 0 once the socket is ready, the pid file
#    names the live server, which serves nbdinfo and stops on SIGTERM; a bridge that cannot start
#    makes the parent exit 1 (and writes no pid file).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need nbdinfo nbdcopy cmp

iqn=iqn.2026-11.org.iserkit:run
start_target mem:16M
nbd() { "$BIN/iserkit-nbd" "$url" "$@"; }

echo "== --run on a private socket"
export TMPDIR=$tmp
nbd --run 'echo "$uri|$nbd|$unixsocket|$port" >"'"$tmp"'/vars"; test -S "$unixsocket" &&
  nbdinfo --size "$uri" >"'"$tmp"'/size" && head -c 1048576 /dev/urandom >"'"$tmp"'/in" &&
  nbdcopy "'"$tmp"'/in" "$nbd" && nbdcopy "$uri" "'"$tmp"'/out"' >>"$tmp/nbd.log" 2>&1 \
  || fail "--run exited with $?"
IFS='|' read -r uri nbdvar sock port <"$tmp/vars"
[[ $uri == "nbd+unix:///?socket=$sock" && $nbdvar == "$uri" && $sock == "$tmp"/iserkit-nbd.*/nbd.sock && -z $port ]] \
  || fail "variables: uri=$uri nbd=$nbdvar unixsocket=$sock port=$port"
[[ $(cat "$tmp/size") == $((16 << 20)) ]] || fail "nbdinfo --size through \$uri: $(cat "$tmp/size")"
head -c 1048576 "$tmp/out" | cmp - "$tmp/in" || fail "nbdcopy through \$uri/\$nbd: data differs"
[[ ! -e $(dirname "$sock") ]] || fail "the private socket directory was left behind"
echo "  $uri"

echo "== --run exit status"
rc=0; nbd --run 'exit 7' >>"$tmp/nbd.log" 2>&1 || rc=$?
[[ $rc -eq 7 ]] || fail "--run 'exit 7' gave $rc"
rc=0; nbd --run 'kill -KILL $$' >>"$tmp/nbd.log" 2>&1 || rc=$?
[[ $rc -eq $((128 + 9)) ]] || fail "--run killed by SIGKILL gave $rc"

echo "== --run with --listen (TCP) and --name"
out=$(nbd --listen 127.0.0.1:0 --name disk --run 'echo "$uri $port $exportname"; nbdinfo --size "$uri"' 2>>"$tmp/nbd.log") \
  || fail "--run with --listen: $?"
read -r uri port name size <<<"$(grep -v '^serving' <<<"$out" | tr '\n' ' ')"
[[ $uri == "nbd://127.0.0.1:$port/disk" && $name == disk && $size == $((16 << 20)) ]] || fail "TCP --run: $out"
echo "  $uri"

echo "== --fork --pid-file"
nbd --socket "$tmp/fork.sock" --fork --pid-file "$tmp/pid" >>"$tmp/nbd.log" 2>&1 || fail "--fork parent exited with $?"
# The parent returned only once the socket was ready: no waiting loop here.
[[ -S $tmp/fork.sock ]] || fail "the socket is not there when the --fork parent returns"
pid=$(cat "$tmp/pid"); pids+=($pid)
[[ $(cat /proc/$pid/comm) == iserkit-nbd ]] || fail "the pid file names $(cat /proc/$pid/comm 2>/dev/null)"
[[ $(ps -o sid= -p $pid | tr -d ' ') == "$pid" ]] || fail "the server did not start its own session"
[[ $(nbdinfo --size "nbd+unix:///?socket=$tmp/fork.sock") == $((16 << 20)) ]] || fail "nbdinfo on the forked server"
kill -TERM "$pid"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$pid" 2>/dev/null && fail "the forked server did not stop on SIGTERM"

echo "== --fork with a target that is not there"
rc=0; "$BIN/iserkit-nbd" "iscsi://127.0.0.1:1/$iqn/0" --socket "$tmp/bad.sock" --fork --pid-file "$tmp/bad.pid" \
  >>"$tmp/nbd.log" 2>&1 || rc=$?
[[ $rc -eq 1 && ! -e $tmp/bad.pid ]] || fail "--fork with no target: exit $rc, pid file $(ls "$tmp/bad.pid" 2>&1)"
echo PASS
