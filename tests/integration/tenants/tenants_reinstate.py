#!/usr/bin/env python3
"""Session reinstatement at a tenant's session cap (issue 14; RFC 7143 §6.3.5, §11.13.5).

red allows one session. With session A (ISID X) open:
  - a login with another ISID (Y) is a new session: refused with 0x0302 (out of resources);
  - a login with A's InitiatorName + ISID X reinstates A: it succeeds, the target closes A, and the
    new session does I/O;
  - a new session (ISID Y) is still refused afterwards: the cap counts one session again.
Usage: tenants_reinstate.py TARGET_LOG RED_HOST:PORT RED_IQN
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tenant_raw import clear_unit_attention, login, read, try_login  # noqa: E402

LOG, RED, RED_IQN = sys.argv[1:4]
X = bytes([0x80, 0x42, 0, 0, 0x0a, 0x01])
Y = bytes([0x80, 0x42, 0, 0, 0x0b, 0x02])


def logged(needle):
    with open(LOG, errors="replace") as f:
        return any(needle in line for line in f)


a = login(RED, RED_IQN, X)
clear_unit_attention(a)
assert len(read(a, 0, 8)) == 4096
print("ok: session A (ISID X) open: red is at its cap of 1")

status, b = try_login(RED, RED_IQN, Y)
assert status == 0x0302, f"a new session at the cap got status {status!r}, expected 0x0302"
b.close()
print("ok: a new session (ISID Y) is refused with 0x0302")

status, c = try_login(RED, RED_IQN, X)
assert status == 0, f"the reinstating login (ISID X) got status {status:#06x}, expected success"
assert a.wait_closed(10), "the target did not close the reinstated session A"
clear_unit_attention(c)
assert len(read(c, 0, 8)) == 4096
assert logged("reinstating the session"), "the target did not log the reinstatement"
print("ok: the login with A's ISID reinstates A at the cap: A closed, the new session does I/O")

status, d = try_login(RED, RED_IQN, Y)
assert status == 0x0302, f"a new session after the reinstatement got status {status!r}, expected 0x0302"
d.close()
print("ok: a new session is still refused after the reinstatement")
c.close()
