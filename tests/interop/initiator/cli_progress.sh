#!/bin/bash
# Interop: `iserkit read`/`write` progress (issue 15 item 6). On a terminal (a pty from
# util-linux `script`) a long transfer shows a progress line and a closing summary with the exact
# byte count on stderr; with stderr a file (not a terminal) nothing is printed; --progress never
# silences a terminal and --progress always prints without one. The data moved is checked too.
# Usage: cli_progress.sh iserkit-target   (ISERKIT_BIN = build's bin directory)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/target_env.sh"
need_cli script  # util-linux
start_target "${1:-iserkit-target}"

# on_pty OUT CMD...: runs CMD with stdin/stdout/stderr on a new pty; OUT gets what it printed.
on_pty() {
  local out=$1; shift
  timeout 120 script -qe -E never -c "$(printf '%q ' "$@")" /dev/null </dev/null >"$out"
}

head -c 20000000 /dev/urandom >"$W/a.bin"   # 20 MB: five 4 MiB chunks
on_pty "$W/write.tty" "$CLI" write "$ISERKIT_TEST_URL" -i "$W/a.bin" || fail "write on a pty exited $?"
cat -v "$W/write.tty"
grep -aq 'write: 20000000 bytes (19.1 MiB) in [0-9.]* s, .*/s' "$W/write.tty" || fail "write: no closing summary on a terminal"
on_pty "$W/read.tty" "$CLI" read "$ISERKIT_TEST_URL" --length 20000000 -o "$W/a.back" || fail "read on a pty exited $?"
cat -v "$W/read.tty"
grep -aq 'read: 20000000 bytes (19.1 MiB) in [0-9.]* s' "$W/read.tty" || fail "read: no closing summary on a terminal"
cmp "$W/a.bin" "$W/a.back" || fail "data read back differs"

# Not a terminal: quiet.
"$CLI" read "$ISERKIT_TEST_URL" --length 20000000 -o "$W/b.back" 2>"$W/read.err" || fail "read exited $?"
[ ! -s "$W/read.err" ] || { cat "$W/read.err"; fail "read printed on stderr although it is not a terminal"; }
"$CLI" write "$ISERKIT_TEST_URL" --offset 4096 <"$W/a.bin" 2>"$W/write.err" || fail "write exited $?"
[ ! -s "$W/write.err" ] || { cat "$W/write.err"; fail "write printed on stderr although it is not a terminal"; }
cmp "$W/a.bin" "$W/b.back" || fail "data read back (quiet) differs"

# --progress never on a terminal: quiet; --progress always without one: the summary.
on_pty "$W/never.tty" "$CLI" --progress never read "$ISERKIT_TEST_URL" --length 20000000 -o "$W/c.back" ||
  fail "read --progress never exited $?"
[ ! -s "$W/never.tty" ] || { cat -v "$W/never.tty"; fail "--progress never printed on a terminal"; }
"$CLI" --progress always read "$ISERKIT_TEST_URL" --length 1000 -o "$W/d.back" 2>"$W/always.err" ||
  fail "read --progress always exited $?"
grep -aq 'read: 1000 bytes' "$W/always.err" || fail "--progress always printed no summary"
if "$CLI" --progress sometimes read "$ISERKIT_TEST_URL" --length 1 -o "$W/e" 2>"$W/bad.err"; then fail "--progress sometimes accepted"; fi
grep -q -- '--progress sometimes: want one of auto, always, never' "$W/bad.err" || fail "bad --progress: unclear message"
echo "PASS: cli progress against ${1:-iserkit-target}"
