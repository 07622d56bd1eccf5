#!/usr/bin/env python3
"""Checks the first export of `nbdinfo --json` as the shell tests expect an iserkit LUN behind NBD
(the bridge, iserkit-nbd, and the nbdkit plugin): its size, a 512-byte minimum block size, flush,
FUA and zero, writable; with --block-size-maximum N also that maximum. Prints the size and block
sizes; exits non-zero (an AssertionError showing the export) when one differs.

    nbdinfo_export.py INFO_JSON SIZE [--block-size-maximum N]
"""
import argparse
import json

parser = argparse.ArgumentParser()
parser.add_argument("info_json")
parser.add_argument("size", type=int)
parser.add_argument("--block-size-maximum", type=int)
args = parser.parse_args()

with open(args.info_json) as f:
    info = json.load(f)["exports"][0]
assert info["export-size"] == args.size, info
assert info["block_size_minimum"] == 512, info
assert info["can_flush"] and info["can_fua"] and info["can_zero"], info
assert not info["is_read_only"], info
if args.block_size_maximum is not None:
    assert info["block_size_maximum"] == args.block_size_maximum, info
print("  size", info["export-size"], "block sizes", info["block_size_minimum"], info["block_size_preferred"],
      info["block_size_maximum"])
