#!/usr/bin/python3
# Where a process's allocations came from: reads a stacks file of the counting allocator
# (alloc_counter.cpp with ISERKIT_ALLOC_STACKS, e.g. from alloc_count.py --stacks DIR), groups the
# allocations by call stack, symbolizes the frames with addr2line (the binaries' debug info), and
# prints the stacks by how many allocations each made, most first:
#   alloc_stacks.py DIR/target.stacks [--top 10] [--frames 14]
# Python 3 standard library and binutils' addr2line only.
import argparse
import collections
import subprocess

SKIP = ("alloc_counter.cpp", "libiserkit_alloc_counter")


def read(path):
    """(maps, stacks): maps as [(start, end, offset, file)], stacks as [(bytes, (pc, ...))]."""
    maps, stacks = [], []
    with open(path) as f:
        for line in f:
            if line.startswith("stack "):
                fields = line.split()
                stacks.append((int(fields[1]), tuple(int(a, 16) for a in fields[2:])))
                continue
            fields = line.split()
            if len(fields) >= 6 and "x" in fields[1] and fields[5].startswith("/"):
                lo, hi = (int(a, 16) for a in fields[0].split("-"))
                maps.append((lo, hi, int(fields[2], 16), fields[5]))
    return maps, stacks


def module_of(maps, pc):
    """(file, address in the file for addr2line) of `pc`, or (None, pc)."""
    for lo, hi, off, name in maps:
        if lo <= pc < hi:
            base = min(l - o for l, _, o, n in maps if n == name)  # load base of that file
            return name, pc - base
    return None, pc


def symbolize(maps, pcs):
    """{pc: 'function at file:line'} for every pc (return addresses: the call is at pc - 1)."""
    by_file = collections.defaultdict(list)
    for pc in pcs:
        name, addr = module_of(maps, pc)
        if name is not None:
            by_file[name].append((pc, addr - 1))
    names = {}
    for name, items in by_file.items():
        out = subprocess.run(["addr2line", "-f", "-C", "-e", name] + [hex(a) for _, a in items],
                             capture_output=True, text=True).stdout.splitlines()
        for i, (pc, _) in enumerate(items):
            func, where = (out[2 * i], out[2 * i + 1]) if 2 * i + 1 < len(out) else ("??", "??")
            if func == "??":
                func = f"{name.rsplit('/', 1)[-1]}+{hex(module_of(maps, pc)[1])}"
            names[pc] = f"{func[:160]}  {where.rsplit('/', 2)[-2:] and '/'.join(where.rsplit('/', 2)[-2:])}"
    for pc in pcs:
        names.setdefault(pc, hex(pc))
    return names


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("stacks")
    ap.add_argument("--top", type=int, default=10, help="stacks to print")
    ap.add_argument("--frames", type=int, default=14, help="frames of each stack to print")
    args = ap.parse_args()
    maps, stacks = read(args.stacks)
    names = symbolize(maps, {pc for _, s in stacks for pc in s})
    groups = collections.Counter()
    sizes = collections.defaultdict(collections.Counter)
    for size, s in stacks:
        frames = tuple(names[pc] for pc in s if not any(k in names[pc] for k in SKIP))
        groups[frames] += 1
        sizes[frames][size] += 1
    print(f"{len(stacks)} allocations recorded, {len(groups)} distinct stacks")
    for frames, n in groups.most_common(args.top):
        print(f"\n{n} allocations, sizes {dict(sizes[frames].most_common(4))}")
        for f in frames[:args.frames]:
            print(f"    {f}")


if __name__ == "__main__":
    main()
