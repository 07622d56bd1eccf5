#!/usr/bin/env bash
# nbdinfo (libnbd) against nbd_memory_server: size, block sizes and transmission flags through
# NBD_OPT_GO/NBD_INFO_*, export listing (NBD_OPT_LIST), read-only, socket activation, Unix and TCP
# (IPv4 and IPv6) listeners, and an unknown export name. Spec: NBD proto.md "Option types".
source "$(dirname "$0")/lib.sh"
requires nbdinfo
requires jq

check() {  # check JSON JQ-EXPR EXPECTED
  local got
  got=$(jq -r "$2" <<<"$1")
  if [ "$got" != "$3" ]; then echo "FAIL: $2: got '$got', want '$3'" >&2; echo "$1" >&2; exit 1; fi
}

# Socket activation ([ CMD ] sets LISTEN_PID/LISTEN_FDS), writable export with 512-byte blocks.
json=$(nbdinfo --json -- [ "$SERVER" --size 64M --name disk --description "test disk" --min-block 512 ])
check "$json" '.protocol' newstyle-fixed
check "$json" '.structured' true
check "$json" '.exports[0]["export-name"]' disk
check "$json" '.exports[0].description' "test disk"
check "$json" '.exports[0]["export-size"]' 67108864
check "$json" '.exports[0].block_size_minimum' 512
check "$json" '.exports[0].block_size_preferred' 4096
check "$json" '.exports[0].block_size_maximum' 33554432
check "$json" '.exports[0].is_read_only' false
for cap in can_flush can_fua can_trim can_zero can_multi_conn can_df; do
  check "$json" ".exports[0].$cap" true
done
check "$json" '.exports[0].can_fast_zero' false
check "$json" '.exports[0].can_cache' false

# Read-only: READ_ONLY set, TRIM and WRITE_ZEROES not offered.
json=$(nbdinfo --json -- [ "$SERVER" --size 1G --read-only ])
check "$json" '.exports[0].is_read_only' true
check "$json" '.exports[0].can_trim' false
check "$json" '.exports[0].can_zero' false
check "$json" '.exports[0]["export-size"]' 1073741824

# The maximum payload is capped at 32 MiB and never below the preferred size.
json=$(nbdinfo --json -- [ "$SERVER" --size 16M --max-block 1M ])
check "$json" '.exports[0].block_size_maximum' 1048576

# Unix socket listener; the export by name, by the default name "", and listed.
start_unix_server "$TMP/sock" --size 8M --name vol1
check "$(nbdinfo --json "nbd+unix:///vol1?socket=$TMP/sock")" '.exports[0]["export-size"]' 8388608
check "$(nbdinfo --json "nbd+unix:///?socket=$TMP/sock")" '.exports[0]["export-size"]' 8388608
check "$(nbdinfo --json --list "nbd+unix:///?socket=$TMP/sock")" '.exports[0]["export-name"]' vol1
nbdinfo --size "nbd+unix:///?socket=$TMP/sock" | grep -qx 8388608
if nbdinfo "nbd+unix:///nope?socket=$TMP/sock" >/dev/null 2>"$TMP/err"; then
  echo "FAIL: unknown export name was accepted" >&2; exit 1
fi
grep -qi "unknown\|not available\|export" "$TMP/err" || { cat "$TMP/err" >&2; exit 1; }
stop_server "${SERVER_PIDS[-1]}"

# TCP listener on an ephemeral port, IPv4 and (when the host has it) IPv6.
"$SERVER" --tcp "*:0" --port-file "$TMP/port" --size 4M 2>>"$TMP/server.log" &
SERVER_PIDS+=($!)
for _ in $(seq 100); do [ -s "$TMP/port" ] && break; sleep 0.05; done
port=$(cat "$TMP/port")
check "$(nbdinfo --json "nbd://127.0.0.1:$port/")" '.exports[0]["export-size"]' 4194304
if python3 -c 'import socket; s=socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null; then
  check "$(nbdinfo --json "nbd://[::1]:$port/")" '.exports[0]["export-size"]' 4194304
else
  echo "note: no IPv6 loopback; IPv6 check skipped" >&2
fi
stop_server "${SERVER_PIDS[-1]}"
echo PASS
