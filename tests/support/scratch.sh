#!/usr/bin/env bash
# Sourced by integration scripts that start daemons (and FUSE views) in a scratch folder of their
# own (errors_test.sh, nbdkit_plugin_test.sh): scratch_init NAME makes W (/tmp/iserkit-NAME.*) and
# the exit trap that lazily unmounts every path in `mounted`, stops every PID in `started` (only
# the processes this test started) and removes W; fail MESSAGE prints the tail of each $W/*.err and
# $W/*.log and exits 1; serve NAME ARGS... starts an iserkit-target ($BIN) there.
started=()
mounted=()
scratch_init() {
  W=$(mktemp -d "/tmp/iserkit-$1.XXXXXX")
  trap scratch_finish EXIT
}
scratch_finish() {
  set +e
  for m in "${mounted[@]}"; do fusermount3 -u -z "$m" 2>/dev/null; done
  for p in "${started[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$W"
}
fail() {
  echo "FAIL: $*" >&2
  for f in "$W"/*.err "$W"/*.log; do [[ -s $f ]] && { echo "--- $f" >&2; tail -n 20 "$f" >&2; }; done
  exit 1
}

# serve NAME ARGS...: iserkit-target ARGS on a free loopback port, its PID in `started` (so not
# in a $(...) subshell: the cleanup would never see it); its port in $W/NAME.port.
serve() {
  local name=$1; shift
  "$BIN/iserkit-target" "$@" --listen 127.0.0.1:0 --port-file "$W/$name.port" >"$W/target-$name.log" 2>&1 &
  started+=($!)
  for _ in $(seq 100); do [[ -s $W/$name.port ]] && break; sleep 0.05; done
  [[ -s $W/$name.port ]] || fail "iserkit-target $name did not start"
}
