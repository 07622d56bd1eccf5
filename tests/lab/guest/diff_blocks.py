#!/usr/bin/env python3
"""diff_blocks.py EXPECTED ACTUAL [--block BYTES] [--command BYTES]: where ACTUAL differs from EXPECTED.

A lab helper for data mismatches: prints how many blocks differ, the differing ranges (coalesced,
in bytes and in per-command units), and what each wrong block holds, because that names the bug:
- zeros: never written (a lost command, a short transfer);
- the expected data of another offset (the delta is printed): data landed at the wrong place or a
  buffer was reused while the peer still wrote into it or read from it;
- an older copy of ACTUAL's own data elsewhere: the same, seen from the other side;
- unknown: neither (stale data from before the write, or garbage).
Exit status 0 when the files are equal, 1 when they differ, 2 on a usage or I/O error.
"""
import argparse
import sys


def read_blocks(path, block):
    with open(path, "rb") as f:
        data = f.read()
    return [data[i:i + block] for i in range(0, len(data), block)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("expected")
    ap.add_argument("actual")
    ap.add_argument("--block", type=int, default=4096)
    ap.add_argument("--command", type=int, default=512 << 10, help="bytes per command, to name command indexes")
    ap.add_argument("--max-ranges", type=int, default=12)
    a = ap.parse_args()
    try:
        want = read_blocks(a.expected, a.block)
        got = read_blocks(a.actual, a.block)
    except OSError as e:
        print(f"diff_blocks: {e}", file=sys.stderr)
        return 2
    if len(want) != len(got) or (want and len(want[-1]) != len(got[-1])):
        print(f"sizes differ: expected {sum(map(len, want))} bytes, actual {sum(map(len, got))} bytes")
    n = min(len(want), len(got))
    bad = [i for i in range(n) if want[i] != got[i]]
    if not bad and len(want) == len(got):
        print("identical")
        return 0
    where = {}
    for i, b in enumerate(want):
        where.setdefault(b, i)
    zero = bytes(a.block)
    kinds = {"zeros": 0, "moved": 0, "unknown": 0}
    deltas = {}
    for i in bad:
        b = got[i]
        if b == zero[:len(b)]:
            kinds["zeros"] += 1
        elif b in where:
            kinds["moved"] += 1
            d = (where[b] - i) * a.block
            deltas[d] = deltas.get(d, 0) + 1
        else:
            kinds["unknown"] += 1
    ranges = []
    for i in bad:
        if ranges and ranges[-1][1] == i:
            ranges[-1][1] = i + 1
        else:
            ranges.append([i, i + 1])
    total = n * a.block
    print(f"{len(bad)} of {n} blocks of {a.block} bytes differ ({len(bad) * a.block} of {total} bytes), "
          f"in {len(ranges)} range(s): zeros={kinds['zeros']} moved={kinds['moved']} unknown={kinds['unknown']}")
    for lo, hi in ranges[:a.max_ranges]:
        s, e = lo * a.block, hi * a.block
        print(f"  bytes [{s}, {e}) = {e - s} bytes; commands of {a.command}: {s // a.command}..{(e - 1) // a.command}, "
              f"offset in the first {s % a.command}")
    if len(ranges) > a.max_ranges:
        print(f"  ... {len(ranges) - a.max_ranges} more range(s)")
    for d, c in sorted(deltas.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {c} wrong block(s) hold the expected data of {d:+d} bytes away")
    return 1


if __name__ == "__main__":
    sys.exit(main())
