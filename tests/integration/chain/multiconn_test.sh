#!/usr/bin/env bash
# iserkit-nbd --threads 2 (issue 23 item 5): two event loops, each with its own iSCSI session, NBD
# connections spread over them, NBD_FLAG_CAN_MULTI_CONN kept. Against a real iserkit-target
# (--threads 2, file LUN, --status-socket: per-session ISIDs and command counts by kind):
#  - the bridge logs in two sessions with distinct ISIDs at start-up;
#  - nbdcopy --connections=2 copies 64 MiB of random data in and out: same SHA-256, the target's
#    backing file holds it, and each nbdcopy connection went to its own loop;
#  - fio's nbd engine with numjobs=2 (one connection per job) writes and verifies (crc32c) two
#    32 MiB regions: both loops served NBD requests (--stats-file loop.K.requests, --status-socket
#    "loops") and both sessions carried writes and reads (the target's per-session counts);
#  - cross-connection FLUSH (proto.md NBD_FLAG_CAN_MULTI_CONN): libnbd opens connections A and B
#    (one per loop), writes on A; the target sees the WRITE on A's session only; then FLUSH on B:
#    the target sees exactly one more non-read/write command (the SYNCHRONIZE CACHE) on B's
#    session and none on A's; B and the backing file read the data back;
#  - the `threads` key of --config works; --threads 2 with two URLs (multipath) is refused;
#  - SIGTERM: the bridge exits 0 and both sessions are gone from the target (logged out).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need nbdcopy nbdsh sha256sum python3
export PATH=/usr/bin:$PATH   # nbdsh needs the system python3 with libnbd's bindings

# Every log's tail (this test runs several bridges).
fail() {
  echo "FAIL: $*"
  for f in "$tmp"/*.log; do [[ -s $f ]] && { echo "--- ${f##*/}"; tail -n 40 "$f"; }; done
  exit 1
} >&2

size=$((64 << 20))
truncate -s $size "$tmp/lun.img"
iqn=iqn.2026-11.org.iserkit:multiconn
"$TARGET_BIN" --iqn $iqn --lun "$tmp/lun.img" --threads 2 --listen 127.0.0.1:0 --port-file "$tmp/port" \
  --status-socket "$tmp/target.status" >"$tmp/target.log" 2>&1 &
target_pid=$!; pids+=($target_pid)
for _ in $(seq 100); do [[ -s $tmp/port && -S $tmp/target.status ]] && break; sleep 0.1; done
[[ -s $tmp/port ]] || fail "target did not start"
port=$(cat "$tmp/port")
url="iscsi://127.0.0.1:$port/$iqn/0"

# The target's status document (Unix socket: connect, read to EOF).
cp "$(dirname "${BASH_SOURCE[0]}")/../../support/status_socket.py" "$tmp/status.py"  # imported as `status` below

echo "== --threads 2 with two URLs is refused"
rc=0
"$BIN/iserkit-nbd" "$url" "$url" --threads 2 --socket "$tmp/never.sock" >"$tmp/refused.log" 2>&1 || rc=$?
[[ $rc == 2 ]] || fail "multipath with --threads 2 exited $rc, not 2"
grep -q -- "--threads 2: several URLs" "$tmp/refused.log" || fail "no clear error: $(cat "$tmp/refused.log")"

echo "== iserkit-nbd --threads 2"
"$BIN/iserkit-nbd" "$url" --threads 2 --socket "$tmp/nbd.sock" --stats-file "$tmp/nbd.stats" \
  --status-socket "$tmp/nbd.status" --log-level info >"$tmp/nbd.log" 2>&1 &
nbd_pid=$!; pids+=($nbd_pid)
for _ in $(seq 100); do [[ -S $tmp/nbd.sock && -S $tmp/nbd.status ]] && break; sleep 0.1; done
[[ -S $tmp/nbd.sock ]] || fail "iserkit-nbd did not start"
uri="nbd+unix:///?socket=$tmp/nbd.sock"
python3 - "$tmp" <<'PY' || fail "the bridge did not log in two sessions with distinct ISIDs"
import sys; sys.path.insert(0, sys.argv[1]); import status
sessions = status.normal_sessions(sys.argv[1] + "/target.status")
assert len(sessions) == 2, sessions
print("  target sessions:", sorted(sessions))
doc = status.query(sys.argv[1] + "/nbd.status")
assert doc["threads"] == 2 and len(doc["loops"]) == 2, doc
assert doc["state"] == "connected", doc
PY
grep -qx 'threads=2' "$tmp/nbd.stats" || fail "stats file lacks threads=2: $(cat "$tmp/nbd.stats")"

echo "== nbdcopy --connections=2: 64 MiB in and out"
head -c $size /dev/urandom >"$tmp/random.img"
round_trip "$uri" "$tmp/lun.img" --connections=2 --threads=2 --requests=16
# nbdcopy opens both connections (one per loop) but hands out work in large units: a 64 MiB copy
# may run on one connection only, so the requests of both loops are checked with fio below.
python3 - "$tmp" <<'PY' || fail "nbdcopy's connections did not go to both loops"
import sys; sys.path.insert(0, sys.argv[1]); import status
loops = status.query(sys.argv[1] + "/nbd.status")["loops"]
assert all(l["connections"] >= 2 for l in loops), loops  # two nbdcopy runs, two connections each
PY

echo "== fio nbd engine, numjobs=2: a connection per job, each on its own loop and session"
if command -v fio >/dev/null && fio --enghelp=nbd >/dev/null 2>&1; then
  python3 - "$tmp" >"$tmp/before.json" <<'PY'
import json, sys; sys.path.insert(0, sys.argv[1]); import status
print(json.dumps(status.normal_sessions(sys.argv[1] + "/target.status")))
PY
  # Each job writes random 64 KiB blocks over its own 32 MiB and reads them back checked (crc32c).
  fio --name=multiconn --ioengine=nbd --uri="$uri" --rw=randwrite --bs=64k --iodepth=8 --numjobs=2 \
    --size=32M --offset_increment=32M --verify=crc32c --do_verify=1 --verify_fatal=1 --group_reporting \
    >"$tmp/fio.log" 2>&1 || fail "fio failed or found bad data: $(tail -20 "$tmp/fio.log")"
  python3 - "$tmp" <<'PY' || fail "fio's jobs did not run on both loops and both sessions"
import json, sys, time; sys.path.insert(0, sys.argv[1]); import status
before = json.load(open(sys.argv[1] + "/before.json"))
after = status.normal_sessions(sys.argv[1] + "/target.status")
for s, c in after.items():
    print("  target session", s, "writes", c["write"] - before[s]["write"], "reads", c["read"] - before[s]["read"])
    assert c["write"] > before[s]["write"] and c["read"] > before[s]["read"], \
        "session %s carried no writes or no reads: %s -> %s" % (s, before[s], c)
time.sleep(0.6)  # the worker loop's session counters are sampled every 250 ms
loops = status.query(sys.argv[1] + "/nbd.status")["loops"]
for l in loops:
    print("  loop", l["index"], "connections", l["connections"], "requests", l["requests"],
          "commands_sent", l["commands_sent"])
    assert l["requests"] > 0 and l["commands_sent"] > 0, loops
PY
  # The stats file is rewritten on state changes, at exit and on SIGUSR1.
  kill -USR1 $nbd_pid
  sleep 0.3
  for k in 0 1; do
    requests=$(sed -n "s/^loop\.$k\.requests=//p" "$tmp/nbd.stats")
    [[ ${requests:-0} -gt 0 ]] || fail "stats file: loop $k served no requests: $(cat "$tmp/nbd.stats")"
  done
else
  echo "  (fio or its nbd engine missing: per-loop requests not checked)"
fi

echo "== FLUSH on connection B covers a WRITE completed on connection A (another session)"
python3 - "$tmp" "$tmp/nbd.sock" <<'PY' || fail "cross-connection flush check failed"
import os, sys, time
import nbd
work, sock = sys.argv[1], sys.argv[2]
sys.path.insert(0, work)
import status
target = work + "/target.status"

def wait_change(before, what, timeout=2.0):
    # The target counts a command as it completes; give the counter a moment.
    deadline = time.time() + timeout
    while True:
        now = status.normal_sessions(target)
        if what(now) or time.time() > deadline:
            return now
        time.sleep(0.02)

a = nbd.NBD(); a.connect_unix(sock)
b = nbd.NBD(); b.connect_unix(sock)
assert a.can_multi_conn() and b.can_multi_conn(), "NBD_FLAG_CAN_MULTI_CONN not offered"
loops = status.query(work + "/nbd.status")["loops"]
assert [l["open_connections"] for l in loops] == [1, 1], "A and B are not on different loops: %s" % loops

data = os.urandom(65536)
offset = 5 << 20
s0 = status.normal_sessions(target)
a.pwrite(data, offset)            # completed (replied to) on A
s1 = wait_change(s0, lambda n: sum(c["write"] for c in n.values()) > sum(c["write"] for c in s0.values()))
grew = [s for s in s1 if s1[s]["write"] > s0[s]["write"]]
assert len(grew) == 1, "the write went to %d sessions: %s -> %s" % (len(grew), s0, s1)
sa = grew[0]
sb = [s for s in s1 if s != sa][0]
assert s1[sa]["other"] == s0[sa]["other"] and s1[sb]["other"] == s0[sb]["other"], "unexpected commands: %s" % s1
b.flush()                          # FLUSH on B, after A's write completed
s2 = wait_change(s1, lambda n: n[sb]["other"] > s1[sb]["other"])
assert s2[sb]["other"] == s1[sb]["other"] + 1, "B's session got no SYNCHRONIZE CACHE: %s -> %s" % (s1, s2)
assert s2[sa]["other"] == s1[sa]["other"], "the flush went to A's session: %s -> %s" % (s1, s2)
assert s2[sb]["write"] == s1[sb]["write"], "B's session wrote: %s" % s2
print("  write on session", sa, "then SYNCHRONIZE CACHE on session", sb)
assert b.pread(len(data), offset) == data, "B does not read A's write"
with open(work + "/lun.img", "rb") as f:
    f.seek(offset)
    assert f.read(len(data)) == data, "the backing file lacks A's write"
a.shutdown(); b.shutdown()
print("  B and the backing file read A's write back")
PY

echo "== --config: threads = 2"
printf 'url = "%s"\nthreads = 2\nsocket = "%s"\nstatus-socket = "%s"\n' "$url" "$tmp/cfg.sock" "$tmp/cfg.status" \
  >"$tmp/bridge.toml"
"$BIN/iserkit-nbd" --config "$tmp/bridge.toml" >"$tmp/cfg.log" 2>&1 &
cfg_pid=$!; pids+=($cfg_pid)
for _ in $(seq 100); do [[ -S $tmp/cfg.status ]] && break; sleep 0.1; done
python3 - "$tmp" <<'PY' || fail "--config threads = 2 did not give two loops"
import sys; sys.path.insert(0, sys.argv[1]); import status
doc = status.query(sys.argv[1] + "/cfg.status")
assert doc["threads"] == 2, doc
assert len(status.normal_sessions(sys.argv[1] + "/target.status")) == 4
PY
kill -TERM $cfg_pid; wait $cfg_pid || fail "the --config bridge exited with $?"

echo "== SIGTERM: exit 0, every session logged out"
kill -TERM $nbd_pid
rc=0; wait $nbd_pid || rc=$?
[[ $rc == 0 ]] || fail "iserkit-nbd exited with $rc"
python3 - "$tmp" <<'PY' || fail "sessions left on the target after the bridge's exit"
import sys, time; sys.path.insert(0, sys.argv[1]); import status
for _ in range(50):
    left = status.normal_sessions(sys.argv[1] + "/target.status")
    if not left:
        break
    time.sleep(0.1)
assert not left, left
PY
grep -qx 'state=stopped' "$tmp/nbd.stats" || fail "stats file not stopped: $(cat "$tmp/nbd.stats")"
kill -TERM $target_pid; wait $target_pid || fail "iserkit-target exited with $?"
pids=()
echo "PASS"
