#!/bin/bash
# iserkit (our initiator) -> tgtd's iSER portal on Soft-RoCE: discovery, write/read round trip
# tgt in Debian is built with iSER. tgtd admits an iSER login only when both its address ACL and
# its initiator-name ACL match, so the target is bound to ALL addresses and to our initiator name.
# 128 MiB of random data written with `iserkit write iser://…` and read back with `iserkit read`,
# SHA-256 compared, and with tgtd's backing file. Large I/O (issue 13 item 3): tgtd states no
# MAXIMUM TRANSFER LENGTH and refuses commands above its 512 KiB RDMA buffers, so the initiator's
# per-command cap must stay 512 KiB (inquiry and the write's --json say so) and the CLI's 4 MiB
# pieces are split into 512 KiB commands (the 128 MiB round trip verifies the data).
# CHAP over iSER: a tgtd account bound to the target; a login without CHAP and one with a wrong
# secret are refused, one with the secret (CHAP_A MD5: all tgtd offers) logs in and round-trips 4 MiB.
# Without iSER in the iserkit CLI: SKIP.
source "$LAB_SOURCE/tests/lab/guest/lib.sh"
plan soft-roce tgtd discovery large-io-limit write-read backing-file chap

check soft-roce rxe_up || give_up "no Soft-RoCE device"
command -v tgtd >/dev/null || give_up "tgt is not installed"
iqn=iqn.2026-11.org.iserkit.lab:tgtd-iser
portal=$LAB_RDMA_IP:3260
cli() { timeout 900 iserkit --initiator-name "$LAB_INITIATOR_IQN" "$@"; }

# Cheap first: does our initiator accept iser:// at all? (before it exists: "not supported")
cli discover "iser://$portal" >"$work/probe.txt" 2>&1
if initiator_refuses_iser "$work/probe.txt"; then
  give_up "the iserkit CLI in this build has no iSER: $(tail -n 1 "$work/probe.txt")"
fi

check tgtd tgtd_iser_up "$iqn" "$work/tgt.img" || give_up "tgtd did not come up"
discover() {
  cli discover "iser://$portal" || return 1
  cli discover "iser://$portal" | grep -q "$iqn" || { echo "SendTargets over iSER did not list $iqn"; return 1; }
  echo "tgtd lists $iqn over iSER"
}
check discovery discover
url=iser://$portal/$iqn/1
large_io_limit() {
  cli inquiry "$url" >"$work/inquiry.txt" 2>&1 || { cat "$work/inquiry.txt"; return 1; }
  grep '^block limits:\|^max transfer' "$work/inquiry.txt"
  grep -qx "max transfer per command: $((512 << 10)) bytes" "$work/inquiry.txt" ||
    { echo "per-command cap to tgtd over iSER is not 512 KiB"; return 1; }
  echo "per-command cap to tgtd over iSER: 512 KiB (tgtd states no MAXIMUM TRANSFER LENGTH); larger I/O is split"
}
check large-io-limit large_io_limit
write_read() {
  local cap
  cli_roundtrip "$url" 128 "$work/tgt.img" || return 1
  cap=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["max_transfer_bytes"])' "$work/write.json")
  [[ $cap == $((512 << 10)) ]] || { echo "the write's per-command cap was ${cap:-missing}, want 524288"; return 1; }
  echo "128 MiB (4 MiB pieces split into 512 KiB commands) written to tgtd and read back over iSER, sha256 matches"
}
check write-read write_read
check backing-file backing_holds_written "$work/tgt.img" 128 "tgtd's"
chap() {
  local secret=lab-chap-secret-1234
  tgtadm --lld iser --op new --mode account --user labuser --password "$secret" &&
    tgtadm --lld iser --op bind --mode account --tid 1 --user labuser || return 1
  if cli inquiry "$url" >/dev/null 2>&1; then echo "tgtd let in a login without CHAP"; return 1; fi
  if ISERKIT_CHAP_SECRET=wrong-secret-5678 cli --chap-user labuser --chap-algorithms MD5 inquiry "$url" >/dev/null 2>&1; then
    echo "tgtd let in a wrong CHAP secret"; return 1
  fi
  head -c "$(mib 4)" /dev/urandom >"$work/chap.in"
  ISERKIT_CHAP_SECRET=$secret cli --chap-user labuser --chap-algorithms MD5 write "$url" --offset "$(mib 200)" -i "$work/chap.in" || return 1
  ISERKIT_CHAP_SECRET=$secret cli --chap-user labuser --chap-algorithms MD5 read "$url" --offset "$(mib 200)" --length "$(mib 4)" \
    -o "$work/chap.out" || return 1
  cmp "$work/chap.in" "$work/chap.out" || return 1
  echo "CHAP over iSER to tgtd: no secret and a wrong one refused, the right one logs in, 4 MiB round trip"
}
check chap chap
tgtadm --op delete --mode system >/dev/null 2>&1   # how tgtd is told to exit
stop_daemon tgtd 20 >/dev/null || true
