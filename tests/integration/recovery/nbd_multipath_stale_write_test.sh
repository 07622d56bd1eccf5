#!/usr/bin/env bash
# A write left in a failed path's TCP send queue must never land after newer data (issue 15).
# iserkit-target in a network namespace on two portals (two veth pairs, lib.sh two_links),
# iserkit-nbd with both URLs (--multipath failover). Link 1 goes down; a 4 KiB write of pattern A
# is issued at once: it goes out on path 0 (not yet noticed down) and sits, whole (immediate data),
# in that connection's TCP send queue. Path 0 is declared lost (NOP-Out ping, then the path
# replacement timeout), the write is retried on path 1 and completes; a 4 KiB write of pattern B
# to the same block follows on path 1 and is flushed. The bridge is stopped (so no reinstatement
# login ends the target's old session first), link 1 comes up again, and once nothing is left
# queued towards portal 1 (or 40 s passed) the block on the target's file must hold B. Before the
# fix, the initiator's graceful close left A in an orphaned socket that TCP retransmitted when the
# link returned, and the target ran it on its still-open old connection: the block held A.
# Bounded: about 20 s. Skips (77) without python3-libnbd (nbdsh) or network namespaces.
source "$(dirname "$0")/lib.sh"
command -v nbdsh >/dev/null || skip "nbdsh is not installed (package python3-libnbd)"
command -v ss >/dev/null || skip "ss (iproute2) is not installed"
two_links
truncate -s 16M "$tmp/lun.img"
start_target_two_portals

start_multipath_bridge --path-replacement-timeout 1 --replacement-timeout 30
uri="nbd+unix:///?socket=$tmp/mp.sock"

# pattern BYTE: 4 KiB of one byte value, as a Python bytes expression.
nbd_write() { nbdsh -u "$uri" -c "h.pwrite(bytes([$1]) * 4096, 0); h.flush()" >>"$tmp/nbdsh.log" 2>&1; }
nbd_write 0x11 || fail "first write (path 0 up) failed"

link_down 1
nbd_write 0xaa || fail "write A (queued on path 0, retried on path 1) failed"
grep -q "path 0 down" "$tmp/mp.log" || fail "the bridge did not notice path 0 going down"
nbd_write 0xbb || fail "write B (path 1) failed"
kill -TERM $bridge_pid; wait $bridge_pid || fail "iserkit-nbd exited with $?"

link_up 1
# Whatever the initiator's namespace still has queued towards portal 1 goes out now (an orphaned
# socket retransmits with backoff); wait until nothing is left queued, then let the target run it.
guard=$((SECONDS + 40))
while :; do
  queued=$(ip netns exec "$ns_initiator" ss -tnH dst 10.201.1.1 | awk '$3 > 0' | wc -l)
  ((queued == 0)) && break
  ((SECONDS < guard)) || fail "bytes stayed queued towards portal 1 for 40 s"
  sleep 0.5
done
echo "  sockets towards portal 1 after link up: $(ip netns exec "$ns_initiator" ss -tanH dst 10.201.1.1 | wc -l)"
sleep 2

got=$(od -An -v -tx1 -N4096 "$tmp/lun.img" | tr -s ' \n' '\n' | sort -u | grep -v '^$' | tr '\n' ' ')
echo "  block 0 holds byte value(s): $got"
[[ $got == "bb " ]] || fail "block 0 must hold the newer write (bb), holds: $got — a stale write landed"
echo PASS
