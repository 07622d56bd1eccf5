#!/usr/bin/env python3
"""Session reinstatement (RFC 7143 §6.3.5, ErrorRecoveryLevel 0) against iserkit-target, raw sockets.

Session A (ISID X) writes block 0 (acknowledged) and starts a WRITE of block 1 whose data it never
sends (the target answered with an R2T). Session C (ISID Y, same initiator) is logged in too. A new
login with ISID X (session B): it succeeds with a new TSIH, the target closes A's connection, C keeps
working, and through B block 0 holds A's acknowledged data while block 1 was never written.
Usage: reinstate.py PORT IQN

Usage: reinstate.py PORT IQN hung FUSE_PID (target/README.md "Session reinstatement", the bound):
the LUN is a file on a FUSE mount served by FUSE_PID. Session A writes block 0, then FUSE_PID is
stopped (SIGSTOP) and A sends a WRITE of block 1 with its data: the backend never completes it. A
reinstating login (ISID X) is answered 0x0301 (Service Unavailable) after the target's
--reinstate-timeout, far inside its login timeout, and closed; so is a second one (the first one
gave up but still stands for A); a session with another ISID logs in and answers a ping meanwhile.
Then FUSE_PID continues (SIGCONT): A's WRITE completes, A ends, and the next reinstating login
succeeds and reads block 0 back.
"""
import os
import signal
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import bad_input as bi  # noqa: E402  (reads PORT IQN from argv too)
from iscsi_raw import full_feature_login, login_status, login_step, session_keys  # noqa: E402

INITIATOR = "iqn.2026-11.org.test:reinstate"
ISID_X = bytes([0x80, 0x12, 0x34, 0x56, 0x00, 0x01])
ISID_Y = bytes([0x80, 0x12, 0x34, 0x56, 0x00, 0x02])


KEYS = (("InitialR2T", "Yes"), ("ImmediateData", "Yes"), ("FirstBurstLength", "65536"), ("MaxBurstLength", "262144"))


def login(isid):
    """A normal session with `isid`; returns (Conn, TSIH)."""
    c = bi.Conn()
    bhs, _ = full_feature_login(c, session_keys(INITIATOR, bi.IQN, *KEYS), isid)
    return c, struct.unpack(">H", bhs[14:16])[0]


def refused_login(isid, within):
    """A login with `isid` that must be answered 0x0301 within `within` seconds and then closed;
    returns the seconds the answer took."""
    c = bi.Conn()
    c.s.settimeout(within + 5)
    start = time.monotonic()
    bhs, _ = login_step(c, session_keys(INITIATOR, bi.IQN, *KEYS), isid)
    took = time.monotonic() - start
    assert bhs is not None, f"connection closed after {took:.1f} s instead of a Login Response"
    assert login_status(bhs) == 0x0301, f"status {login_status(bhs):#06x}, expected 0x0301 (service unavailable)"
    assert bhs[1] & 0x80 == 0 and struct.unpack(">H", bhs[14:16])[0] == 0, "a refusal must not transit or carry a TSIH"
    assert took < within, f"refused after {took:.1f} s, not within {within} s"
    assert c.wait_closed(5), "the target did not close the refused login's connection"
    c.close()
    return took


def hung(fuse_pid):
    a, _ = login(ISID_X)
    bi.clear_unit_attention(a)
    acked = bytes((i * 7 + 3) & 0xFF for i in range(512))
    bi.write10(a, 0, acked)
    os.kill(fuse_pid, signal.SIGSTOP)
    try:
        # A WRITE whose data comes along (immediate, F bit): it goes straight to the backend, whose
        # write to the frozen FUSE file does not return.
        cdb = bytes([0x2A, 0]) + struct.pack(">IBHB", 1, 0, 1, 0)
        _, bhs = bi.scsi_bhs(a, cdb, 512, write=True)
        a.send(bhs, bytes(512))
        time.sleep(0.5)  # on the backend by now

        took = refused_login(ISID_X, 5)  # --reinstate-timeout 1 (the login timeout is 30 s)
        print(f"ok: reinstating login refused with 0x0301 after {took:.2f} s while A's WRITE hangs")
        took = refused_login(ISID_X, 5)
        print(f"ok: the next one too ({took:.2f} s): the refused login still stands for A")

        y, _ = login(ISID_Y)  # another session of the initiator is not held up
        bi.nop_ping(y)
        print("ok: a session with another ISID logs in and answers meanwhile")
    finally:
        os.kill(fuse_pid, signal.SIGCONT)

    start = time.monotonic()
    deadline = start + 20
    while True:  # A ends once its WRITE completed; the initiator retries, as after 0x0301
        c = bi.Conn()
        bhs, _ = login_step(c, session_keys(INITIATOR, bi.IQN, *KEYS), ISID_X)
        assert bhs is not None, "connection closed instead of a Login Response"
        if login_status(bhs) == 0:
            break
        assert login_status(bhs) == 0x0301, f"status {login_status(bhs):#06x}"
        assert time.monotonic() < deadline, "still refused 20 s after the backend came back"
        c.close()
        time.sleep(0.2)
    c.exp_stat_sn = struct.unpack(">I", bhs[24:28])[0] + 1
    c.cmd_sn = struct.unpack(">I", bhs[28:32])[0]
    assert a.wait_closed(5), "the reinstated session's connection is still open"
    bi.clear_unit_attention(c)
    assert bi.read10(c, 0, 1) == acked, "an acknowledged write was lost"
    print(f"ok: reinstated {time.monotonic() - start:.2f} s after the backend came back; block 0 reads back")
    print("PASS")


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
    if len(sys.argv) > 3 and sys.argv[3] == "hung":
        hung(int(sys.argv[4]))
    else:
        main()
