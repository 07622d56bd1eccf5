#!/usr/bin/env bash
# Runs nbdsh_test.py (libnbd's Python bindings, the engine of nbdsh) against nbd_memory_server.
source "$(dirname "$0")/lib.sh"
PY=$(nbd_python) || skip "python3-libnbd (nbdsh) is not installed"
"$PY" "$(dirname "$0")/nbdsh_test.py" "$SERVER" "$TMP"
