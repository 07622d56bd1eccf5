#!/usr/bin/python3
# The benchmark orchestrator of issue 6: starts iserkit-target, tgtd, iserkit-nbd, qemu-nbd and the
# ceilings (fio io_uring on the backing file, nbdkit memory, iperf3) on loopback, runs the same
# workloads against each in one run (interleaved, >= 3 repetitions, pinned to CPU 0 and unpinned),
# stops exactly the processes it started, and writes docs/benchmarks.md. First, in the same run, the
# three chains of issue 23 on a LUN file on /dev/shm, pinned (mode "shm": the iserkit chain, the
# peer chain qemu-nbd + tgtd, and nbdkit's file plugin as the one-hop server), for issue 23's goals.
# The report (docs/benchmarks.md, docs/benchmarks-rbd.md and the summary on stdout) is written by
# bench_report.py. Python 3 standard library only; run it with /usr/bin/python3. Usage: see --help
# and tests/bench/README.md.
import argparse
import itertools
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager

from bench_report import SOURCE, Table, binaries_built, goals, goals23, pinned_summary, report, sh
from benchlib import (GIB, ISCSI_PERF_WORKLOADS, MIB, RBD_IMAGES, WORKLOADS, cpu_seconds, fio_job,
                      make_tmpfs_backing, stop_processes, wait_until)

ISERKIT_IQN = "iqn.2026-11.org.iserkit:target"
TGT_IQN = "iqn.2026-11.org.iserkit.bench:tgtd"

# Workloads (WORKLOADS, and ISCSI_PERF_WORKLOADS: the ones iscsi-perf can run) and the process/CPU
# helpers are shared with alloc/alloc_count.py and bench_report.py (benchlib.py).

# Per profile: file size, seconds per run, repetitions, workloads, and per mode the cells it runs
# ("iscsi-perf" and "iperf3" besides the fio combos below). Sized so that --quick stays under 3
# minutes and the full run under 20 on the 2-vCPU development machine with ~0.7 s of start-up per run.
ALL = ("iserkit-nbd>iserkit-target", "iserkit-nbd>tgtd", "qemu-nbd>tgtd", "qemu-nbd>iserkit-target",
       "nbdkit-memory", "file-io_uring", "iscsi-perf", "iperf3")
CHAINS = ("iserkit-nbd>iserkit-target", "qemu-nbd>tgtd")
# Mode "shm" (issue 23's measurement): the two chains and the one-hop nbdkit file server, pinned, on
# a LUN file on /dev/shm (no O_DIRECT: tmpfs has none). It runs first; its 54 cells (full profile)
# cost about 4 minutes, paid for by the unpinned mode's fio through iserkit-nbd > tgtd (iscsi-perf
# still compares the targets unpinned) so that the full run stays under 20 minutes.
SHM = CHAINS + ("nbdkit-file",)
PROFILES = {
    "full": dict(size=GIB, runtime=4, reps=3,
                 workloads=("sw1m-qd8", "rw4k-qd32", "rw4k-qd1", "rr4k-qd1", "rr4k-qd32", "sr1m-qd8"),
                 cells={"shm": SHM, "pinned": ALL, "unpinned": CHAINS + ("iscsi-perf", "iperf3")}),
    "quick": dict(size=256 * MIB, runtime=1, reps=3, workloads=("rr4k-qd1", "rr4k-qd32", "sr1m-qd8"),
                  cells={"shm": SHM,
                         "pinned": tuple(c for c in ALL if c not in ("qemu-nbd>iserkit-target", "nbdkit-memory")),
                         "unpinned": CHAINS}),
    "smoke": dict(size=64 * MIB, runtime=1, reps=1, workloads=("rr4k-qd1", "sr1m-qd8"),
                  cells={"shm": SHM, "pinned": ALL}),
}

# --rbd (issue 12): iserkit-target's RBD backend against tgtd's bs_rbd on one throwaway cluster
# (tests/support/ceph_cluster.sh via rbd_cluster.sh). Two images of the same size holding the same
# random data, one per target, so neither target's librbd fights the other for the exclusive lock
# and each starts from identical, fully written objects. Same client for both: iscsi-perf straight
# at the target and fio through iserkit-nbd. Every workload, since writes are where RBD differs.
# The images' names (RBD_IMAGES) are in benchlib.py: the report names them too.
RBD_CELLS = ("iserkit-nbd>iserkit-target", "iserkit-nbd>tgtd", "iscsi-perf")
RBD_WORKLOADS = ("rr4k-qd1", "rw4k-qd1", "rr4k-qd32", "rw4k-qd32", "sr1m-qd8", "sw1m-qd8")
PROFILES["rbd"] = dict(size=GIB, runtime=4, reps=3, workloads=RBD_WORKLOADS,
                       cells={"pinned": RBD_CELLS, "unpinned": RBD_CELLS})
PROFILES["rbd-quick"] = dict(size=256 * MIB, runtime=2, reps=3, workloads=RBD_WORKLOADS,
                             cells={"pinned": RBD_CELLS, "unpinned": RBD_CELLS})
CEPH_TOOLS = ("ceph-mon", "ceph-osd", "ceph", "ceph-authtool", "monmaptool", "rbd", "uuidgen")
BS_RBD = "/usr/lib/tgt/backing-store/bs_rbd.so"

# fio-through-NBD combos: name -> (bridge, target). "file" and "nbdkit" are the ceilings.
COMBOS = {
    "iserkit-nbd>iserkit-target": ("iserkit-nbd", "iserkit-target"),
    "iserkit-nbd>tgtd": ("iserkit-nbd", "tgtd"),
    "qemu-nbd>tgtd": ("qemu-nbd", "tgtd"),
    "qemu-nbd>iserkit-target": ("qemu-nbd", "iserkit-target"),
    "nbdkit-memory": ("nbdkit", None),
    "nbdkit-file": ("nbdkit", None),
    "file-io_uring": (None, None),
}


def log(msg):
    print(msg, flush=True)


class Failed(Exception):
    """A system or a run failed; its cells say so and the run continues."""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unix_socket_ready(path):
    if not os.path.exists(path):
        return False
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(path)
            return True
        except OSError:
            return False


class Daemon:
    """One long-running process this run started: its argv, log and PID."""

    def __init__(self, name, proc, argv, stop_hook=None):
        self.name, self.proc, self.argv, self.stop_hook = name, proc, argv, stop_hook

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.alive() and self.stop_hook:
            try:
                self.stop_hook()
            except Exception:  # noqa: BLE001 - stopping must go on
                pass
        stop_processes([self.proc], grace=3)


class Bench:
    def __init__(self, args, profile):
        self.args, self.p = args, profile
        self.bin = args.bin
        self.rundir = tempfile.mkdtemp(prefix="iserkit-bench.", dir=args.workdir)
        self.logdir = os.path.join(self.rundir, "logs")
        os.mkdir(self.logdir)
        self.backing = os.path.join(self.rundir, "backing.img")
        self.daemons = []           # every daemon started, for the final cleanup
        self.systems = {}           # name -> Daemon, for the current mode
        self.urls = {}              # target name -> iscsi:// URL
        self.command_sets = {}      # LUN file ("shm" or "") -> system -> command line shown in the report
        self.results = []           # dicts, one per run
        self.failures = []          # (mode, system, reason)
        self.pin = False
        self.mode = ""
        self.rbd = bool(getattr(args, "rbd", False))
        self.ceph_conf = None       # --rbd: the cluster's ceph.conf once it is up
        self.cluster = None         # --rbd: the rbd_cluster.sh process (its stdin is its lifeline)
        self.direct_io = True       # tgtd --bsoflags direct (the tmpfs files of mode shm and the guard have none)
        self.shmdir = None          # mode shm: the folder of its LUN file on /dev/shm
        self.binaries_built = binaries_built(self.bin)  # compared at the end: rebuilt during the run?

    @property
    def commands(self):
        """system -> command line shown in the report, for the current mode's LUN file (pinned and
        unpinned run the same commands on the /var/tmp file)."""
        return self.command_sets.setdefault("shm" if self.mode == "shm" else "", {})

    def shown(self, text):
        """`text` with the run's folders as $RUN and $SHM, as the report shows commands."""
        text = text.replace(self.rundir, "$RUN")
        return text.replace(self.shmdir, "$SHM") if self.shmdir else text

    # ---- process plumbing -------------------------------------------------------------------
    def logfile(self, name):
        return open(os.path.join(self.logdir, f"{self.mode}-{name}.log"), "ab")

    def argv(self, argv):
        return (["taskset", "-c", "0"] if self.pin else []) + argv

    def show(self, system, argv, env=None):
        text = self.shown(" ".join(shlex.quote(a) for a in argv))
        if env:
            text = self.shown(" ".join(f"{k}={v}" for k, v in env.items())) + " " + text
        self.commands.setdefault(system, text)

    def spawn(self, name, argv, env=None, stop_hook=None):
        full = self.argv(argv)
        self.show(name, argv, env)
        with self.logfile(name) as out:
            proc = subprocess.Popen(full, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=dict(os.environ, **(env or {})))
        d = Daemon(name, proc, full, stop_hook)
        self.daemons.append(d)
        return d

    def run_tool(self, name, argv, timeout, env=None, show_as=None):
        """Runs a short-lived tool (pinned like the rest); returns its stdout; stderr to the log."""
        if show_as:
            self.show(show_as, argv)
        with self.logfile(name) as err:
            err.write(("$ " + " ".join(argv) + "\n").encode())
            err.flush()
            r = subprocess.run(self.argv(argv), stdout=subprocess.PIPE, stderr=err, timeout=timeout,
                               stdin=subprocess.DEVNULL, env=dict(os.environ, **(env or {})))
            err.write(r.stdout[-4000:])
        if r.returncode != 0:
            raise Failed(f"{argv[0]} exited {r.returncode}")
        return r.stdout.decode(errors="replace")

    # ---- systems ----------------------------------------------------------------------------
    def make_backing(self):
        log(f"backing file: {self.p['size'] // MIB} MiB of random data in {self.backing}")
        with open("/dev/urandom", "rb") as src, open(self.backing, "wb") as dst:
            left = self.p["size"]
            while left:
                chunk = src.read(min(left, 8 * MIB))
                dst.write(chunk)
                left -= len(chunk)
            dst.flush()
            os.fsync(dst.fileno())

    def start_cluster(self):
        """--rbd: starts the throwaway Ceph cluster (rbd_cluster.sh) with one image per target, each
        a copy of the backing file; sets self.ceph_conf. Raises Failed (the run cannot go on)."""
        log("ceph: starting a one-monitor, one-OSD cluster and importing the backing file into "
            + ", ".join(f"rbd/{i}" for i in RBD_IMAGES.values()))
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rbd_cluster.sh")
        argv = ["bash", script, os.path.join(self.rundir, "ceph"), self.backing, *RBD_IMAGES.values()]
        with open(os.path.join(self.logdir, "ceph-cluster.log"), "ab") as err:
            self.cluster = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        line = self.cluster.stdout.readline().decode(errors="replace").strip()
        if not line.startswith("ready "):
            self.stop_cluster()
            raise Failed(f"the Ceph cluster did not come up (see {self.logdir}/ceph-cluster.log)")
        self.ceph_conf = line.split(" ", 1)[1]
        self.commands["ceph"] = ("tests/bench/rbd_cluster.sh $RUN/ceph $RUN/backing.img "
                                 + " ".join(RBD_IMAGES.values()) + " (tests/support/ceph_cluster.sh, then rbd import)")

    def stop_cluster(self):
        """Closes rbd_cluster.sh's stdin (it then kills its monitor and OSD by PID); SIGTERM, then
        SIGKILL, if it has not finished within 30 s."""
        if self.cluster is None:
            return
        try:
            self.cluster.stdin.close()
        except OSError:
            pass
        try:
            self.cluster.wait(timeout=30)
        except subprocess.TimeoutExpired:
            stop_processes([self.cluster], grace=15)
        self.cluster.stdout.close()
        self.cluster = None

    def start_iserkit_target(self):
        port_file = os.path.join(self.rundir, f"{self.mode}-target.port")
        lun = [f"rbd:rbd/{RBD_IMAGES['iserkit-target']}", "--ceph-conf", self.ceph_conf] if self.rbd else [self.backing]
        d = self.spawn("iserkit-target", [os.path.join(self.bin, "iserkit-target"), "--lun", *lun,
                                          "--listen", "127.0.0.1:0", "--port-file", port_file,
                                          "--log-level", "warn", "--no-iser"])
        if not wait_until(lambda: os.path.exists(port_file) and os.path.getsize(port_file) > 0, 20, [d.proc]):
            raise Failed("no port file")
        port = int(open(port_file).read().strip())
        self.urls["iserkit-target"] = f"iscsi://127.0.0.1:{port}/{ISERKIT_IQN}/0"
        return d

    def start_tgtd(self):
        sock = os.path.join(self.rundir, f"{self.mode}-tgtd.sock")
        env = {"TGT_IPC_SOCKET": sock}

        def tgtadm(*a, check=True):
            r = subprocess.run(["tgtadm", "--lld", "iscsi", *a], env=dict(os.environ, **env),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=20)
            if check and r.returncode != 0:
                raise Failed("tgtadm " + " ".join(a) + f" exited {r.returncode}")
            return r.returncode == 0

        def delete_target():  # tgtd ignores SIGTERM while a target exists
            tgtadm("--op", "delete", "--mode", "target", "--tid", "1", "--force", check=False)

        for _ in range(3):
            port = free_port()
            d = self.spawn("tgtd", ["tgtd", "-f", "--iscsi", f"portal=127.0.0.1:{port}"], env=env,
                           stop_hook=delete_target)
            if wait_until(lambda: tgtadm("--op", "show", "--mode", "target", check=False), 10, [d.proc]):
                break
            d.stop()
        else:
            raise Failed("tgtd did not start")
        tgtadm("--op", "new", "--mode", "target", "--tid", "1", "-T", TGT_IQN)
        lun = ["--op", "new", "--mode", "logicalunit", "--tid", "1", "--lun", "1"]
        if self.rbd:  # bs_rbd (tgt-rbd): the cluster from bsopts conf=, client.admin's key from its keyring
            lun += ["--bstype", "rbd", "-b", f"rbd/{RBD_IMAGES['tgtd']}", "--bsopts", f"conf={self.ceph_conf}"]
        else:
            lun += ["-b", self.backing] + (["--bsoflags", "direct"] if self.direct_io else [])
        tgtadm(*lun)
        tgtadm("--op", "bind", "--mode", "target", "--tid", "1", "-I", "ALL")
        self.commands.setdefault("tgtd", self.commands.get("tgtd", ""))
        self.commands["tgtadm"] = ("tgtadm --lld iscsi --op new --mode target --tid 1 -T " + TGT_IQN + "; tgtadm --lld iscsi "
                                   + self.shown(" ".join(lun))
                                   + "; tgtadm --lld iscsi --op bind --mode target --tid 1 -I ALL")
        self.urls["tgtd"] = f"iscsi://127.0.0.1:{port}/{TGT_IQN}/1"
        return d

    def start_bridge(self, bridge, target):
        sock = os.path.join(self.rundir, f"{self.mode}-{bridge}-{target}.sock")
        url = self.urls[target]
        if bridge == "iserkit-nbd":
            d = self.spawn(f"{bridge}>{target}", [os.path.join(self.bin, "iserkit-nbd"), url, "--socket", sock,
                                                 "--log-level", "warn"])
            self.commands.setdefault("iserkit-nbd", self.commands[f"{bridge}>{target}"])
        else:
            m = re.match(r"iscsi://([^/]+)/([^/]+)/(\d+)$", url)
            opts = f"driver=iscsi,transport=tcp,portal={m[1]},target={m[2]},lun={m[3]}"
            d = self.spawn(f"{bridge}>{target}", ["qemu-nbd", "-t", "-k", sock,
                                                 *shlex.split(self.args.qemu_nbd_args), "--image-opts", opts])
            self.commands.setdefault("qemu-nbd", self.commands[f"{bridge}>{target}"])
        if not wait_until(lambda: unix_socket_ready(sock), 20, [d.proc]):
            raise Failed("no NBD socket")
        return d, sock

    def start_nbdkit(self, name, plugin):
        """nbdkit with `plugin` (its name and arguments) on a Unix socket: nbdkit-memory (the memory
        plugin, as large as the backing file) or nbdkit-file (the file plugin on the backing file:
        the one-hop server of issue 23 and of the guard)."""
        sock = os.path.join(self.rundir, f"{self.mode}-{name}.sock")
        pidfile = os.path.join(self.rundir, f"{self.mode}-{name}.pid")
        d = self.spawn(name, ["nbdkit", "-U", sock, "-P", pidfile, "-f", *plugin])
        if not wait_until(lambda: unix_socket_ready(sock), 20, [d.proc]):
            raise Failed("no NBD socket")
        return d, sock

    def start_all(self):
        """Starts every system for the current mode; a system that fails is recorded, not fatal."""
        self.systems, self.sockets = {}, {}

        def attempt(name, fn):
            try:
                out = fn()
                d, sock = out if isinstance(out, tuple) else (out, None)
                self.systems[name] = d
                if sock:
                    self.sockets[name] = sock
            except (Failed, OSError, subprocess.SubprocessError) as e:
                self.failures.append((self.mode, name, str(e)))
                log(f"  {name}: FAILED to start ({e}); its cells say so (logs in {self.logdir})")

        attempt("iserkit-target", self.start_iserkit_target)
        attempt("tgtd", self.start_tgtd)
        for combo, (bridge, target) in COMBOS.items():
            if combo in self.cells and bridge in ("iserkit-nbd", "qemu-nbd"):
                if target in self.systems:
                    attempt(combo, lambda b=bridge, t=target: self.start_bridge(b, t))
        if "nbdkit-memory" in self.cells:
            attempt("nbdkit-memory", lambda: self.start_nbdkit("nbdkit-memory", ["memory", str(self.p["size"])]))
        if "nbdkit-file" in self.cells:
            attempt("nbdkit-file", lambda: self.start_nbdkit("nbdkit-file", ["file", self.backing]))

    def stop_all(self):
        # Bridges first (they hold sessions on the targets), then the targets.
        for d in reversed(self.daemons):
            d.stop()
        self.daemons = []

    # ---- one measured run -------------------------------------------------------------------
    def cpu_snapshot(self, names):
        snap = {}
        for n in names:
            d = self.systems.get(n)
            if d is None or not d.alive():
                raise Failed(f"{n} is not running")
            snap[n] = cpu_seconds(d.pid)
        return snap

    def fio(self, combo, wl):
        _, rw, bs, qd = WORKLOADS[wl]
        bridge, target = COMBOS[combo]
        if combo == "file-io_uring":
            io = ["--ioengine=io_uring", "--direct=1", f"--filename={self.backing}"]
            daemons = {}
        else:
            sock = self.sockets.get(combo)
            if sock is None:
                raise Failed(f"{combo} did not start")
            io = ["--ioengine=nbd", f"--uri=nbd+unix:///?socket={sock}"]
            daemons = {"bridge": combo, "target": target} if target else {"server": combo}
        argv = ["fio", "--name=b", *io, f"--rw={rw}", f"--bs={bs}", f"--iodepth={qd}",
                f"--size={self.p['size']}", f"--runtime={self.p['runtime']}", "--time_based",
                "--norandommap", "--randrepeat=0", "--output-format=json"]
        shown = "fio-nbd" if combo != "file-io_uring" else "fio-file"
        before = self.cpu_snapshot(daemons.values())
        out = self.run_tool(f"fio-{combo}", argv, timeout=self.p["runtime"] + 60, show_as=shown)
        after = self.cpu_snapshot(daemons.values())
        job = fio_job(out)  # fio nbd prints "connected to NBD server" first
        side = job["write"] if "write" in rw else job["read"]
        moved = job["read"]["io_bytes"] + job["write"]["io_bytes"]
        res = dict(iops=side["iops"], mibs=side["bw_bytes"] / MIB, bytes=moved)
        pct = side.get("clat_ns", {}).get("percentile", {})
        if qd == 1 and pct:
            res["p50_us"] = pct["50.000000"] / 1000
            res["p99_us"] = pct["99.000000"] / 1000
        if moved > 0:
            for role, n in daemons.items():
                res[f"cpu_{role}"] = (after[n] - before[n]) / (moved / GIB)
        return res

    def iscsi_perf(self, target, wl):
        _, rw, bs, qd = WORKLOADS[wl]
        url = self.urls.get(target)
        if url is None or target not in self.systems:
            raise Failed(f"{target} did not start")
        argv = ["iscsi-perf", "-m", str(qd), "-b", str(bs // 512)] + (["-r"] if rw.startswith("rand") else []) + [url]
        argv[1:1] = ["-t", str(self.p["runtime"])]  # runs that long after login, then prints its average
        self.show("iscsi-perf", argv)
        before = self.cpu_snapshot([target])
        with self.logfile(f"iscsi-perf-{target}") as err:
            r = subprocess.run(self.argv(argv), stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                               timeout=self.p["runtime"] + 60)
            err.write(r.stdout[-2000:])
        out = r.stdout
        after = self.cpu_snapshot([target])
        text = out.decode(errors="replace")
        avgs = re.findall(r"iops average (\d+)", text)
        if not avgs:
            raise Failed("iscsi-perf printed no 'iops average'")
        iops = int(avgs[-1])
        moved = iops * bs * self.p["runtime"]  # iscsi-perf prints rates only: bytes = average rate * -t
        res = dict(iops=iops, mibs=iops * bs / MIB, bytes=moved)
        if moved:
            res["cpu_target"] = (after[target] - before[target]) / (moved / GIB)
        return res

    def iperf(self):
        port = free_port()
        d = self.spawn("iperf3-server", ["iperf3", "-s", "-1", "-p", str(port)])
        try:
            # No probe connection: the one-off server (-1) would take it as its test.
            logf = os.path.join(self.logdir, f"{self.mode}-iperf3-server.log")
            wait_until(lambda: f"listening on {port}" in open(logf, errors="replace").read(), 10, [d.proc])
            argv = ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(self.p["runtime"]), "-J"]
            out = self.run_tool("iperf3-client", argv, timeout=self.p["runtime"] + 30, show_as="iperf3")
            j = json.loads(out)
            return dict(mibs=j["end"]["sum_received"]["bits_per_second"] / 8 / MIB)
        finally:
            d.stop()
            self.daemons.remove(d)

    def record(self, kind, system, wl, rep, fn):
        row = dict(mode=self.mode, kind=kind, system=system, workload=wl, rep=rep)
        try:
            row.update(fn())
        except (Failed, OSError, ValueError, KeyError, subprocess.SubprocessError) as e:
            row["error"] = str(e)
            log(f"    {kind} {system} {wl} rep {rep}: FAILED: {e}")
        self.results.append(row)

    # ---- the plan ---------------------------------------------------------------------------
    @contextmanager
    def lun_of(self, mode):
        """The LUN file of `mode`: mode shm gets its own on /dev/shm (issue 23's set-up; no O_DIRECT),
        removed after the mode; the other modes keep the /var/tmp backing file."""
        if mode != "shm":
            yield
            return
        saved = self.backing, self.direct_io
        self.shmdir = tempfile.mkdtemp(prefix="iserkit-bench.", dir="/dev/shm")
        self.backing, self.direct_io = os.path.join(self.shmdir, "lun.img"), False
        try:
            log(f"LUN file on /dev/shm: {self.p['size'] // MIB} MiB in {self.backing}")
            try:
                make_tmpfs_backing(self.backing, self.p["size"])
            except OSError as e:
                raise Failed(f"no LUN file on /dev/shm ({e})") from e
            yield
        finally:
            self.backing, self.direct_io = saved
            shutil.rmtree(self.shmdir, ignore_errors=True)

    def run_mode(self, mode):
        self.mode, self.pin = mode, mode != "unpinned"
        self.cells = self.p["cells"][mode]
        try:
            with self.lun_of(mode):
                self.run_cells()
        except Failed as e:
            self.failures.append((mode, "LUN file", str(e)))
            log(f"  {mode}: FAILED: {e}")

    def run_cells(self):
        mode = self.mode
        log(f"== {mode}: starting systems")
        self.start_all()
        try:
            reps, fio_combos = self.p["reps"], [c for c in COMBOS if c in self.cells]
            for wl in self.p["workloads"]:
                log(f"  {mode}: {WORKLOADS[wl][0]}")
                for rep in range(reps):
                    # Interleaved: every system once per repetition, the starting system rotating.
                    cells = [("fio", c) for c in fio_combos]
                    if wl in ISCSI_PERF_WORKLOADS and "iscsi-perf" in self.cells:
                        cells += [("iscsi-perf", t) for t in ("iserkit-target", "tgtd")]
                    k = rep % len(cells)
                    for kind, system in cells[k:] + cells[:k]:
                        if kind == "fio":
                            self.record(kind, system, wl, rep, lambda s=system: self.fio(s, wl))
                        else:
                            self.record(kind, system, wl, rep, lambda s=system: self.iscsi_perf(s, wl))
            if "iperf3" in self.cells:
                for rep in range(reps):
                    self.record("iperf3", "loopback-tcp", "tcp", rep, self.iperf)
        finally:
            self.stop_all()


def smoke_check(bench, t):
    """--smoke: every expected row present, no failure, no zero value. Returns a list of problems."""
    problems = []
    for (mode, mode_cells), wl in itertools.product(bench.p["cells"].items(), bench.p["workloads"]):
        cells = [("fio", c) for c in COMBOS if c in mode_cells]
        if "iscsi-perf" in mode_cells and wl in ISCSI_PERF_WORKLOADS:
            cells += [("iscsi-perf", s) for s in ("iserkit-target", "tgtd")]
        for kind, system in cells:
            rs = [r for r in t.rows if r["mode"] == mode and r["kind"] == kind and r["system"] == system
                  and r["workload"] == wl]
            if not rs:
                problems.append(f"missing row {mode} {kind} {system} {wl}")
            for r in rs:
                if "error" in r:
                    problems.append(f"{mode} {kind} {system} {wl}: {r['error']}")
                    continue
                for k, v in r.items():
                    # CPU is counted in clock ticks (10 ms): a slow 1-second cell on a loaded machine
                    # can honestly read 0 there, so CPU must only be present and not negative.
                    low = 0 if k.startswith("cpu_") else 1e-9
                    if k in ("iops", "mibs", "bytes") or k.startswith("cpu_") or k.endswith("_us"):
                        if not v >= low:
                            problems.append(f"{mode} {kind} {system} {wl}: {k} = {v}")
                expected = ["iops", "mibs"] + (["p50_us", "p99_us"] if WORKLOADS[wl][3] == 1 and kind == "fio" else [])
                expected += {"file-io_uring": [], "nbdkit-memory": ["cpu_server"], "nbdkit-file": ["cpu_server"]}.get(
                    system, ["cpu_target"] if kind == "iscsi-perf" else ["cpu_bridge", "cpu_target"])
                problems += [f"{mode} {kind} {system} {wl}: no {k}" for k in expected if k not in r]
    if not t.values("pinned", "iperf3", "loopback-tcp", "tcp", "mibs"):
        problems.append("no iperf3 result")
    return problems


def missing_rbd_peers(bin_dir):
    """What --rbd needs beyond tgtd, fio and iscsi-perf: the Ceph programs, tgt-rbd's bs_rbd, and an
    iserkit-target built WITH_RBD."""
    need = ["tgtd", "tgtadm", "fio", "iscsi-perf", "taskset", "bash", *CEPH_TOOLS]
    miss = [n for n in need if shutil.which(n) is None]
    if not os.path.exists(BS_RBD):
        miss.append(f"tgt-rbd ({BS_RBD})")
    miss += [p for p in ("iserkit-target", "iserkit-nbd") if not os.access(os.path.join(bin_dir, p), os.X_OK)]
    if shutil.which("fio") and "nbd" not in sh(["fio", "--enghelp"]):
        miss.append("fio nbd engine")
    cache = os.path.join(os.path.dirname(bin_dir), "CMakeCache.txt")
    if os.path.exists(cache) and re.search(r"^WITH_RBD:BOOL=OFF$", open(cache).read(), re.M):
        miss.append("iserkit-target built with WITH_RBD=ON (librbd-dev)")
    return miss


def missing_peers(bin_dir):
    need = ["tgtd", "tgtadm", "qemu-nbd", "fio", "iscsi-perf", "nbdkit", "iperf3", "taskset"]
    miss = [n for n in need if shutil.which(n) is None]
    miss += [p for p in ("iserkit-target", "iserkit-nbd") if not os.access(os.path.join(bin_dir, p), os.X_OK)]
    if shutil.which("fio") and "nbd" not in sh(["fio", "--enghelp"]):
        miss.append("fio nbd engine")
    if not any(os.path.exists(p) for p in ("/usr/lib/x86_64-linux-gnu/qemu/block-iscsi.so",
                                             "/usr/lib/aarch64-linux-gnu/qemu/block-iscsi.so")):
        miss.append("qemu iscsi block driver (qemu-block-extra)")
    return miss


def main():
    ap = argparse.ArgumentParser(description=__doc__ or "iserkit benchmarks (issue 6)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="under 3 minutes: 256 MiB, 3 reps x 1 s, 3 workloads, fewer cells unpinned")
    g.add_argument("--smoke", action="store_true", help="harness check: 1 rep x 1 s, pinned, 2 workloads; "
                   "exit 1 if a row is missing or a value is zero, 77 if a peer is missing")
    ap.add_argument("--rbd", action="store_true", help="the Ceph RBD profile: iserkit-target's rbd: LUN vs tgtd's "
                    "bs_rbd on one throwaway cluster (1 GiB images; with --quick 256 MiB); writes "
                    "docs/benchmarks-rbd.md; exit 77 if Ceph, tgt-rbd or a peer is missing")
    ap.add_argument("--output", help="report path (default docs/benchmarks.md; with --rbd docs/benchmarks-rbd.md)")
    ap.add_argument("--json", help="also write the raw per-run results here")
    ap.add_argument("--bin", default=os.environ.get("ISERKIT_BIN", os.path.join(SOURCE, "build", "bin")),
                    help="directory holding iserkit-target and iserkit-nbd (default build/bin or $ISERKIT_BIN)")
    ap.add_argument("--workdir", default="/var/tmp", help="where the run dir and backing file go (not tmpfs)")
    ap.add_argument("--runtime", type=int, help="seconds per run (overrides the profile)")
    ap.add_argument("--reps", type=int, help="repetitions per cell (overrides the profile)")
    ap.add_argument("--qemu-nbd-args", default="--cache=none --aio=io_uring",
                    help="qemu-nbd's cache/aio options (default: %(default)s)")
    ap.add_argument("--keep", action="store_true", help="keep the run dir (logs) even when nothing failed")
    args = ap.parse_args()
    if args.rbd and args.smoke:
        ap.error("--rbd takes --quick, not --smoke")
    name = "smoke" if args.smoke else "quick" if args.quick else "full"
    if args.rbd:
        name = "rbd-quick" if args.quick else "rbd"
    if args.output is None:
        args.output = os.path.join(SOURCE, "docs", "benchmarks-rbd.md" if args.rbd else "benchmarks.md")
    profile = dict(PROFILES[name])
    if args.runtime:
        profile["runtime"] = args.runtime
    if args.reps:
        profile["reps"] = args.reps
    args.bin = os.path.abspath(args.bin)

    miss = missing_rbd_peers(args.bin) if args.rbd else missing_peers(args.bin)
    if miss:
        print("SKIP: missing: " + ", ".join(miss) + " (packaging/install-deps.sh installs the peers; "
              "build iserkit-target and iserkit-nbd)")
        return 77 if args.smoke or args.rbd else 1

    # SIGTERM/SIGHUP end the run like Ctrl-C: the finally below stops what was started.
    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    start = time.monotonic()
    bench = Bench(args, profile)
    ok = False
    try:
        bench.make_backing()
        if args.rbd:
            bench.start_cluster()
        for mode in profile["cells"]:
            bench.run_mode(mode)
        ok = True
    except Failed as e:
        bench.failures.append(("setup", "ceph", str(e)))
        log(f"FAILED: {e}")
    finally:
        bench.stop_all()
        bench.stop_cluster()
        if os.path.exists(bench.backing):
            os.unlink(bench.backing)
        failed = bool(bench.failures) or any("error" in r for r in bench.results)
        if ok and not failed and not args.keep:
            shutil.rmtree(bench.rundir, ignore_errors=True)
        else:
            log(f"logs kept in {bench.logdir}")
    elapsed = time.monotonic() - start
    t = Table(bench.results)
    text = report(bench, t, elapsed, name)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        f.write(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(bench.results, f, indent=1)
    if args.rbd:
        log(text.split("## Commands")[0].split("\n\n", 1)[1])
        return 0 if ok else 1
    if "shm" in profile["cells"]:
        log(pinned_summary(t, profile["workloads"], "shm"))
        log("\n".join(goals23(t, profile["workloads"])))
    log(pinned_summary(t, profile["workloads"]))
    log("\n".join(goals(t, profile["workloads"])))
    log(f"report: {args.output}; elapsed {elapsed:.0f} s ({elapsed / 60:.1f} min)")
    if args.smoke:
        problems = smoke_check(bench, t)
        for p in problems:
            print("FAIL: " + p)
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
