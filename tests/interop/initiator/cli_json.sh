#!/bin/bash
# Interop: `iserkit --json` against a real target (tgtd, or the bundled iserkit-target). Every
# subcommand's stdout must be one well-formed JSON document (python3 -m json.tool and jq parse
# it) whose values are the target's real ones: the LUN's size is the 64 MiB image, the target's
# name is the one discovery returned, read/write summaries count the bytes moved, and an error is
# {"error": {...}} with its exit status (iserkit(1) EXIT STATUS). Field names: initiator/README.md "iserkit --json".
# Usage: cli_json.sh tgtd|iserkit-target   (ISERKIT_BIN = build's bin directory)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/target_env.sh"
need_cli jq
start_target "${1:?target kind}"

# json FILE FILTER: the value of a jq filter (jq rejects a malformed document; python3's json
# module checks every document once more at the end: one interpreter start, it is slow under load).
json() { jq -er "$2" "$1" || fail "$1: no value for $2 (or not JSON)"; }

run --json discover "iscsi://$ISERKIT_TEST_PORTAL" >"$W/discover.json" || fail "discover exited $?"
cat "$W/discover.json"
[ "$(json "$W/discover.json" '.portal')" = "$ISERKIT_TEST_PORTAL" ] || fail "discover: wrong portal"
json "$W/discover.json" '.targets[].name' | grep -qx "$ISERKIT_TEST_TARGET" || fail "discover: target not listed"
[ "$(json "$W/discover.json" ".targets[] | select(.name == \"$ISERKIT_TEST_TARGET\") | .portals[0].port")" = \
  "${ISERKIT_TEST_PORTAL##*:}" ] || fail "discover: wrong portal port"

run --json readcap "$ISERKIT_TEST_URL" >"$W/readcap.json" || fail "readcap exited $?"
cat "$W/readcap.json"
[ "$(json "$W/readcap.json" '.size_bytes')" = 67108864 ] || fail "readcap: size is not the 64 MiB image"
[ "$(json "$W/readcap.json" '.blocks * .block_size_bytes')" = 67108864 ] || fail "readcap: blocks × block size ≠ size"

run --json inquiry "$ISERKIT_TEST_URL" >"$W/inquiry.json" || fail "inquiry exited $?"
cat "$W/inquiry.json"
[ "$(json "$W/inquiry.json" '.peripheral_device_type')" = 0 ] || fail "inquiry: not a direct-access block device"
# The vendor is the one the plain output and libiscsi's iscsi-inq see.
vendor=$(run inquiry "$ISERKIT_TEST_URL" | sed -n 's/^vendor: //p')
[ "$(json "$W/inquiry.json" '.vendor')" = "$vendor" ] || fail "inquiry: JSON vendor differs from the text output"
json "$W/inquiry.json" '.designators | type' | grep -qx array || fail "inquiry: no designator list"
json "$W/inquiry.json" 'has("block_limits") and has("provisioning") and has("serial")' | grep -qx true ||
  fail "inquiry: missing fields"

run --json luns "iscsi://$ISERKIT_TEST_PORTAL/$ISERKIT_TEST_TARGET" >"$W/luns.json" || fail "luns exited $?"
cat "$W/luns.json"
[ "$(json "$W/luns.json" '.target')" = "$ISERKIT_TEST_TARGET" ] || fail "luns: wrong target"
lun=${ISERKIT_TEST_URL##*/}
json "$W/luns.json" '.luns[].lun' | grep -qx "$lun" || fail "luns: LUN $lun not reported"
[ "$(json "$W/luns.json" ".luns[] | select(.lun == $lun) | .capacity.size_bytes")" = 67108864 ] ||
  fail "luns: LUN $lun's size is not the 64 MiB image"

head -c 3000001 /dev/urandom >"$W/a.bin"
run --json write "$ISERKIT_TEST_URL" --offset 4096 -i "$W/a.bin" >"$W/write.json" || fail "write exited $?"
cat "$W/write.json"
[ "$(json "$W/write.json" '.length_bytes')" = 3000001 ] || fail "write: wrong byte count"
[ "$(json "$W/write.json" '.offset_bytes')" = 4096 ] || fail "write: wrong offset"
run --json read "$ISERKIT_TEST_URL" --offset 4096 --length 3000001 -o "$W/a.back" >"$W/read.json" || fail "read exited $?"
cat "$W/read.json"
[ "$(json "$W/read.json" '.length_bytes')" = 3000001 ] || fail "read: wrong byte count"
cmp "$W/a.bin" "$W/a.back" || fail "data read back differs"

# Block-aligned transfers copy no payload in user space (the counter counts every copy; an
# unaligned head or tail is staged through a bounce block, counted).
head -c 1048576 /dev/urandom >"$W/aligned.bin"
run --json write "$ISERKIT_TEST_URL" --offset 8388608 -i "$W/aligned.bin" >"$W/aligned-write.json" || fail "aligned write exited $?"
[ "$(json "$W/aligned-write.json" '.copied_payload_bytes')" = 0 ] || fail "aligned write copied payload"
run --json read "$ISERKIT_TEST_URL" --offset 8388608 --length 1048576 -o "$W/aligned.back" >"$W/aligned-read.json" ||
  fail "aligned read exited $?"
[ "$(json "$W/aligned-read.json" '.copied_payload_bytes')" = 0 ] || fail "aligned read copied payload"
cmp "$W/aligned.bin" "$W/aligned.back" || fail "aligned data read back differs"
[ "$(json "$W/write.json" '.copied_payload_bytes')" -gt 0 ] || fail "the unaligned write's bounced tail was not counted"

# Log lines go to stderr, whatever the level: stdout carries only the JSON summary, or the data of
# a read to stdout (they were written to stdout once, and a warning at logout then corrupted
# `iserkit read URL | sha256sum`).
run --log-level debug --json write "$ISERKIT_TEST_URL" --offset 4096 -i "$W/a.bin" >"$W/write-debug.json" \
  2>"$W/write-debug.log" || fail "write --log-level debug exited $?"
grep -q 'debug' "$W/write-debug.log" || fail "--log-level debug wrote no log line to stderr"
[ "$(json "$W/write-debug.json" '.length_bytes')" = 3000001 ] || fail "write --log-level debug: stdout is not the summary"
run --log-level debug read "$ISERKIT_TEST_URL" --offset 4096 --length 3000001 >"$W/a.stdout" 2>"$W/read-debug.log" ||
  fail "read to stdout exited $?"
grep -q 'debug' "$W/read-debug.log" || fail "read --log-level debug wrote no log line to stderr"
cmp "$W/a.bin" "$W/a.stdout" || fail "read to stdout with --log-level debug: stdout is not exactly the data"

# Errors: the exit status, the text on stderr, {"error": {...}} on stdout with the next step.
rc=0; run --json read "$ISERKIT_TEST_URL" --offset 67108860 --length 8 -o "$W/x" >"$W/err.json" 2>/dev/null || rc=$?
[ $rc -eq 6 ] || fail "read past the end exited $rc, want 6"
cat "$W/err.json"
[ "$(json "$W/err.json" '.error.operation')" = read ] || fail "error: wrong operation"
json "$W/err.json" '.error.detail' | grep -q 'offset=67108860' || fail "error: detail lacks the offset"
[ "$(json "$W/err.json" '.error.exit_status')" = 6 ] || fail "error: no exit_status 6"
json "$W/err.json" '.error.next_step' | grep -q 'at most 4 bytes fit' || fail "error: no next step"
# Data on stdout and a JSON summary cannot share it.
if run --json read "$ISERKIT_TEST_URL" --length 8 >"$W/err2.json" 2>/dev/null; then fail "--json read to stdout succeeded"; fi
json "$W/err2.json" '.error.message' >/dev/null || fail "--json read to stdout: no JSON error"
python3 -c '
import json, sys
for path in sys.argv[1:]:
    with open(path) as f:
        json.load(f)  # exactly one document: trailing text is an error
' "$W"/*.json || fail "python3 json rejected a document"
echo "PASS: cli --json against $1"
