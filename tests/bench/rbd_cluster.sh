#!/usr/bin/env bash
# The Ceph side of `bench.py --rbd`: starts a throwaway one-monitor, one-OSD cluster in DIR
# (tests/support/ceph_cluster.sh), imports FILE into each IMAGE of pool "rbd" (so both targets read
# the same random data, not never-written objects), prints "ready CEPH_CONF_PATH" on stdout, then
# waits until its stdin closes (or SIGTERM/SIGINT/SIGHUP) and stops both daemons by PID.
# Exits 1 (after printing why and the daemons' log tails on stderr) when the cluster does not come up.
#
# Usage: rbd_cluster.sh DIR FILE IMAGE...   (bench.py runs it; stdin is its lifeline)
set -u
source "$(dirname "${BASH_SOURCE[0]}")/../support/ceph_cluster.sh"
trap 'ceph_cluster_stop; exit 143' TERM INT HUP
dir=$1 file=$2
shift 2
if ! ceph_cluster_start "$dir"; then
  ceph_cluster_logs >&2
  ceph_cluster_stop
  exit 1
fi
for image in "$@"; do
  if ! rbd import --no-progress "$file" "rbd/$image" >&2; then
    echo "rbd_cluster: rbd import of $image failed" >&2
    ceph_cluster_stop
    exit 1
  fi
done
echo "ready $CEPH_CONF"
# Wait for bench.py to close our stdin (also when it dies: EOF), then stop the cluster.
read -r _ || true
ceph_cluster_stop
