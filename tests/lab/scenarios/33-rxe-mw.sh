#!/bin/bash
# Soft-RoCE memory windows outside iserkit: type 1 and 2 bind, RDMA through them, invalidation
# lab: opt-in (under a minute; kept out of the default run because a kernel bug it looks for would panic the VM): scripts/lab.sh --only rxe-mw
# Issue 13 item 2. iserkit-mw-probe (tests/lab/tools/mw_probe.cpp, built into the build's bin/)
# on labrxe0: device attributes (max_mw, memory window capability flags), an MR registered
# LOCAL_WRITE|MW_BIND (iserkit's window pool), a type 1 window bound with ibv_bind_mw() and an RDMA
# WRITE through it, a type 2 window bound with IBV_WR_BIND_MW / RDMA WRITE or READ / Local
# Invalidate 200 times over a loopback RC QP pair (data checked), a stale rkey after the Local
# Invalidate refused with a remote access error, Send with Invalidate (does the receiver's
# completion carry IBV_WC_WITH_INV?) and the stale rkey after it, deallocating a bound window.
# Each probe step is one check here.
source "$LAB_SOURCE/tests/lab/guest/lib.sh"
plan soft-roce probe

check soft-roce rxe_up || give_up "no Soft-RoCE device"
command -v iserkit-mw-probe >/dev/null || give_up "iserkit-mw-probe is not built (ninja -C build iserkit-mw-probe)"
start=$EPOCHREALTIME
timeout 120 iserkit-mw-probe -d "$LAB_RDMA_DEV" >"$work/probe.txt" 2>&1
rc=$?
took=$(seconds_since "$start")
cat "$work/probe.txt"
dmesg | tail -n 20
case $rc in
  0) pass probe "$(grep -c '^PASS' "$work/probe.txt") steps passed; $(grep '^INFO swi-completion' "$work/probe.txt" | cut -c 6-)" "$took" ;;
  77) skip probe "$(tail -n 1 "$work/probe.txt")" "$took" ;;
  *) fail probe "$(grep '^FAIL' "$work/probe.txt" | head -n 1) (exit $rc)" "$took" ;;
esac
