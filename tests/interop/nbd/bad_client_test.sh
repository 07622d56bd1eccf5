#!/usr/bin/env bash
# Raw-socket misbehaviour against nbd_memory_server (bad magic, out of range, oversize payloads,
# handshake violations, pipelining, DISC behind writes, a silent client past the handshake limit); the server must survive and exit cleanly.
source "$(dirname "$0")/lib.sh"
requires python3
start_unix_server "$TMP/sock" --size 8M --max-block 1M --handshake-limit 2
python3 "$(dirname "$0")/bad_client.py" "$TMP/sock"
stop_server "${SERVER_PIDS[-1]}"
echo PASS
