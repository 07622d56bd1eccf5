#!/bin/bash
# Interop: SIGINT/SIGTERM during `iserkit write` (issue 26 item 4). The input is a FIFO fed by
# cli_write_feed.py, which writes 6 MiB (one full 4 MiB command, then 2 MiB the tool holds while
# waiting for more), waits until the tool has read all of it (FIONREAD on the FIFO is 0), sends the
# signal and keeps the FIFO open (no end of input). The tool must stop at a command boundary: the
# 2 MiB it holds go out as the last command, the data is flushed, a summary line gives the bytes and
# the last offset, the progress line is ended, and the exit status is 128 + the signal. A new
# session then reads exactly that data at those offsets, and the LUN after them is untouched.
# Usage: cli_write_interrupt.sh iserkit-target   (ISERKIT_BIN = build's bin directory)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/target_env.sh"
need_cli python3
start_target "${1:-iserkit-target}"
URL="$ISERKIT_TEST_URL"
MIB=1048576
FED=$((6 * MIB))

run_case() {  # SIGNAL EXPECTED-STATUS OFFSET
  local sig=$1 want=$2 offset=$3
  head -c $FED /dev/urandom >"$W/in.bin"
  head -c $((8 * MIB)) /dev/urandom >"$W/guard.bin"   # what lies after the region: must stay
  "$CLI" write "$URL" --offset $((offset + FED)) -i "$W/guard.bin" || fail "$sig: writing the guard exited $?"
  rm -f "$W/fifo"
  mkfifo "$W/fifo"
  local out
  out=$(python3 "$HERE/cli_write_feed.py" "$W/fifo" "$W/in.bin" "$sig" \
    "$CLI" write "$URL" --offset "$offset" -i "$W/fifo" --progress always 2>"$W/err") || fail "$sig: the feeder failed"
  local rc=${out#status=}
  cat -v "$W/err"
  [ "$rc" -eq "$want" ] || fail "$sig: exit status $rc, want $want"
  grep -q "^write: interrupted by $sig: stopped after a whole command, flushed: bytes=$FED offset=$offset last_offset=$((offset + FED - 1))\$" "$W/err" ||
    fail "$sig: no summary line with the bytes and the last offset (on a line of its own)"
  "$CLI" read "$URL" --offset "$offset" --length $((FED + MIB)) -o "$W/back.bin" || fail "$sig: read back exited $?"
  cmp -n $FED "$W/in.bin" "$W/back.bin" || fail "$sig: the data up to the last offset is not on the LUN"
  cmp -n $MIB <(tail -c +$((FED + 1)) "$W/back.bin") "$W/guard.bin" || fail "$sig: the LUN changed after the last offset"
}
run_case SIGINT 130 $((3 * MIB + 512))
run_case SIGTERM 143 $((20 * MIB))
echo "PASS: iserkit write stops at a command boundary on SIGINT/SIGTERM"
