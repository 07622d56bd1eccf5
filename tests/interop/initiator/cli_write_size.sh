#!/bin/bash
# Interop: `iserkit write` checks the size first (issue 26 item 4). Against iserkit-target's 64 MiB
# LUN: an 8 MiB input file at --offset 60 MiB (two 4 MiB commands, the first of which would fit)
# is refused before anything is written — the LUN is unchanged, the message says why and how much
# room there is; --offset past the end is refused too; a pipe whose data goes past the end reports
# the bytes written before (flushed). The same file at an offset where it fits is written.
# Usage: cli_write_size.sh iserkit-target   (ISERKIT_BIN = build's bin directory)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/target_env.sh"
need_cli
start_target "${1:-iserkit-target}"
URL="$ISERKIT_TEST_URL"
MIB=1048576

# The last 8 MiB of the LUN hold a known pattern before the refused write.
head -c $((8 * MIB)) /dev/urandom >"$W/before.bin"
"$CLI" write "$URL" --offset $((56 * MIB)) -i "$W/before.bin" || fail "writing the pattern exited $?"
head -c $((8 * MIB)) /dev/urandom >"$W/big.bin"

rc=0; "$CLI" write "$URL" --offset $((60 * MIB)) -i "$W/big.bin" --progress always 2>"$W/err" || rc=$?
[ $rc -eq 6 ] || fail "a write past the end of the LUN exited $rc, want 6 (the LUN refused)"
cat "$W/err"
grep -q "^write: write past the end: offset+length > capacity $((64 * MIB)) bytes (offset $((60 * MIB)) + length $((8 * MIB))) (nothing written): at most $((4 * MIB)) bytes fit from offset $((60 * MIB)): input_bytes=$((8 * MIB)) offset=$((60 * MIB)) size=$((64 * MIB)) room=$((4 * MIB))\$" "$W/err" ||
  fail "expected the size message"
"$CLI" read "$URL" --offset $((56 * MIB)) --length $((8 * MIB)) -o "$W/after.bin" || fail "read back exited $?"
cmp "$W/before.bin" "$W/after.bin" || fail "the LUN changed although the write was refused"

if "$CLI" write "$URL" --offset $((65 * MIB)) -i "$W/big.bin" 2>"$W/err2"; then fail "a write at an offset past the end succeeded"; fi
grep -q "^write: write past the end: offset+length > capacity $((64 * MIB)) bytes (offset $((65 * MIB)) + length $((8 * MIB))) (nothing written): offsets go up to $((64 * MIB - 1)): offset=$((65 * MIB)) size=$((64 * MIB))\$" "$W/err2" ||
  { cat "$W/err2"; fail "expected the offset message"; }

# A pipe: its size is unknown, so the first command goes out; the second is refused before it is
# sent and the message says what was written (and flushed) before.
if cat "$W/big.bin" | "$CLI" write "$URL" --offset $((60 * MIB)) 2>"$W/err3"; then fail "a piped write past the end succeeded"; fi
cat "$W/err3"
grep -q "^write: write past the end: offset+length > capacity $((64 * MIB)) bytes (offset $((64 * MIB)) + length $((4 * MIB))) (what was written before is flushed): offsets go up to $((64 * MIB - 1)): offset=$((64 * MIB)) length=$((4 * MIB)) size=$((64 * MIB)) written_bytes=$((4 * MIB)) written_offset=$((60 * MIB)) written_last_offset=$((64 * MIB - 1))\$" "$W/err3" ||
  fail "expected the pipe message with the bytes written"
"$CLI" read "$URL" --offset $((60 * MIB)) --length $((4 * MIB)) -o "$W/piped.bin" || fail "read back exited $?"
cmp <(head -c $((4 * MIB)) "$W/big.bin") "$W/piped.bin" || fail "the piped data that fitted is not on the LUN"

# Where it fits it is written.
"$CLI" write "$URL" --offset $((56 * MIB)) -i "$W/big.bin" || fail "a write that fits exited $?"
"$CLI" read "$URL" --offset $((56 * MIB)) --length $((8 * MIB)) -o "$W/fits.bin" || fail "read back exited $?"
cmp "$W/big.bin" "$W/fits.bin" || fail "data written where it fits differs"
echo "PASS: iserkit write checks the size first"
