# sd_notify and SIGHUP reload of iserkit-target (reload.py says what is checked).
set -euo pipefail
BIN=${ISERKIT_BIN:?ISERKIT_BIN must point at the build bin directory}
command -v python3 >/dev/null || { echo "SKIP: python3 not installed" >&2; exit 77; }
exec timeout 120 python3 "$(dirname "$0")/reload.py" "$BIN"
