#!/usr/bin/env bash
# A daemonized iserkit-fuse (no -f) logs to syslog (issue 26 item 6). The test makes a private mount
# namespace with its own /dev (a tmpfs with /dev/fuse, null, zero and urandom bound from the real
# one) so a small syslog reader can own /dev/log there without touching the host's logging; it
# mounts without -f, uses the mount, unmounts, and checks that the daemon's lines arrived with its
# ident, PID and the daemon facility, at the right priorities, and that none of them went to the
# terminal. Needs root (unshare -m); skips (77) otherwise.
source "$(dirname "$0")/lib.sh"
[[ $(id -u) == 0 ]] || skip "needs root: a private mount namespace with its own /dev/log"
command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"
unshare -m true 2>/dev/null || skip "cannot create a mount namespace here"

base=iqn.2026-11.org.iserkit
truncate -s 8M "$tmp/a.img"
start_target t --iqn $base:t --lun "$tmp/a.img"
url=iscsi://127.0.0.1:${target_port[t]}

cat >"$tmp/inner.sh" <<'SH'
# Runs inside the new mount namespace: its own /dev, a syslog reader on /dev/log, the daemon.
set -euo pipefail
tmp=$1 BIN=$2 url=$3 iqn=$4
mount --make-rprivate /
mkdir -p "$tmp/realdev" "$tmp/mnt"
mount --bind /dev "$tmp/realdev"
mount -t tmpfs -o mode=755 none /dev
for d in fuse null zero urandom random; do
  touch "/dev/$d"
  mount --bind "$tmp/realdev/$d" "/dev/$d"
done
python3 - "$tmp/syslog.txt" <<'PY' &
# A syslog daemon's receiving end (RFC 3164 datagrams on /dev/log): each message on one line.
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("/dev/log")
s.settimeout(60)
with open(sys.argv[1], "ab", buffering=0) as out:
    while True:
        data = s.recv(65536)
        out.write(data.rstrip(b"\n") + b"\n")
        if b"fuse: unmounted" in data:
            break
PY
reader=$!
for _ in $(seq 100); do [[ -S /dev/log ]] && break; sleep 0.1; done
[[ -S /dev/log ]] || { echo "the syslog reader did not start" >&2; exit 1; }
# Without -f: the parent returns once mounted, the daemon goes on with stdio on /dev/null.
"$BIN/iserkit-fuse" "$url" "$tmp/mnt" --log-level info >"$tmp/terminal.txt" 2>&1
ls "$tmp/mnt/$iqn" >"$tmp/ls.txt"
cmp -n 4096 "$tmp/mnt/$iqn/lun0" /dev/zero
fusermount3 -u "$tmp/mnt"
wait $reader
SH
# Kill the daemon if the namespace script failed before unmounting (its PID is in its syslog lines).
rc=0
unshare -m bash "$tmp/inner.sh" "$tmp" "$BIN" "$url" "$base:t" || rc=$?
daemon=$(sed -n 's/.*iserkit-fuse\[\([0-9]*\)\]: .*/\1/p' "$tmp/syslog.txt" 2>/dev/null | head -1)
if ((rc != 0)); then
  [[ -n $daemon ]] && kill "$daemon" 2>/dev/null
  cat "$tmp/syslog.txt" "$tmp/terminal.txt" >&2 2>/dev/null
  fail "the mount namespace run failed (status $rc)"
fi
echo "--- syslog"
cat "$tmp/syslog.txt"
[[ -n $daemon ]] || fail "no line from iserkit-fuse[PID] reached syslog"
# <30> = facility daemon (3) × 8 + priority info (6).
grep -q "^<30>.* iserkit-fuse\[$daemon\]: fuse: mounted: url=$url mountpoint=$tmp/mnt targets=1\$" "$tmp/syslog.txt" ||
  fail "no 'mounted' line at daemon.info"
grep -q "iserkit-fuse\[$daemon\]: fuse: loop ended" "$tmp/syslog.txt" || fail "no 'loop ended' line"
grep -q "iserkit-fuse\[$daemon\]: fuse: unmounted: mountpoint=$tmp/mnt" "$tmp/syslog.txt" || fail "no 'unmounted' line"
! grep -q "fuse: mounted\|loop ended" "$tmp/terminal.txt" || fail "the daemon's lines went to the terminal: $(cat "$tmp/terminal.txt")"
grep -q "lun0" "$tmp/ls.txt" || fail "the mount did not list lun0"
echo "PASS"
