#!/usr/bin/env python3
"""One tenant fills its payload budget; the other tenant's I/O still proceeds (issue 14;
target/README.md "Tenants", "Limits").

blue's "hog" session sends 32 READs of 1 MiB and never reads its socket: their Data-In cannot
leave, so each READ keeps its task buffer, and blue's payload budget (4 MiB) stays full with the
rest queued behind it. Then:
  - a second blue session's 64 KiB READ gets no answer while the hog holds the budget (it waits
    in the same tenant budget), and completes once the hog's connection is closed;
  - red's session WRITEs and READs back 1 MiB meanwhile (its own budget; the target-wide budget is
    as small as blue's, so a shared budget would block red too);
  - the target logs "tenant blue payload budget full" (once per episode of it being full: the
    socket buffers let a few READs finish, so it may fill more than once), and nothing of red's.
Usage: tenants_budget.py TARGET_LOG BLUE_HOST:PORT BLUE_IQN RED_HOST:PORT RED_IQN
"""
import os
import select
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.environ["ISERKIT_SOURCE"], "tests", "interop"))
from iscsi_raw import RawConn, full_feature_login, session_keys  # noqa: E402

LOG, BLUE, BLUE_IQN, RED, RED_IQN = sys.argv[1:6]
MiB = 1 << 20
_isid = [0]


class Conn(RawConn):
    """A session's connection to HOST:PORT (not only 127.0.0.1, as RawConn)."""

    def __init__(self, where):
        host, port = where.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)), timeout=10)
        self.data_digest = False
        self.itt = 0

    def next_itt(self):
        self.itt += 1
        return self.itt


def login(where, iqn):
    c = Conn(where)
    _isid[0] += 1
    isid = bytes([0x80, 0x42, 0, 0, 0, _isid[0]])
    pairs = session_keys("iqn.2026-11.org.test:tenant-budget", iqn, ("ImmediateData", "Yes"),
                         ("InitialR2T", "No"), ("FirstBurstLength", "65536"), ("MaxBurstLength", "262144"))
    full_feature_login(c, pairs, isid)
    return c


def cmd(c, cdb, edtl, read=False, write=False):
    itt = c.next_itt()
    flags = 0x80 | (0x40 if read else 0) | (0x20 if write else 0) | 1
    bhs = (bytes([0x01, flags, 0, 0, 0, 0, 0, 0]) + b"\0" * 8 +
           struct.pack(">IIII", itt, edtl, c.cmd_sn, c.exp_stat_sn) + cdb.ljust(16, b"\0"))
    c.cmd_sn += 1
    return itt, bhs


def read_cdb(lba, blocks):
    return bytes([0x28, 0]) + struct.pack(">IBHB", lba, 0, blocks, 0)


def finish_read(c):
    out = b""
    while True:
        rbhs, data = c.recv()
        assert rbhs is not None, "closed during READ"
        op = rbhs[0] & 0x3F
        if op == 0x25:
            out += data
            if rbhs[1] & 1:
                assert rbhs[3] == 0, f"READ status {rbhs[3]:#x}"
                return out
        elif op == 0x21:
            assert rbhs[3] == 0, f"READ status {rbhs[3]:#x}"
            return out
        else:
            raise AssertionError(f"unexpected opcode {op:#x} during READ")


def clear_unit_attention(c):
    for _ in range(10):
        _, bhs = cmd(c, bytes(6), 0)
        c.send(bhs)
        rbhs, _ = c.recv()
        assert rbhs is not None and rbhs[0] & 0x3F == 0x21, "no SCSI Response to TEST UNIT READY"
        if rbhs[3] == 0:
            return
    raise AssertionError("unit attentions do not clear")


def write(c, lba, payload):
    """WRITE(10) with 64 KiB immediate data, the rest through R2T/Data-Out."""
    cdb = bytes([0x2A, 0]) + struct.pack(">IBHB", lba, 0, len(payload) // 512, 0)
    itt, bhs = cmd(c, cdb, len(payload), write=True)
    c.send(bhs, payload[:65536])
    while True:
        rbhs, _ = c.recv()
        assert rbhs is not None, "closed during WRITE"
        op = rbhs[0] & 0x3F
        if op == 0x31:  # R2T
            ttt, _, _, _, _, offset, length = struct.unpack(">IIIIIII", rbhs[20:48])
            for o in range(offset, offset + length, 65536):
                n = min(65536, offset + length - o)
                final = o + n == offset + length
                out = (bytes([0x05, 0x80 if final else 0, 0, 0, 0, 0, 0, 0]) + b"\0" * 8 +
                       struct.pack(">IIIIIII", itt, ttt, 0, c.exp_stat_sn, 0, (o - offset) // 65536, o) + b"\0" * 4)
                c.send(out, payload[o:o + n])
        elif op == 0x21:
            assert rbhs[3] == 0, f"WRITE status {rbhs[3]:#x}"
            return
        else:
            raise AssertionError(f"unexpected opcode {op:#x} during WRITE")


def log_lines(needle):
    with open(LOG, errors="replace") as f:
        return [line for line in f if needle in line]


# 1. blue's hog fills blue's budget.
hog = login(BLUE, BLUE_IQN)
clear_unit_attention(hog)
hog.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
for i in range(32):
    _, bhs = cmd(hog, read_cdb(i * 2048, 2048), MiB, read=True)
    hog.send(bhs)
deadline = time.monotonic() + 20
while not log_lines("tenant blue payload budget full") and time.monotonic() < deadline:
    time.sleep(0.1)
full = log_lines("tenant blue payload budget full")
assert full, "the target did not report blue's payload budget full"
print("ok: " + full[0].strip())

# 2. Another blue session waits in the same budget.
waiter = login(BLUE, BLUE_IQN)
clear_unit_attention(waiter)
_, bhs = cmd(waiter, read_cdb(0, 128), 65536, read=True)
waiter.send(bhs)
ready, _, _ = select.select([waiter.s], [], [], 2.0)
assert not ready, "blue's second session got an answer while blue's budget was full"
print("ok: a second blue session's READ waits while blue's budget is full")

# 3. red does I/O meanwhile.
red = login(RED, RED_IQN)
clear_unit_attention(red)
payload = bytes((i * 13 + (i >> 9)) & 0xFF for i in range(MiB))
write(red, 4096, payload)
got = b""
for k in range(MiB // 65536):
    _, bhs = cmd(red, read_cdb(4096 + k * 128, 128), 65536, read=True)
    red.send(bhs)
    got += finish_read(red)
assert got == payload, "red read back other data"
print("ok: red WRITEs and READs back 1 MiB while blue's budget is full")
assert not log_lines("tenant red payload budget full"), "red's budget was reported full"

# 4. The hog goes: blue's waiting READ is granted.
hog.s.close()
waiter.s.settimeout(20)
data = finish_read(waiter)
assert len(data) == 65536, f"blue's waiting READ returned {len(data)} bytes"
print("ok: blue's waiting READ completes once the hog's connection is closed")
