"""Helpers shared by the benchmark orchestrator (bench.py), its report (bench_report.py) and the
per-request counters (alloc/alloc_count.py, syscalls/syscall_count.py): the workloads they run,
waiting for a process's readiness, stopping the processes a run started, per-process CPU time,
reading fio's JSON report, and the counters' common frame (skip with 77, fio's nbd engine, the
--workloads and --ceiling options, the run's folder and processes). Python 3 standard library only."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
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
# bench.py and its report (bench_report.py): iscsi-perf reads only, so the workloads it can run (-r
# random, -b 512-byte blocks per request); and --rbd's two images, one per target.
ISCSI_PERF_WORKLOADS = ("rr4k-qd32", "sr1m-qd8")
RBD_IMAGES = {"iserkit-target": "bench-iserkit", "tgtd": "bench-tgtd"}


def make_tmpfs_backing(path, size):
    """A LUN file of `size` bytes on tmpfs (/dev/shm): one 8 MiB block of random data repeated (fast
    to make; tmpfs neither compresses nor deduplicates, so the content does not matter)."""
    block = os.urandom(8 * MIB)
    with open(path, "wb") as f:
        for _ in range(size // len(block)):
            f.write(block)


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


def skip(reason):
    """Ends a bench test as skipped (ctest's SKIP_RETURN_CODE 77)."""
    print(f"SKIP: {reason}", flush=True)
    sys.exit(77)


def fio_with_nbd_engine():
    """The path of fio; skips the test when fio or its nbd engine is missing."""
    fio = shutil.which("fio")
    if fio is None:
        skip("fio is not installed")
    if "nbd" not in subprocess.run([fio, "--enghelp"], capture_output=True, text=True).stdout.split():
        skip("this fio has no nbd engine")
    return fio


def chosen_workloads(ap, text):
    """The comma-separated --workloads `text` as a list; an unknown name is an argparse error."""
    workloads = [w for w in text.split(",") if w]
    for w in workloads:
        if w not in WORKLOADS:
            ap.error(f"unknown workload {w}")
    return workloads


def passed(failed):
    """Prints a FAIL line for each message in `failed`; True when there is none."""
    for msg in failed:
        print(f"FAIL: {msg}")
    return not failed


def end_run(procs, run, ok):
    """Stops the run's processes; removes its folder `run` when it passed, else says where its logs are."""
    stop_processes(procs)
    if ok:
        shutil.rmtree(run, ignore_errors=True)
    else:
        print(f"logs kept in {run}")


def ceiling_options(ap, specs, processes, fields):
    """The --ceiling options `specs`, each `fields` names joined by ':' (WORKLOAD:PROCESS, and the
    system call for syscall_count.py), then =N: {(WORKLOAD, PROCESS, ...): N}. An unknown workload
    or process, or another number of names, is an argparse error."""
    ceilings = {}
    for c in specs:
        key, value = c.split("=")
        names = tuple(key.split(":"))
        if len(names) != fields or names[0] not in WORKLOADS or names[1] not in processes:
            ap.error(f"bad --ceiling {c}")
        ceilings[names] = float(value)
    return ceilings


class CountedRun:
    """The frame of a per-request counter's run (alloc_count.py, syscall_count.py), as a `with`
    block: a new folder `dir` (mkdtemp PREFIX in BASE) and the list `procs` for the processes the
    run starts; verdict(failed) prints its FAIL lines and gives the exit status. Leaving the block,
    also by an exception, is end_run(): the processes stopped, the folder removed after a pass."""

    def __init__(self, prefix, base):
        self.dir = tempfile.mkdtemp(prefix=prefix, dir=base)
        self.procs = []
        self.ok = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        end_run(self.procs, self.dir, self.ok)
        return False

    def verdict(self, failed):
        self.ok = passed(failed)
        return 0 if self.ok else 1


def fio_job(stdout):
    """The first job of fio's --output-format=json report (fio's nbd engine prints a line before
    the JSON, so parsing starts at the first '{')."""
    return json.loads(stdout[stdout.index("{"):])["jobs"][0]


def fio_nbd_run(fio, socket_path, workload, seconds, size):
    """One time-based fio run of WORKLOADS[workload] through fio's nbd engine on the Unix socket
    `socket_path`; returns the requests it did. Raises RuntimeError when fio fails or did none."""
    _, rw, bs, qd = WORKLOADS[workload]
    argv = [fio, "--name=a", "--ioengine=nbd", f"--uri=nbd+unix:///?socket={socket_path}", f"--rw={rw}",
            f"--bs={bs}", f"--iodepth={qd}", f"--size={size}", "--time_based",
            f"--runtime={seconds}", "--norandommap", "--randrepeat=0", "--output-format=json"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"fio failed ({out.returncode}): {out.stderr.strip()}")
    job = fio_job(out.stdout)
    done = job["read"]["total_ios"] + job["write"]["total_ios"]
    if job.get("error", 0) != 0 or done == 0:
        raise RuntimeError(f"fio: error {job.get('error')} after {done} requests")
    return done


CHAIN_IQN = "iqn.2026-11.org.iserkit:target"


def start_chain(bin_dir, run, backing, spawn):
    """iserkit-target serving `backing` on 127.0.0.1 (TCP only) and iserkit-nbd in front of it on
    the Unix socket run/nbd.sock, each started by spawn(name, argv) -> Popen (which adds its own
    environment and logs). Returns (target, bridge, socket path) once both are ready."""
    port_file = os.path.join(run, "target.port")
    sock = os.path.join(run, "nbd.sock")
    target = spawn("target", [os.path.join(bin_dir, "iserkit-target"), "--lun", backing, "--listen",
                              "127.0.0.1:0", "--port-file", port_file, "--log-level", "warn", "--no-iser"])
    require_within(lambda: os.path.exists(port_file) and open(port_file).read().strip(), 10, "target port", [target])
    port = int(open(port_file).read().strip())
    bridge = spawn("bridge", [os.path.join(bin_dir, "iserkit-nbd"), f"iscsi://127.0.0.1:{port}/{CHAIN_IQN}/0",
                              "--socket", sock, "--log-level", "warn"])
    require_within(lambda: os.path.exists(sock), 10, "bridge socket", [bridge])
    return target, bridge, sock
