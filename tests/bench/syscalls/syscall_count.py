#!/usr/bin/python3
# System calls per request in steady state (issue 23 items 3 and 6), for iserkit-target and
# iserkit-nbd: the chain scripts/bench.sh measures (fio's nbd engine -> iserkit-nbd -> iserkit-target,
# a file LUN on /dev/shm or /var/tmp) with `strace -c -f` attached to both daemons during a measured
# fio run; calls per request = the count / requests fio did. Attaching strace slows the chain (every
# system call stops the traced thread), so only counts are read here, never times; the counts are
# what batching changes (reads that take several PDUs, one gather write per pass of the loop).
#
# --ceiling WORKLOAD:PROCESS:SYSCALL=N (repeatable; SYSCALL is a name such as sendmsg, or "total")
# makes it a check: exit 1 when a measured figure is above N (the bench-label regression test,
# tests/bench/syscalls/CMakeLists.txt). Exit 77 when fio, its nbd engine or strace is missing, or
# strace may not attach (no ptrace here). Python 3 standard library only.
import argparse
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchlib import (MIB, WORKLOADS, CountedRun, ceiling_options, chosen_workloads, fio_nbd_run, fio_with_nbd_engine,  # noqa: E402  (tests/bench)
                      skip, start_chain)

PROCESSES = ("target", "bridge")




def parse_summary(path):
    """strace -c's table: {syscall: calls}."""
    calls = {}
    with open(path) as f:
        for line in f:
            fields = line.split()
            # % time, seconds, usecs/call, calls, [errors,] syscall
            if len(fields) < 5 or not fields[3].isdigit() or fields[-1] == "total":
                continue
            calls[fields[-1]] = int(fields[3])
    return calls


def traced_run(strace, pids, run, fio, sock, workload, seconds, size):
    tracers = {}
    for name, pid in pids.items():
        out = os.path.join(run, f"{name}.{workload}.strace")
        tracers[name] = (subprocess.Popen([strace, "-f", "-c", "-o", out, "-p", str(pid)],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True), out)
    time.sleep(0.5)  # strace attaches every thread before the measured run starts
    for name, (p, _) in tracers.items():
        if p.poll() is not None:
            skip(f"strace cannot attach to the {name}: {p.stderr.read().strip()}")
    try:
        done = fio_nbd_run(fio, sock, workload, seconds, size)
    finally:
        for p, _ in tracers.values():
            p.send_signal(signal.SIGINT)
        for p, _ in tracers.values():
            p.wait(timeout=30)
    return done, {name: parse_summary(out) for name, (_, out) in tracers.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", required=True, help="folder with iserkit-target and iserkit-nbd")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--runtime", type=int, default=2, help="seconds of each measured run")
    ap.add_argument("--size-mib", type=int, default=64, help="backing file size")
    ap.add_argument("--ceiling", action="append", default=[], help="WORKLOAD:PROCESS:SYSCALL=N, fail above N")
    args = ap.parse_args()

    fio = fio_with_nbd_engine()
    strace = shutil.which("strace")
    if strace is None:
        skip("strace is not installed")
    ceilings = ceiling_options(ap, args.ceiling, PROCESSES, 3)
    workloads = chosen_workloads(ap, args.workloads)

    base = "/dev/shm" if os.path.isdir("/dev/shm") else "/var/tmp"
    with CountedRun("iserkit-syscalls.", base) as counted:
        run, procs = counted.dir, counted.procs
        backing = os.path.join(run, "backing.img")
        with open(backing, "wb") as f:
            f.truncate(args.size_mib * MIB)

        def spawn(name, argv):
            log = open(os.path.join(run, f"{name}.log"), "w")
            p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            procs.append(p)
            return p

        target, bridge, sock = start_chain(args.bin, run, backing, spawn)

        failed = []
        shown = ("recvmsg", "sendmsg", "epoll_wait", "io_uring_enter", "preadv2", "pwritev2")
        print(f"{'workload':28} {'process':7} {'requests':>8} {'total/req':>9}  " + " ".join(f"{s:>14}" for s in shown))
        for w in workloads:
            label = WORKLOADS[w][0]
            fio_nbd_run(fio, sock, w, 1, args.size_mib * MIB)  # warm-up: pools, free lists, frames
            done, counts = traced_run(strace, {"target": target.pid, "bridge": bridge.pid}, run, fio, sock, w,
                                      args.runtime, args.size_mib * MIB)
            for p in PROCESSES:
                per = {name: n / done for name, n in counts[p].items()}
                per["total"] = sum(counts[p].values()) / done
                print(f"{label:28} {p:7} {done:8} {per['total']:9.2f}  "
                      + " ".join(f"{per.get(s, 0.0):14.2f}" for s in shown), flush=True)
                for (cw, cp, cs), limit in ceilings.items():
                    if cw == w and cp == p and per.get(cs, 0.0) > limit:
                        failed.append(f"{label}: the {p} makes {per.get(cs, 0.0):.2f} {cs} calls per request, "
                                      f"ceiling {limit}")
        return counted.verdict(failed)


if __name__ == "__main__":
    sys.exit(main())
