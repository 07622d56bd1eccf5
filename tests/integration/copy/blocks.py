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
import array
import struct
import sys

BS = 512


def block(lba, gen):
    head = b"ISKB" + struct.pack(">IQ", gen, lba)
    fill = bytes(((lba * 7 + gen * 31 + i) & 0xFF) for i in range(8)) * 61
    tail = struct.pack(">II", lba & 0xFFFFFFFF, gen)
    return head + fill + tail


# The blocks are built and checked a chunk at a time (CHUNK blocks, a multiple of the fill's period
# of 256): a template of the chunk per generation (everything but the LBA fields), whose LBA fields
# are then patched with strided slice assignments, one per byte of the field; a chunk that equals
# its all-new or all-old form is settled with one comparison, only a mixed chunk is looked at block
# by block. About 1 s per GiB instead of a loop over every block.
CHUNK = 8192
_templates = {}


def _template(gen):
    if gen not in _templates:
        _templates[gen] = bytearray(b"".join(block(lba, gen) for lba in range(CHUNK)))
    return _templates[gen]


def _chunk(first, count, gen):
    """The stamped blocks first..first+count-1 (first a multiple of CHUNK) of generation gen."""
    buf = bytearray(_template(gen)[: count * BS])
    lbas = array.array("Q", range(first, first + count))
    if sys.byteorder == "little":
        lbas.byteswap()
    raw = lbas.tobytes()  # big-endian 8-byte LBAs, one after the other
    for k in range(8):
        buf[8 + k :: BS] = raw[k::8]  # the head's LBA
    for k in range(4):
        buf[504 + k :: BS] = raw[4 + k :: 8]  # the tail's low 32 bits of the LBA
    return buf


def write(path, blocks, gen):
    with open(path, "r+b") as f:
        for first in range(0, blocks, CHUNK):
            f.write(_chunk(first, min(CHUNK, blocks - first), gen))


def check(path, blocks, old, new, copied):
    counts = {old: 0, new: 0}
    src = sys.stdin.buffer if path == "-" else open(path, "rb")
    for first in range(0, blocks, CHUNK):
        count = min(CHUNK, blocks - first)
        data = src.read(count * BS)
        while len(data) < count * BS:
            more = src.read(count * BS - len(data))
            if not more:
                print(f"short read at LBA {first + len(data) // BS}")
                return 1
            data += more
        forms = {new: _chunk(first, count, new), old: _chunk(first, count, old)}
        whole = next((gen for gen in (new, old) if data == forms[gen]), None)
        for i in range(count):
            lba = first + i
            if whole is not None:
                got = whole
            else:
                b = data[i * BS : (i + 1) * BS]
                got = next((gen for gen in (new, old) if b == forms[gen][i * BS : (i + 1) * BS]), None)
                if got is None:
                    print(f"torn or foreign block at LBA {lba}: {b[:16].hex()} … {b[-8:].hex()}")
                    return 1
            if lba * BS < copied and got != new:
                print(f"LBA {lba} is below the reported offset reached ({copied}) but holds the old generation")
                return 1
            if whole is not None and (lba + 1) * BS >= copied:
                counts[got] += first + count - lba  # the rest of a whole chunk, at once
                break
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
