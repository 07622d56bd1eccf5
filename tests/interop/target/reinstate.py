#!/usr/bin/env python3
"""Session reinstatement (RFC 7143 §6.3.5, ErrorRecoveryLevel 0) against iserkit-target, raw sockets.

Session A (ISID X) writes block 0 (acknowledged) and starts a WRITE of block 1 whose data it never
sends (the target answered with an R2T). Session C (ISID Y, same initiator) is logged in too. A new
login with ISID X (session B): it succeeds with a new TSIH, the target closes A's connection, C keeps
working, and through B block 0 holds A's acknowledged data while block 1 was never written.
Usage: reinstate.py PORT IQN
"""
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import bad_input as bi  # noqa: E402  (reads PORT IQN from argv too)
from iscsi_raw import full_feature_login, session_keys  # noqa: E402

INITIATOR = "iqn.2026-11.org.test:reinstate"
ISID_X = bytes([0x80, 0x12, 0x34, 0x56, 0x00, 0x01])
ISID_Y = bytes([0x80, 0x12, 0x34, 0x56, 0x00, 0x02])


def login(isid):
    """A normal session with `isid`; returns (Conn, TSIH)."""
    c = bi.Conn()
    bhs, _ = full_feature_login(c, session_keys(INITIATOR, bi.IQN, ("InitialR2T", "Yes"), ("ImmediateData", "Yes"),
                                                ("FirstBurstLength", "65536"), ("MaxBurstLength", "262144")), isid)
    return c, struct.unpack(">H", bhs[14:16])[0]


def main():
    a, tsih_a = login(ISID_X)
    bi.clear_unit_attention(a)
    acked = bytes((i * 13 + 5) & 0xFF for i in range(512))
    bi.write10(a, 0, acked)
    # A WRITE of block 1 whose data never comes: InitialR2T=Yes, no immediate data, so the target
    # asks for it with an R2T and the task waits for Data-Out.
    cdb = bytes([0x2A, 0]) + struct.pack(">IBHB", 1, 0, 1, 0)
    itt, bhs = bi.scsi_bhs(a, cdb, 512, write=True)
    a.send(bhs)
    rbhs, _ = a.recv()
    assert rbhs is not None and rbhs[0] & 0x3F == 0x31, f"expected R2T, got {rbhs and rbhs[0]:#x}"

    c, tsih_c = login(ISID_Y)  # another ISID of the same initiator: another session
    bi.clear_unit_attention(c)

    start = time.monotonic()
    b, tsih_b = login(ISID_X)  # the reinstating login
    assert tsih_b not in (0, tsih_a, tsih_c), f"new session got TSIH {tsih_b} (old {tsih_a}, other {tsih_c})"
    # The old connection was closed before the new login's response was sent.
    assert a.wait_closed(5), "the target did not close the reinstated session's connection"
    print(f"ok: reinstating login answered in {time.monotonic() - start:.3f} s; old connection closed")

    # The new session is a new I_T nexus: it first hears POWER ON, RESET (SAM-5 §5.14).
    assert bi.clear_unit_attention(b) == [(0x29, 0x00)], "the new session must first hear POWER ON/RESET"
    assert bi.read10(b, 0, 1) == acked, "an acknowledged write was lost"
    assert bi.read10(b, 1, 1) == bytes(512), "the reinstated session's unfinished write reached the LU"
    bi.write10(b, 2, acked)
    assert bi.read10(b, 2, 1) == acked
    print("ok: new session reads the acknowledged write and not the unfinished one")

    bi.nop_ping(c)
    assert bi.read10(c, 0, 1) == acked, "the other ISID's session stopped working"
    print("ok: the session with another ISID kept working")

    # Reinstating again, now from the session that did the reinstating.
    d, tsih_d = login(ISID_X)
    assert b.wait_closed(5), "second reinstatement did not close the previous session"
    bi.clear_unit_attention(d)
    assert bi.read10(d, 2, 1) == acked
    print(f"ok: reinstated again (tsih {tsih_b} -> {tsih_d})")
    print("PASS")


if __name__ == "__main__":
    main()
