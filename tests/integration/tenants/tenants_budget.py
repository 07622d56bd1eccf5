#!/usr/bin/env python3
"""One tenant fills its payload budget; the other tenant's I/O still proceeds (issue 14;
target/README.md "Tenants", "Limits").

blue's "hog" session sends 32 READs of 1 MiB and never reads its socket: their Data-In cannot
leave, so each READ keeps its task buffer, and blue's payload budget (4 MiB) stays full with the
rest queued behind it. Then:
  - a second blue session's 64 KiB READ gets no answer while the hog holds the budget (it waits
    in the same tenant budget), and completes once the hog's connection is closed;
  - red's session WRITEs and READs back 1 MiB meanwhile (its own budget; the target-wide budget is
    as small as blue's, so a shared budget would block red too);
  - the target logs "tenant blue payload budget full" (once per episode of it being full: the
    socket buffers let a few READs finish, so it may fill more than once), and nothing of red's.
Usage: tenants_budget.py TARGET_LOG BLUE_HOST:PORT BLUE_IQN RED_HOST:PORT RED_IQN
"""
import os
import select
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tenant_raw import MiB, clear_unit_attention, finish_read, login, read, read_cdb, scsi_bhs, write  # noqa: E402

LOG, BLUE, BLUE_IQN, RED, RED_IQN = sys.argv[1:6]


def log_lines(needle):
    with open(LOG, errors="replace") as f:
        return [line for line in f if needle in line]


# 1. blue's hog fills blue's budget.
hog = login(BLUE, BLUE_IQN)
clear_unit_attention(hog)
hog.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
for i in range(32):
    _, bhs = scsi_bhs(hog, read_cdb(i * 2048, 2048), MiB, read=True)
    hog.send(bhs)
deadline = time.monotonic() + 20
while not log_lines("tenant blue payload budget full") and time.monotonic() < deadline:
    time.sleep(0.1)
full = log_lines("tenant blue payload budget full")
assert full, "the target did not report blue's payload budget full"
print("ok: " + full[0].strip())

# 2. Another blue session waits in the same budget.
waiter = login(BLUE, BLUE_IQN)
clear_unit_attention(waiter)
_, bhs = scsi_bhs(waiter, read_cdb(0, 128), 65536, read=True)
waiter.send(bhs)
ready, _, _ = select.select([waiter.s], [], [], 2.0)
assert not ready, "blue's second session got an answer while blue's budget was full"
print("ok: a second blue session's READ waits while blue's budget is full")

# 3. red does I/O meanwhile.
red = login(RED, RED_IQN)
clear_unit_attention(red)
payload = bytes((i * 13 + (i >> 9)) & 0xFF for i in range(MiB))
write(red, 4096, payload)
got = b"".join(read(red, 4096 + k * 128, 128) for k in range(MiB // 65536))
assert got == payload, "red read back other data"
print("ok: red WRITEs and READs back 1 MiB while blue's budget is full")
assert not log_lines("tenant red payload budget full"), "red's budget was reported full"

# 4. The hog goes: blue's waiting READ is granted.
hog.s.close()
waiter.s.settimeout(20)
data = finish_read(waiter)
assert len(data) == 65536, f"blue's waiting READ returned {len(data)} bytes"
print("ok: blue's waiting READ completes once the hog's connection is closed")
