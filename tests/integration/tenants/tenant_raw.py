"""Raw iSCSI sessions to a tenant portal at HOST:PORT, for the tenant tests (tenants_*.py): login
with a chosen ISID, SCSI commands, READ/WRITE with R2T. Builds on tests/interop/iscsi_raw.py."""
import os
import socket
import struct
import sys

sys.path.insert(0, os.path.join(os.environ["ISERKIT_SOURCE"], "tests", "interop"))
from iscsi_raw import (RawConn, full_feature_login, login_status, login_step, read_data_in, scsi_bhs,  # noqa: E402,F401
                       session_keys, until_ready)

MiB = 1 << 20
INITIATOR = "iqn.2026-11.org.test:tenants"
_isid = [0]


class Conn(RawConn):
    """A connection to HOST:PORT (RawConn connects to 127.0.0.1 only)."""

    def __init__(self, where, timeout=10):
        host, port = where.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)), timeout=timeout)
        self.data_digest = False
        self.itt = 0

    def next_itt(self):
        self.itt += 1
        return self.itt


def fresh_isid():
    """A new ISID (random qualifier type 0x80) per call."""
    _isid[0] += 1
    return bytes([0x80, 0x42, (os.getpid() >> 8) & 0xFF, os.getpid() & 0xFF, 0, _isid[0] & 0xFF])


def pairs(iqn):
    return session_keys(INITIATOR, iqn, ("ImmediateData", "Yes"), ("InitialR2T", "No"), ("FirstBurstLength", "65536"),
                        ("MaxBurstLength", "262144"))


def login(where, iqn, isid=None):
    """A normal session to `iqn` (asserts success)."""
    c = Conn(where)
    full_feature_login(c, pairs(iqn), isid or fresh_isid())
    return c


def try_login(where, iqn, isid):
    """(status, connection): the Login Response's status (0 = logged in), or None when closed."""
    c = Conn(where)
    bhs, _ = login_step(c, pairs(iqn), isid)
    if bhs is None:
        return None, c
    if login_status(bhs) == 0:
        c.exp_stat_sn = struct.unpack(">I", bhs[24:28])[0] + 1
        c.cmd_sn = struct.unpack(">I", bhs[28:32])[0]
    return login_status(bhs), c


def read_cdb(lba, blocks):
    return bytes([0x28, 0]) + struct.pack(">IBHB", lba, 0, blocks, 0)


def finish_read(c):
    """The Data-In of the READ sent last, until its status."""
    return read_data_in(c)


def read(c, lba, blocks):
    _, bhs = scsi_bhs(c, read_cdb(lba, blocks), blocks * 512, read=True)
    c.send(bhs)
    return finish_read(c)


def clear_unit_attention(c):
    """TEST UNIT READY until GOOD (a new I_T nexus first hears a UNIT ATTENTION)."""
    until_ready(c)


def write(c, lba, payload):
    """WRITE(10) with 64 KiB immediate data, the rest through R2T/Data-Out."""
    cdb = bytes([0x2A, 0]) + struct.pack(">IBHB", lba, 0, len(payload) // 512, 0)
    itt, bhs = scsi_bhs(c, cdb, len(payload), write=True)
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
