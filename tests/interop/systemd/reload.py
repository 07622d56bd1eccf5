#!/usr/bin/env python3
"""iserkit-target under a service manager, without systemd: the test is the service manager.
It binds an AF_UNIX datagram socket, starts the target with NOTIFY_SOCKET pointing at it and a
--config file, and checks (target/README.md "Reloading", docs/systemd.md):

- READY=1 once listening, STATUS= with the session and target counts (and its change when a
  session logs in);
- SIGHUP with an edited file: RELOADING=1 then READY=1; a new target is discoverable and
  loginable, a new LUN of an existing target appears to its open session (unit attention
  REPORTED LUNS DATA HAS CHANGED, REPORT LUNS lists it), a new ACL refuses an initiator it used to
  admit, new CHAP users are required of new logins; the session opened before the reload keeps
  reading and writing its data throughout;
- SIGHUP with a bad file (syntax error; a removed LUN; a new LUN whose file is missing, next to a
  good new target): RELOADING=1, READY=1 with "last reload failed", the log says why, and nothing
  changed (the good new target of the failed file is not served either);
- SIGHUP removing a target: no longer listed or loginable (0x0203); its open session keeps working;
  a CHAP secret rotated in the same reload: the old secret is refused (0x0201), the new one works;
- SIGTERM: STOPPING=1 and exit status 0.
Usage: reload.py BIN_DIR
"""
import hashlib
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "acl"))
from iscsi_raw import RawConn, full_feature_login, login_bhs, login_step, parse_text, session_keys, text  # noqa: E402
from acl_login import chap_login  # noqa: E402

BIN = sys.argv[1]
BASE = "iqn.2026-11.org.test"
A, B, C = f"{BASE}:a", f"{BASE}:b", f"{BASE}:c"
OLD, NEW, INTRUDER = f"{BASE}:old", f"{BASE}:new", f"{BASE}:intruder"
SECRET = "bob-secret-1234"
work = tempfile.mkdtemp(prefix="iserkit-reload.")
conf = os.path.join(work, "target.toml")


def write_config(body):
    # Written next to the file and renamed over it, as an editor or a deployment tool does.
    with open(conf + ".new", "w") as f:
        f.write(body)
    os.rename(conf + ".new", conf)


def target(iqn, luns, extra=""):
    return f'[[targets]]\niqn = "{iqn}"\nluns = [{", ".join(chr(34) + l + chr(34) for l in luns)}]\n{extra}\n'


V1 = target(A, ["mem:16M"])
B_DISK = os.path.join(work, "b.img")
V2 = (target(A, ["mem:16M", "mem:8M"], f'allowed_initiators = ["{OLD}", "{NEW}"]') +
      target(B, [B_DISK], f'chap_users = [{{ user = "bob", secret = "{SECRET}" }}]') + target(C, ["mem:4M"]))


class Notifications:
    """The service manager's end of NOTIFY_SOCKET: every datagram, in order."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.s.bind(path)
        self.path = path

    def next(self, timeout=10):
        self.s.settimeout(timeout)
        try:
            msg = self.s.recv(4096).decode()
        except socket.timeout:
            raise AssertionError(f"no notification within {timeout} s")
        return dict(line.split("=", 1) for line in msg.splitlines() if "=" in line)

    def expect(self, key, timeout=10):
        """Skips STATUS-only updates until a message with `key`; returns it."""
        end = time.monotonic() + timeout
        while True:
            m = self.next(max(0.1, end - time.monotonic()))
            if key in m:
                return m
            assert set(m) == {"STATUS"}, f"unexpected notification {m} while waiting for {key}"


class Session(RawConn):
    """A logged-in normal session with the counters read10/write10 need."""

    def __init__(self, port, iqn, initiator):
        super().__init__(port)
        self.itt = 1
        full_feature_login(self, session_keys(initiator, iqn, ("InitialR2T", "No"), ("ImmediateData", "Yes"),
                                              ("FirstBurstLength", "65536")),
                           bytes([0x80, 0x52, 0, 0, 0, len(initiator) & 0xFF]))
        self.clear_unit_attentions()

    def command(self, cdb, edtl=0, read=False, data=b""):
        self.itt += 1
        flags = 0x80 | (0x40 if read else 0) | (0x20 if data else 0) | 1
        bhs = (bytes([0x01, flags, 0, 0, 0, 0, 0, 0]) + b"\0" * 8 +
               struct.pack(">IIII", self.itt, edtl or len(data), self.cmd_sn, self.exp_stat_sn) + cdb.ljust(16, b"\0"))
        self.cmd_sn += 1
        self.send(bhs, data)
        out = b""
        while True:
            rbhs, rdata = self.recv()
            assert rbhs is not None, "connection closed during a command"
            self.exp_stat_sn = struct.unpack(">I", rbhs[24:28])[0] + 1 if rbhs[1] & 1 or rbhs[0] & 0x3F == 0x21 \
                else self.exp_stat_sn
            if rbhs[0] & 0x3F == 0x25:  # Data-In
                out += rdata
                if rbhs[1] & 1:
                    return rbhs[3], out, b""
            elif rbhs[0] & 0x3F == 0x21:  # SCSI Response
                return rbhs[3], out, rdata[2:]
            else:
                raise AssertionError(f"unexpected opcode {rbhs[0] & 0x3f:#x}")

    def clear_unit_attentions(self):
        seen = []
        for _ in range(10):
            status, _, sense = self.command(bytes(6))  # TEST UNIT READY
            if status == 0:
                return seen
            assert status == 2 and sense[2] & 0x0F == 6, f"TEST UNIT READY: status {status:#x}"
            seen.append((sense[12], sense[13]))
        raise AssertionError("unit attentions do not clear")

    def read10(self, lba, blocks):
        status, data, _ = self.command(bytes([0x28, 0]) + struct.pack(">IBHB", lba, 0, blocks, 0), blocks * 512, True)
        assert status == 0, f"READ(10) status {status:#x}"
        return data

    def write10(self, lba, payload):
        status, _, _ = self.command(bytes([0x2A, 0]) + struct.pack(">IBHB", lba, 0, len(payload) // 512, 0),
                                    data=payload)
        assert status == 0, f"WRITE(10) status {status:#x}"

    def report_luns(self):
        status, data, _ = self.command(bytes([0xA0, 0, 0, 0, 0, 0]) + struct.pack(">I", 4096) + b"\0\0", 4096, True)
        assert status == 0, f"REPORT LUNS status {status:#x}"
        return struct.unpack(">I", data[:4])[0] // 8

    def io_roundtrip(self, lba, seed):
        pattern = bytes((i * 31 + seed) & 0xFF for i in range(4096))
        self.write10(lba, pattern)
        assert self.read10(lba, 8) == pattern, "read back differs"


def login_answer(port, iqn, initiator):
    """The status of a login to `iqn` as `initiator` with no authentication, e.g. 0x0000, 0x0202."""
    c = RawConn(port)
    bhs, _ = login_step(c, session_keys(initiator, iqn))
    c.close()
    return -1 if bhs is None else bhs[36] << 8 | bhs[37]


def discover(port, initiator=NEW):
    """SendTargets=All in a discovery session (RFC 7143 Appendix C): the target names."""
    c = RawConn(port)
    bhs, _ = login_step(c, [("InitiatorName", initiator), ("SessionType", "Discovery"), ("HeaderDigest", "None"),
                            ("DataDigest", "None"), ("MaxRecvDataSegmentLength", "65536")])
    assert bhs is not None and bhs[36:38] == b"\0\0", "discovery login refused"
    cmd_sn, exp_stat_sn = struct.unpack(">I", bhs[28:32])[0], struct.unpack(">I", bhs[24:28])[0] + 1
    c.send(bytes([0x04, 0x80, 0, 0, 0, 0, 0, 0]) + b"\0" * 8 +
           struct.pack(">IIII", 2, 0xFFFFFFFF, cmd_sn, exp_stat_sn) + b"\0" * 16, text([("SendTargets", "All")]))
    rbhs, data = c.recv()
    assert rbhs is not None and rbhs[0] & 0x3F == 0x24, "no Text Response"
    c.close()
    return sorted(v for p in data.split(b"\0") if p.startswith(b"TargetName=") for v in [p.decode()[11:]])


def main():
    with open(B_DISK, "wb") as f:
        f.truncate(4 << 20)
    notes = Notifications(os.path.join(work, "notify"))
    write_config(V1)
    log = open(os.path.join(work, "target.log"), "w+")
    port_file = os.path.join(work, "port")
    proc = subprocess.Popen([os.path.join(BIN, "iserkit-target"), "--config", conf, "--listen", "127.0.0.1:0",
                             "--port-file", port_file, "--idle-interval", "0"],
                            env=dict(os.environ, NOTIFY_SOCKET=notes.path), stdout=log, stderr=log)

    def reload(expect_ok):
        proc.send_signal(signal.SIGHUP)
        m = notes.expect("RELOADING")
        assert m["RELOADING"] == "1" and "MONOTONIC_USEC" in m, m
        m = notes.expect("READY")
        failed = "last reload failed" in m.get("STATUS", "")
        assert failed != expect_ok, f"reload {'failed' if failed else 'succeeded'}: {m}; log:\n{log_text()}"
        return m

    def log_text():
        log.flush()
        with open(log.name) as f:
            return f.read()

    try:
        m = notes.expect("READY")
        assert m["READY"] == "1" and m["STATUS"] == "0 session(s), 1 target(s)", m
        port = int(open(port_file).read())
        print("ok: READY=1", m["STATUS"])

        old = Session(port, A, OLD)
        old.io_roundtrip(100, 1)
        m = notes.expect("STATUS", 5)
        assert m["STATUS"] == "1 session(s), 1 target(s)", m
        print("ok: STATUS follows the sessions:", m["STATUS"])
        assert discover(port) == [A]
        assert login_answer(port, A, INTRUDER) == 0

        # Edit: a LUN for A, an ACL on A, a CHAP target B, an open target C.
        write_config(V2)
        m = reload(True)
        assert m["STATUS"].endswith("3 target(s)"), m
        print("ok: RELOADING=1 then READY=1:", m["STATUS"])
        assert discover(port) == [A, B, C], discover(port)
        assert old.clear_unit_attentions() == [(0x3F, 0x0E)], "no REPORTED LUNS DATA HAS CHANGED"
        assert old.report_luns() == 2, "the open session does not see the new LUN"
        old.io_roundtrip(200, 2)
        print("ok: the open session saw lun1 appear and kept its I/O")
        assert login_answer(port, A, INTRUDER) == 0x0202, "the new ACL does not refuse"
        assert login_answer(port, B, NEW) == 0x0201, "CHAP is not required by the new target"
        assert chap_login(port, B, "127.0.0.1", "bob", SECRET) == "0000", "CHAP login to the new target"
        c_session = Session(port, C, NEW)
        c_session.io_roundtrip(8, 3)
        print("ok: new targets discoverable and loginable (ACL, CHAP applied)")

        # Bad files: nothing changes.
        good = lambda: (discover(port) == [A, B, C] and login_answer(port, A, INTRUDER) == 0x0202)  # noqa: E731
        write_config(V2 + "[[targets]\n")
        reload(False)
        assert "kept the running configuration" in log_text()
        assert good()
        write_config(V2.replace('"mem:16M", "mem:8M"', '"mem:16M"'))
        reload(False)
        assert "lun 1 removed" in log_text()
        assert good()
        write_config(V2 + target(f"{BASE}:d", ["mem:4M"]) + target(f"{BASE}:e", [os.path.join(work, "missing.img")]))
        reload(False)
        assert "missing.img" in log_text()
        assert good(), discover(port)
        old.io_roundtrip(300, 4)
        assert old.read10(100, 8) == bytes((i * 31 + 1) & 0xFF for i in range(4096))
        print("ok: bad files (syntax, a removed LUN, a missing LUN file) changed nothing")

        # C removed: not listed, not loginable; its open session works on. Bob's secret rotated.
        write_config(V2.replace(target(C, ["mem:4M"]), "").replace(SECRET, SECRET + "-v2"))
        reload(True)
        assert discover(port) == [A, B]
        assert login_answer(port, C, NEW) == 0x0203, "a removed target still takes logins"
        assert chap_login(port, B, "127.0.0.1", "bob", SECRET) == "0201", "the old CHAP secret still works"
        assert chap_login(port, B, "127.0.0.1", "bob", SECRET + "-v2") == "0000", "the new CHAP secret"
        c_session.io_roundtrip(16, 5)
        old.io_roundtrip(400, 6)
        print("ok: a removed target refuses new logins; its open session keeps working; CHAP secret rotated")

        proc.send_signal(signal.SIGTERM)
        m = notes.expect("STOPPING")
        assert m["STOPPING"] == "1", m
        assert proc.wait(30) == 0, "exit status after SIGTERM"
        print("ok: STOPPING=1, exit 0")
        print("PASS")
    except BaseException:
        print(log_text(), file=sys.stderr)
        raise
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
