# libnbd (python3-libnbd, the library behind nbdsh) against nbd_memory_server.
# Usage: python3 nbdsh_test.py SERVER TMPDIR. Spec: NBD proto.md "Request types", "Error values",
# "Structured reply chunk message", "Newstyle negotiation".
import errno
import os
import random
import sys
import time

import nbd

SERVER, TMP = sys.argv[1], sys.argv[2]
MiB = 1 << 20


def connect(*server_args, structured=True, handshake_flags=None, strict=True):
    h = nbd.NBD()
    h.set_request_structured_replies(structured)
    if handshake_flags is not None:
        h.set_handshake_flags(handshake_flags)
    if not strict:
        h.set_strict_mode(0)  # let invalid requests reach the server, to test its validation
    h.connect_command([SERVER, "--stdio", *server_args])
    return h


def expect_error(fn, code, what):
    try:
        fn()
    except nbd.Error as e:
        got = e.errno if isinstance(e.errno, int) else getattr(errno, str(e.errno), e.errno)
        assert got == code, f"{what}: errno {e.errno} ({e.string}), want {errno.errorcode[code]}"
        assert "out of bounds" not in e.string, f"{what}: rejected by libnbd, not by the server"
        return
    raise AssertionError(f"{what}: succeeded, want errno {code}")


def basic_io(h):
    size = h.get_size()
    data = os.urandom(64 * 1024)
    h.pwrite(data, 0)
    assert h.pread(len(data), 0) == data
    h.pwrite(data, size - len(data), nbd.CMD_FLAG_FUA)
    assert h.pread(len(data), size - len(data)) == data
    h.flush()
    h.zero(4096, 8192)
    assert h.pread(4096, 8192) == bytes(4096)
    h.zero(4096, 12288, nbd.CMD_FLAG_NO_HOLE | nbd.CMD_FLAG_FUA)
    assert h.pread(4096, 12288) == bytes(4096)
    assert h.pread(4096, 16384) == data[16384:20480]
    h.trim(128 * 1024, 256 * 1024, nbd.CMD_FLAG_FUA)  # contents unspecified afterwards; must succeed


def out_of_range_keeps_connection(h):
    size = h.get_size()
    # proto.md "Error values": EINVAL for reads past the end, ENOSPC for writes past the end.
    expect_error(lambda: h.pread(512, size - 256), errno.EINVAL, "read past end")
    expect_error(lambda: h.pwrite(b"x" * 512, size), errno.ENOSPC, "write past end")
    expect_error(lambda: h.zero(1024, size - 512), errno.ENOSPC, "zero past end")
    expect_error(lambda: h.trim(1024, size), errno.EINVAL, "trim past end")
    expect_error(lambda: h.pread(512, 1 << 62), errno.EINVAL, "read at a huge offset")
    h.pwrite(b"still here", 0)
    assert h.pread(10, 0) == b"still here"


def concurrent_aio(h, count=512, block=4096):
    """Many commands in flight at once; the server completes them out of order (--delay-us)."""
    blocks = random.sample(range(h.get_size() // block), count)
    payload = {b: os.urandom(block) for b in blocks}
    max_in_flight = 0
    cookies = []
    for b in blocks:
        cookies.append(h.aio_pwrite(payload[b], b * block))
        max_in_flight = max(max_in_flight, h.aio_in_flight())
    while h.aio_in_flight() > 0:
        h.poll(-1)
    for c in cookies:
        assert h.aio_command_completed(c)
    buffers = {b: nbd.Buffer(block) for b in blocks}
    cookies = [h.aio_pread(buffers[b], b * block) for b in blocks]
    max_in_flight = max(max_in_flight, h.aio_in_flight())
    while h.aio_in_flight() > 0:
        h.poll(-1)
    for c in cookies:
        assert h.aio_command_completed(c)
    for b in blocks:
        assert buffers[b].to_bytearray() == payload[b], f"block {b} differs"
    assert max_in_flight > 32, f"only {max_in_flight} commands were in flight"


# 1. Structured replies, socket in stdin (nbd_connect_command).
h = connect("--size", "64M", strict=False)
assert h.get_structured_replies_negotiated()
assert h.get_protocol() == "newstyle-fixed"
basic_io(h)
out_of_range_keeps_connection(h)
h.shutdown()

# 2. Simple replies only (no NBD_OPT_STRUCTURED_REPLY).
h = connect("--size", "16M", structured=False, strict=False)
assert not h.get_structured_replies_negotiated()
basic_io(h)
out_of_range_keeps_connection(h)
h.shutdown()

# 3. Non-fixed newstyle: NBD_OPT_EXPORT_NAME with the 124 zero bytes (no NO_ZEROES).
h = connect("--size", "8M", handshake_flags=0, structured=False)
assert h.get_protocol() == "newstyle", h.get_protocol()
basic_io(h)
h.shutdown()

# 4. Many requests in flight, replies out of order, both reply styles.
for structured in (True, False):
    h = connect("--size", "256M", "--delay-us", "2000", structured=structured)
    concurrent_aio(h)
    h.shutdown()

# 5. Server-side checks with libnbd's own checks off: read-only, unknown command flags, alignment.
h = connect("--size", "8M", "--read-only", strict=False)
assert h.is_read_only()
expect_error(lambda: h.pwrite(b"x" * 512, 0), errno.EPERM, "write on read-only")
expect_error(lambda: h.trim(512, 0), errno.EPERM, "trim on read-only")
assert h.pread(512, 0) == bytes(512)
h.shutdown()
for structured in (True, False):
    h = connect("--size", "8M", strict=False, structured=structured)
    assert h.pread(0, 0) == b""  # empty read: a lone NONE chunk, or an empty simple reply
    h.pwrite(b"", 100)
    expect_error(lambda: h.pread(512, 0, 0x100), errno.EINVAL, "unknown command flag")
    assert h.pread(4, 0) == bytes(4)
    h.shutdown()
h = connect("--size", "8M", "--min-block", "512", strict=False)
expect_error(lambda: h.pread(100, 0), errno.EINVAL, "unaligned read")
expect_error(lambda: h.pwrite(b"y" * 512, 3), errno.EINVAL, "unaligned write")
h.pwrite(b"z" * 512, 512)
assert h.pread(512, 512) == b"z" * 512
h.shutdown()
h = connect("--size", "8M", "--max-block", "1M", strict=False)
expect_error(lambda: h.pread(2 * MiB, 0), errno.EINVAL, "read above the maximum payload")
expect_error(lambda: h.pwrite(b"w" * (2 * MiB), 0), errno.EINVAL, "write above the maximum payload")
h.pwrite(b"w" * MiB, 0)  # the rejected payload was consumed: framing intact
assert h.pread(MiB, 0) == b"w" * MiB
h.shutdown()

# 6. An export error (injected EIO) is reported and the connection continues.
for structured in (True, False):
    h = connect("--size", "8M", "--fail-at", "1M:4K", structured=structured)
    expect_error(lambda: h.pread(8192, MiB - 4096), errno.EIO, "read over a failing range")
    expect_error(lambda: h.pwrite(b"e" * 4096, MiB), errno.EIO, "write over a failing range")
    assert h.pread(4096, 0) == bytes(4096)
    h.shutdown()

# 7. Option haggling: NBD_OPT_LIST, NBD_OPT_INFO, unknown export, then NBD_OPT_GO.
h = nbd.NBD()
h.set_opt_mode(True)
h.connect_command([SERVER, "--stdio", "--size", "4M", "--name", "vol"])
names = []
h.opt_list(lambda name, description: names.append((name, description)))
assert names == [("vol", "iserkit test export")], names
h.set_export_name("missing")
try:
    h.opt_info()
    raise AssertionError("opt_info of a missing export succeeded")
except nbd.Error:
    pass
h.set_export_name("vol")
h.opt_info()
assert h.get_size() == 4 * MiB
h.opt_go()
assert h.pread(4, 0) == bytes(4)
h.shutdown()

# 8. Two connections to one Unix-socket server (CAN_MULTI_CONN): a flushed write is visible to the other.
sock = os.path.join(TMP, "multi.sock")
import subprocess
server = subprocess.Popen([SERVER, "--unix", sock, "--size", "8M"])
for _ in range(100):
    if os.path.exists(sock):
        break
    time.sleep(0.05)
a, b = nbd.NBD(), nbd.NBD()
a.connect_uri(f"nbd+unix:///?socket={sock}")
b.connect_uri(f"nbd+unix:///?socket={sock}")
assert a.can_multi_conn()
a.pwrite(b"shared", 4096)
a.flush()
assert b.pread(6, 4096) == b"shared"
a.shutdown()
b.shutdown()
server.terminate()
assert server.wait(timeout=10) == 0

print("PASS")
