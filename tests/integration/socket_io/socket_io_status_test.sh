#!/bin/bash
# iserkit-target --socket-io: the status socket reports what was asked, what TCP sends use and the
# kernel's io_uring features; socket_io in the --config file; a bad value is refused clearly; data
# written and read back through a target with --socket-io uring is the same.
source "$(dirname "$0")/../status/lib.sh" socket-io cmp
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
js() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

target_refuses socket-io kqueue 'socket-io.*auto, uring or epoll' 'socket_io = "kqueue"' 'socket_io must be'

# run_target NAME ARGS...: starts a target with a status socket; sets PORTAL and URL.
run_target() {
  local name=$1; shift
  "$B/iserkit-target" --listen 127.0.0.1:0 --lun mem:16M --status-socket "$W/$name.sock" "$@" >"$W/$name.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do grep -q 'listening on' "$W/$name.log" && [ -S "$W/$name.sock" ] && break; sleep 0.1; done
  PORTAL=$(grep -o 'listening on [0-9.]*:[0-9]*' "$W/$name.log" | head -1 | cut -d' ' -f3)
  [ -n "$PORTAL" ] || fail "target $name did not start"
  URL="iscsi://$PORTAL/$("$B/iserkit" discover "iscsi://$PORTAL" | head -1)/0"
  "$B/iserkit" status "$W/$name.sock" --json >"$W/$name.json" || fail "iserkit status failed"
}

# Every send on the ring (not only those joining a pending submit: a mem: LUN has none), so that
# the data below really leaves through it.
ISERKIT_URING_SEND_ALWAYS=1 run_target ring --socket-io uring
[ "$(js "$W/ring.json" 'd["socket_io"]["requested"]')" = uring ] || fail "requested mode not reported"
ring_ok=$(js "$W/ring.json" 'd["socket_io"]["kernel"]["io_uring"] and d["socket_io"]["kernel"]["sendmsg"]')
if [ "$ring_ok" = True ]; then
  [ "$(js "$W/ring.json" 'd["socket_io"]["sends"]')" = uring ] || fail "uring asked and possible, but sends are not on the ring"
else
  [ "$(js "$W/ring.json" 'd["socket_io"]["sends"]')" = epoll ] || fail "no io_uring sends here, but not the epoll fallback"
fi
for k in send_zc recv_multishot buf_ring fast_poll; do
  [ -n "$(js "$W/ring.json" "d['socket_io']['kernel']['$k']")" ] || fail "kernel feature $k not reported"
done
# Data through the ring's sends: 4 MiB out and back, compared.
head -c $((4 << 20)) /dev/urandom >"$W/data"
"$B/iserkit" write "$URL" --offset 0 -i "$W/data" >/dev/null 2>"$W/write.err" || fail "write through the ring failed"
"$B/iserkit" read "$URL" --length $((4 << 20)) -o "$W/back" 2>"$W/read.err" || fail "read through the ring failed"
cmp -s "$W/data" "$W/back" || fail "data read back through the ring's sends differs"

printf 'socket_io = "epoll"\n' >"$W/epoll.toml"
run_target epoll --config "$W/epoll.toml"
[ "$(js "$W/epoll.json" 'd["socket_io"]["requested"]')" = epoll ] || fail "socket_io from the config file not reported"
[ "$(js "$W/epoll.json" 'd["socket_io"]["sends"]')" = epoll ] || fail "epoll asked, sends not on epoll"
echo PASS
