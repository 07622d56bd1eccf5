#!/bin/bash
# Interop: the `iserkit` CLI against a real target (tgtd, or the bundled iserkit-target): discover,
# inquiry, readcap, write a random file at offset 0 and at an odd offset, read back and compare.
# Usage: cli_interop.sh tgtd|iserkit-target   (ISERKIT_BIN = build's bin directory)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/target_env.sh"
need_cli
start_target "${1:?target kind}"


out=$(run discover "iscsi://$ISERKIT_TEST_PORTAL") || fail "discover exited $?"
echo "$out"
echo "$out" | grep -qx "$ISERKIT_TEST_TARGET" || fail "discover did not list $ISERKIT_TEST_TARGET"
echo "$out" | grep -q "portal .*:${ISERKIT_TEST_PORTAL##*:} tpgt=" || fail "discover did not list the portal"

out=$(run inquiry "$ISERKIT_TEST_URL") || fail "inquiry exited $?"
echo "$out"
echo "$out" | grep -q '^vendor: ' || fail "inquiry printed no vendor"
echo "$out" | grep -q '^product: ' || fail "inquiry printed no product"
echo "$out" | grep -q '^block limits: ' || fail "inquiry printed no block limits"
# The per-command cap the initiator derived: over TCP the unit's MAXIMUM TRANSFER LENGTH, at most
# 8 MiB; iserkit-target states 32 MiB, so 8 MiB.
cap=$(echo "$out" | sed -n 's/^max transfer per command: \([0-9]*\) bytes$/\1/p')
[ -n "$cap" ] && [ "$cap" -gt 0 ] && [ "$cap" -le 8388608 ] || fail "inquiry: no or a bad 'max transfer per command' line"
if [ "$1" = iserkit-target ]; then [ "$cap" = 8388608 ] || fail "inquiry: cap $cap bytes to iserkit-target, want 8388608"; fi
# Both targets report DPOFUA (MODE SENSE device-specific parameter, SBC-4 §6.5.1), writable.
echo "$out" | grep -qx 'mode header: dpofua=1 write_protected=0' || fail "inquiry: expected DPOFUA and no WP"

out=$(run readcap "$ISERKIT_TEST_URL") || fail "readcap exited $?"
echo "$out"
echo "$out" | grep -qx 'bytes: 67108864' || fail "readcap: expected 64 MiB"
bs=$(echo "$out" | sed -n 's/^block size: //p')
blocks=$(echo "$out" | sed -n 's/^blocks: //p')
[ "$((bs * blocks))" = 67108864 ] || fail "readcap: blocks × block size ≠ bytes"

head -c 3000000 /dev/urandom >"$W/a.bin"
head -c 1234567 /dev/urandom >"$W/b.bin"
run write "$ISERKIT_TEST_URL" -i "$W/a.bin" || fail "write at 0 exited $?"
run read "$ISERKIT_TEST_URL" --length 3000000 -o "$W/a.back" || fail "read at 0 exited $?"
cmp "$W/a.bin" "$W/a.back" || fail "data read back at offset 0 differs"

# Odd offset, through stdin/stdout, with FUA: edge blocks are read-modify-written.
odd=5000003
run write "$ISERKIT_TEST_URL" --offset $odd --fua <"$W/b.bin" || fail "write at odd offset exited $?"
run read "$ISERKIT_TEST_URL" --offset $odd --length 1234567 >"$W/b.back" || fail "read at odd offset exited $?"
[ "$(sha256sum <"$W/b.bin")" = "$(sha256sum <"$W/b.back")" ] || fail "data read back at offset $odd differs"
# The bytes around the odd range were preserved (zero before, zero after).
run read "$ISERKIT_TEST_URL" --offset $((odd - 3)) --length 3 -o "$W/before" || fail "read before exited $?"
[ "$(od -An -tx1 "$W/before" | tr -d ' \n')" = 000000 ] || fail "bytes before the odd write changed"
# The first write is still intact.
run read "$ISERKIT_TEST_URL" --length 3000000 -o "$W/a.again" || fail "re-read exited $?"
cmp "$W/a.bin" "$W/a.again" || fail "offset-0 data changed after the odd-offset write"

# Header and data digests (CRC32C, RFC 7143 §13.1) on both ends: the same data written and read.
head -c 2000000 /dev/urandom >"$W/c.bin"
run --header-digest crc32c --data-digest crc32c write "$ISERKIT_TEST_URL" --offset 8388608 -i "$W/c.bin" ||
  fail "write with digests exited $?"
run --header-digest crc32c --data-digest crc32c read "$ISERKIT_TEST_URL" --offset 8388608 --length 2000000 \
  -o "$W/c.back" || fail "read with digests exited $?"
cmp "$W/c.bin" "$W/c.back" || fail "data read back with digests differs"

# Errors: "<operation>: <what>: <next step>: key=value" and the documented exit status (6: the LUN
# refused the request).
rc=0; run read "$ISERKIT_TEST_URL" --offset 67108860 --length 8 >/dev/null 2>"$W/err" || rc=$?
[ $rc -eq 6 ] || fail "read past the end exited $rc, want 6"
cat "$W/err"
grep -q '^read: read past the end: offset+length > capacity 67108864 bytes (offset 67108860 + length 8): at most 4 bytes fit from offset 67108860: offset=67108860' "$W/err" || fail "read past the end: unclear message"
if run inquiry "iscsi://$ISERKIT_TEST_PORTAL/iqn.2026-11.org.iserkit.test:no-such-target/0" 2>"$W/err"; then
  fail "login to a missing target succeeded"
fi
cat "$W/err"
grep -q 'status=0x02' "$W/err" || fail "missing target: no login status in the message"
# --iser-stags: a bad mode is refused before anything is sent; a good one is accepted (over TCP it
# changes nothing)
if run --iser-stags everything readcap "$ISERKIT_TEST_URL" >/dev/null 2>"$W/err"; then fail "--iser-stags everything accepted"; fi
grep -q -- '--iser-stags everything: want one of automatic, auto, per-command, whole-slab' "$W/err" || fail "--iser-stags everything: unclear message: $(cat "$W/err")"
run --iser-stags whole-slab readcap "$ISERKIT_TEST_URL" >/dev/null || fail "--iser-stags whole-slab refused"
echo "PASS: cli interop against $1"
