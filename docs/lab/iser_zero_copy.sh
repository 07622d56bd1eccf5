#!/bin/bash
# iSER whole chain in the QEMU lab, with the payload copy counter: iserkit-target (io_uring file
# LUN) ← iSER over Soft-RoCE ← iserkit-nbd ← kernel nbd ← dd. Writes SIZE_MIB MiB of a pseudo-random
# stream, reads it back through the same chain, compares SHA-256s, and requires both ends to
# report "copied_payload_bytes=0" at exit (RFC 7145 data path: RDMA Read/Write into registered
# buffers, no user-space copy). Then the same over TCP for comparison (also 0: kernel copies only).
#
# Run from the host (the reference lab, see /work/shared/lab/README.md):
#   /work/shared/lab/run-lab.sh -m 3072 -t 1500 -e ISERKIT_BIN=$PWD/build/bin \
#       /work/shared/lab/scenarios/with-env.sh --rxe --nbd -- $PWD/docs/lab/iser_zero_copy.sh
# Env: ISERKIT_BIN (default: the build dir next to this file), SIZE_MIB (default 1024),
#      TRANSPORTS (default "iser tcp").
set -u
here=$(cd "$(dirname "$0")" && pwd)
B=${ISERKIT_BIN:-$here/../../build/bin}
IP=${LAB_RXE_IP:?run under with-env.sh --rxe --nbd}
OUT=${LAB_OUT:-/lab/out}
SIZE_MIB=${SIZE_MIB:-1024}
IQN=iqn.2026-11.lab:zerocopy
W=/run/lab/zc
mkdir -p "$W"
rc=0
fail() { echo "FAIL: $*"; rc=1; }

stream() { openssl enc -aes-128-ctr -pass pass:iserkit -nosalt -pbkdf2 </dev/zero 2>/dev/null | head -c $((SIZE_MIB << 20)); }

run_chain() {  # TRANSPORT(iser|tcp)
  local t=$1 scheme=iser
  [[ $t == tcp ]] && scheme=iscsi
  rm -f "$W/port" "$W/nbd.sock" "$OUT/target-$t.stats" "$OUT/nbd-$t.stats"
  truncate -s 0 "$W/lun.img"; truncate -s $((SIZE_MIB + 16))M "$W/lun.img"
  "$B/iserkit-target" --lun "$W/lun.img" --listen "$IP:3260" --iqn $IQN --port-file "$W/port" \
      --stats-file "$OUT/target-$t.stats" >"$OUT/target-$t.log" 2>&1 &
  local target=$!
  for _ in $(seq 200); do [[ -s $W/port ]] && break; sleep 0.1; done
  sleep 0.5
  "$B/iserkit-nbd" "$scheme://$IP/$IQN/0" --socket "$W/nbd.sock" --stats-file "$OUT/nbd-$t.stats" \
      --log-level info >"$OUT/nbd-$t.log" 2>&1 &
  local nbd=$!
  for _ in $(seq 200); do [[ -S $W/nbd.sock ]] && break; sleep 0.1; done
  if ! nbd-client -unix "$W/nbd.sock" /dev/nbd0 -b 4096 >/dev/null 2>&1; then
    fail "$t: nbd-client could not attach"; cat "$OUT/nbd-$t.log"
  else
    local t0 t1 t1b t2 wsum rsum
    t0=$(date +%s.%N)
    stream | dd of=/dev/nbd0 bs=1M oflag=direct iflag=fullblock status=none || fail "$t: write failed"
    t1=$(date +%s.%N)
    wsum=$(stream | sha256sum | cut -d' ' -f1)  # the stream is deterministic: no copy kept
    t1b=$(date +%s.%N)
    rsum=$(dd if=/dev/nbd0 bs=1M count=$SIZE_MIB iflag=direct status=none | sha256sum | cut -d' ' -f1)
    t2=$(date +%s.%N)
    nbd-client -d /dev/nbd0 >/dev/null 2>&1
    echo "$t: wrote $SIZE_MIB MiB in $(echo "$t1 - $t0" | bc) s, read (+sha256) in $(echo "$t2 - $t1b" | bc) s"
    [[ $wsum == "$rsum" ]] && echo "$t: sha256 $wsum (written = read back)" || fail "$t: sha256 differs: $wsum vs $rsum"
  fi
  kill -TERM $nbd; wait $nbd || fail "$t: iserkit-nbd exited with $?"
  kill -TERM $target; wait $target || fail "$t: iserkit-target exited with $?"
  local want=TCP
  [[ $t == iser ]] && want=iSER
  grep -q "logged in over $want" "$OUT/nbd-$t.log" || fail "$t: the session did not run over $want"
  for f in "$OUT/nbd-$t.stats" "$OUT/target-$t.stats"; do
    echo "$t: $(basename "$f"): $(cat "$f" 2>/dev/null)"
    grep -qx 'copied_payload_bytes=0' "$f" 2>/dev/null || fail "$t: $(basename "$f") is not copied_payload_bytes=0"
  done
}

for t in ${TRANSPORTS:-iser tcp}; do run_chain "$t"; done
grep -h 'iSER listening' "$OUT"/target-iser.log 2>/dev/null | head -1
exit $rc
