#!/usr/bin/python3
# Heap allocations per request in steady state (issue 10 item 8), for iserkit-target and
# iserkit-nbd. Starts both on loopback with the counting allocator preloaded (alloc_counter.cpp,
# LD_PRELOAD; counts malloc/calloc/realloc/aligned allocations, i.e. every operator new), drives them
# with fio's nbd engine (fio -> iserkit-nbd -> iserkit-target, the chain scripts/bench.sh measures),
# and for each workload: a warm-up run, a snapshot of both counters (SIGUSR2), a measured run of
# --runtime seconds, another snapshot; allocations per request = difference / requests fio did.
# Each fio run is a fresh NBD connection, so the bridge's per-connection work (handshake, the
# connection's coroutine) is spread over the run's thousands of requests.
# One NBD request of up to 8 MiB is one SCSI command, so the target's figure is per SCSI command.
#
# --stacks DIR records where the first measured run's allocations come from (the counter's
# ISERKIT_ALLOC_STACKS): DIR/target.stacks and DIR/bridge.stacks, for alloc_stacks.py.
#
# --ceiling WORKLOAD:PROCESS=N (repeatable) makes it a check: exit 1 when a measured figure is
# above N (the bench-mode regression test, tests/bench/alloc/CMakeLists.txt). Exit 77 when fio or
# its nbd engine is missing. Python 3 standard library only; run it with /usr/bin/python3.
import argparse
import json
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchlib import (MIB, WORKLOADS, CountedRun, ceiling_options, chosen_workloads, fio_nbd_run, fio_with_nbd_engine,  # noqa: E402  (tests/bench)
                      require_within, start_chain)

PROCESSES = ("target", "bridge")


class Counter:
    """The report file of one preloaded process; snapshot() asks for a line and parses it."""

    def __init__(self, path):
        self.path = path
        self.proc = None

    def lines(self):
        try:
            with open(self.path) as f:
                return [l for l in f.read().splitlines() if l.startswith("allocations=")]
        except FileNotFoundError:
            return []

    def snapshot(self):
        before = len(self.lines())
        self.proc.send_signal(signal.SIGUSR2)
        require_within(lambda: len(self.lines()) > before, 30, "allocation counter report", [self.proc])
        fields = dict(kv.split("=") for kv in self.lines()[before].split())
        return {k: int(v) for k, v in fields.items()}




def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", required=True, help="folder with iserkit-target and iserkit-nbd")
    ap.add_argument("--counter", required=True, help="path of libiserkit_alloc_counter.so")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--runtime", type=int, default=3, help="seconds of each measured run")
    ap.add_argument("--warmup", type=int, default=1, help="seconds of each warm-up run")
    ap.add_argument("--size-mib", type=int, default=64, help="backing file size")
    ap.add_argument("--ceiling", action="append", default=[], help="WORKLOAD:PROCESS=N, fail above N")
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--stacks", help="folder for each process's allocation stacks of the first measured run")
    args = ap.parse_args()

    fio = fio_with_nbd_engine()
    ceilings = ceiling_options(ap, args.ceiling, PROCESSES, 2)
    workloads = chosen_workloads(ap, args.workloads)

    with CountedRun("iserkit-alloc.", "/var/tmp") as counted:
        run, procs = counted.dir, counted.procs
        backing = os.path.join(run, "backing.img")
        with open(backing, "wb") as f:
            chunk = os.urandom(MIB)
            for _ in range(args.size_mib):
                f.write(chunk)
        counters = {p: Counter(os.path.join(run, f"{p}.alloc")) for p in PROCESSES}

        def spawn(name, argv):
            env = dict(os.environ, LD_PRELOAD=args.counter, ISERKIT_ALLOC_COUNTER=counters[name].path)
            if args.stacks:
                os.makedirs(args.stacks, exist_ok=True)
                env["ISERKIT_ALLOC_STACKS"] = os.path.join(os.path.abspath(args.stacks), f"{name}.stacks")
            log = open(os.path.join(run, f"{name}.log"), "w")
            p = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            procs.append(p)
            counters[name].proc = p
            return p

        target, bridge, sock = start_chain(args.bin, run, backing, spawn)

        results = {}
        failed = []
        print(f"{'workload':32} {'requests':>9} {'target/req':>11} {'bridge/req':>11}"
              f" {'target B/req':>13} {'bridge B/req':>13}")
        for w in workloads:
            label = WORKLOADS[w][0]
            fio_nbd_run(fio, sock, w, args.warmup, args.size_mib * MIB)  # warm-up: pools, free lists, frames
            before = {p: counters[p].snapshot() for p in PROCESSES}
            done = fio_nbd_run(fio, sock, w, args.runtime, args.size_mib * MIB)
            after = {p: counters[p].snapshot() for p in PROCESSES}
            row = {"label": label, "requests": done}
            for p in PROCESSES:
                row[p] = (after[p]["allocations"] - before[p]["allocations"]) / done
                row[p + "_bytes"] = (after[p]["bytes"] - before[p]["bytes"]) / done
                limit = ceilings.get((w, p))
                if limit is not None and row[p] > limit:
                    failed.append(f"{label}: {p} makes {row[p]:.2f} allocations per request, ceiling {limit}")
            results[w] = row
            print(f"{label:32} {done:9} {row['target']:11.2f} {row['bridge']:11.2f}"
                  f" {row['target_bytes']:13.0f} {row['bridge_bytes']:13.0f}", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=2)
        return counted.verdict(failed)


if __name__ == "__main__":
    sys.exit(main())
