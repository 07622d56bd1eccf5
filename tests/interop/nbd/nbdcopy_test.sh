#!/usr/bin/env bash
# nbdcopy (libnbd) copies a random image into nbd_memory_server and back out, over a Unix socket
# with several connections (CAN_MULTI_CONN) and out-of-order completion, and again through socket
# activation; the copies must be byte-identical (sha256sum). Spec: NBD proto.md "Transmission".
source "$(dirname "$0")/lib.sh"
requires nbdcopy
requires sha256sum

# 40 MiB: random data with a zero hole in the middle (exercises WRITE_ZEROES / sparse paths).
head -c $((16 << 20)) /dev/urandom >"$TMP/in.img"
head -c $((8 << 20)) /dev/zero >>"$TMP/in.img"
head -c $((16 << 20)) /dev/urandom >>"$TMP/in.img"
want=$(sha256sum <"$TMP/in.img")

start_unix_server "$TMP/sock" --size 40M --delay-us 300
uri="nbd+unix:///?socket=$TMP/sock"
nbdcopy --connections=4 --requests=32 "$TMP/in.img" "$uri"
nbdcopy --connections=4 --requests=32 "$uri" "$TMP/out.img"
got=$(sha256sum <"$TMP/out.img")
[ "$got" = "$want" ] || { echo "FAIL: copy differs: $got vs $want" >&2; exit 1; }
# A single connection with large requests (up to the 32 MiB payload limit).
nbdcopy --connections=1 --request-size=$((32 << 20)) "$uri" - | sha256sum | grep -q "${want%% *}" ||
  { echo "FAIL: single-connection large-request copy differs" >&2; exit 1; }
stop_server "${SERVER_PIDS[-1]}"

# Through socket activation ([ CMD ]): copy out of a fresh server must give zeroes.
nbdcopy -- [ "$SERVER" --size 4M ] "$TMP/zero.img"
cmp "$TMP/zero.img" <(head -c $((4 << 20)) /dev/zero) || { echo "FAIL: fresh export is not zero" >&2; exit 1; }
echo PASS
