#!/usr/bin/env bash
# A throwaway single-node Ceph cluster for the RBD backend tests: one monitor and one OSD
# (BlueStore on a sparse file), on loopback, cephx on, pool size 1, no manager. Started in
# about 15 s from Debian's ceph-mon/ceph-osd/ceph-common and stopped by PID; nothing is installed
# system-wide (no systemd units, no /etc/ceph, no /var/lib/ceph).
#
# Sourced by a test:
#   source "$ISERKIT_SOURCE/tests/support/ceph_cluster.sh"
#   ceph_cluster_available || skip "..."   # are the programs there?
#   ceph_cluster_start DIR                  # sets CEPH_CONF=DIR/ceph.conf; pool "rbd" ready
#   rbd create rbd/vol --size 64M           # the ceph/rbd CLIs find the cluster through CEPH_CONF
#   ceph_cluster_stop                       # kill -9 of both daemons (also call it from the trap)
# Logs: DIR/log/{mon.a,osd.0,client.admin}.log; ceph_cluster_logs prints their tails.

ceph_cluster_pids=()

ceph_cluster_available() {
  local p
  for p in ceph-mon ceph-osd ceph ceph-authtool monmaptool rbd uuidgen; do
    command -v "$p" >/dev/null || return 1
  done
}

# ceph_cluster_start DIR: creates the cluster in DIR (which must be empty or absent) and waits
# until pool "rbd" takes I/O. Returns non-zero (after printing why) if it does not come up in 90 s.
ceph_cluster_start() {
  local dir=$1
  mkdir -p "$dir"/{mon,osd,run,log}
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  local fsid
  fsid=$(uuidgen)
  # The OSD's own key goes to its data folder; the monitor's and client.admin's to DIR/keyring.
  cat >"$dir/ceph.conf" <<EOF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$port
ms bind ipv6 = false
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
run dir = $dir/run
admin socket = $dir/run/\$name.asok
log file = $dir/log/\$name.log
keyring = $dir/keyring
mon data = $dir/mon/\$cluster-\$id
osd data = $dir/osd/\$cluster-\$id
osd pool default size = 1
osd pool default min size = 1
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
osd objectstore = bluestore
bluestore block create = true
bluestore block size = 4294967296
bluestore fsck on mount = false
osd memory target = 939524096
bluestore cache autotune = false
bluestore cache size = 134217728
[osd]
keyring = $dir/osd/\$cluster-\$id/keyring
EOF
  export CEPH_CONF=$dir/ceph.conf
  ceph-authtool --create-keyring "$dir/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
  ceph-authtool "$dir/keyring" --gen-key -n client.admin --cap mon 'allow *' --cap osd 'allow *' \
    --cap mgr 'allow *' >/dev/null
  monmaptool --create --addv a "[v2:127.0.0.1:$port]" --fsid "$fsid" "$dir/monmap" >/dev/null
  ceph-mon --mkfs -i a --monmap "$dir/monmap" --keyring "$dir/keyring" || return 1
  ceph-mon -i a --foreground >/dev/null 2>&1 &
  ceph_cluster_pids+=($!)
  local uuid id
  uuid=$(uuidgen)
  id=$(timeout 60 ceph --connect-timeout 30 osd new "$uuid") || { echo "ceph_cluster: the monitor did not answer" >&2; return 1; }
  mkdir -p "$dir/osd/ceph-$id"
  ceph-osd -i "$id" --mkfs --mkkey --no-mon-config --osd-uuid "$uuid" >"$dir/log/osd-mkfs.log" 2>&1 ||
    { echo "ceph_cluster: OSD mkfs failed" >&2; tail -5 "$dir/log/osd-mkfs.log" >&2; return 1; }
  ceph auth add "osd.$id" osd 'allow *' mon 'allow profile osd' -i "$dir/osd/ceph-$id/keyring" >/dev/null 2>&1
  ceph-osd -i "$id" --foreground >/dev/null 2>&1 &
  ceph_cluster_pids+=($!)
  ceph osd pool create rbd 8 8 >/dev/null 2>&1 || { echo "ceph_cluster: pool create failed" >&2; return 1; }
  # rbd pool init waits for the pool's PGs, i.e. for the OSD to be up.
  timeout 90 rbd pool init rbd || { echo "ceph_cluster: pool rbd did not become ready" >&2; return 1; }
}

ceph_cluster_stop() {
  local p
  for p in "${ceph_cluster_pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${ceph_cluster_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  ceph_cluster_pids=()
}

ceph_cluster_logs() {
  local dir=${CEPH_CONF%/ceph.conf} f
  for f in "$dir"/log/*.log; do echo "--- $f"; tail -n 15 "$f"; done
}
