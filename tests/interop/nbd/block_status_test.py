# BLOCK_STATUS with the base:allocation context through libnbd (python3-libnbd, the engine of nbdsh)
# against nbd_memory_server (64 KiB chunks: unwritten = HOLE|ZERO). Usage: python3 block_status_test.py
# SERVER. Spec: NBD proto.md "Metadata querying", NBD_CMD_BLOCK_STATUS, NBD_CMD_FLAG_REQ_ONE.
import errno
import sys

import nbd

SERVER = sys.argv[1]
KiB, MiB = 1 << 10, 1 << 20
CHUNK = 64 * KiB
HOLE_ZERO = nbd.STATE_HOLE | nbd.STATE_ZERO


def connect(*args, structured=True, meta=True, strict=True):
    h = nbd.NBD()
    h.set_request_structured_replies(structured)
    if meta:
        h.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
    if not strict:
        h.set_strict_mode(0)
    h.connect_command([SERVER, "--stdio", *args])
    return h


def extents(h, length, offset, flags=0):
    got = []

    def cb(metacontext, off, entries, err):
        assert metacontext == nbd.CONTEXT_BASE_ALLOCATION, metacontext
        assert off == offset, (off, offset)
        got.extend(zip(entries[0::2], entries[1::2]))
        return 0

    h.block_status(length, offset, cb, flags)
    return got


def expect_einval(fn, what):
    try:
        fn()
    except nbd.Error as e:
        got = e.errno if isinstance(e.errno, int) else getattr(errno, str(e.errno), e.errno)
        assert got == errno.EINVAL, f"{what}: {e.string}"
        assert "out of bounds" not in e.string, f"{what}: rejected by libnbd, not by the server"
        return
    raise AssertionError(f"{what}: succeeded")


# The context is listed and selected (NBD_OPT_LIST_META_CONTEXT / SET_META_CONTEXT).
h = connect("--size", "1M", "--min-block", "512")
assert h.can_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
# A fresh export is one hole.
assert extents(h, MiB, 0) == [(MiB, HOLE_ZERO)], extents(h, MiB, 0)
# Data in chunks 2 and 3 (a write of a few bytes allocates its whole chunk), then a hole.
h.pwrite(b"d" * 512, 2 * CHUNK + 512)
h.pwrite(b"e" * 512, 3 * CHUNK)
want = [(2 * CHUNK, HOLE_ZERO), (2 * CHUNK, 0), (MiB - 4 * CHUNK, HOLE_ZERO)]
assert extents(h, MiB, 0) == want, extents(h, MiB, 0)
# A range starting inside a run, ending inside another: cut exactly at the requested length.
assert extents(h, 2 * CHUNK, CHUNK + 512) == [(CHUNK - 512, HOLE_ZERO), (CHUNK + 512, 0)]
# REQ_ONE: exactly one descriptor, never longer than asked.
assert extents(h, MiB, 0, nbd.CMD_FLAG_REQ_ONE) == [(2 * CHUNK, HOLE_ZERO)]
assert extents(h, 1024, 2 * CHUNK, nbd.CMD_FLAG_REQ_ONE) == [(1024, 0)]
# The last block of the export.
assert extents(h, 512, MiB - 512) == [(512, HOLE_ZERO)]
# Zeroing a whole chunk with trim allowed punches it; trimmed chunks are holes again.
h.trim(CHUNK, 3 * CHUNK)
assert extents(h, 2 * CHUNK, 2 * CHUNK) == [(CHUNK, 0), (CHUNK, HOLE_ZERO)], extents(h, 2 * CHUNK, 2 * CHUNK)
h.shutdown()

# Bounds and validation reach the server (strict mode off) and keep the connection usable.
h = connect("--size", "1M", "--min-block", "512", strict=False)
expect_einval(lambda: extents(h, 512, MiB), "block status at the end")
expect_einval(lambda: extents(h, 1024, MiB - 512), "block status past the end")
expect_einval(lambda: extents(h, 512, 100), "unaligned block status")
expect_einval(lambda: extents(h, 0, 0), "block status of length 0")
assert extents(h, 512, 0) == [(512, HOLE_ZERO)]
h.shutdown()

# Without SET_META_CONTEXT the server refuses BLOCK_STATUS (libnbd refuses it locally in strict mode).
h = connect("--size", "1M", meta=False, strict=False)
assert not h.can_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
try:
    h.block_status(512, 0, lambda *a: 0)
    raise AssertionError("block status without a context succeeded")
except nbd.Error:
    pass
assert h.pread(512, 0) == bytes(512)
h.shutdown()

# Without structured replies no context can be selected (NBD_REP_ERR_INVALID), the export still works.
h = connect("--size", "1M", structured=False)
assert not h.can_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
assert h.pread(512, 0) == bytes(512)
h.shutdown()

# Listing: the server has exactly one context.
h = nbd.NBD()
h.set_opt_mode(True)
h.connect_command([SERVER, "--stdio", "--size", "1M"])
listed = []
h.opt_list_meta_context(lambda name: listed.append(name) or 0)
assert listed == [nbd.CONTEXT_BASE_ALLOCATION], listed
h.opt_abort()
print("PASS")
