#!/usr/bin/env python3
"""Attacks on iserkit-target's resource bounds (target/README.md "Limits") over raw sockets.

Each scenario attacks one bound and, while the attack holds, checks that a legitimate session
still logs in and does I/O (a login, READ and WRITE through bad_input.py's helpers), and that the
target process stays under a memory bound (VmRSS/VmHWM from /proc/PID/status) where the bound is
about memory. limits.sh starts the target with the options each scenario needs.
Usage: limits.py PORT IQN TARGET_PID SCENARIO
Scenarios: login_timeout, logging_in_cap, fd_reserve, oversize_headers, idle_ping, read_budget,
           immediate_reads
"""
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bad_input as bi  # noqa: E402  (reads PORT and IQN from argv[1:3])

PORT, IQN, PID, SCENARIO = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
MiB = 1 << 20


def status_kib(field):
    with open(f"/proc/{PID}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{PID}/status")


def rss_mib():
    return status_kib("VmRSS") / 1024


def hwm_mib():
    return status_kib("VmHWM") / 1024


def open_fds():
    return len(os.listdir(f"/proc/{PID}/fd"))


def legit_session(tag):
    """A well-behaved initiator: login, clear the unit attention, WRITE then READ 64 KiB back."""
    c = bi.login()
    bi.clear_unit_attention(c)
    payload = bytes((i * 7 + len(tag)) & 0xFF for i in range(65536))
    bi.write10(c, 2048, payload)
    got = bi.read10(c, 2048, 128)
    assert got == payload, f"{tag}: legitimate READ returned other data than written"
    c.s.close()
    print(f"ok: legitimate session works ({tag})")


def silent(n):
    """n connections that never send a byte."""
    out = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", PORT), timeout=10)
        out.append(s)
    return out


def is_closed(s):
    """True when the target closed `s` (EOF or reset), without blocking; drops what was sent."""
    s.setblocking(False)
    try:
        while True:
            if s.recv(65536) == b"":
                return True
    except BlockingIOError:
        return False
    except (ConnectionResetError, OSError):
        return True
    finally:
        s.setblocking(True)


def wait_closed(socks, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if all(is_closed(s) for s in socks):
            return True
        time.sleep(0.1)
    return False


def login_timeout():
    # The target runs with --login-timeout 1.
    socks = silent(5)
    partial = socket.create_connection(("127.0.0.1", PORT), timeout=10)
    partial.sendall(bi.login_bhs(1, 3, True)[:20])  # half a BHS, then nothing
    socks.append(partial)
    legit_session("during silent logins")
    start = time.monotonic()
    assert wait_closed(socks, 5), "connections that never finish a login are still open after 5 s (timeout 1 s)"
    print(f"ok: silent and half-sent logins closed after {time.monotonic() - start:.1f} s")
    legit_session("after")


def logging_in_cap():
    # The target runs with --max-logging-in 8 and a long login timeout.
    socks = silent(50)
    time.sleep(0.5)
    legit_session("with 50 silent connections")
    time.sleep(0.3)
    still_open = sum(not is_closed(s) for s in socks)
    assert still_open <= 8, f"{still_open} silent connections still open, cap is 8"
    print(f"ok: {still_open} of 50 silent connections kept (cap 8, oldest closed first)")


def fd_reserve():
    # The target runs under `ulimit -n 256` with --fd-reserve 64 and a logging-in cap above it.
    socks = silent(300)
    time.sleep(0.5)
    fds = open_fds()
    # 192 connections at most; the target's own descriptors (listener, epoll, io_uring, …) come
    # out of the reserve.
    assert fds <= 256 - 32, f"target holds {fds} descriptors: the reserve of 64 is eaten into"
    kept = sum(not is_closed(s) for s in socks)
    assert kept <= 256 - 64, f"{kept} silent connections kept open, more than the 192 the reserve allows"
    legit_session("with 300 silent connections at a 256-descriptor limit")
    print(f"ok: target holds {fds} descriptors with 300 silent connections (limit 256, reserve 64)")
    for s in socks:
        s.close()


def oversize_headers():
    # 1000 connections, each a 48-byte Login Request announcing a 16 MiB data segment.
    base = rss_mib()
    socks = []
    for i in range(1000):
        s = socket.create_connection(("127.0.0.1", PORT), timeout=10)
        bhs = bytearray(bi.login_bhs(1, 3, True, itt=i + 1))
        bhs[5:8] = (16 * MiB - 4).to_bytes(3, "big")
        s.sendall(bytes(bhs))
        socks.append(s)
    legit_session("during 1000 oversize login headers")
    # Every one is answered (Login Response, Initiator Error) and closed without reading the data.
    for s in socks:
        c = bi.Conn.__new__(bi.Conn)
        c.s, c.data_digest = s, False
        rbhs, _ = c.recv()
        assert rbhs is not None and rbhs[0] & 0x3F == 0x23, "no Login Response to an oversize login PDU"
        assert rbhs[36] == 0x02, f"login status class {rbhs[36]:#x}, expected 0x02 (initiator error)"
        assert c.closed(), "an oversize login connection stays open"
    # Full feature phase: 100 sessions each announce a text request of MaxRecvDataSegmentLength
    # bytes and send none of it: scratch grows with arriving bytes only.
    sessions = []
    for _ in range(100):
        c = bi.login()
        bhs = bytearray([0x04 | 0x40, 0x80, 0, 0, 0, 0, 0, 0]) + b"\0" * 8 + struct.pack(
            ">IIII", c.next_itt(), 0xFFFFFFFF, c.cmd_sn, c.exp_stat_sn) + b"\0" * 16
        bhs[5:8] = (262144).to_bytes(3, "big")
        c.s.sendall(bytes(bhs))
        sessions.append(c)
    legit_session("with 100 sessions holding announced text segments")
    hwm = hwm_mib()
    print(f"info: target RSS before {base:.0f} MiB, VmHWM after {hwm:.0f} MiB")
    assert hwm < base + 48, f"VmHWM {hwm:.0f} MiB: announced data segments committed memory (start {base:.0f} MiB)"
    print("ok: 1000 oversize login headers and 100 announced text segments: VmHWM stays under start + 48 MiB")
    for c in sessions:
        c.s.close()


class Answering(bi.Conn):
    """A session whose receive answers NOP-In pings (RFC 7143 §11.18: NOP-Out, ITT 0xffffffff,
    the ping's TTT, immediate) the way initiators do."""
    pings = 0

    def recv(self):
        while True:
            rbhs, data = super().recv()
            if rbhs is None or rbhs[0] & 0x3F != 0x20 or rbhs[16:20] != b"\xff\xff\xff\xff":
                return rbhs, data
            ttt = struct.unpack(">I", rbhs[20:24])[0]
            assert ttt != 0xFFFFFFFF, "NOP-In with ITT 0xffffffff and no TTT"
            Answering.pings += 1
            self.send(bytes([0x40, 0x80, 0, 0, 0, 0, 0, 0]) + b"\0" * 8 +
                      struct.pack(">IIII", 0xFFFFFFFF, ttt, self.cmd_sn, self.exp_stat_sn) + b"\0" * 16)


def idle_ping():
    # The target runs with --idle-interval 1 --ping-timeout 1.
    # A session that answers pings stays; one that never reads nor answers is closed.
    good = bi.login()
    good.__class__ = Answering
    mute = bi.login()
    deadline = time.monotonic() + 8
    good.s.settimeout(0.2)
    while time.monotonic() < deadline and not (Answering.pings >= 2 and is_closed(mute.s)):
        try:
            rbhs, _ = good.recv()
            assert rbhs is not None, "the session that answers pings was closed"
        except socket.timeout:
            pass
    assert Answering.pings >= 1, "no NOP-In ping after seconds of silence (interval 1 s)"
    print(f"ok: an idle session got {Answering.pings} NOP-In pings (ITT 0xffffffff, TTT set) and answered")
    assert is_closed(mute.s), "a session that never answers pings is still open"
    print("ok: a session that does not answer is closed")
    good.s.settimeout(10)
    bi.clear_unit_attention(good)
    got = bi.read10(good, 0, 8)
    assert len(got) == 4096, "READ after pings failed"
    print("ok: the answering session still does I/O")


def big_reads(immediate):
    c = bi.login()
    bi.clear_unit_attention(c)
    c.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    base = rss_mib()
    blocks = 65536  # 32 MiB per READ (16)
    for i in range(128):
        cdb = bytes([0x88, 0]) + struct.pack(">QIBB", (i % 8) * blocks, blocks, 0, 0)
        _, bhs = bi.scsi_bhs(c, cdb, blocks * 512, read=True, immediate=immediate)
        c.s.sendall(bhs)
    # The initiator never reads its socket again.
    time.sleep(2)
    legit_session("while a connection holds 128 x 32 MiB READs unread")
    time.sleep(1)
    rss = rss_mib()
    hwm = hwm_mib()
    kind = "immediate " if immediate else ""
    print(f"info: target RSS {rss:.0f} MiB (start {base:.0f}), VmHWM {hwm:.0f} MiB")
    assert hwm < base + 192, f"VmHWM {hwm:.0f} MiB with 128 {kind}READs of 32 MiB unread (start {base:.0f} MiB)"
    print(f"ok: 128 {kind}READs of 32 MiB never read: VmHWM under start + 192 MiB")
    c.s.close()


def write_staging():
    """Two 1 MiB WRITEs with immediate and unsolicited data on a connection whose budget (1 MiB)
    holds one: the second's unsolicited data waits in a staging buffer and moves to its full
    buffer once the first finishes; R2Ts then fetch the rest. Both read back intact."""
    c = bi.login()
    bi.clear_unit_attention(c)
    size = MiB
    payloads = {}
    itts = []
    for n, lba in enumerate((0, 4096)):
        payload = bytes(((i >> 9) + n * 31 + i) & 0xFF for i in range(size))
        cdb = bytes([0x2A, 0]) + struct.pack(">IBHB", lba, 0, size // 512, 0)
        itt, bhs = bi.scsi_bhs(c, cdb, size, write=True, final=False)
        c.send(bhs, payload[:16384])                                    # immediate data
        c.send(bi.data_out_bhs(itt, 16384, 0, True), payload[16384:65536])  # unsolicited, F=1
        payloads[itt] = payload
        itts.append(itt)
    done = {}
    order = []
    while len(done) < 2:
        rbhs, data = c.recv()
        assert rbhs is not None, "closed during the WRITEs"
        op = rbhs[0] & 0x3F
        itt = struct.unpack(">I", rbhs[16:20])[0]
        if op == 0x31:  # R2T
            ttt, _, _, _, _, offset, length = struct.unpack(">IIIIIII", rbhs[20:48])
            order.append(itt)
            chunk = payloads[itt][offset:offset + length]
            out = bytearray(bi.data_out_bhs(itt, offset, 0, True))
            out[20:24] = struct.pack(">I", ttt)
            c.send(bytes(out), chunk)
        elif op == 0x21:
            assert rbhs[3] == 0, f"WRITE status {rbhs[3]:#x}"
            done[itt] = True
            order.append(("done", itt))
        else:
            raise AssertionError(f"unexpected opcode {op:#x}")
    # The second command's R2Ts come only after the first finished (its budget was taken).
    first_done = order.index(("done", itts[0]))
    assert itts[1] not in order[:first_done], "the second WRITE was solicited before budget freed"
    for n, lba in enumerate((0, 4096)):
        got = b"".join(bi.read10(c, lba + k * 128, 128) for k in range(size // 65536))
        assert got == payloads[itts[n]], f"WRITE {n} read back different data"
    print("ok: a WRITE waiting for budget keeps its unsolicited data and completes after the first")
    legit_session("after")


def tmf_flood():
    """Up to 500000 immediate ABORT TASK requests from a connection that never reads its socket:
    TMFs in progress are bounded like immediate commands (Reject 0x06 beyond, and the Rejects then
    stall the connection's own receive loop), so the target stops reading instead of growing."""
    c = bi.login()
    c.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    base = rss_mib()
    one = []
    for i in range(500):
        one.append(bytes([0x02 | 0x40, 0x80 | 0x01, 0, 0, 0, 0, 0, 0]) + b"\0" * 8 + struct.pack(
            ">IIIIII", 0x10000 + i, 0x12345678, c.cmd_sn, c.exp_stat_sn, c.cmd_sn, 0) + b"\0" * 8)
    batch = b"".join(one)
    c.s.settimeout(2)
    sent = 0
    try:
        while sent < 500000:
            c.s.sendall(batch)
            sent += len(one)
    except socket.timeout:
        pass  # the target stopped reading: the bound held
    legit_session(f"during a flood of {sent} TMFs that is never read")
    hwm = hwm_mib()
    print(f"info: {sent} TMFs sent before the target stopped reading; VmHWM {hwm:.0f} MiB (start {base:.0f})")
    assert hwm < base + 32, f"VmHWM {hwm:.0f} MiB after {sent} unread TMFs (start {base:.0f} MiB)"
    print("ok: unread TMFs: VmHWM under start + 32 MiB")
    c.s.close()


def main():
    scenarios = {
        "tmf_flood": tmf_flood,
        "write_staging": write_staging,
        "login_timeout": login_timeout,
        "logging_in_cap": logging_in_cap,
        "fd_reserve": fd_reserve,
        "oversize_headers": oversize_headers,
        "idle_ping": idle_ping,
        "read_budget": lambda: big_reads(False),
        "immediate_reads": lambda: big_reads(True),
    }
    scenarios[SCENARIO]()
    print("PASS")


if __name__ == "__main__":
    main()
