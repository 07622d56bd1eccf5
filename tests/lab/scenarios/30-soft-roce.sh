#!/bin/bash
# Soft-RoCE itself: rdma_rxe on a dummy netdev, the device is ACTIVE, rping over rdma_cm, ib_write_bw
# The iSER scenarios stand on this; when it fails they fail too, and this says it is the lab's RDMA
# (not our code). ib_write_bw's figure is for orientation only: rxe under TCG is slow.
source "$LAB_SOURCE/tests/lab/guest/lib.sh"
plan rxe-device rping ib-write-bw

check rxe-device rxe_up || give_up "no Soft-RoCE device"
client_server() {  # client_server PORT SERVER-CMD -- CLIENT-CMD...
  local port=$1 server=() rc
  shift
  while [[ $1 != -- ]]; do server+=("$1"); shift; done
  shift
  daemon server "${server[@]}"
  # listening on rdma_cm port PORT?
  wait_until 60 bash -c "rdma resource show cm_id 2>/dev/null | grep -q 'state LISTEN.*:$port\b'" ||
    { echo "the server never listened on rdma_cm port $port"; stop_daemon server 5; return 1; }
  timeout 300 "$@"
  rc=$?
  stop_daemon server 10 >/dev/null
  return $rc
}
rping_test() {
  client_server 7174 rping -s -a "$LAB_RDMA_IP" -p 7174 -C 10 -- rping -c -a "$LAB_RDMA_IP" -p 7174 -C 10 -S 4096 -v \
    >"$work/rping.txt" 2>&1 || { tail -n 5 "$work/rping.txt"; return 1; }
  echo "rping: 10 RDMA READ/WRITE exchanges of 4 KiB over rdma_cm to $LAB_RDMA_IP"
}
check rping rping_test
bw_test() {
  client_server 18515 ib_write_bw -R -F -d "$LAB_RDMA_DEV" -D 3 -- \
    ib_write_bw -R -F -d "$LAB_RDMA_DEV" -D 3 "$LAB_RDMA_IP" >"$work/bw.txt" 2>&1 || { tail -n 5 "$work/bw.txt"; return 1; }
  cat "$work/bw.txt"
  echo "ib_write_bw over rdma_cm: $(awk '/^ *65536/ { print $4 " MB/s average" }' "$work/bw.txt") (TCG; orientation only)"
}
if command -v ib_write_bw >/dev/null; then check ib-write-bw bw_test; else skip ib-write-bw "perftest is not installed"; fi
