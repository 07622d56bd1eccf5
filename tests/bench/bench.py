#!/usr/bin/python3
# The benchmark orchestrator of issue 6: starts iserkit-target, tgtd, iserkit-nbd, qemu-nbd and the
# ceilings (fio io_uring on the backing file, nbdkit memory, iperf3) on loopback, runs the same
# workloads against each in one run (interleaved, >= 3 repetitions, pinned to CPU 0 and unpinned),
# stops exactly the processes it started, and writes docs/benchmarks.md. First, in the same run, the
# three chains of issue 23 on a LUN file on /dev/shm, pinned (mode "shm": the iserkit chain, the
# peer chain qemu-nbd + tgtd, and nbdkit's file plugin as the one-hop server), for issue 23's goals.
# Python 3 standard library only; run it with /usr/bin/python3. Usage: see --help and
# tests/bench/README.md.
import argparse
import datetime
import itertools
import json
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager

from benchlib import GIB, MIB, WORKLOADS, cpu_seconds, fio_job, make_tmpfs_backing, stop_processes, wait_until

ISERKIT_IQN = "iqn.2026-11.org.iserkit:target"
TGT_IQN = "iqn.2026-11.org.iserkit.bench:tgtd"
SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Workloads (WORKLOADS) and the process/CPU helpers are shared with alloc/alloc_count.py (benchlib.py).
# iscsi-perf reads only: the workloads it can run (-r random, -b 512-byte blocks per request).
ISCSI_PERF_WORKLOADS = ("rr4k-qd32", "sr1m-qd8")

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
# The report's heading of each mode.
MODE_TITLES = {"shm": "Pinned, LUN file on /dev/shm: the three chains of issue 23",
               "pinned": "Pinned, LUN file in /var/tmp with O_DIRECT (the tables to compare for issue 6)",
               "unpinned": "Unpinned, LUN file in /var/tmp with O_DIRECT"}

# --rbd (issue 12): iserkit-target's RBD backend against tgtd's bs_rbd on one throwaway cluster
# (tests/support/ceph_cluster.sh via rbd_cluster.sh). Two images of the same size holding the same
# random data, one per target, so neither target's librbd fights the other for the exclusive lock
# and each starts from identical, fully written objects. Same client for both: iscsi-perf straight
# at the target and fio through iserkit-nbd. Every workload, since writes are where RBD differs.
RBD_CELLS = ("iserkit-nbd>iserkit-target", "iserkit-nbd>tgtd", "iscsi-perf")
RBD_IMAGES = {"iserkit-target": "bench-iserkit", "tgtd": "bench-tgtd"}
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


# ---- report ---------------------------------------------------------------------------------
def sh(argv):
    try:
        return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=20,
                              cwd=SOURCE).stdout.decode(errors="replace").strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def machine_info():
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = "unknown"
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / (1 << 20):.1f} GiB"
    debian = open("/etc/debian_version").read().strip() if os.path.exists("/etc/debian_version") else "?"
    return [("CPU", cpu), ("nproc", str(os.cpu_count())), ("memory", mem),
            ("kernel", platform.release()), ("Debian", debian)]


def versions(rbd=False):
    def first(argv):
        return sh(argv).splitlines()[0] if sh(argv) else "unknown"
    dpkg = lambda p: sh(["dpkg-query", "-W", "-f=${Version}", p])  # noqa: E731
    if rbd:
        return [("tgtd (tgt)", first(["tgtd", "--version"]) + f" (packages tgt {dpkg('tgt')}, tgt-rbd {dpkg('tgt-rbd')})"),
                ("Ceph (ceph-osd, librbd1)", f"{dpkg('ceph-osd')}, {dpkg('librbd1')}"),
                ("fio", first(["fio", "--version"])),
                ("libiscsi (iscsi-perf)", dpkg("libiscsi7"))]
    return [("tgtd (tgt)", first(["tgtd", "--version"]) + f" (package {dpkg('tgt')})"),
            ("qemu-nbd", first(["qemu-nbd", "--version"])),
            ("fio", first(["fio", "--version"])),
            ("nbdkit", first(["nbdkit", "--version"])),
            ("libiscsi (iscsi-perf)", dpkg("libiscsi7")),
            ("iperf3", first(["iperf3", "--version"]))]


class Table:
    """Medians (min–max) per (mode, system, workload, metric) from the raw rows."""

    def __init__(self, rows):
        self.rows = rows

    def values(self, mode, kind, system, wl, metric):
        return [r[metric] for r in self.rows if r["mode"] == mode and r["kind"] == kind
                and r["system"] == system and r["workload"] == wl and metric in r]

    def ran(self, mode, kind, system, wl=None):
        return any(r["mode"] == mode and r["kind"] == kind and r["system"] == system
                   and (wl is None or r["workload"] == wl) for r in self.rows)

    def failed(self, mode, kind, system, wl):
        rs = [r for r in self.rows if r["mode"] == mode and r["kind"] == kind and r["system"] == system
              and r["workload"] == wl]
        return not rs or all("error" in r for r in rs)

    def errors(self, mode, kind, system, wl):
        """(failed repetitions, all repetitions) of one cell."""
        rs = [r for r in self.rows if r["mode"] == mode and r["kind"] == kind and r["system"] == system
              and r["workload"] == wl]
        return sum("error" in r for r in rs), len(rs)

    def median(self, mode, kind, system, wl, metric):
        if self.failed(mode, kind, system, wl):
            return None
        v = self.values(mode, kind, system, wl, metric)
        return statistics.median(v) if v else None

    def cell(self, mode, kind, system, wl, metric):
        if not self.ran(mode, kind, system, wl):
            return "not run"
        if self.failed(mode, kind, system, wl):
            return "failed (see log)"
        v = self.values(mode, kind, system, wl, metric)
        if not v:
            return "–"
        fmt = fmt_value(metric)
        bad, n = self.errors(mode, kind, system, wl)
        # A repetition that failed is left out of the median, and the cell says so.
        note = f" [{bad}/{n} failed, see log]" if bad else ""
        if len(v) == 1:
            return fmt(v[0]) + note
        return f"{fmt(statistics.median(v))} ({fmt(min(v))}–{fmt(max(v))})" + note


def fmt_value(metric):
    if metric == "iops":
        return lambda x: f"{x / 1000:.1f}K" if x >= 1000 else f"{x:.0f}"
    if metric == "mibs":
        return lambda x: f"{x:.0f}" if x >= 100 else f"{x:.1f}"
    if metric.endswith("_us"):
        return lambda x: f"{x:.0f}"
    return lambda x: f"{x:.2f}"


METRICS = [("iops", "IOPS ↑"), ("mibs", "MiB/s ↑"), ("p50_us", "p50 latency µs ↓"), ("p99_us", "p99 latency µs ↓")]


def ratio(a, b):
    return f"{a / b:.2f}×" if a is not None and b not in (None, 0) else "–"


def compare_table(t, mode, workloads, left, right, cpu_roles, title_left, title_right):
    """Rows: workload × metric; columns: left, right, left/right. left/right are (kind, system)."""
    cpu_rows = [(f"CPU s/GiB {label} ↓", (f"cpu_{role}", f"cpu_{role}")) for role, label in cpu_roles]
    return side_by_side(t, mode, workloads, [(*left, title_left), (*right, title_right)], cpu_rows, [(0, 1)])


def side_by_side(t, mode, workloads, columns, cpu_rows, ratios):
    """Rows: workload × metric; columns: each (kind, system, title) of `columns`, then each ratio
    (i, j) of `ratios`: column i / column j of the medians. cpu_rows: (row name, the CPU metric of
    each column, or None where a column has none); a ratio is given only where both columns report
    the same metric."""
    if not any(t.ran(mode, kind, system) for kind, system, _ in columns):
        return ["(not run in this mode)"]
    workloads = [w for w in workloads if any(t.ran(mode, kind, system, w) for kind, system, _ in columns)]
    titles = [title for _, _, title in columns]
    out = ["| workload | metric | " + " | ".join(titles) + " | "
           + " | ".join(f"{titles[i].split()[0]} / {titles[j].split()[0]}" for i, j in ratios) + " |",
           "|---|---|" + "---|" * (len(columns) + len(ratios))]
    for wl in workloads:
        rows = [(name, (m,) * len(columns)) for m, name in METRICS
                if m in ("iops", "mibs") or any(t.values(mode, kind, system, wl, m) for kind, system, _ in columns)]
        for name, metrics in rows + list(cpu_rows):
            cells = [t.cell(mode, kind, system, wl, m) if m else "–" for (kind, system, _), m in zip(columns, metrics)]
            rs = [ratio(t.median(mode, *columns[i][:2], wl, metrics[i]), t.median(mode, *columns[j][:2], wl, metrics[j]))
                  if metrics[i] and metrics[i] == metrics[j] else "–" for i, j in ratios]
            out.append(f"| {WORKLOADS[wl][0]} | {name} | " + " | ".join(cells) + " | " + " | ".join(rs) + " |")
    return out


def report(bench, t, elapsed, profile_name):
    if bench.rbd:
        return report_rbd(bench, t, elapsed, profile_name)
    p = bench.p
    wls = list(p["workloads"])
    head = sh(["git", "rev-parse", "--short=12", "HEAD"])
    dirty = sh(["git", "status", "--porcelain", "--", ".", ":!docs/benchmarks.md", ":!docs/benchmarks-rbd.md"])
    shm = "shm" in p["cells"]
    L = ["# Benchmarks: iserkit against its peers",
         "",
         "Generated by `scripts/bench.sh` (tests/bench/bench.py); do not edit by hand — rerun the command.",
         "",
         f"- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
         f"- commit: {head}{' (working tree dirty)' if dirty else ' (clean tree)'}, build type {build_type_of(bench)}",
         *binaries_line(bench),
         f"- profile: {profile_name}: backing file {p['size'] // MIB} MiB of random data in /var/tmp"
         + (f", and for the /dev/shm section a LUN file of {p['size'] // MIB} MiB on /dev/shm (tmpfs)" if shm else "")
         + f"; {p['reps']} repetitions × {p['runtime']} s per cell, interleaved (every system once per "
         f"repetition, starting system rotating); elapsed {elapsed:.0f} s",
         "- machine: " + ", ".join(f"{k} {v}" for k, v in machine_info()),
         "- peers: " + "; ".join(f"{k} {v}" for k, v in versions()),
         "",
         "Each cell: median (min–max) over the repetitions. Ratios are iserkit / peer of the medians: "
         "for IOPS and MiB/s (↑) above 1 means iserkit is faster; for latency and CPU seconds per GiB "
         "moved (↓) below 1 means iserkit is better. CPU s/GiB is utime+stime of the daemon's process "
         "(all threads, /proc/PID/stat) across the run, divided by the GiB the client moved. "
         "**Pinned** means every process of every system (targets, bridges, fio, iscsi-perf) ran on CPU 0 "
         "(`taskset -c 0`): on this 2-vCPU machine the placement of client and server alone moves 4 KiB "
         "figures by up to 3×, so **the pinned tables are the ones to compare**. The machine is shared "
         "(other builds run at the same time): absolute figures are noisy, ratios within one run less so.",
         ""]
    if shm:
        L += ["Issue 23's goals are measured as issue 23 measured: the iserkit chain (fio's nbd engine → "
              "iserkit-nbd → iserkit-target), the peer chain (fio's nbd engine → qemu-nbd with libiscsi → tgtd) "
              "and the one-hop nbdkit file server (fio's nbd engine → nbdkit's file plugin, no iSCSI), all pinned "
              "to one CPU, all serving one LUN file on /dev/shm (no O_DIRECT: tmpfs has none), medians of "
              f"{p['reps']} × {p['runtime']} s; the /dev/shm section below. Issue 6's goals come from the tables on "
              "the /var/tmp file with O_DIRECT, as in issue 6: the history of those figures goes on there.", ""]
        L += goals23(t, wls)
    L += goals(t, wls)
    for mode in p["cells"]:
        L += [f"## {MODE_TITLES[mode]}", ""]
        L += chains_table(t, wls) if mode == "shm" else tables(t, mode, wls)
    L += ["## Commands", "", "Exactly what each system ran (`$RUN` is the run's temp dir in /var/tmp, `$SHM` the "
          "/dev/shm section's folder on /dev/shm; pinned runs prefix every command with `taskset -c 0`; ports "
          "are chosen by the kernel).", ""]
    for lun, title in (("", "On the /var/tmp file (pinned and unpinned):"), ("shm", "On the /dev/shm LUN file:")):
        cmds = [f"- {k}: `{v}`" for k, v in bench.command_sets.get(lun, {}).items() if v]
        L += ([title, ""] + cmds + [""]) if cmds and shm else cmds
    L += ([] if shm else [""]) + ["qemu-nbd: `--cache=none` (cache.direct=on, writeback on: no FUA per write, like iserkit-nbd) and "
          "`--aio=io_uring`; with the iscsi driver neither touches a local file, so they only fix the block layer "
          "mode. tgtd's LUN is `--bsoflags direct` (O_DIRECT) on the /var/tmp file, as iserkit-target's io_uring "
          "backend uses O_DIRECT for aligned I/O; on /dev/shm neither can (tmpfs has no O_DIRECT): both read "
          "and write through the page cache there, as nbdkit's file plugin does.", ""]
    if bench.failures:
        L += ["## Failures", ""] + [f"- {m}: {s}: {r}" for m, s, r in bench.failures] + [""]
    L += ["## Ceph RBD", "",
          "iserkit-target's RBD backend against tgtd's bs_rbd on one throwaway cluster: "
          "[docs/benchmarks-rbd.md](benchmarks-rbd.md) (`scripts/bench.sh --rbd [--quick]`).", ""]
    L += ["## Analysis", "",
          "What was profiled and changed, and why a goal is not met: [docs/performance.md](performance.md) "
          "(hand-written; this page is only ever generated).", ""]
    return "\n".join(L) + "\n"


def binaries_line(bench):
    """The page's "binaries" line when iserkit-target and iserkit-nbd come from another tree's build
    (--bin): when they were built, that tree's HEAD then (its reflog) and now, and its uncommitted
    changes older than the build (the page's commit is then the harness's)."""
    cache = os.path.join(os.path.dirname(bench.bin), "CMakeCache.txt")
    m = re.search(r"^CMAKE_HOME_DIRECTORY:\w+=(.*)$", open(cache).read(), re.M) if os.path.exists(cache) else None
    if m is None or os.path.realpath(m[1]) == os.path.realpath(SOURCE):
        return []
    src, built = m[1], max(bench.binaries_built)
    then = "unknown"
    for h, _, gd in (line.partition(" ") for line in
                     sh(["git", "-C", src, "reflog", "show", "--date=unix", "--format=%h %gd", "HEAD"]).splitlines()):
        moved = re.search(r"\{(\d+)\}", gd)  # HEAD@{UNIX TIME}: when HEAD moved to h
        if moved and int(moved[1]) <= built:
            then = h
            break
    now = sh(["git", "-C", src, "rev-parse", "--short", "HEAD"])
    dirty = [f for f in sh(["git", "-C", src, "diff", "--name-only", "HEAD"]).split()
             if os.path.exists(os.path.join(src, f)) and os.path.getmtime(os.path.join(src, f)) <= built]
    when = datetime.datetime.fromtimestamp(built, datetime.timezone.utc)
    return [f"- binaries: iserkit-target and iserkit-nbd from {bench.bin}, built {when:%Y-%m-%d %H:%M UTC} from {src} "
            f"when its HEAD was {then}" + (f" (now {now})" if now != then else "")
            + (f", with uncommitted changes to {', '.join(dirty)} older than the build" if dirty else "")
            + ("; REBUILT DURING THE RUN: later cells ran other binaries" if bench.binaries_built
               != binaries_built(bench.bin) else "") + "; the commit above is the harness's"]


def binaries_built(bin_dir):
    """The modification times of iserkit-target and iserkit-nbd in `bin_dir`."""
    return tuple(os.path.getmtime(os.path.join(bin_dir, b)) for b in ("iserkit-target", "iserkit-nbd"))


def build_type_of(bench):
    cache = os.path.join(os.path.dirname(bench.bin), "CMakeCache.txt")
    if os.path.exists(cache):
        m = re.search(r"^CMAKE_BUILD_TYPE:\w+=(.*)$", open(cache).read(), re.M)
        if m:
            return m[1]
    return "unknown"


def report_rbd(bench, t, elapsed, profile_name):
    """docs/benchmarks-rbd.md: iserkit-target (rbd: LUN) vs tgtd (bs_rbd), per mode, iscsi-perf and
    fio through iserkit-nbd, ratios iserkit/tgtd and CPU s/GiB of both targets."""
    p = bench.p
    wls = list(p["workloads"])
    head = sh(["git", "rev-parse", "--short=12", "HEAD"])
    dirty = sh(["git", "status", "--porcelain", "--", ".", ":!docs/benchmarks.md", ":!docs/benchmarks-rbd.md"])
    L = ["# Benchmarks: iserkit-target's RBD backend against tgtd's bs_rbd",
         "",
         "Generated by `scripts/bench.sh --rbd [--quick]` (tests/bench/bench.py --rbd); do not edit by hand — "
         "rerun the command. The file-backed comparison is [benchmarks.md](benchmarks.md); the reading of "
         "these figures is in [performance.md](performance.md).",
         "",
         f"- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
         f"- commit: {head}{' (working tree dirty)' if dirty else ' (clean tree)'}, build type {build_type_of(bench)}",
         f"- profile: {profile_name}: one throwaway Ceph cluster (one monitor, one OSD, BlueStore on a sparse file "
         f"in /var/tmp, pool `rbd` of size 1, cephx, loopback; tests/support/ceph_cluster.sh); two images of "
         f"{p['size'] // MIB} MiB, each an `rbd import` of the same random data, one per target "
         f"({', '.join(f'{k}: rbd/{v}' for k, v in RBD_IMAGES.items())}); "
         f"{p['reps']} repetitions × {p['runtime']} s per cell, interleaved (every system once per repetition, "
         f"starting system rotating); elapsed {elapsed:.0f} s",
         "- machine: " + ", ".join(f"{k} {v}" for k, v in machine_info()),
         "- peers: " + "; ".join(f"{k} {v}" for k, v in versions(rbd=True)),
         "",
         "Each cell: median (min–max) over the repetitions. Ratios are iserkit-target / tgtd of the medians: for "
         "IOPS and MiB/s (↑) above 1 means iserkit-target is faster; for latency and CPU seconds per GiB moved (↓) "
         "below 1 means iserkit-target is better. CPU s/GiB is utime+stime of the target's process (all threads, "
         "librbd's and librados's included; /proc/PID/stat) across the run, divided by the GiB the client moved; "
         "the OSD's and monitor's CPU is not counted for either. **Pinned** means both targets, iserkit-nbd, fio "
         "and iscsi-perf ran on CPU 0 (`taskset -c 0`); the Ceph daemons are never pinned. Both targets use "
         "librbd with the cluster's defaults (librbd's cache on, writethrough until the first flush; fio through "
         "NBD sends no flush). Caveat: a one-OSD cluster on one disk on a shared 2-vCPU machine — the OSD, not "
         "the gateway, bounds most cells, so ratios near 1 are expected there.",
         ""]
    for mode in p["cells"]:
        L += [f"## {mode.capitalize()}", ""]
        L += target_tables(t, mode, wls, "iscsi-perf straight at each target (reads only):",
                           "fio (nbd engine) → iserkit-nbd → target:")
    L += ["## Commands", "", "Exactly what each system ran (`$RUN` is the run's temp dir in /var/tmp; "
          "pinned runs prefix every command but the cluster's with `taskset -c 0`; ports are chosen by the kernel).", ""]
    for k, v in bench.commands.items():
        if v:
            L.append(f"- {k}: `{v}`")
    L.append("")
    if bench.failures:
        L += ["## Failures", ""] + [f"- {m}: {s}: {r}" for m, s, r in bench.failures] + [""]
    return "\n".join(L) + "\n"


def target_tables(t, mode, wls, perf_caption, fio_caption):
    """iserkit-target against tgtd in `mode`: iscsi-perf straight at each target (its read workloads
    among `wls`, if any) and fio through iserkit-nbd, each table under its caption."""
    L = []
    ip = [w for w in wls if w in ISCSI_PERF_WORKLOADS]
    if ip:
        L += [perf_caption, ""]
        L += compare_table(t, mode, ip, ("iscsi-perf", "iserkit-target"), ("iscsi-perf", "tgtd"),
                           [("target", "target")], "iserkit-target", "tgtd") + [""]
    L += [fio_caption, ""]
    L += compare_table(t, mode, wls, ("fio", "iserkit-nbd>iserkit-target"), ("fio", "iserkit-nbd>tgtd"),
                       [("target", "target")], "iserkit-target", "tgtd") + [""]
    return L


def tables(t, mode, wls):
    L = ["### Targets: iserkit-target vs tgtd", "",
         "Same backing file, O_DIRECT on both. Driven by libiscsi's iscsi-perf (reads only) and by fio's nbd "
         "engine through the same bridge, iserkit-nbd, in front of each (Debian's fio has no libiscsi engine).", ""]
    L += target_tables(t, mode, wls, "iscsi-perf:", "fio → iserkit-nbd → target:")
    L += ["### Bridges: iserkit-nbd vs qemu-nbd", "", "fio's nbd engine → bridge → the same target.", "",
          "In front of tgtd:", ""]
    L += compare_table(t, mode, wls, ("fio", "iserkit-nbd>tgtd"), ("fio", "qemu-nbd>tgtd"),
                       [("bridge", "bridge")], "iserkit-nbd", "qemu-nbd") + [""]
    L += ["In front of iserkit-target:", ""]
    L += compare_table(t, mode, wls, ("fio", "iserkit-nbd>iserkit-target"), ("fio", "qemu-nbd>iserkit-target"),
                       [("bridge", "bridge")], "iserkit-nbd", "qemu-nbd") + [""]
    L += ["### Whole chain: iserkit-nbd + iserkit-target vs qemu-nbd + tgtd", ""]
    L += compare_table(t, mode, wls, ("fio", "iserkit-nbd>iserkit-target"), ("fio", "qemu-nbd>tgtd"),
                       [("bridge", "bridge"), ("target", "target")], "iserkit", "qemu-nbd+tgtd") + [""]
    L += ["### Ceilings on the same machine", "",
          "fio io_uring O_DIRECT on the backing file (no network, no iSCSI); nbdkit's memory plugin through fio's "
          "nbd engine (NBD with no iSCSI and no disk); raw loopback TCP with iperf3 (one stream).", "",
          "| workload | metric | file io_uring | nbdkit memory |", "|---|---|---|---|"]
    for wl in wls:
        for m, name in METRICS + [("cpu_server", "CPU s/GiB nbdkit ↓")]:
            a, b = t.cell(mode, "fio", "file-io_uring", wl, m), t.cell(mode, "fio", "nbdkit-memory", wl, m)
            if a not in ("–", "not run") or b not in ("–", "not run"):
                L.append(f"| {WORKLOADS[wl][0]} | {name} | {a} | {b} |")
    L += ["", f"Loopback TCP (iperf3, one stream): {t.cell(mode, 'iperf3', 'loopback-tcp', 'tcp', 'mibs')} MiB/s", ""]
    return L


# The /dev/shm section's columns: (kind, system, title); its ratios: column pairs.
SHM_COLUMNS = [("fio", "iserkit-nbd>iserkit-target", "iserkit chain"), ("fio", "qemu-nbd>tgtd", "peer chain"),
               ("fio", "nbdkit-file", "nbdkit file (one hop)")]


def chains_table(t, wls):
    """The /dev/shm section: the iserkit chain, the peer chain and the one-hop nbdkit file server side
    by side, with iserkit / peer and iserkit / nbdkit."""
    return (["fio's nbd engine → iserkit-nbd → iserkit-target (iserkit chain), → qemu-nbd (libiscsi) → tgtd "
             "(peer chain), → nbdkit's file plugin (one hop, no iSCSI); every process pinned to CPU 0, one LUN "
             "file on /dev/shm served by all three. CPU s/GiB: the bridge (iserkit-nbd, qemu-nbd; for nbdkit its "
             "one server process) and the target (iserkit-target, tgtd).", ""]
            + side_by_side(t, "shm", wls, SHM_COLUMNS,
                           [("CPU s/GiB bridge (nbdkit: server) ↓", ("cpu_bridge", "cpu_bridge", "cpu_server")),
                            ("CPU s/GiB target ↓", ("cpu_target", "cpu_target", None))], [(0, 1), (0, 2)]) + [""])


def goals23(t, wls):
    """Issue 23 item 6's goals with MET / NOT MET from the /dev/shm section (mode shm): ratios of the
    iserkit chain's medians to the peer chain's and to the one-hop nbdkit file server's."""
    iserkit, peer, nbdkit = (c[1] for c in SHM_COLUMNS)
    L = ["## Goals (issue 23 item 6), from the /dev/shm section", "",
         "| goal | measured (ratio of the medians) | verdict |", "|---|---|---|"]

    def row(goal, den, wanted, metric, need, lower_better=False, aim=None):
        rs, missing = {}, []
        for w in wanted:
            a, b = (t.median("shm", "fio", system, w, metric(w)) for system in (iserkit, den))
            if w in wls and a is not None and b:
                rs[w] = a / b
            else:
                missing.append(WORKLOADS[w][0] + (": no figure" if w in wls else ": not in this profile"))
        bad = any(r > need if lower_better else r < need for r in rs.values())
        text = "; ".join([f"{WORKLOADS[w][0]} {r:.2f}×" for w, r in rs.items()] + missing)
        verdict = "NOT MET" if bad else f"NOT MEASURED ({len(rs)} of {len(wanted)})" if missing else "MET"
        if aim and verdict == "MET":
            verdict += f" (the aim, {aim}×: {'met' if min(rs.values()) >= aim else 'not met'})"
        L.append(f"| {goal} | {text} | {verdict} |")

    rate = lambda w: "mibs" if WORKLOADS[w][2] >= MIB else "iops"  # noqa: E731
    small, large = ("rr4k-qd1", "rw4k-qd1", "rr4k-qd32", "rw4k-qd32"), ("sr1m-qd8", "sw1m-qd8")
    row("iserkit chain ≥ 2× the peer chain, 4 KiB QD1 and QD32, read and write (IOPS)", peer, small, rate, 2.0)
    row("iserkit chain ≥ 3× the peer chain, 1 MiB QD8, read and write (MiB/s)", peer, large, rate, 3.0)
    row("iserkit chain ≥ 0.6× the one-hop nbdkit file server, 4 KiB QD32 (IOPS; the aim is 0.8×)", nbdkit,
        ("rr4k-qd32", "rw4k-qd32"), rate, 0.6, aim=0.8)
    row("iserkit chain ≥ 0.8× the one-hop nbdkit file server, 1 MiB QD8 (MiB/s)", nbdkit, large, rate, 0.8)
    row("iserkit-nbd's CPU s/GiB ≤ 0.5× qemu-nbd's, every workload (each bridge in its own chain)", peer,
        small + large, lambda w: "cpu_bridge", 0.5, lower_better=True)
    row("QD1 p99 latency of the iserkit chain no worse than the peer chain's (ratio ≤ 1)", peer,
        ("rr4k-qd1", "rw4k-qd1"), lambda w: "p99_us", 1.0, lower_better=True)
    return L + [""]


def goals(t, wls):
    mode = "pinned"
    L = ["## Goals (issue 6), from the pinned run on the /var/tmp file (O_DIRECT)", "",
         "| goal | measured (iserkit / peer, medians) | verdict |", "|---|---|---|"]

    def row(goal, pairs, need, lower_better=False):
        rs = [(label, a / b) for label, a, b in pairs if a is not None and b not in (None, 0)]
        if not rs:
            L.append(f"| {goal} | no data | NOT MEASURED |")
            return
        ok = all((r < need) if lower_better else (r >= need) for _, r in rs)
        L.append(f"| {goal} | " + "; ".join(f"{lab} {r:.2f}×" for lab, r in rs) + f" | {'MET' if ok else 'NOT MET'} |")

    med = t.median
    if "rr4k-qd32" in wls:
        row("iserkit-target ≥ 1.5× tgtd IOPS, 4 KiB random read QD32",
            [("iscsi-perf", med(mode, "iscsi-perf", "iserkit-target", "rr4k-qd32", "iops"),
              med(mode, "iscsi-perf", "tgtd", "rr4k-qd32", "iops")),
             ("fio via iserkit-nbd", med(mode, "fio", "iserkit-nbd>iserkit-target", "rr4k-qd32", "iops"),
              med(mode, "fio", "iserkit-nbd>tgtd", "rr4k-qd32", "iops"))], 1.5)
    if "rw4k-qd32" in wls:
        row("iserkit-target ≥ 1.5× tgtd IOPS, 4 KiB random write QD32",
            [("fio via iserkit-nbd", med(mode, "fio", "iserkit-nbd>iserkit-target", "rw4k-qd32", "iops"),
              med(mode, "fio", "iserkit-nbd>tgtd", "rw4k-qd32", "iops"))], 1.5)
    tp = []
    if "sr1m-qd8" in wls:
        tp.append(("read, iscsi-perf", med(mode, "iscsi-perf", "iserkit-target", "sr1m-qd8", "mibs"),
                   med(mode, "iscsi-perf", "tgtd", "sr1m-qd8", "mibs")))
    for wl, lab in (("sr1m-qd8", "read"), ("sw1m-qd8", "write")):
        if wl in wls:
            tp.append((f"{lab}, fio via iserkit-nbd", med(mode, "fio", "iserkit-nbd>iserkit-target", wl, "mibs"),
                       med(mode, "fio", "iserkit-nbd>tgtd", wl, "mibs")))
    if tp:
        row("iserkit-target ≥ 1.2× tgtd throughput, 1 MiB QD8", tp, 1.2)
    row("iserkit-nbd ≥ 1.5× qemu-nbd on every workload (IOPS, both in front of tgtd)",
        [(WORKLOADS[w][0], med(mode, "fio", "iserkit-nbd>tgtd", w, "iops"), med(mode, "fio", "qemu-nbd>tgtd", w, "iops"))
         for w in wls], 1.5)
    row("iserkit-nbd ≥ 1.5× qemu-nbd on every workload (IOPS, both in front of iserkit-target)",
        [(WORKLOADS[w][0], med(mode, "fio", "iserkit-nbd>iserkit-target", w, "iops"),
          med(mode, "fio", "qemu-nbd>iserkit-target", w, "iops")) for w in wls], 1.5)
    cpu_t = [(f"{WORKLOADS[w][0]} (fio)", med(mode, "fio", "iserkit-nbd>iserkit-target", w, "cpu_target"),
              med(mode, "fio", "iserkit-nbd>tgtd", w, "cpu_target")) for w in wls]
    cpu_t += [(f"{WORKLOADS[w][0]} (iscsi-perf)", med(mode, "iscsi-perf", "iserkit-target", w, "cpu_target"),
               med(mode, "iscsi-perf", "tgtd", w, "cpu_target")) for w in wls if w in ISCSI_PERF_WORKLOADS]
    row("CPU s/GiB: iserkit-target below tgtd (ratio < 1)", cpu_t, 1.0, lower_better=True)
    row("CPU s/GiB: iserkit-nbd below qemu-nbd (ratio < 1, in front of tgtd)",
        [(WORKLOADS[w][0], med(mode, "fio", "iserkit-nbd>tgtd", w, "cpu_bridge"),
          med(mode, "fio", "qemu-nbd>tgtd", w, "cpu_bridge")) for w in wls], 1.0, lower_better=True)
    return L + [""]


def pinned_summary(t, wls, mode="pinned"):
    """A compact table of `mode` for stdout (pinned: every system; shm: the three chains of issue 23):
    one row per workload, IOPS medians (MiB/s for 1 MiB)."""
    cols = [("fio", "iserkit-nbd>iserkit-target", "chain iserkit"), ("fio", "qemu-nbd>tgtd", "chain qemu+tgtd"),
            ("fio", "iserkit-nbd>tgtd", "iserkit-nbd>tgtd"), ("fio", "qemu-nbd>iserkit-target", "qemu>iserkit-t"),
            ("iscsi-perf", "iserkit-target", "perf iserkit-t"), ("iscsi-perf", "tgtd", "perf tgtd"),
            ("fio", "nbdkit-memory", "nbdkit mem"), ("fio", "file-io_uring", "file")]
    if mode == "shm":
        cols = [(kind, system, title.split(" (")[0]) for kind, system, title in SHM_COLUMNS]
    w = 16
    lines = [f"{mode} medians (IOPS; MiB/s for 1 MiB):", "workload".ljust(28) + "".join(c[2].rjust(w) for c in cols)]
    for wl in wls:
        metric = "mibs" if WORKLOADS[wl][2] == MIB else "iops"
        cells = []
        for kind, system, _ in cols:
            if not t.ran(mode, kind, system, wl):
                cells.append("")
                continue
            v = t.median(mode, kind, system, wl, metric)
            cells.append("failed" if v is None else fmt_value(metric)(v))
        lines.append(WORKLOADS[wl][0].ljust(28) + "".join(c.rjust(w) for c in cells))
    v = t.median(mode, "iperf3", "loopback-tcp", "tcp", "mibs")
    if v is not None:
        lines.append(f"loopback TCP (iperf3): {v:.0f} MiB/s")
    return "\n".join(lines)


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
