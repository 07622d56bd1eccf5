# Starts an iSCSI target for the initiator interop tests and exports ISERKIT_TEST_PORTAL,
# ISERKIT_TEST_URL (a LUN of 64 MiB backed by a temp file or memory). Source it; call
# start_target KIND (tgtd | iserkit-target); stop_target runs from the EXIT trap.
# CHAP: set ISERKIT_TEST_CHAP_USER/ISERKIT_TEST_CHAP_SECRET (and ISERKIT_TEST_MUTUAL_USER/
# ISERKIT_TEST_MUTUAL_SECRET for mutual CHAP) before start_target to make the target require it.
# Exit 77 (skip) with a reason when the target program is missing or cannot start here.

WORKDIR=$(mktemp -d /tmp/iserkit-initiator-interop.XXXXXX)
TARGET_PID=""
IQN="iqn.2026-11.org.iserkit.test:interop-$$"

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

# need_cli [TOOL...]: for the tests of the iserkit CLI: CLI (which must be built) and W (the work
# directory); skips (77) unless every other TOOL the test runs is installed. Then run ARGS... runs
# the CLI, echoed, under a 60 s timeout.
need_cli() {
  CLI="${ISERKIT_BIN:?ISERKIT_BIN not set}/iserkit"
  [ -x "$CLI" ] || fail "$CLI not built"
  W="$WORKDIR"
  local tool
  for tool in "$@"; do command -v "$tool" >/dev/null || skip "$tool not installed"; done
}
run() { echo "+ iserkit $*" >&2; timeout 60 "$CLI" "$@"; }

stop_target() {
  if [ -n "$TARGET_PID" ] && kill -0 "$TARGET_PID" 2>/dev/null; then
    if [ "${TARGET_KIND:-}" = tgtd ]; then
      # tgtd ignores SIGTERM while targets exist; delete them first, then stop it.
      TGT_IPC_SOCKET="$WORKDIR/tgtd.socket" tgtadm --lld iscsi --op delete --mode target --tid 1 --force >/dev/null 2>&1
    fi
    kill "$TARGET_PID" 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$TARGET_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$TARGET_PID" 2>/dev/null
  fi
  rm -rf "$WORKDIR"
}
trap stop_target EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

start_tgtd() {
  command -v tgtd >/dev/null || skip "tgtd not installed (Debian package tgt)"
  command -v tgtadm >/dev/null || skip "tgtadm not installed (Debian package tgt)"
  export TGT_IPC_SOCKET="$WORKDIR/tgtd.socket"
  local port
  for _ in 1 2 3; do
    port=$(free_port)
    tgtd -f --iscsi portal=127.0.0.1:$port >"$WORKDIR/tgtd.log" 2>&1 &
    TARGET_PID=$!
    disown "$TARGET_PID" 2>/dev/null
    for _ in $(seq 1 50); do
      if tgtadm --lld iscsi --op show --mode target >/dev/null 2>&1; then break; fi
      kill -0 "$TARGET_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$TARGET_PID" 2>/dev/null && break
  done
  kill -0 "$TARGET_PID" 2>/dev/null || { cat "$WORKDIR/tgtd.log"; skip "tgtd cannot start as $(id -un): see log above"; }
  truncate -s 64M "$WORKDIR/lun1.img"
  tgtadm --lld iscsi --op new --mode target --tid 1 -T "$IQN" || skip "tgtadm cannot create a target"
  tgtadm --lld iscsi --op new --mode logicalunit --tid 1 --lun 1 -b "$WORKDIR/lun1.img" || skip "tgtadm cannot add a LUN"
  tgtadm --lld iscsi --op bind --mode target --tid 1 -I ALL || skip "tgtadm cannot bind initiators"
  if [ -n "${ISERKIT_TEST_CHAP_USER:-}" ]; then
    # tgtd CHAP: an incoming account bound to the target; --outgoing for the mutual one.
    tgtadm --lld iscsi --op new --mode account --user "$ISERKIT_TEST_CHAP_USER" --password "$ISERKIT_TEST_CHAP_SECRET" ||
      skip "tgtadm cannot create a CHAP account"
    tgtadm --lld iscsi --op bind --mode account --tid 1 --user "$ISERKIT_TEST_CHAP_USER" || skip "tgtadm cannot bind the account"
    if [ -n "${ISERKIT_TEST_MUTUAL_USER:-}" ]; then
      tgtadm --lld iscsi --op new --mode account --user "$ISERKIT_TEST_MUTUAL_USER" --password "$ISERKIT_TEST_MUTUAL_SECRET" ||
        skip "tgtadm cannot create the outgoing account"
      tgtadm --lld iscsi --op bind --mode account --tid 1 --user "$ISERKIT_TEST_MUTUAL_USER" --outgoing ||
        skip "tgtadm cannot bind the outgoing account"
    fi
  fi
  export ISERKIT_TEST_PORTAL="127.0.0.1:$port"
  export ISERKIT_TEST_URL="iscsi://127.0.0.1:$port/$IQN/1"
  export ISERKIT_TEST_TARGET="$IQN"
}

start_iserkit_target() {
  local bin="${ISERKIT_TARGET_BIN:-${ISERKIT_BIN:-}/iserkit-target}"
  [ -x "$bin" ] || skip "iserkit-target not built yet ($bin)"
  local auth=()
  if [ -n "${ISERKIT_TEST_CHAP_USER:-}" ]; then
    auth+=(--chap-user "$ISERKIT_TEST_CHAP_USER")
    if [ -n "${ISERKIT_TEST_MUTUAL_USER:-}" ]; then auth+=(--mutual-user "$ISERKIT_TEST_MUTUAL_USER"); fi
  fi
  # Secrets reach the target through its environment, never its command line.
  ISERKIT_TARGET_CHAP_SECRET="${ISERKIT_TEST_CHAP_SECRET:-}" ISERKIT_TARGET_MUTUAL_SECRET="${ISERKIT_TEST_MUTUAL_SECRET:-}" \
    "$bin" --listen 127.0.0.1:0 --lun mem:64M "${auth[@]}" >"$WORKDIR/target.log" 2>&1 &
  TARGET_PID=$!
  disown "$TARGET_PID" 2>/dev/null
  local line=""
  for _ in $(seq 1 100); do
    line=$(grep -o 'listening on [0-9.]*:[0-9]*' "$WORKDIR/target.log" | head -1)
    [ -n "$line" ] && break
    kill -0 "$TARGET_PID" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$line" ] || { cat "$WORKDIR/target.log"; skip "iserkit-target did not start (no 'listening on' line)"; }
  export ISERKIT_TEST_PORTAL="${line#listening on }"
  # The bundled target names its only target itself: learn it by discovery.
  local name
  name=$("$ISERKIT_BIN/iserkit" discover "iscsi://$ISERKIT_TEST_PORTAL" | head -1)
  [ -n "$name" ] || { echo "FAIL: discovery against iserkit-target returned nothing"; exit 1; }
  export ISERKIT_TEST_TARGET="$name"
  # Its LUN numbering starts at 0.
  export ISERKIT_TEST_URL="iscsi://$ISERKIT_TEST_PORTAL/$name/0"
}

start_target() {
  export TARGET_KIND="$1"
  case "$1" in
    tgtd) start_tgtd ;;
    iserkit-target) start_iserkit_target ;;
    *) echo "unknown target kind: $1"; exit 2 ;;
  esac
}
