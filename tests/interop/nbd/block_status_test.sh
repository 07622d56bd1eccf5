#!/usr/bin/env bash
# BLOCK_STATUS (base:allocation) against nbd_memory_server: block_status_test.py (libnbd edge cases)
# and nbdinfo --map (holes and data of a sparse export, REQ_ONE through --totals).
# Spec: NBD proto.md "Metadata querying", NBD_CMD_BLOCK_STATUS.
source "$(dirname "$0")/lib.sh"
PY=$(nbd_python) || skip "python3-libnbd (nbdsh) is not installed"
requires nbdinfo
requires jq
"$PY" "$(dirname "$0")/block_status_test.py" "$SERVER"

# nbdinfo --map on a sparse export: write two extents with nbdsh, then map.
start_unix_server "$TMP/sock" --size 16M
uri="nbd+unix:///?socket=$TMP/sock"
"$PY" - "$uri" <<'PY'
import sys, nbd
h = nbd.NBD(); h.connect_uri(sys.argv[1])
h.pwrite(b"x" * 65536, 1 << 20)
h.pwrite(b"y" * 131072, 8 << 20)
h.shutdown()
PY
map=$(nbdinfo --map --json "$uri")
want='[{"offset":0,"length":1048576,"type":3},{"offset":1048576,"length":65536,"type":0},{"offset":1114112,"length":7274496,"type":3},{"offset":8388608,"length":131072,"type":0},{"offset":8519680,"length":8257536,"type":3}]'
got=$(jq -c '[.[] | {offset, length, type}]' <<<"$map")
[ "$got" = "$want" ] || { echo "FAIL: nbdinfo --map: got $got, want $want" >&2; exit 1; }
# --totals: 196608 bytes (1.2%) of 16 MiB are data.
nbdinfo --map --totals "$uri" | grep -E '^ *196608 +1\.2% +0 +data' >/dev/null \
  || { nbdinfo --map --totals "$uri" >&2; echo "FAIL: nbdinfo --map --totals" >&2; exit 1; }
stop_server "${SERVER_PIDS[-1]}"
echo PASS
