# Raw-socket misbehaviour tests against nbd_memory_server (plain python3, no libnbd): the server
# answers as NBD proto.md says, disconnects only the offending client, and keeps serving others.
# Usage: python3 bad_client.py SOCKET_PATH (server started with --size 8M --max-block 1M).
import socket
import struct
import sys
import time

SOCK = sys.argv[1]
NBDMAGIC, IHAVEOPT, REPLY_MAGIC = 0x4E42444D41474943, 0x49484156454F5054, 0x3E889045565A9
REQ, SIMPLE, STRUCTURED = 0x25609513, 0x67446698, 0x668E33EF
OPT_GO, OPT_STRUCTURED_REPLY = 7, 8
READ, WRITE, DISC = 0, 1, 2
SIZE, MAX = 8 << 20, 1 << 20


def recv_exact(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise EOFError(f"EOF after {len(data)} of {n} bytes")
        data += chunk
    return data


def closed(s):
    s.settimeout(5)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def option(s, opt, data=b""):
    s.sendall(struct.pack(">QII", IHAVEOPT, opt, len(data)) + data)


def option_reply(s):
    magic, opt, rtype, length = struct.unpack(">QIII", recv_exact(s, 20))
    assert magic == REPLY_MAGIC
    return opt, rtype, recv_exact(s, length)


def handshake(structured=False, name=b""):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(SOCK)
    magic, opt_magic, flags = struct.unpack(">QQH", recv_exact(s, 18))
    assert (magic, opt_magic) == (NBDMAGIC, IHAVEOPT) and flags & 1
    s.sendall(struct.pack(">I", 3))  # FIXED_NEWSTYLE | NO_ZEROES
    if structured:
        option(s, OPT_STRUCTURED_REPLY)
        assert option_reply(s)[1] == 1
    option(s, OPT_GO, struct.pack(">I", len(name)) + name + struct.pack(">H", 0))
    while True:
        _, rtype, _ = option_reply(s)
        if rtype == 1:
            return s
        assert rtype == 3, hex(rtype)  # NBD_REP_INFO


def request(s, cmd, offset, length, cookie=1, flags=0, payload=b""):
    s.sendall(struct.pack(">IHHQQI", REQ, flags, cmd, cookie, offset, length) + payload)


def simple_reply(s):
    magic, error, cookie = struct.unpack(">IIQ", recv_exact(s, 16))
    assert magic == SIMPLE, hex(magic)
    return error, cookie


def read_ok(s, offset, length, cookie=7):
    request(s, READ, offset, length, cookie)
    error, got = simple_reply(s)
    assert (error, got) == (0, cookie), (error, got)
    return recv_exact(s, length)


# A well-behaved client stays connected through everything below.
good = handshake()
request(good, WRITE, 4096, 5, 1, payload=b"hello")
assert simple_reply(good) == (0, 1)

# 1. Bad request magic: that client is disconnected; the other one is still served.
bad = handshake()
bad.sendall(struct.pack(">IHHQQI", 0xDEADBEEF, 0, READ, 1, 0, 512))
assert closed(bad), "bad magic did not close the connection"
assert read_ok(good, 4096, 5) == b"hello"

# 2. Out of range: EINVAL for a read, ENOSPC for a write (its payload consumed); connection continues.
c = handshake()
request(c, READ, SIZE - 100, 512, 2)
assert simple_reply(c) == (22, 2)
request(c, WRITE, SIZE, 512, 3, payload=b"x" * 512)
assert simple_reply(c) == (28, 3)
request(c, 99, 0, 0, 4)  # unknown command
assert simple_reply(c) == (22, 4)
request(c, WRITE, 0, 2 * MAX, 5, payload=b"y" * (2 * MAX))  # above the maximum payload
assert simple_reply(c) == (22, 5)
assert read_ok(c, 4096, 5) == b"hello"

# 3. Structured replies: an out-of-range READ gets an NBD_REPLY_TYPE_ERROR chunk with DONE.
s = handshake(structured=True)
request(s, READ, SIZE, 512, 9)
magic, flags, rtype, cookie, length = struct.unpack(">IHHQI", recv_exact(s, 20))
assert (magic, flags, rtype, cookie) == (STRUCTURED, 1, 0x8001, 9), (hex(magic), flags, hex(rtype), cookie)
error, msg_len = struct.unpack(">IH", recv_exact(s, 6))
assert error == 22 and msg_len == length - 6
recv_exact(s, msg_len)
request(s, READ, 4096, 5, 10)
magic, flags, rtype, cookie, length = struct.unpack(">IHHQI", recv_exact(s, 20))
assert (rtype, flags, cookie, length) == (1, 1, 10, 13)
assert struct.unpack(">Q", recv_exact(s, 8))[0] == 4096 and recv_exact(s, 5) == b"hello"

# 4. A write whose length cannot be skipped safely (4 GiB - 1) ends the connection.
h = handshake()
request(h, WRITE, 0, 0xFFFFFFFF, 11)
assert closed(h), "huge write did not close the connection"

# 5. Truncated header, then EOF: nothing breaks.
t = handshake()
t.sendall(struct.pack(">IHH", REQ, 0, READ))
t.close()

# 6. Handshake misbehaviour: unknown client flags, bad option magic, unknown option, unknown name.
for bad_bytes in (struct.pack(">I", 0x80), None):
    x = socket.socket(socket.AF_UNIX)
    x.connect(SOCK)
    recv_exact(x, 18)
    if bad_bytes is not None:
        x.sendall(bad_bytes)
    else:
        x.sendall(struct.pack(">I", 1) + struct.pack(">QII", 0x1234, OPT_GO, 0))
    assert closed(x), "handshake violation did not close the connection"
x = socket.socket(socket.AF_UNIX)
x.connect(SOCK)
recv_exact(x, 18)
x.sendall(struct.pack(">I", 1))
option(x, 0x4242, b"junk")
assert option_reply(x)[:2] == (0x4242, 0x80000001)  # NBD_REP_ERR_UNSUP
option(x, OPT_GO, struct.pack(">I", 4) + b"nope" + struct.pack(">H", 0))
assert option_reply(x)[1] == 0x80000006  # NBD_REP_ERR_UNKNOWN
option(x, 2)  # NBD_OPT_ABORT → NBD_REP_ACK, then the server closes
assert option_reply(x)[1] == 1
assert closed(x)

# 7. Pipelining without reading: 300 reads of 64 KiB are answered in full once we read
#    (the server bounds requests in flight and stops reading, never drops or deadlocks).
p = handshake()
p.sendall(b"".join(struct.pack(">IHHQQI", REQ, 0, READ, 1000 + i, (i % 64) * 65536, 65536) for i in range(300)))
seen = set()
for _ in range(300):
    error, cookie = simple_reply(p)
    assert error == 0
    recv_exact(p, 65536)
    seen.add(cookie)
assert seen == set(range(1000, 1300))

# 8. NBD_CMD_DISC right behind outstanding writes: every write is answered before the close.
d = handshake()
d.sendall(b"".join(struct.pack(">IHHQQI", REQ, 0, WRITE, 2000 + i, i * 512, 512) + bytes([i]) * 512
                   for i in range(20)) + struct.pack(">IHHQQI", REQ, 0, DISC, 0, 0, 0))
assert {simple_reply(d)[1] for _ in range(20)} == set(range(2000, 2020))
assert closed(d)
assert read_ok(good, 19 * 512, 512) == bytes([19]) * 512

# 9. The handshake limit (the server runs with --handshake-limit 2): a client that connects and
#    says nothing is dropped, neither at once nor never; a connection already in transmission
#    (good) idles longer than that and is still served.
t0 = time.monotonic()
q = socket.socket(socket.AF_UNIX)
q.connect(SOCK)
recv_exact(q, 18)  # the greeting, then silence
q.settimeout(30)
try:
    gone = q.recv(1) == b""
except ConnectionResetError:
    gone = True
except socket.timeout:
    gone = False
took = time.monotonic() - t0
assert gone, "a silent client was not dropped within 30 s"
assert 1.5 <= took <= 25, f"a silent client was dropped after {took:.1f} s, not about 2 s"
assert read_ok(good, 19 * 512, 512) == bytes([19]) * 512

request(good, DISC, 0, 0)
assert closed(good)
print("PASS")
