#!/usr/bin/env python3
"""kill -9 loses no durable write (target/README.md "Durability"), raw sockets.

Usage: kill9.py PORT IQN write PID GEN   — writes generation GEN: blocks 0..15 with WRITE(10) FUA=1,
                                           blocks 16..31 with FUA=0 then SYNCHRONIZE CACHE(10); once
                                           the last answer is in, kill -9 PID at once.
       kill9.py PORT IQN verify 0 GEN    — every one of blocks 0..31 holds generation GEN.
Each block carries (generation, LBA) and a checksum, so a torn, stale or misplaced block is caught.
"""
import hashlib
import os
import signal
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import bad_input as bi  # noqa: E402  (reads PORT IQN from argv)

MODE, PID, GEN = sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
BLOCKS = 32


def block(gen, lba):
    head = struct.pack(">QQ", gen, lba) + bytes((gen * 31 + lba * 7 + i) & 0xFF for i in range(472))
    return head + hashlib.sha256(head).digest()[:24]


def command(c, cdb, data=b""):
    """One SCSI command with immediate data; the SCSI Response's status."""
    itt, bhs = bi.scsi_bhs(c, cdb, len(data), write=bool(data))
    c.send(bhs, data)
    rbhs, _ = c.recv()
    assert rbhs is not None and rbhs[0] & 0x3F == 0x21, "no SCSI Response"
    return rbhs[3]


def main():
    c = bi.login()
    bi.clear_unit_attention(c)
    if MODE == "verify":
        for lba in range(BLOCKS):
            got = bi.read10(c, lba, 1)
            assert got == block(GEN, lba), f"block {lba}: not generation {GEN} (lost or torn durable write)"
        print(f"ok: all {BLOCKS} durable blocks of generation {GEN} survived kill -9")
        return
    for lba in range(16):  # WRITE(10) with FUA: durable when answered (SBC-4 §4.15)
        cdb = bytes([0x2A, 0x08]) + struct.pack(">IBHB", lba, 0, 1, 0)
        assert command(c, cdb, block(GEN, lba)) == 0, f"FUA WRITE of block {lba} failed"
    for lba in range(16, BLOCKS):  # plain WRITE(10) ...
        cdb = bytes([0x2A, 0]) + struct.pack(">IBHB", lba, 0, 1, 0)
        assert command(c, cdb, block(GEN, lba)) == 0, f"WRITE of block {lba} failed"
    # ... made durable by SYNCHRONIZE CACHE(10) over the whole LU (SBC-4 §5.27).
    assert command(c, bytes([0x35]) + bytes(9)) == 0, "SYNCHRONIZE CACHE failed"
    os.kill(PID, signal.SIGKILL)
    print(f"ok: generation {GEN} written and acknowledged; target killed")


if __name__ == "__main__":
    main()
