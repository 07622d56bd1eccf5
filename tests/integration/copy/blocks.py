#!/usr/bin/env python3
"""Block patterns for copy_kill_test.sh: every 512-byte block stamped with its LBA and a
generation, so a torn block (part old, part new) or a block from the wrong place is visible.

  blocks.py write FILE BLOCKS GENERATION      writes BLOCKS stamped blocks into FILE (from 0)
  blocks.py check FILE|- BLOCKS OLD NEW COPIED  checks that every block holds generation OLD or NEW
      for its own LBA, whole, and that the first COPIED bytes hold NEW; prints how many blocks
      hold each; exit 1 (with the first bad LBA) otherwise.

A block: "ISKB" + generation (4 bytes) + LBA (8 bytes), 488 bytes of a fill derived from both, and
the LBA and generation again in the last 8 bytes (so a block whose head and tail come from
different writes fails the check).
"""
import struct
import sys

BS = 512


def block(lba, gen):
    head = b"ISKB" + struct.pack(">IQ", gen, lba)
    fill = bytes(((lba * 7 + gen * 31 + i) & 0xFF) for i in range(8)) * 61
    tail = struct.pack(">II", lba & 0xFFFFFFFF, gen)
    return head + fill + tail


def write(path, blocks, gen):
    # The fill repeats with period 256 in the LBA: build those once, stamp the LBA per block.
    with open(path, "r+b") as f:
        chunk = bytearray()
        for lba in range(blocks):
            chunk += block(lba, gen)
            if len(chunk) >= 1 << 22:
                f.write(chunk)
                chunk = bytearray()
        f.write(chunk)


def check(path, blocks, old, new, copied):
    counts = {old: 0, new: 0}
    src = sys.stdin.buffer if path == "-" else open(path, "rb")
    cache = {}
    for lba in range(blocks):
        b = src.read(BS)
        if len(b) != BS:
            print(f"short read at LBA {lba}")
            return 1
        got = None
        for gen in (new, old):
            key = (lba & 0xFF, gen)
            if key not in cache:
                cache[key] = block(lba & 0xFF, gen)[16:504]
            if (b[:4] == b"ISKB" and b[4:16] == struct.pack(">IQ", gen, lba) and b[16:504] == cache[key]
                    and b[504:] == struct.pack(">II", lba & 0xFFFFFFFF, gen)):
                got = gen
                break
        if got is None:
            print(f"torn or foreign block at LBA {lba}: {b[:16].hex()} … {b[-8:].hex()}")
            return 1
        if lba * BS < copied and got != new:
            print(f"LBA {lba} is below the reported offset reached ({copied}) but holds the old generation")
            return 1
        counts[got] += 1
    print(f"blocks: new={counts[new]} old={counts[old]}")
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])))
    else:
        sys.exit(f"usage: {sys.argv[0]} write|check …")
