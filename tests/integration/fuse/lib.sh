# Helpers for the FUSE view tests: start iserkit-target processes on kernel-chosen ports, mount
# iserkit-fuse on a temp directory, clean everything up (only what the test started, by PID).
# Source, don't run. Needs ISERKIT_BIN. Skips (exit 77) where FUSE or the binaries are missing.
# ISERKIT_TARGET_BIN names another iserkit-target (the peer only: scripts/test.sh's TSan stage
# runs build/'s uninstrumented one against the instrumented iserkit-fuse and iserkit).
set -euo pipefail
skip() { echo "SKIP: $*" >&2; exit 77; }
BIN=${ISERKIT_BIN:?ISERKIT_BIN must name the bin directory of the build}
TARGET_BIN=${ISERKIT_TARGET_BIN:-$BIN/iserkit-target}
export PATH=/usr/bin:/usr/sbin:/sbin:$PATH   # system python3 (xattrs), losetup, mkfs
[[ -c /dev/fuse ]] || skip "/dev/fuse is missing"
command -v fusermount3 >/dev/null || skip "fusermount3 is not installed (package fuse3)"
[[ -x $BIN/iserkit-fuse ]] || skip "iserkit-fuse is not built (libfuse3-dev missing at configure time)"
[[ -x $TARGET_BIN ]] || skip "iserkit-target is not built ($TARGET_BIN)"
command -v python3 >/dev/null || skip "python3 is not installed"

tmp=$(mktemp -d /tmp/iserkit-fuse-test.XXXXXX)
pids=()
mounts=()
cleanup() {
  set +e
  # Unmount whatever is still listed, also a dead mount whose daemon crashed (mountpoint(1) cannot
  # stat those: "Transport endpoint is not connected"), so no failed run leaves a mount behind.
  for m in "${mounts[@]}"; do fusermount3 -u -z "$m" 2>/dev/null; done
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null; kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$tmp"/*.log; do [[ -f $f ]] && { echo "--- $f" >&2; tail -n 40 "$f" >&2; }; done
  exit 1
}

# start_target NAME ARGS...: starts iserkit-target with ARGS on 127.0.0.1:${port:-0} (set port=N
# to restart a target where it was); sets
# target_pid[NAME] and target_port[NAME]; log in $tmp/NAME.log.
declare -A target_pid target_port
start_target() {
  local name=$1; shift
  rm -f "$tmp/$name.port"
  "$TARGET_BIN" "$@" --listen "127.0.0.1:${port:-0}" --port-file "$tmp/$name.port" >"$tmp/$name.log" 2>&1 &
  target_pid[$name]=$!
  pids+=($!)
  for _ in $(seq 100); do [[ -s $tmp/$name.port ]] && break; kill -0 "${target_pid[$name]}" 2>/dev/null || break; sleep 0.1; done
  [[ -s $tmp/$name.port ]] || fail "iserkit-target $name did not start"
  target_port[$name]=$(cat "$tmp/$name.port")
}

# mount_view MOUNTPOINT ARGS...: runs iserkit-fuse ARGS MOUNTPOINT in the foreground (background
# job); sets fuse_pid; log in $tmp/fuse-<basename>.log; waits for the mount.
mount_view() {
  local mnt=$1; shift
  mkdir -p "$mnt"
  "$BIN/iserkit-fuse" "$@" "$mnt" --foreground --log-level info >"$tmp/fuse-$(basename "$mnt").log" 2>&1 &
  fuse_pid=$!
  pids+=($fuse_pid)
  mounts+=("$mnt")
  for _ in $(seq 100); do mountpoint -q "$mnt" && return 0; kill -0 $fuse_pid 2>/dev/null || break; sleep 0.1; done
  fail "iserkit-fuse did not mount $mnt"
}

# unmount_view MOUNTPOINT PID: SIGTERM, wait for a clean exit (status 0) and the mount to go.
unmount_view() {
  local mnt=$1 pid=$2
  kill -TERM "$pid"
  wait "$pid" || fail "iserkit-fuse exited with $? on SIGTERM"
  ! mountpoint -q "$mnt" || fail "$mnt still mounted after SIGTERM"
}

# fio_name PATH: PATH with ':' escaped (fio splits --filename on ':').
fio_name() { printf '%s' "${1//:/\\:}"; }
