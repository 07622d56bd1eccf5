#!/usr/bin/env python3
"""Per-tenant connection admission (issue 14; target/README.md "Tenants", "Limits").

Target-wide max_logging_in 16; blue: max_logging_in 4, max_connections 6; red: no caps of its
own; [login_throttle] blocks an address after its second failure. Red's initiator connects first
and sends its login only after each flood:
  1. blue floods its portal with 100 silent connections: the target keeps at most 4 of them
     (blue's own cap evicts blue's oldest), and red's connection stays open;
  2. the untenanted portal is flooded with 100 more: at the target-wide cap the group with the
     most connections logging in (the untenanted portals) loses its oldest, never red's one;
  3. red's waiting connection logs in and reads;
  4. blue opens 6 sessions (its max_connections): a 7th connection is closed at once, red still
     logs in;
  5. blue's initiator fails CHAP from 127.0.0.1 until the address is blocked (0x0301) on blue's
     portals; red's initiator from the same address (tenants' overlays may reuse addresses)
     still logs in.
Usage: tenants_admission.py TARGET_LOG BLUE_HOST:PORT BLUE_IQN BLUE_CHAP_IQN RED_HOST:PORT RED_IQN PLAIN_HOST:PORT
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tenant_raw import (Conn, clear_unit_attention, fresh_isid, full_feature_login, login, pairs,  # noqa: E402
                        read, try_login)

LOG, BLUE, BLUE_IQN, BLUE_CHAP_IQN, RED, RED_IQN, PLAIN = sys.argv[1:8]


def settle(conns, most, seconds=10):
    """Waits until at most `most` of `conns` are still open; returns those."""
    deadline = time.monotonic() + seconds
    while True:
        still = [c for c in conns if not c.wait_closed(0)]
        if len(still) <= most or time.monotonic() > deadline:
            return still
        time.sleep(0.1)


def logged(needle):
    with open(LOG, errors="replace") as f:
        return any(needle in line for line in f)


red_waiting = Conn(RED)

# 1. blue floods its own portal.
flood = [Conn(BLUE) for _ in range(100)]
still = settle(flood, 4)
assert len(still) <= 4, f"{len(still)} of blue's silent connections still open (blue's max_logging_in is 4)"
assert not red_waiting.wait_closed(0), "red's connection was closed by blue's flood"
print(f"ok: blue's flood of 100 silent connections: {len(still)} kept (its cap 4); red's connection stays")

# 2. The untenanted portal floods the target-wide cap.
flood2 = [Conn(PLAIN) for _ in range(100)]
still2 = settle(flood2, 16)
assert len(still2) < 16, f"{len(still2)} untenanted silent connections still open (target-wide cap 16)"
assert not red_waiting.wait_closed(0), "red's connection was evicted at the target-wide cap"
print(f"ok: 100 silent connections on the untenanted portal: {len(still2)} kept; red's connection stays")

# 3. red's connection, connected before both floods, logs in now.
full_feature_login(red_waiting, pairs(RED_IQN), fresh_isid())
clear_unit_attention(red_waiting)
assert len(read(red_waiting, 0, 8)) == 4096
print("ok: red's connection opened before the floods logs in and reads")
for c in flood + flood2:
    c.close()
time.sleep(0.5)

# 4. blue's max_connections.
sessions = [login(BLUE, BLUE_IQN) for _ in range(6)]
extra = Conn(BLUE)
assert extra.wait_closed(10), "a 7th connection on blue's portal was not closed (blue's max_connections is 6)"
assert logged("refused: tenant blue has 6 connections open"), "the refusal was not logged"
r = login(RED, RED_IQN)
clear_unit_attention(r)
r.close()
print("ok: blue at its max_connections (6 sessions): a 7th connection is closed at once; red still logs in")
for c in sessions:
    c.close()
time.sleep(0.5)

# 5. The login throttle is per tenant.
statuses = []
for _ in range(4):
    status, c = try_login(BLUE, BLUE_CHAP_IQN, fresh_isid())
    statuses.append(status)
    c.close()
assert statuses[0] == 0x0201, f"a login without CHAP to a CHAP target got {statuses[0]!r}, expected 0x0201"
assert statuses[-1] == 0x0301, f"blue's address is not blocked after {len(statuses)} failures: {statuses}"
status, c = try_login(RED, RED_IQN, fresh_isid())
assert status == 0, f"red's login from the address blocked on blue's portals got {status:#06x}"
c.close()
print(f"ok: 127.0.0.1 blocked on blue's portals ({', '.join(f'{s:#06x}' for s in statuses)}); red logs in from it")
