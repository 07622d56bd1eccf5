# Set-up shared by the RBD tests (sourced first by each script in this folder): skip() and fail(),
# BIN and SRC from ctest's environment, the throwaway cluster's helpers
# (tests/support/ceph_cluster.sh; a skip, 77, without the Ceph packages), a temporary folder $tmp,
# and one exit trap that lazily unmounts $tmp/view (a FUSE view, if any), kills every PID in
# pids and $target_pid, stops the cluster and removes $tmp.
#   source "$(dirname "$0")/lib.sh"; rbd_test_init NAME; ...more skips...; rbd_cluster_up
set -euo pipefail
skip() { echo "SKIP: $*" >&2; exit 77; }
BIN=${ISERKIT_BIN:?ISERKIT_BIN must name the bin directory of the build}
SRC=${ISERKIT_SOURCE:?ISERKIT_SOURCE must name the source tree}
source "$SRC/tests/support/ceph_cluster.sh"
ceph_cluster_available || skip "Ceph is not installed (Debian packages ceph-mon ceph-osd ceph-common uuid-runtime)"

pids=()
target_pid=
tmp=
start=$(date +%s)  # when the test began (scripts print their total at PASS)

# rbd_test_init NAME: creates $tmp (/tmp/iserkit-NAME.XXXXXX) and sets the exit trap.
rbd_test_init() {
  tmp=$(mktemp -d "/tmp/iserkit-$1.XXXXXX")
  trap rbd_test_cleanup EXIT
}

rbd_test_cleanup() {
  if [[ -n $tmp ]] && command -v fusermount3 >/dev/null; then fusermount3 -u -z "$tmp/view" 2>/dev/null || true; fi
  local p
  for p in "${pids[@]}" $target_pid; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${pids[@]}" $target_pid; do wait "$p" 2>/dev/null || true; done
  ceph_cluster_stop
  [[ -n $tmp ]] && rm -rf "$tmp"
}

# fail MESSAGE: prints it, the tail of every log in $tmp and the cluster's logs, and exits 1.
fail() {
  echo "FAIL: $*"
  local f
  for f in "$tmp"/*.log; do [[ -f $f ]] && { echo "--- $(basename "$f")"; tail -n 25 "$f"; }; done
  ceph_cluster_logs
  exit 1
} >&2

# rbd_cluster_up: starts the cluster in $tmp/ceph (CEPH_CONF set; pool "rbd" ready) or fails.
rbd_cluster_up() {
  local t0
  t0=$(date +%s)
  ceph_cluster_start "$tmp/ceph" || fail "the test cluster did not start"
  echo "cluster up in $(( $(date +%s) - t0 )) s"
}

# wait_gateway NAME PID: waits (15 s at most, while PID runs) for the port file $tmp/NAME.port of a
# gateway (iserkit-target on an RBD image, log $tmp/NAME.log) and sets NAME_port; skips (77) when
# the build has no RBD backend.
wait_gateway() {
  local name=$1 pid=$2
  for _ in $(seq 150); do
    [[ -s $tmp/$name.port ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [[ ! -s $tmp/$name.port ]]; then
    grep -q "no RBD backend" "$tmp/$name.log" && skip "this build has no RBD backend (WITH_RBD=OFF)"
    fail "gateway $name did not start"
  fi
  eval "${name}_port=$(cat "$tmp/$name.port")"
}

# rbd_failover_init NAME: for the gateway failover tests (fio through iserkit-nbd while a gateway is
# killed): skips (77) without fio's nbd engine, then rbd_test_init NAME and rbd_cluster_up, with
# osd_client_watch_timeout 5 s: a dead gateway's watch on the image lasts that long (30 s by
# default), and only then may librbd on the other gateway break its exclusive lock.
rbd_failover_init() {
  export PATH=/usr/bin:$PATH
  command -v fio >/dev/null || skip "fio is not installed"
  fio --enghelp 2>/dev/null | grep -qw nbd || skip "this fio has no nbd ioengine"
  rbd_test_init "$1"
  rbd_cluster_up
  ceph tell osd.0 config set osd_client_watch_timeout 5 >/dev/null || fail "cannot set osd_client_watch_timeout"
}
