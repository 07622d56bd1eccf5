#!/usr/bin/python3
"""The speed guard (issue 23 item 2): one short pinned, interleaved run of the three chains that
matter, printed as ratios beside the last accepted ratios kept in tests/bench/guard-figures.json.

Chains, all on one CPU (taskset -c 0), all serving the same LUN file on /dev/shm:
  iserkit: fio (nbd engine) -> iserkit-nbd -> iserkit-target   (iSCSI/TCP on loopback)
  peer:    fio (nbd engine) -> qemu-nbd (libiscsi) -> tgtd     (iSCSI/TCP on loopback)
  nbdkit:  fio (nbd engine) -> nbdkit file plugin              (one hop, no iSCSI)
Workloads: 4 KiB random read QD1 and QD32, 4 KiB random write QD32, 1 MiB sequential read QD8.
Each workload runs the three chains back to back (the first one rotating), so drift on a shared
machine hits all three alike; only ratios within the run are compared, never absolute figures.

It is a benchmark that prints, not a test that fails: the exit status is 0 whatever the figures
(1 when a chain could not run, 77 when a peer is missing). A ratio more than 15 % below its kept
value is flagged "slower by N %". `--accept` writes this run's ratios as the new kept figures: do
that in the commit of a change that is meant to move a figure. Python 3 standard library only;
run with /usr/bin/python3. scripts/bench.sh --guard runs it on the existing build.
"""
import argparse
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from bench import SOURCE, Bench, Failed, log
from bench_report import machine_info, sh
from benchlib import MIB, WORKLOADS, make_tmpfs_backing

GUARD_WORKLOADS = ("rr4k-qd1", "rr4k-qd32", "rw4k-qd32", "sr1m-qd8")
CHAINS = ("iserkit", "peer", "nbdkit")
COMBO_OF = {"iserkit": "iserkit-nbd>iserkit-target", "peer": "qemu-nbd>tgtd", "nbdkit": "nbdkit-file"}
FIGURES = os.path.join(SOURCE, "tests", "bench", "guard-figures.json")
THRESHOLD = 0.15  # a ratio this much below its kept value is flagged


class Guard(Bench):
    """Bench's process plumbing with the guard's set-up: tmpfs LUN file, no O_DIRECT anywhere
    (tmpfs has none), nbdkit's file plugin as the one-hop server (Bench's nbdkit-file system)."""

    def start_chains(self):
        self.mode, self.pin = "guard", True
        self.cells = tuple(COMBO_OF.values())
        self.start_all()  # iserkit-target, tgtd, the two bridges and nbdkit's file plugin

    def fio_guard(self, chain, wl):
        return self.fio(COMBO_OF[chain], wl)


def metric(wl):
    return "mibs" if WORKLOADS[wl][2] >= MIB else "iops"


def fmt_rate(wl, v):
    if v is None:
        return "failed"
    return f"{v:.0f} MiB/s" if metric(wl) == "mibs" else f"{v / 1000:.1f}K"


def load_kept(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def main():
    ap = argparse.ArgumentParser(description="the speed guard: iserkit chain / peer chain and / one-hop nbdkit, "
                                 "one pinned interleaved run, beside the kept figures")
    ap.add_argument("--bin", default=os.environ.get("ISERKIT_BIN", os.path.join(SOURCE, "build", "bin")),
                    help="directory holding iserkit-target and iserkit-nbd (default build/bin)")
    ap.add_argument("--runtime", type=float, default=3, help="seconds per fio run (default %(default)s)")
    ap.add_argument("--size-mib", type=int, default=256, help="LUN file size in MiB on /dev/shm (default %(default)s)")
    ap.add_argument("--figures", default=FIGURES, help="the kept figures (default %(default)s)")
    ap.add_argument("--accept", action="store_true", help="write this run's ratios as the kept figures")
    ap.add_argument("--json", help="also write this run's figures here")
    ap.add_argument("--qemu-nbd-args", default="--cache=none --aio=io_uring",
                    help="qemu-nbd's cache/aio options (default: %(default)s)")
    ap.add_argument("--keep", action="store_true", help="keep the run dir (logs)")
    ap.add_argument("--smoke", action="store_true", help="harness check (ctest bench_guard_smoke): 1 s per cell, "
                    "64 MiB; exit 1 if a chain failed or a rate is missing or zero, 77 if a peer is missing")
    args = ap.parse_args()
    if args.smoke:
        args.runtime, args.size_mib = 1, 64
        if args.accept:
            ap.error("--smoke measures nothing worth keeping: no --accept")
    args.bin = os.path.abspath(args.bin)
    args.workdir, args.rbd = "/dev/shm", False

    need = ["tgtd", "tgtadm", "qemu-nbd", "fio", "nbdkit", "taskset"]
    miss = [n for n in need if shutil.which(n) is None]
    miss += [p for p in ("iserkit-target", "iserkit-nbd") if not os.access(os.path.join(args.bin, p), os.X_OK)]
    if miss:
        print("SKIP: missing: " + ", ".join(miss) + " (scripts/bench.sh installs the peers and builds)")
        return 77

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    start = time.monotonic()
    # fio's runtime is whole seconds; sub-second values are rounded up by fio itself, so keep ints.
    profile = dict(size=args.size_mib * MIB, runtime=max(1, int(round(args.runtime))), reps=1,
                   workloads=GUARD_WORKLOADS, cells={})
    g = Guard(args, profile)
    g.direct_io = False  # tmpfs refuses O_DIRECT; iserkit-target falls back to the page cache by itself
    g.backing = os.path.join(g.rundir, "lun.img")
    rates = {}  # (chain, wl) -> rate
    cpu = {}  # (chain, wl) -> bridge CPU s/GiB
    ok = False
    try:
        make_tmpfs_backing(g.backing, profile["size"])
        g.start_chains()
        for i, wl in enumerate(GUARD_WORKLOADS):
            order = CHAINS[i % 3:] + CHAINS[:i % 3]
            for chain in order:
                try:
                    r = g.fio_guard(chain, wl)
                    rates[(chain, wl)] = r[metric(wl)]
                    if "cpu_bridge" in r:
                        cpu[(chain, wl)] = r["cpu_bridge"]
                except (Failed, OSError, ValueError, KeyError, subprocess.SubprocessError) as e:
                    g.failures.append(("guard", f"{chain} {wl}", str(e)))
                    log(f"  {chain} {wl}: FAILED: {e}")
        ok = True
    finally:
        g.stop_all()
        if ok and not g.failures and not args.keep:
            shutil.rmtree(g.rundir, ignore_errors=True)
        else:
            log(f"logs kept in {g.logdir}")
    elapsed = time.monotonic() - start

    kept = load_kept(args.figures)
    kept_ratios = (kept or {}).get("ratios", {})
    ratios = {}
    lines = []
    head = (f"{'workload':<28}{'iserkit':>11}{'peer':>11}{'nbdkit':>11}  {'/ peer':>7} {'(kept)':>7}  "
            f"{'/ nbdkit':>8} {'(kept)':>7}  {'bridge CPU / qemu-nbd':>21}")
    lines.append(head)
    flagged = []
    for wl in GUARD_WORKLOADS:
        a, p, n = (rates.get((c, wl)) for c in CHAINS)
        row = f"{WORKLOADS[wl][0]:<28}{fmt_rate(wl, a):>11}{fmt_rate(wl, p):>11}{fmt_rate(wl, n):>11}  "
        notes = []
        for key, den in (("peer", p), ("nbdkit", n)):
            r = a / den if a and den else None
            k = kept_ratios.get(wl, {}).get(key)
            if r is not None:
                ratios.setdefault(wl, {})[key] = round(r, 3)
            width = 7 if key == "peer" else 8
            row += (f"{r:>{width}.2f}" if r is not None else f"{'-':>{width}}") + \
                   (f" {k:>7.2f}" if k is not None else f" {'-':>7}") + "  "
            if r is not None and k and r < k * (1 - THRESHOLD):
                notes.append(f"/ {key} slower by {100 * (1 - r / k):.0f} %")
        cb, cp = cpu.get(("iserkit", wl)), cpu.get(("peer", wl))
        if cb and cp:
            ratios.setdefault(wl, {})["bridge_cpu_vs_qemu_nbd"] = round(cb / cp, 3)
            row += f"{cb / cp:>21.2f}"
        else:
            row += f"{'-':>21}"
        lines.append(row)
        flagged += [f"{WORKLOADS[wl][0]}: {n}" for n in notes]

    commit = sh(["git", "rev-parse", "--short", "HEAD"])
    dirty = bool(sh(["git", "status", "--porcelain", "--untracked-files=no"]))
    print()
    print(f"speed guard: pinned to CPU 0, one interleaved run, {profile['runtime']} s per cell, "
          f"{args.size_mib} MiB LUN file on /dev/shm; commit {commit}{' (dirty tree)' if dirty else ''}")
    if kept:
        print(f"kept figures: {os.path.relpath(args.figures, SOURCE)} (commit {kept.get('commit', '?')}, "
              f"{kept.get('date', '?')})")
    else:
        print(f"kept figures: none yet ({args.figures}); run with --accept to keep these")
    print("\n".join(lines))
    if flagged:
        print("\n".join(flagged))
    elif kept:
        print("no ratio fell by more than 15 % against the kept figures")
    if g.failures:
        print("failures: " + "; ".join(f"{s}: {r}" for _, s, r in g.failures))
    print(f"elapsed {elapsed:.0f} s")

    doc = dict(commit=commit + ("+dirty" if dirty else ""), date=datetime.date.today().isoformat(),
               machine=dict(machine_info()), runtime_s=profile["runtime"], size_mib=args.size_mib,
               rates={wl: {c: rates.get((c, wl)) for c in CHAINS} for wl in GUARD_WORKLOADS}, ratios=ratios)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    if args.smoke:
        bad = [f"{c} {wl}" for wl in GUARD_WORKLOADS for c in CHAINS if not rates.get((c, wl))]
        bad += [f"{wl} / {k}" for wl in GUARD_WORKLOADS for k in ("peer", "nbdkit") if not ratios.get(wl, {}).get(k)]
        for b in bad:
            print(f"FAIL: no figure for {b}")
        return 1 if bad or g.failures else 0
    if args.accept:
        if g.failures:
            print("not accepted: a chain failed")
            return 1
        with open(args.figures, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        print(f"accepted: {args.figures}")
    return 1 if g.failures else 0


if __name__ == "__main__":
    sys.exit(main())
