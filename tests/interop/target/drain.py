#!/usr/bin/env python3
"""SIGTERM drain of iserkit-target (target/README.md "Shutdown"), raw sockets.

Usage: drain.py PORT IQN MODE PID
  inflight: a WRITE is in flight (R2T received, Data-Out not sent) when the target gets SIGTERM: the
            session gets an Async Message asking for a logout (RFC 7143 §11.9.1, AsyncEvent 1),
            new connections are refused, the Data-Out sent after the signal is taken, the WRITE is
            answered GOOD, then the target closes the connection.
  stalled:  the same WRITE's data never comes: the target closes the connection anyway (the
            caller checks that it exits within --shutdown-timeout plus slack).
  verify:   (PID unused) block 3 holds the pattern the inflight WRITE sent.
  forced:   a FUA WRITE of block 6 is answered GOOD (durable), a WRITE of block 7 is in flight
            (R2T received, no data), SIGTERM, the Async Message, then a second SIGTERM: the target
            ends at once and drops the connection without answering the in-flight WRITE.
  verify-forced: (PID unused) block 6 holds the acknowledged pattern, block 7 was never written.
"""
import os
import signal
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import bad_input as bi  # noqa: E402  (reads PORT IQN from argv)
from iscsi_raw import full_feature_login, session_keys  # noqa: E402

MODE, PID = sys.argv[3], int(sys.argv[4])
PATTERN = bytes((i * 29 + 7) & 0xFF for i in range(512))
LBA = 3


def login():
    c = bi.Conn()
    full_feature_login(c, session_keys("iqn.2026-11.org.test:drain", bi.IQN, ("InitialR2T", "Yes"),
                                       ("ImmediateData", "No"), ("MaxBurstLength", "262144")))
    bi.clear_unit_attention(c)
    return c


def start_write(c, lba=LBA, fua=False):
    """A WRITE(10) of one block at `lba` (FUA bit as asked, SBC-4 §5.43); returns (ITT, TTT of the R2T)."""
    cdb = bytes([0x2A, 0x08 if fua else 0]) + struct.pack(">IBHB", lba, 0, 1, 0)
    itt, bhs = bi.scsi_bhs(c, cdb, 512, write=True)
    c.send(bhs)
    rbhs, _ = c.recv()
    assert rbhs is not None and rbhs[0] & 0x3F == 0x31, "expected an R2T"
    return itt, struct.unpack(">I", rbhs[20:24])[0]


def send_data(c, itt, ttt, data):
    """The one Data-Out PDU (F bit, DataSN 0, offset 0) answering the R2T `ttt` of task `itt`."""
    bhs = bi.data_out_bhs(itt, 0, 0, True)
    c.send(bhs[:20] + struct.pack(">I", ttt) + bhs[24:], data)


def expect_good(c, what):
    rbhs, _ = c.recv()
    assert rbhs is not None, f"connection closed before {what} was answered"
    assert rbhs[0] & 0x3F == 0x21 and rbhs[3] == 0, f"{what} not answered GOOD: {rbhs[0]:#x}/{rbhs[3]:#x}"


def expect_async_logout(c):
    rbhs, _ = c.recv()
    assert rbhs is not None, "connection closed instead of an Async Message"
    assert rbhs[0] & 0x3F == 0x32, f"expected an Async Message, got opcode {rbhs[0] & 0x3f:#x}"
    assert rbhs[36] == 1, f"AsyncEvent {rbhs[36]}, expected 1 (logout request)"
    within = struct.unpack(">H", rbhs[42:44])[0]
    assert within >= 1, "Parameter3 (time to log out) is 0"
    print(f"ok: Async Message: logout requested within {within} s")


def main():
    if MODE == "verify":
        c = login()
        assert bi.read10(c, LBA, 1) == PATTERN, "the WRITE answered during the drain is not on disk"
        print("PASS")
        return
    if MODE == "verify-forced":
        c = login()
        assert bi.read10(c, 6, 1) == PATTERN, "a FUA WRITE answered before the forced exit was lost"
        assert bi.read10(c, 7, 1) == bytes(512), "the WRITE whose data never came reached the disk"
        print("PASS")
        return
    if MODE == "forced":
        c = login()
        itt, ttt = start_write(c, 6, fua=True)
        send_data(c, itt, ttt, PATTERN)
        expect_good(c, "the FUA WRITE")
        start_write(c, 7)  # its data never comes
        os.kill(PID, signal.SIGTERM)
        expect_async_logout(c)  # the drain began
        start = time.monotonic()
        os.kill(PID, signal.SIGTERM)
        assert c.wait_closed(5), "the second SIGTERM did not end the target"
        print(f"ok: second SIGTERM: connection dropped after {time.monotonic() - start:.2f} s, nothing answered")
        print("PASS")
        return
    c = login()
    itt, ttt = start_write(c)
    os.kill(PID, signal.SIGTERM)
    expect_async_logout(c)
    try:
        socket.create_connection(("127.0.0.1", bi.PORT), timeout=2).close()
        raise AssertionError("a new connection was accepted during the drain")
    except ConnectionRefusedError:
        print("ok: new connections refused while draining")
    if MODE == "stalled":
        start = time.monotonic()
        assert c.wait_closed(30), "the target never closed the stalled connection"
        print(f"ok: stalled connection closed after {time.monotonic() - start:.1f} s")
        print("PASS")
        return
    time.sleep(0.3)  # the data comes late, after the signal
    send_data(c, itt, ttt, PATTERN)
    expect_good(c, "the in-flight WRITE")
    print("ok: the WRITE in flight at SIGTERM completed")
    assert c.wait_closed(10), "the target did not close the drained connection"
    print("PASS")


if __name__ == "__main__":
    main()
