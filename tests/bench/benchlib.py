"""Helpers shared by the benchmark orchestrator (bench.py) and the allocation counter
(alloc/alloc_count.py): the workloads both run, waiting for a process's readiness, stopping the
processes a run started, per-process CPU time, and reading fio's JSON report. Python 3 standard
library only."""
import json
import os
import signal
import subprocess
import time

MIB = 1 << 20
GIB = 1 << 30
CLK_TCK = os.sysconf("SC_CLK_TCK")

# Workloads: name -> (label, fio rw mode, request size in bytes, queue depth).
WORKLOADS = {
    "rr4k-qd1": ("4 KiB random read QD1", "randread", 4096, 1),
    "rw4k-qd1": ("4 KiB random write QD1", "randwrite", 4096, 1),
    "rr4k-qd32": ("4 KiB random read QD32", "randread", 4096, 32),
    "rw4k-qd32": ("4 KiB random write QD32", "randwrite", 4096, 32),
    "sr1m-qd8": ("1 MiB sequential read QD8", "read", MIB, 8),
    "sw1m-qd8": ("1 MiB sequential write QD8", "write", MIB, 8),
}


def cpu_seconds(pid):
    """utime + stime of every thread of PID (/proc/PID/stat fields 14 and 15), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def wait_until(pred, seconds, procs=()):
    """Polls pred() every 20 ms for up to `seconds`: True once it holds; False when the time
    passed or one of the Popen objects in `procs` exited first."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pred():
            return True
        if any(p.poll() is not None for p in procs):
            return False
        time.sleep(0.02)
    return pred()


def require_within(pred, seconds, what, procs=()):
    """wait_until(), raising RuntimeError naming `what` (and an early exit) when it fails."""
    if wait_until(pred, seconds, procs):
        return
    for p in procs:
        if p.poll() is not None:
            raise RuntimeError(f"{what}: a process exited early (code {p.returncode})")
    raise RuntimeError(f"{what}: not within {seconds} s")


def stop_processes(procs, grace=10):
    """SIGTERM to every Popen in `procs` still running, then waits up to `grace` seconds for each;
    one still running then is killed (SIGKILL) and reaped. Only the given processes are touched."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def fio_job(stdout):
    """The first job of fio's --output-format=json report (fio's nbd engine prints a line before
    the JSON, so parsing starts at the first '{')."""
    return json.loads(stdout[stdout.index("{"):])["jobs"][0]
