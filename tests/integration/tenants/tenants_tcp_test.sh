#!/usr/bin/env bash
# One iserkit-target, two tenants over TCP (issue 14; target/README.md "Tenants").
#
# Network: one veth underlay between two namespaces, the "target host" (tu) and the "initiator
# host" (iu); on it two VXLAN overlays, VNI 100 (blue, 192.168.100.0/24) and VNI 200 (red,
# 192.168.200.0/24). The target-side VXLAN ends live in the tenants' namespaces (tb, tr), the
# initiator-side ends in per-tenant initiator namespaces (ib, ir). Each initiator namespace also
# routes the other tenant's subnet into its own overlay, so "cannot connect" is the overlay's
# isolation, not a missing route. The target runs in the host namespace and opens each tenant's
# portal inside the tenant's namespace (one process).
#
# Checked:
#  - discovery: each tenant's initiator sees only its own target (iserkit discover, iscsi-ls);
#  - login to the other tenant's target on one's own portal: 0x0203 (target not found), the same
#    answer as for a name that does not exist;
#  - the other tenant's portal cannot be reached at all (TCP connect fails);
#  - the untenanted portal (loopback) serves only the untenanted target;
#  - both tenants do I/O at once (nbdcopy through iserkit-nbd, SHA-256 of what comes back and of
#    the backing files): blue's bridge runs in the host with --netns (its NBD socket on the host,
#    its iSCSI connection in blue's namespace), red's under `ip netns exec`;
#  - per-tenant session cap: red allows 1 session; while red's bridge holds it, another login on
#    red's portal is refused with 0x0302, while blue (cap 4) still takes a second session.
set -euo pipefail
skip() { echo "SKIP: $*" >&2; exit 77; }
[[ $(id -u) == 0 ]] || skip "needs root (network namespaces)"
for tool in ip nbdcopy sha256sum iscsi-ls iscsi-inq; do command -v $tool >/dev/null || skip "$tool is not installed"; done
BIN=${ISERKIT_BIN:?ISERKIT_BIN must name the bin directory of the build}
source "$(dirname "$0")/../../support/target_toml.sh"
ip netns add ikt-probe-$$ || skip "cannot create network namespaces"
ip -n ikt-probe-$$ link add probe type vxlan id 1 dstport 4789 2>/dev/null || { ip netns del ikt-probe-$$; skip "no VXLAN support in this kernel"; }
ip netns del ikt-probe-$$

s=$$   # namespace names are global: make ours unique
tu=ikt-tu-$s iu=ikt-iu-$s tb=ikt-tb-$s tr=ikt-tr-$s ib=ikt-ib-$s ir=ikt-ir-$s
tmp=$(mktemp -d /tmp/iserkit-tenants.XXXXXX)
pids=()
TARGET_PID=""  # start_config_target (tests/support/target_toml.sh) sets it
mnt=""
cleanup() {
  [[ -z $mnt ]] || fusermount3 -u -z "$mnt" 2>/dev/null || true
  for p in $TARGET_PID "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for n in $tu $iu $tb $tr $ib $ir; do ip netns del $n 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"; echo "--- target log"; cat "$tmp/target.log"
  for f in "$tmp"/nbd-*.log; do [[ -e $f ]] && { echo "--- $f"; cat "$f"; }; done; exit 1
} >&2

for n in $tu $iu $tb $tr $ib $ir; do ip netns add $n; ip -n $n link set lo up; done
# Underlay: one veth pair.
ip -n $tu link add ul type veth peer name ul netns $iu
ip -n $tu addr add 10.99.0.1/24 dev ul; ip -n $tu link set ul up
ip -n $iu addr add 10.99.0.2/24 dev ul; ip -n $iu link set ul up
# overlay UNDERLAY_NS PEER_NS LOCAL REMOTE VNI NAME ADDR OTHER_SUBNET
overlay() {
  ip -n $1 link add $6 type vxlan id $5 local $3 remote $4 dstport 4789 dev ul
  ip -n $1 link set $6 netns $2
  ip -n $2 addr add $7/24 dev $6
  ip -n $2 link set $6 up
  [[ -z $8 ]] || ip -n $2 route add $8 dev $6
}
overlay $tu $tb 10.99.0.1 10.99.0.2 100 vx-blue 192.168.100.1 ""
overlay $tu $tr 10.99.0.1 10.99.0.2 200 vx-red 192.168.200.1 ""
overlay $iu $ib 10.99.0.2 10.99.0.1 100 vx-blue 192.168.100.2 192.168.200.0/24
overlay $iu $ir 10.99.0.2 10.99.0.1 200 vx-red 192.168.200.2 192.168.100.0/24

size=$((32 << 20))
truncate -s $size "$tmp/blue.img" "$tmp/red.img"
blue=iqn.2026-11.org.example:blue-vol red=iqn.2026-11.org.example:red-vol plain=iqn.2026-11.org.example:plain
{
  toml_keys 'listen=["127.0.0.1:0"]'
  toml_tenant blue 192.168.100.1:3260 netns="$tb" 'limits={ max_sessions = 4, payload_budget = "8M" }'
  toml_tenant red 192.168.200.1:3260 netns="$tr" 'limits={ max_sessions = 1 }'
  toml_target "$blue" "$tmp/blue.img" tenant=blue
  toml_target "$red" "$tmp/red.img" tenant=red
  toml_target "$plain" mem:16M
} >"$tmp/target.toml"
start_config_target "$tmp" --log-level debug || fail "target did not start"
port=$(cat "$tmp/port")
grep -q "tenant blue: listening on 192.168.100.1:3260 in network namespace $tb" "$tmp/target.log" ||
  fail "blue's portal is not in its namespace"
# The tenant portals exist only inside the tenants' namespaces, not in the target's own.
! ss -ltn | grep -q "192.168.100.1:3260" || fail "blue's portal is in the host namespace"
ip netns exec $tb ss -ltn | grep -q "192.168.100.1:3260" || fail "blue's portal is not listening in $tb"

echo "== discovery: each tenant sees its own target only"
ip netns exec $ib "$BIN/iserkit" discover iscsi://192.168.100.1 >"$tmp/disc-blue" || fail "blue discovery failed"
ip netns exec $ir "$BIN/iserkit" discover iscsi://192.168.200.1 >"$tmp/disc-red" || fail "red discovery failed"
cat "$tmp/disc-blue" "$tmp/disc-red"
[[ $(grep -c '^iqn' "$tmp/disc-blue") == 1 ]] && grep -qx "$blue" "$tmp/disc-blue" || fail "blue sees: $(cat "$tmp/disc-blue")"
[[ $(grep -c '^iqn' "$tmp/disc-red") == 1 ]] && grep -qx "$red" "$tmp/disc-red" || fail "red sees: $(cat "$tmp/disc-red")"
grep -q "portal 192.168.200" "$tmp/disc-blue" && fail "blue's SendTargets lists red's portal"
grep -q "portal 127.0.0.1" "$tmp/disc-blue" && fail "blue's SendTargets lists the host portal"
ip netns exec $ib iscsi-ls iscsi://192.168.100.1 >"$tmp/ls-blue" 2>&1 || fail "iscsi-ls (blue) failed: $(cat "$tmp/ls-blue")"
ip netns exec $ir iscsi-ls iscsi://192.168.200.1 >"$tmp/ls-red" 2>&1 || fail "iscsi-ls (red) failed: $(cat "$tmp/ls-red")"
cat "$tmp/ls-blue" "$tmp/ls-red"
grep -q "$blue" "$tmp/ls-blue" && ! grep -q "$red\|$plain" "$tmp/ls-blue" || fail "iscsi-ls (blue) sees: $(cat "$tmp/ls-blue")"
grep -q "$red" "$tmp/ls-red" && ! grep -q "$blue\|$plain" "$tmp/ls-red" || fail "iscsi-ls (red) sees: $(cat "$tmp/ls-red")"
"$BIN/iserkit" discover "iscsi://127.0.0.1:$port" >"$tmp/disc-host" || fail "host discovery failed"
[[ $(grep -c '^iqn' "$tmp/disc-host") == 1 ]] && grep -qx "$plain" "$tmp/disc-host" || fail "host portal lists: $(cat "$tmp/disc-host")"

echo "== login to the other tenant's target on one's own portal: 0x0203, as for no such target"
out=$(ip netns exec $ib "$BIN/iserkit" inquiry "iscsi://192.168.100.1/$red/0" 2>&1) && fail "blue logged in to red's target"
echo "  $out"
grep -q "target not found" <<<"$out" || fail "not refused as 'target not found': $out"
none=$(ip netns exec $ib "$BIN/iserkit" inquiry "iscsi://192.168.100.1/iqn.2026-11.org.example:nothing/0" 2>&1) || true
[[ ${none//nothing/X} == "${out//red-vol/X}" ]] || fail "another tenant's target is answered differently from no target: '$out' vs '$none'"
ip netns exec $ib iscsi-inq "iscsi://192.168.100.1/$plain/0" >/dev/null 2>&1 && fail "blue logged in to the untenanted target"
"$BIN/iserkit" inquiry "iscsi://127.0.0.1:$port/$blue/0" >/dev/null 2>&1 && fail "the host portal served blue's target"
grep -q "status=0x0203: target not served on this portal" "$tmp/target.log" || fail "the target did not log the refusal"

echo "== the other tenant's portal is unreachable"
ip netns exec $ib timeout 5 bash -c 'exec 3<>/dev/tcp/192.168.200.1/3260' 2>/dev/null && fail "blue reached red's portal"
ip netns exec $ir timeout 5 bash -c 'exec 3<>/dev/tcp/192.168.100.1/3260' 2>/dev/null && fail "red reached blue's portal"
ip netns exec $ib timeout 5 bash -c 'exec 3<>/dev/tcp/192.168.100.1/3260' || fail "blue cannot reach its own portal"

echo "== both tenants do I/O at once"
# blue: the bridge runs here (NBD socket on the host), its iSCSI connection in blue's namespace.
"$BIN/iserkit-nbd" --netns $ib "iscsi://192.168.100.1/$blue/0" --socket "$tmp/blue.sock" >"$tmp/nbd-blue.log" 2>&1 &
blue_nbd=$!; pids+=($blue_nbd)
# red: the whole bridge inside red's initiator namespace (a Unix socket path is reachable from here).
ip netns exec $ir "$BIN/iserkit-nbd" "iscsi://192.168.200.1/$red/0" --socket "$tmp/red.sock" >"$tmp/nbd-red.log" 2>&1 &
red_nbd=$!; pids+=($red_nbd)  # ip netns exec execs the bridge: this is its pid
for _ in $(seq 100); do [[ -S $tmp/blue.sock && -S $tmp/red.sock ]] && break; sleep 0.1; done
[[ -S $tmp/blue.sock && -S $tmp/red.sock ]] || fail "a bridge did not start"
head -c $size /dev/urandom >"$tmp/blue.in"
head -c $size /dev/urandom >"$tmp/red.in"
nbdcopy --requests=8 "$tmp/blue.in" "nbd+unix:///?socket=$tmp/blue.sock" & c1=$!
nbdcopy --requests=8 "$tmp/red.in" "nbd+unix:///?socket=$tmp/red.sock" & c2=$!
wait $c1 || fail "blue's copy in failed"
wait $c2 || fail "red's copy in failed"
nbdcopy "nbd+unix:///?socket=$tmp/blue.sock" "$tmp/blue.out" & c1=$!
nbdcopy "nbd+unix:///?socket=$tmp/red.sock" "$tmp/red.out" & c2=$!
wait $c1 || fail "blue's copy out failed"
wait $c2 || fail "red's copy out failed"
for t in blue red; do
  want=$(sha256sum <"$tmp/$t.in")
  [[ $(sha256sum <"$tmp/$t.out") == "$want" ]] || fail "$t read back other bytes"
  [[ $(sha256sum <"$tmp/$t.img") == "$want" ]] || fail "$t's backing file holds other bytes"
done
grep -q "login .*192.168.100.2.*normal session.*$blue" "$tmp/target.log" ||
  fail "blue's session did not come from blue's overlay address"
echo "  both tenants read back what they wrote (SHA-256)"

echo "== iserkit-fuse --netns: the mount on the host, the connection in blue's namespace"
if [[ -x $BIN/iserkit-fuse ]] && command -v fusermount3 >/dev/null; then
  mnt=$tmp/mnt; mkdir -p "$mnt"
  "$BIN/iserkit-fuse" --netns $ib iscsi://192.168.100.1 "$mnt" --foreground >"$tmp/fuse.log" 2>&1 &
  fuse_pid=$!; pids+=($fuse_pid)
  for _ in $(seq 100); do mountpoint -q "$mnt" && break; sleep 0.1; done
  mountpoint -q "$mnt" || { cat "$tmp/fuse.log" >&2; fail "iserkit-fuse --netns did not mount"; }
  ls "$mnt" >"$tmp/fuse-root"
  [[ $(grep -c '^iqn' "$tmp/fuse-root") == 1 ]] && grep -qx "$blue" "$tmp/fuse-root" || fail "the FUSE view lists: $(cat "$tmp/fuse-root")"
  [[ $(sha256sum <"$mnt/$blue/lun0") == $(sha256sum <"$tmp/blue.in") ]] || fail "blue's LUN read through FUSE differs"
  kill -TERM $fuse_pid; wait $fuse_pid || fail "iserkit-fuse exited with $? on SIGTERM"
  ! mountpoint -q "$mnt" || fail "still mounted after SIGTERM"
  mnt=""
  echo "  the FUSE view shows blue's target only and reads back blue's bytes"
else
  echo "  (iserkit-fuse not built or fusermount3 missing: skipped this part)"
fi

echo "== per-tenant session cap"
# red allows 1 session, which red's bridge holds: one more login on red's portal is refused.
out=$(ip netns exec $ir "$BIN/iserkit" inquiry "iscsi://192.168.200.1/$red/0" 2>&1) && fail "red got a second session"
echo "  $out"
grep -q "status=0x0302" "$tmp/target.log" || fail "no 0x0302 refusal logged"
# blue allows 4: a second session works while the first is open.
ip netns exec $ib "$BIN/iserkit" inquiry "iscsi://192.168.100.1/$blue/0" >/dev/null || fail "blue's second session was refused"

echo "== both bridges stop on SIGTERM with status 0"
# (Under the ASan build a LeakSanitizer report at exit aborts the bridge: 134.)
for b in blue red; do
  if [[ $b == blue ]]; then p=$blue_nbd; else p=$red_nbd; fi
  kill -TERM $p
  for _ in $(seq 100); do kill -0 $p 2>/dev/null || break; sleep 0.1; done
  kill -0 $p 2>/dev/null && fail "$b's bridge did not exit within 10 s of SIGTERM"
  rc=0; wait $p || rc=$?
  ((rc == 0)) || fail "$b's bridge exited with $rc on SIGTERM"
done
echo "PASS"
