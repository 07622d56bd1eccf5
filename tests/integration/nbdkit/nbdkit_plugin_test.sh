#!/usr/bin/env bash
# nbdkit-iserkit-plugin against a real iserkit-target (file LUN and a read-only LUN), with nbdkit's
# stats filter in front and libnbd's tools as the clients:
#  - nbdinfo sees the LUN's size, its logical block size as block_size_minimum, flush and FUA;
#  - nbdcopy writes 4 MiB of random data; after nbdsh's flush the LUN file holds exactly those bytes,
#    and nbdcopy reads the same bytes back out; an unaligned read works, an unaligned write fails
#    (EINVAL, the log names --filter=blocksize); zero() leaves zeroes in the LUN file;
#  - the stats filter counted the writes and the flush;
#  - a read-only LUN is advertised read-only and a write is refused (EPERM/EROFS);
#  - CHAP from chap-file= and LIBISCSI_CHAP_*; a wrong secret says so without showing it; a
#    chap-file others can read is refused;
#  - the cache, retry and log filters stack on the plugin;
#  - an unknown target names the target and what discovery lists; a bad URL fails at start-up.
# Usage: nbdkit_plugin_test.sh PLUGIN.so   (ISERKIT_BIN = the build's bin directory)
set -euo pipefail
PLUGIN=${1:?usage: nbdkit_plugin_test.sh PLUGIN.so}
BIN=${ISERKIT_BIN:?ISERKIT_BIN must name the build bin directory}
export PATH=/usr/bin:/usr/sbin:/bin:$PATH   # nbdsh needs the system python3 with libnbd's bindings
skip() { echo "SKIP: $*" >&2; exit 77; }
for tool in nbdkit nbdinfo nbdcopy nbdsh cmp; do command -v $tool >/dev/null || skip "$tool is not installed"; done
# The test exists only when the plugin was built: a plugin nbdkit cannot load is a failure, not a skip.
if ! out=$(nbdkit --dump-plugin "$PLUGIN" 2>&1); then
  echo "FAIL: nbdkit cannot load $PLUGIN: $out" >&2
  exit 1
fi

source "$(dirname "$0")/../../support/scratch.sh"
source "$(dirname "$0")/../../support/target_toml.sh"
scratch_init nbdkit

IQN=iqn.2026-11.org.iserkit:nbdkit
RO=iqn.2026-11.org.iserkit:nbdkit-ro
SIZE=$((16 << 20))
truncate -s $SIZE "$W/lun.img"
truncate -s $SIZE "$W/ro.img"

serve rw --iqn "$IQN" --lun "$W/lun.img"
P=$(cat "$W/rw.port")
SECURE=iqn.2026-11.org.iserkit:nbdkit-chap
umask 077
echo alice-secret-1234 >"$W/alice.secret"
printf 'username = alice\nsecret = "alice-secret-1234"\n' >"$W/alice.chap"
printf 'username = alice\nsecret = wrong-secret-0000\n' >"$W/wrong.chap"
toml_target "$SECURE" mem:4M 'chap_users=[{ user = "alice", secret_file = "alice.secret" }]' >"$W/chap.toml"
serve chap --config "$W/chap.toml"
serve ro --iqn "$RO" --lun "$W/ro.img" --read-only
PCHAP=$(cat "$W/chap.port")
PRO=$(cat "$W/ro.port")

# plugin NAME URL [--nbdkit-option...] [key=value...]: nbdkit in the foreground on $W/NAME.sock
# with the stats filter; --options go before the plugin, key=value parameters after it; sets $uri.
plugin() {
  local name=$1 url=$2; shift 2
  local options=() params=()
  for a in "$@"; do if [[ $a == --* ]]; then options+=("$a"); else params+=("$a"); fi; done
  nbdkit -f -U "$W/$name.sock" --filter=stats "${options[@]}" "$PLUGIN" url="$url" statsfile="$W/$name.stats" \
    "${params[@]}" \
    >"$W/nbdkit-$name.log" 2>&1 &
  started+=($!)
  eval "pid_$name=$!"
  for _ in $(seq 100); do [[ -S $W/$name.sock ]] && break; sleep 0.05; done
  [[ -S $W/$name.sock ]] || fail "nbdkit $name did not start"
  uri="nbd+unix:///?socket=$W/$name.sock"
}

echo "== nbdinfo"
plugin rw "iscsi://127.0.0.1:$P/$IQN/0"
nbdinfo --json "$uri" >"$W/info.json" || fail "nbdinfo failed"
python3 "$(dirname "$0")/../../support/nbdinfo_export.py" "$W/info.json" $SIZE || fail "nbdinfo reported the wrong export"

echo "== nbdcopy in, flush, compare with the LUN file, nbdcopy out"
head -c $((4 << 20)) /dev/urandom >"$W/pattern.img"
nbdcopy "$W/pattern.img" "$uri" || fail "nbdcopy into the plugin failed"
nbdsh -u "$uri" -c 'h.flush()' || fail "flush failed"
cmp -n $((4 << 20)) "$W/pattern.img" "$W/lun.img" || fail "the LUN file does not hold what nbdcopy wrote"
nbdcopy "$uri" "$W/out.img" || fail "nbdcopy out of the plugin failed"
cmp -n $((4 << 20)) "$W/pattern.img" "$W/out.img" || fail "nbdcopy read back other bytes"

echo "== unaligned read works, unaligned write is refused with EINVAL"
# libnbd's strict mode would refuse unaligned requests itself: off, so the plugin answers.
nbdsh -c "
import errno
h.set_strict_mode(0)
h.connect_uri('$uri')
buf = h.pread(1000, 4097)
assert buf == open('$W/pattern.img', 'rb').read()[4097:5097], 'unaligned read differs'
try:
    h.pwrite(b'x' * 100, 3)
    raise SystemExit('unaligned write succeeded')
except nbd.Error as e:
    assert e.errnum == errno.EINVAL, e
" || fail "unaligned requests"
grep -q "filter=blocksize" "$W/nbdkit-rw.log" || fail "the log does not say why an unaligned write fails"

echo "== zero"
nbdsh -u "$uri" -c 'h.zero(65536, 1 << 20); h.flush()' || fail "zero failed"
cmp -n 65536 -i $((1 << 20)) "$W/lun.img" /dev/zero || fail "zero() left data in the LUN file"

echo "== stats counted the writes and the flush"
kill "$pid_rw"; wait "$pid_rw" 2>/dev/null || true
grep -E "^write: [1-9]" "$W/rw.stats" >/dev/null || { cat "$W/rw.stats" >&2; fail "stats: no writes"; }
grep -E "^flush: [1-9]" "$W/rw.stats" >/dev/null || { cat "$W/rw.stats" >&2; fail "stats: no flush"; }

echo "== a read-only LUN refuses writes"
plugin ro "iscsi://127.0.0.1:$PRO/$RO/0"
nbdinfo --json "$uri" | python3 -c 'import json,sys; assert json.load(sys.stdin)["exports"][0]["is_read_only"]' \
  || fail "the read-only LUN is not advertised read-only"
# Strict mode off: the write reaches nbdkit, not only libnbd's own check of the flags.
nbdsh -c "
import errno
h.set_strict_mode(0)
h.connect_uri('$uri')
try:
    h.pwrite(b'\\0' * 512, 0)
    raise SystemExit('write to a read-only LUN succeeded')
except nbd.Error as e:
    assert e.errnum in (errno.EPERM, errno.EROFS), e
" || fail "a write to the read-only LUN was not refused with EPERM/EROFS"

echo "== an unknown target says so"
plugin unknown "iscsi://127.0.0.1:$P/iqn.2026-11.org.iserkit:nope/0"
if nbdinfo "$uri" >"$W/unknown.out" 2>&1; then fail "nbdinfo succeeded on an unknown target"; fi
grep -q "iqn.2026-11.org.iserkit:nope" "$W/nbdkit-unknown.log" || fail "the error does not name the target"
grep -q "unknown at portal" "$W/nbdkit-unknown.log" || fail "the error does not say the target is unknown"
grep -q "$IQN" "$W/nbdkit-unknown.log" || fail "the error does not list the portal's targets"
grep "unknown at portal" "$W/nbdkit-unknown.log" | head -n 1 | sed 's/^/  /'

echo "== CHAP from chap-file= and from libiscsi's variables, a wrong secret in words"
plugin chapfile "iscsi://127.0.0.1:$PCHAP/$SECURE/0" chap-file="$W/alice.chap"
[[ $(nbdinfo --size "$uri") == $((4 << 20)) ]] || fail "CHAP with chap-file= did not log in"
LIBISCSI_CHAP_USERNAME=alice LIBISCSI_CHAP_PASSWORD=alice-secret-1234 plugin chapenv "iscsi://127.0.0.1:$PCHAP/$SECURE/0"
[[ $(nbdinfo --size "$uri") == $((4 << 20)) ]] || fail "CHAP from LIBISCSI_CHAP_* did not log in"
plugin chapwrong "iscsi://127.0.0.1:$PCHAP/$SECURE/0" chap-file="$W/wrong.chap"
if nbdinfo --size "$uri" >/dev/null 2>&1; then fail "a wrong CHAP secret logged in"; fi
grep -qi "chap" "$W/nbdkit-chapwrong.log" || fail "the wrong-secret error does not mention CHAP"
grep -qi "wrong-secret" "$W/nbdkit-chapwrong.log" && fail "the log shows the secret"
grep -i "chap" "$W/nbdkit-chapwrong.log" | head -n 1 | sed 's/^/  /'
chmod 644 "$W/alice.chap"
if nbdkit -f -U "$W/open.sock" "$PLUGIN" url="iscsi://127.0.0.1:$PCHAP/$SECURE/0" chap-file="$W/alice.chap" \
  >"$W/open.log" 2>&1; then fail "a chap-file readable by others was accepted"; fi
grep -q "chmod" "$W/open.log" || fail "the open chap-file message does not say what to do"

echo "== filters stack on the plugin (cache, retry, log)"
plugin filters "iscsi://127.0.0.1:$P/$IQN/0" --filter=cache --filter=retry --filter=log logfile="$W/filters.txt"
nbdcopy "$uri" - | cmp - "$W/lun.img" || fail "reading through cache+retry+log differs from the LUN file"
grep -q "Read" "$W/filters.txt" || fail "the log filter logged no reads"

echo "== a bad URL fails at start-up"
if nbdkit -f -U "$W/bad.sock" "$PLUGIN" url=iscsi://127.0.0.1/ >"$W/bad.log" 2>&1; then fail "a URL without target was accepted"; fi
grep -q "iscsi://" "$W/bad.log" || fail "the bad URL message does not show the form"
sed 's/^/  /' "$W/bad.log" | head -n 2

echo "PASS"
