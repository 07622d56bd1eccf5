#!/usr/bin/env python3
"""Reads what two independent initiators saw of one LUN and prints its logical-unit identity.

Usage: lu_ids.py VPD80 VPD83 INQUIRY
  VPD80, VPD83: the raw output of libiscsi's `iscsi-inq -e 1 -c 128|131 URL`;
  INQUIRY: the output of `iserkit inquiry URL` (designators in hex).
Prints "serial=…", "t10=…", "naa=…" (hex, from iserkit inquiry) lines, sorted, and checks that
both initiators agree: the same serial and T10 designator, and iscsi-inq's NAA bytes (printed
with %s, so cut at the first zero byte) a prefix of the full NAA. Exits 1 with a reason if not.
"""
import re
import sys

vpd80, vpd83, inquiry = (open(p, "rb").read() for p in sys.argv[1:4])


def die(why):
    print("lu_ids.py: " + why, file=sys.stderr)
    sys.exit(1)


m = re.search(rb"^Unit Serial Number:\[(.*)\]$", vpd80, re.M)
if not m:
    die("no serial in iscsi-inq's VPD 0x80 output")
serial = m.group(1).decode()

# iscsi-inq: one block per designator; the LU's have "Association:(0) LOGICAL_UNIT".
blocks = vpd83.split(b"DEVICE DESIGNATOR #")[1:]
peer = {}
for b in blocks:
    if b"Association:(0) LOGICAL_UNIT" not in b:
        continue
    kind = re.search(rb"Designator Type:\(\d+\) (\w+)", b).group(1).decode()
    start = b.index(b"Designator:[") + len(b"Designator:[")
    end = b.rindex(b"]")
    peer[kind] = b[start:end]
if "NAA" not in peer or "T10_VENDORT_ID" not in peer:
    die("iscsi-inq shows no NAA or no T10 designator of the logical unit: %r" % sorted(peer))

ours = {}
for line in inquiry.decode().splitlines():
    k, _, v = line.partition(": ")
    if k == "serial":
        ours["serial"] = v
    elif k == "designator" and v.startswith(("naa ", "t10 ")):
        kind, _, value = v.partition(" ")
        ours.setdefault(kind, value)
if ours.get("serial") != serial:
    die("serial: iscsi-inq %r, iserkit inquiry %r" % (serial, ours.get("serial")))
t10 = peer["T10_VENDORT_ID"].decode()
if ours.get("t10") != t10:
    die("T10 designator: iscsi-inq %r, iserkit inquiry %r" % (t10, ours.get("t10")))
naa = ours.get("naa", "")
if not naa or not bytes.fromhex(naa).startswith(peer["NAA"]):
    die("NAA: iscsi-inq %r is no prefix of iserkit inquiry's %s" % (peer["NAA"], naa))
print("serial=" + serial)
print("t10=" + t10)
print("naa=" + naa)
