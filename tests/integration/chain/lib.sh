#!/usr/bin/env bash
# Sourced by the chain tests (NAME_test.sh): their common start — skip() (exit 77), $BIN, a scratch
# directory $tmp (/tmp/iserkit-NAME.*, removed on exit, when every process in $pids is stopped),
# fail() with the target's and the bridge's logs ($tmp/target.log, $tmp/nbd.log) — and
# start_target, round_trip. $TARGET_BIN is iserkit-target: ISERKIT_TARGET_BIN or $BIN's (the
# peer only: scripts/test.sh's TSan stage runs build/'s uninstrumented one against the
# instrumented iserkit-nbd).
set -euo pipefail
skip() { echo "SKIP: $*" >&2; exit 77; }
BIN=${ISERKIT_BIN:?ISERKIT_BIN must name the bin directory of the build}
TARGET_BIN=${ISERKIT_TARGET_BIN:-$BIN/iserkit-target}
tmp=$(mktemp -d "/tmp/iserkit-$(basename "$0" _test.sh).XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; echo "--- target log"; cat "$tmp/target.log"; echo "--- nbd log"; cat "$tmp/nbd.log" 2>/dev/null; exit 1; } >&2

# need TOOL...: skips (77) unless every TOOL is installed.
need() { local tool; for tool in "$@"; do command -v "$tool" >/dev/null || skip "$tool is not installed"; done; }

# start_target LUN [OPTION...]: iserkit-target $iqn with LUN on any free port of 127.0.0.1 (log
# $tmp/target.log); sets target_pid, port and url (the iSCSI URL of its LUN 0).
start_target() {
  "$TARGET_BIN" --iqn "$iqn" --lun "$1" --listen 127.0.0.1:0 --port-file "$tmp/port" "${@:2}" \
    >"$tmp/target.log" 2>&1 &
  target_pid=$!; pids+=("$target_pid")
  for _ in $(seq 100); do [[ -s $tmp/port ]] && break; sleep 0.1; done
  [[ -s $tmp/port ]] || fail "target did not start"
  port=$(cat "$tmp/port")
  url="iscsi://127.0.0.1:$port/$iqn/0"
}

# round_trip URI LUN_FILE [nbdcopy options...]: copies $tmp/random.img into the export and back out
# to $tmp/back.img with nbdcopy, flushes, and fails unless the source, the read-back copy and the
# target's backing file LUN_FILE have one SHA-256 (the data really crossed the chain both ways).
round_trip() {
  local uri=$1 lun=$2 src back disk
  shift 2
  nbdcopy "$@" "$tmp/random.img" "$uri"
  nbdcopy "$@" "$uri" "$tmp/back.img"
  src=$(sha256sum <"$tmp/random.img" | cut -d' ' -f1)
  back=$(sha256sum <"$tmp/back.img" | cut -d' ' -f1)
  [[ $src == "$back" ]] || fail "read back differs: $src vs $back"
  nbdsh -u "$uri" -c 'h.flush()'
  disk=$(sha256sum <"$lun" | cut -d' ' -f1)
  [[ $src == "$disk" ]] || fail "the target's backing file differs from what was written"
  echo "  sha256 $src (source = read back = target's file)"
}
