"""The report of the benchmark orchestrator (bench.py): docs/benchmarks.md (report()), with --rbd
docs/benchmarks-rbd.md (report_rbd()), and the summary bench.py prints (pinned_summary(), goals23(),
goals()), all from the raw per-run rows (Table); the page's header lines (commit, binaries, machine,
peers' versions). guard.py uses sh() and machine_info() too. Python 3 standard library only."""
import datetime
import os
import platform
import re
import statistics
import subprocess

from benchlib import ISCSI_PERF_WORKLOADS, MIB, RBD_IMAGES, WORKLOADS

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The report's heading of each mode.
MODE_TITLES = {"shm": "Pinned, LUN file on /dev/shm: the three chains of issue 23",
               "pinned": "Pinned, LUN file in /var/tmp with O_DIRECT (the tables to compare for issue 6)",
               "unpinned": "Unpinned, LUN file in /var/tmp with O_DIRECT"}


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
