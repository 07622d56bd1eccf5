#!/usr/bin/env python3
"""Raw-socket bad-input test for iserkit-target (RFC 7143 answers to malformed or wrong PDUs).

Checks: a non-login first PDU drops the connection; a wrong opcode during login gets status
0x020b and a close (§6.3); unknown opcode → Reject 0x05 with the BHS as data (§11.17); an
oversized data segment → Reject 0x04, framing kept (§13.12); data digest error → Reject 0x02
(§7.8); SNACK at ERL 0 → Reject 0x03; CmdSN above MaxCmdSN ignored (§4.2.2.1); WRITE to an
out-of-range LBA with immediate + unsolicited data → one CHECK CONDITION ILLEGAL REQUEST / LBA OUT
OF RANGE after all data is consumed; a second client keeps logging in and reading throughout.
Usage: bad_input.py PORT IQN
"""
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from iscsi_raw import (RawConn, full_feature_login, login_bhs, read_data_in, scsi_bhs,  # noqa: E402,F401
                       session_keys, text, until_ready)

PORT, IQN = int(sys.argv[1]), sys.argv[2]


class Conn(RawConn):
    """A connection to the target under test (PORT) with the session counters the checks use."""

    def __init__(self):
        super().__init__(PORT)
        self.cmd_sn = 1
        self.exp_stat_sn = 0
        self.itt = 1

    def next_itt(self):
        self.itt += 1
        return self.itt


_next_isid = [0]


def next_isid():
    """A fresh ISID (random qualifier type, 0x80): one per session, as initiators do. Sessions with
    the same InitiatorName and ISID would reinstate each other (RFC 7143 §6.3.5)."""
    _next_isid[0] += 1
    return bytes([0x80, 0x42, (os.getpid() >> 8) & 0xFF, os.getpid() & 0xFF]) + struct.pack(">H", _next_isid[0])


def login(digest=False):
    c = Conn()
    pairs = session_keys("iqn.2026-11.org.test:bad-input", IQN, ("DataDigest", "CRC32C" if digest else "None"),
                         ("InitialR2T", "No"), ("ImmediateData", "Yes"), ("FirstBurstLength", "65536"),
                         ("MaxBurstLength", "262144"))
    _, keys = full_feature_login(c, pairs, next_isid())
    assert int(keys["MaxRecvDataSegmentLength"]) >= 262144, keys
    c.data_digest = digest
    return c


def data_out_bhs(itt, offset, data_sn, final):
    return (bytes([0x05, 0x80 if final else 0, 0, 0, 0, 0, 0, 0]) + b"\0" * 8 +
            struct.pack(">IIIIIII", itt, 0xFFFFFFFF, 0, 0, 0, data_sn, offset) + b"\0" * 4)


def nop_ping(c, payload=b"ping"):
    itt = c.next_itt()
    bhs = bytes([0x40, 0x80, 0, 0, 0, 0, 0, 0]) + b"\0" * 8 + struct.pack(">IIII", itt, 0xFFFFFFFF, c.cmd_sn,
                                                                         c.exp_stat_sn) + b"\0" * 16
    c.send(bhs, payload)
    rbhs, data = c.recv()
    assert rbhs is not None and rbhs[0] & 0x3F == 0x20, f"expected NOP-In, got {rbhs and rbhs[0]:#x}"
    assert struct.unpack(">I", rbhs[16:20])[0] == itt and data == payload, "NOP-In does not echo the ping"
    return rbhs


def expect_reject(c, reason, rejected_bhs):
    rbhs, data = c.recv()
    assert rbhs is not None, "connection closed instead of Reject"
    assert rbhs[0] & 0x3F == 0x3F, f"expected Reject, got opcode {rbhs[0] & 0x3f:#x}"
    assert rbhs[2] == reason, f"Reject reason {rbhs[2]:#x}, expected {reason:#x}"
    assert data == bytes(rejected_bhs[:48]), "Reject data is not the rejected BHS"


def read10(c, lba, blocks):
    cdb = bytes([0x28, 0]) + struct.pack(">IBHB", lba, 0, blocks, 0)
    itt, bhs = scsi_bhs(c, cdb, blocks * 512, read=True)
    c.send(bhs)
    return read_data_in(c)


def write10(c, lba, payload):
    blocks = len(payload) // 512
    cdb = bytes([0x2A, 0]) + struct.pack(">IBHB", lba, 0, blocks, 0)
    itt, bhs = scsi_bhs(c, cdb, len(payload), write=True)
    c.send(bhs, payload)
    rbhs, data = c.recv()
    assert rbhs[0] & 0x3F == 0x21 and rbhs[3] == 0, "WRITE failed"


def clear_unit_attention(c):
    """TEST UNIT READY until GOOD. A new I_T nexus first hears POWER ON, RESET, OR BUS DEVICE RESET
    OCCURRED (SAM-5 §5.14: UNIT ATTENTION, ASC/ASCQ 29h/00h); returns the unit attentions seen,
    each answer before GOOD checked to be one."""
    seen = []
    for status, sense in until_ready(c):
        assert status == 0x02 and len(sense) >= 14, f"TEST UNIT READY status {status:#x}"
        assert sense[2] & 0x0F == 0x06, f"sense key {sense[2] & 0x0f:#x}, expected UNIT ATTENTION"
        seen.append((sense[12], sense[13]))
    return seen


def check(name, fn):
    fn()
    print(f"ok: {name}")


def main():
    good = login()
    assert clear_unit_attention(good) == [(0x29, 0x00)], "a new nexus must first hear POWER ON/RESET"
    pattern = bytes(range(256)) * 16  # 4096 bytes
    write10(good, 8, pattern)
    assert read10(good, 8, 8) == pattern

    def first_pdu_not_login():
        c = Conn()
        c.send(bytes([0x40, 0x80]) + b"\0" * 14 + struct.pack(">I", 1) + b"\xff" * 4 + b"\0" * 24)
        assert c.closed(), "target answered a non-login first PDU"

    def wrong_opcode_in_login():
        c = Conn()
        pairs = [("InitiatorName", "iqn.2026-11.org.test:bad"), ("TargetName", IQN), ("AuthMethod", "None")]
        c.send(login_bhs(0, 0, False), text(pairs))
        rbhs, _ = c.recv()
        assert rbhs[36:38] == b"\0\0"
        c.send(bytes([0x01, 0x80]) + b"\0" * 14 + struct.pack(">I", 5) + b"\0" * 28)
        rbhs, _ = c.recv()
        assert rbhs is not None and rbhs[0] & 0x3F == 0x23, "no login response to a wrong opcode"
        assert rbhs[36:38] == b"\x02\x0b", f"status {rbhs[36:38].hex()}, expected 020b"
        assert c.closed(), "connection not closed after login error"

    def login_target_not_found():
        c = Conn()
        c.send(login_bhs(0, 1, True), text([("InitiatorName", "iqn.x:y"), ("TargetName", IQN + "-nope"),
                                            ("AuthMethod", "None")]))
        rbhs, _ = c.recv()
        assert rbhs[36:38] == b"\x02\x03", f"status {rbhs[36:38].hex()}, expected 0203"
        assert c.closed()

    bad = login()
    clear_unit_attention(bad)

    def unknown_opcode():
        bhs = bytes([0x1C, 0x80]) + b"\0" * 14 + struct.pack(">I", 77) + b"\0" * 28
        bad.send(bhs)
        expect_reject(bad, 0x05, bhs)

    def target_opcode_from_initiator():
        bhs = bytes([0x3F, 0x80]) + b"\xee" * 2 + b"\0" * 44
        bad.send(bhs)
        expect_reject(bad, 0x04, bhs)

    def oversized_data_segment():
        bhs = bytes([0x40, 0x80, 0, 0, 0, 0, 0, 0]) + b"\0" * 8 + struct.pack(">IIII", 99, 0xFFFFFFFF, bad.cmd_sn,
                                                                             0) + b"\0" * 16
        big = b"x" * (300 * 1024)
        bad.send(bhs, big)
        sent = bytearray(bhs)
        sent[5:8] = len(big).to_bytes(3, "big")
        expect_reject(bad, 0x04, sent)
        nop_ping(bad)  # framing intact

    def snack_rejected():
        bhs = bytes([0x10, 0x80]) + b"\0" * 14 + struct.pack(">II", 5, 0xFFFFFFFF) + b"\0" * 24
        bad.send(bhs)
        expect_reject(bad, 0x03, bhs)

    def cmd_sn_above_window_ignored():
        saved = bad.cmd_sn
        bad.cmd_sn += 100000
        _, bhs = scsi_bhs(bad, bytes(6), 0)  # TEST UNIT READY, far above MaxCmdSN
        bad.cmd_sn = saved
        bad.send(bhs)
        nop_ping(bad)  # the next PDU answered is the ping: the command was ignored

    def lba_out_of_range_with_data():
        # WRITE (10) past the end with 1 KiB immediate + 1 KiB unsolicited Data-Out.
        cdb = bytes([0x2A, 0]) + struct.pack(">IBHB", 0x7FFFFFF0, 0, 4, 0)
        itt, bhs = scsi_bhs(bad, cdb, 2048, write=True, final=False)
        bad.send(bhs, b"a" * 1024)
        bad.send(data_out_bhs(itt, 1024, 0, True), b"b" * 1024)
        rbhs, data = bad.recv()
        assert rbhs[0] & 0x3F == 0x21, f"expected SCSI Response, got {rbhs[0] & 0x3f:#x}"
        assert struct.unpack(">I", rbhs[16:20])[0] == itt
        assert rbhs[3] == 0x02, f"status {rbhs[3]:#x}, expected CHECK CONDITION"
        sense_len = struct.unpack(">H", data[:2])[0]
        sense = data[2:2 + sense_len]
        assert sense[0] & 0x7F == 0x70, f"sense format {sense[0]:#x}"
        assert sense[2] & 0x0F == 0x05 and sense[12] == 0x21, f"sense key/ASC {sense[2]:#x}/{sense[12]:#x}"
        nop_ping(bad)  # no stray response, framing intact

    def data_digest_error():
        c = login(digest=True)
        bhs = bytes([0x40, 0x80, 0, 0, 0, 0, 0, 0]) + b"\0" * 8 + struct.pack(">IIII", 55, 0xFFFFFFFF, c.cmd_sn,
                                                                             0) + b"\0" * 16
        c.send(bhs, b"digest!", bad_digest=True)
        sent = bytearray(bhs)
        sent[5:8] = (7).to_bytes(3, "big")
        expect_reject(c, 0x02, sent)
        nop_ping(c, b"after the digest error")
        c.s.close()

    check("non-login first PDU closes the connection", first_pdu_not_login)
    check("wrong opcode during login: status 0x020b and close", wrong_opcode_in_login)
    check("unknown target: status 0x0203", login_target_not_found)
    check("unknown opcode: Reject 0x05", unknown_opcode)
    check("target opcode from initiator: Reject 0x04", target_opcode_from_initiator)
    assert read10(good, 8, 8) == pattern, "second client disturbed"
    check("oversized data segment: Reject 0x04, framing kept", oversized_data_segment)
    check("SNACK at ERL 0: Reject 0x03", snack_rejected)
    check("CmdSN above MaxCmdSN ignored", cmd_sn_above_window_ignored)
    check("LBA out of range: CHECK CONDITION 5/0x21 after data consumed", lba_out_of_range_with_data)
    check("data digest error: Reject 0x02", data_digest_error)
    assert read10(good, 8, 8) == pattern, "second client disturbed"
    # Garbage that breaks framing: the bad connection may be dropped; others keep working.
    bad.s.sendall(b"\x01" + b"\xff" * 47)
    bad.s.close()
    again = login()
    clear_unit_attention(again)
    assert read10(again, 8, 8) == pattern
    assert read10(good, 8, 8) == pattern
    print("PASS")


if __name__ == "__main__":
    main()
