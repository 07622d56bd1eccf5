#!/usr/bin/env bash
# `iserkit copy` against real iserkit-target processes (tests/integration/copy/CMakeLists.txt).
# Process A exports target :one (LUNs 0 a.img, 1 b.img) and :two (LUN 0 c.img); process B exports
# :three (LUN 0 d.img). a.img holds random data; every copy is checked with cmp on the files.
#  1. a → b (one target, one session): EXTENDED COPY; the initiator's payload bytes on the network
#     (network_payload_bytes) stay under 64 KiB for 24 MiB copied; --progress always prints the
#     closing summary on stderr.
#  2. a → c (two targets of one process, one session each): EXTENDED COPY, at another offset.
#  3. a → d (another process): the target declines (UNREACHABLE COPY TARGET), so READ + WRITE does
#     it, saying why; the payload on the network is twice the length.
#  4. --method read-write a → b: READ + WRITE.   5. an unaligned range: READ + WRITE (reason said).
#  6. --method xcopy into process B: exit status 1, d.img unchanged there. 7. unaligned with
#     --method xcopy: refused before anything moves. 8. past the end of the destination: exit 6.
# Exit 77 when the binaries are not built.
set -u
BIN=${ISERKIT_BIN:-}
[[ -x $BIN/iserkit-target && -x $BIN/iserkit ]] || { echo "SKIP: iserkit-target or iserkit not built ($BIN)"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 missing"; exit 77; }
WORK=$(mktemp -d /tmp/iserkit-copy-cli.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$WORK"/*.log "$WORK"/*.err; do [[ -f $f ]] && { echo "--- $f"; tail -n 20 "$f"; }; done; exit 1; }

MIB=$((1 << 20))
mkdir -p "$WORK/A/one" "$WORK/A/two" "$WORK/B/three"
for f in A/one/a.img A/one/b.img A/two/c.img B/three/d.img; do truncate -s 64M "$WORK/$f"; done
head -c $((64 * MIB)) /dev/urandom >"$WORK/A/one/a.img"
head -c $((64 * MIB)) /dev/urandom >"$WORK/B/three/d.img"
cp "$WORK/B/three/d.img" "$WORK/d.orig"

BASE="iqn.2026-11.org.iserkit.test.copy$$"
start() {  # start NAME DIR: an iserkit-target over DIR; sets PORT_<NAME>
  "$BIN/iserkit-target" --iqn "$BASE" --export-dir "$WORK/$2" --listen 127.0.0.1:0 --port-file "$WORK/$1.port" \
    --log-level warn >"$WORK/$1.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do [[ -s $WORK/$1.port ]] && break; sleep 0.05; done
  [[ -s $WORK/$1.port ]] || fail "target $1 did not start"
  printf -v "PORT_$1" '%s' "$(cat "$WORK/$1.port")"
}
start A A
start B B
A="iscsi://127.0.0.1:$PORT_A/$BASE"
B="iscsi://127.0.0.1:$PORT_B/$BASE"

# json FILE KEY: a top-level field of the summary (or of "copy" in an error document).
json() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d=d.get("copy",d); v=d[sys.argv[2]]; print("null" if v is None else v)' "$1" "$2"; }
# same FILE1 OFF1 FILE2 OFF2 LEN: the byte ranges are equal.
same() { cmp -s <(tail -c +$(($2 + 1)) "$1" | head -c "$5") <(tail -c +$(($4 + 1)) "$3" | head -c "$5"); }
run() {  # run NAME ARGS...: iserkit --json ARGS > NAME.json, stderr NAME.err; sets RC
  local name=$1
  shift
  "$BIN/iserkit" --json --progress never "$@" >"$WORK/$name.json" 2>"$WORK/$name.err"
  RC=$?
}

# 1. One target: EXTENDED COPY on one session.
run one copy "$A:one/0" "$A:one/1" --offset 4M --length 24M --dst-offset 8M
[[ $RC -eq 0 ]] || fail "copy a → b exited $RC"
[[ $(json "$WORK/one.json" method) == xcopy ]] || fail "a → b did not use EXTENDED COPY: $(cat "$WORK/one.json")"
[[ $(json "$WORK/one.json" one_session) == True ]] || fail "a → b used two sessions"
[[ $(json "$WORK/one.json" bytes) -eq $((24 * MIB)) ]] || fail "a → b: bytes is not 24 MiB"
net=$(json "$WORK/one.json" network_payload_bytes)
((net < 65536)) || fail "EXTENDED COPY moved $net payload bytes over the network"
grep -q "EXTENDED COPY" "$WORK/one.err" || fail "copy did not say which method it used"
same "$WORK/A/one/a.img" $((4 * MIB)) "$WORK/A/one/b.img" $((8 * MIB)) $((24 * MIB)) || fail "b.img does not hold the copy"

# Progress on stderr with --progress always: the closing summary with the byte count.
"$BIN/iserkit" --progress always copy "$A:one/0" "$A:one/1" --length 2M >/dev/null 2>"$WORK/progress.err" ||
  fail "copy with progress"
grep -q "copy: 2097152 bytes (2.0 MiB) in" "$WORK/progress.err" || fail "no progress summary: $(cat "$WORK/progress.err")"

# 2. Two targets of one process.
run two copy "$A:one/0" "$A:two/0" --length 40M --dst-offset 1M
[[ $RC -eq 0 && $(json "$WORK/two.json" method) == xcopy ]] || fail "a → c: rc=$RC $(cat "$WORK/two.json")"
[[ $(json "$WORK/two.json" one_session) == False ]] || fail "a → c claims one session"
# 40 MiB in commands of at most 64 MiB within VPD 0x8f: 16 segments × 65535 blocks max, one command.
[[ $(json "$WORK/two.json" commands) -eq 1 ]] || fail "a → c took $(json "$WORK/two.json" commands) commands"
same "$WORK/A/one/a.img" 0 "$WORK/A/two/c.img" $MIB $((40 * MIB)) || fail "c.img does not hold the copy"

# 3. Another process: declined, READ + WRITE with the reason.
run three copy "$A:one/0" "$B:three/0" --offset 2M --length 10M
[[ $RC -eq 0 && $(json "$WORK/three.json" method) == read-write ]] || fail "a → d: rc=$RC $(cat "$WORK/three.json")"
json "$WORK/three.json" fallback_reason | grep -qi "declined" || fail "a → d: no reason given: $(cat "$WORK/three.json")"
grep -q "READ + WRITE" "$WORK/three.err" || fail "a → d did not say it used READ + WRITE"
net=$(json "$WORK/three.json" network_payload_bytes)
((net >= 20 * MIB)) || fail "READ + WRITE of 10 MiB moved only $net payload bytes"
same "$WORK/A/one/a.img" $((2 * MIB)) "$WORK/B/three/d.img" 0 $((10 * MIB)) || fail "d.img does not hold the copy"
same "$WORK/d.orig" $((10 * MIB)) "$WORK/B/three/d.img" $((10 * MIB)) $((54 * MIB)) || fail "d.img changed past the copy"

# 4. Forced READ + WRITE on one target.
run four copy "$A:one/0" "$A:one/1" --offset 32M --length 16M --dst-offset 40M --method read-write
[[ $RC -eq 0 && $(json "$WORK/four.json" method) == read-write ]] || fail "--method read-write: rc=$RC"
same "$WORK/A/one/a.img" $((32 * MIB)) "$WORK/A/one/b.img" $((40 * MIB)) $((16 * MIB)) || fail "forced READ + WRITE copy differs"

# 5. Unaligned: READ + WRITE with the reason.
run five copy "$A:one/0" "$A:two/0" --offset 1000 --length 3000007 --dst-offset 50000001
[[ $RC -eq 0 && $(json "$WORK/five.json" method) == read-write ]] || fail "unaligned copy: rc=$RC $(cat "$WORK/five.json")"
json "$WORK/five.json" fallback_reason | grep -q "multiples of the 512-byte block size" || fail "unaligned: reason missing"
same "$WORK/A/one/a.img" 1000 "$WORK/A/two/c.img" 50000001 3000007 || fail "unaligned copy differs"
same "$WORK/A/one/a.img" 0 "$WORK/A/two/c.img" $MIB $((40 * MIB)) || fail "the unaligned copy overwrote bytes before it"

# 6. --method xcopy into another process: declined, nothing written, exit 1.
cp "$WORK/B/three/d.img" "$WORK/d.before"
run six copy "$A:one/0" "$B:three/0" --length 1M --dst-offset 30M --method xcopy
[[ $RC -ne 0 ]] || fail "--method xcopy into another process succeeded"
grep -q "EXTENDED COPY failed" "$WORK/six.err" || fail "--method xcopy: $(cat "$WORK/six.err")"
[[ $(json "$WORK/six.json" bytes) -eq 0 ]] || fail "--method xcopy reports bytes copied"
cmp -s "$WORK/d.before" "$WORK/B/three/d.img" || fail "the declined EXTENDED COPY wrote d.img"

# 7. Unaligned with --method xcopy: refused before the copy.
run seven copy "$A:one/0" "$A:one/1" --offset 7 --length 1M --method xcopy
[[ $RC -eq 1 ]] || fail "unaligned --method xcopy exited $RC"
grep -q "EXTENDED COPY cannot be used" "$WORK/seven.err" || fail "unaligned --method xcopy: $(cat "$WORK/seven.err")"

# 8. Past the end of the destination: exit 6, nothing copied.
run eight copy "$A:one/0" "$A:one/1" --length 8M --dst-offset 60M
[[ $RC -eq 6 ]] || fail "a copy past the end exited $RC: $(cat "$WORK/eight.err")"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["error"]["exit_status"]==6' "$WORK/eight.json" ||
  fail "past the end: no JSON error"
# Usage: a missing destination URL.
"$BIN/iserkit" copy "$A:one/0" >/dev/null 2>&1; rc=$?
[[ $rc -eq 2 ]] || fail "copy without a destination exited $rc"

echo "PASS: iserkit copy: EXTENDED COPY in one target and across two of one process, READ + WRITE into another process, forced, unaligned; refusals"
