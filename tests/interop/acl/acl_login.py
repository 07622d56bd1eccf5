#!/usr/bin/env python3
"""Raw-socket login checks of iserkit-target's access control (python3 stdlib only).

Usage: acl_login.py repeat PORT IQN ALLOWED_INITIATOR
  A Login Request that carries InitiatorName twice (the ACL admits the first value) is refused with
  status 0x0200 and the connection closed (RFC 7143 §6.2); so is one that changes InitiatorName in
  its operational-stage request; the same name repeated with the same value (as libiscsi does)
  logs in; a name with a newline is refused by the ACL (and logged escaped: the script checks the
  log afterwards).
Usage: acl_login.py burst PORT IQN SOURCE_ADDRESS USER SECRET SECONDS
  CHAP logins back to back for SECONDS; prints how many were answered 0x0201 (credentials
  checked) and how many 0x0301 (refused unchecked: the address is blocked).
Usage: acl_login.py penalty PORT IQN BLOCKED OTHER USER SECRET WRONG BLOCK_SECONDS
  Starts a fresh block of BLOCKED with one checked wrong secret, then prints the statuses of a
  right login from OTHER and from BLOCKED during the block, and from BLOCKED after it.
Usage: acl_login.py chap PORT IQN SOURCE_ADDRESS USER SECRET
  One CHAP login (CHAP_A=7,5: SHA-256 preferred, MD5) from SOURCE_ADDRESS (a 127.0.0.0/8
  address); prints the final status as four hex digits.
"""
import hashlib
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from iscsi_raw import RawConn, login_bhs, parse_text, text  # noqa: E402


Conn = RawConn


def status(bhs):
    return bhs[36:38].hex()


def expect_refused(c, want, what):
    bhs, _ = c.recv()
    assert bhs is not None and bhs[0] & 0x3F == 0x23, f"{what}: no Login Response"
    assert status(bhs) == want, f"{what}: status {status(bhs)}, expected {want}"
    assert c.closed(), f"{what}: connection not closed after the refusal"


def repeat(port, iqn, allowed):
    other = "iqn.2026-11.org.test:intruder"
    op = [("HeaderDigest", "None"), ("DataDigest", "None"), ("MaxRecvDataSegmentLength", "65536")]

    # One request, InitiatorName twice: the first value is the one the ACL admits.
    c = Conn(port)
    c.send(login_bhs(1, 3, True), text([("InitiatorName", allowed), ("InitiatorName", other), ("TargetName", iqn),
                                        ("SessionType", "Normal")] + op))
    expect_refused(c, "0200", "InitiatorName twice in one request")
    print("ok: InitiatorName twice in one request -> 0x0200")

    # The second copy in a later PDU of the same request (C bit).
    c = Conn(port)
    c.send(login_bhs(0, 0, False, cont=True), text([("InitiatorName", allowed), ("TargetName", iqn)]))
    bhs, _ = c.recv()
    assert bhs is not None and status(bhs) == "0000", "C=1 PDU not acknowledged"
    c.send(login_bhs(0, 1, True), text([("AuthMethod", "None"), ("InitiatorName", other)]))
    expect_refused(c, "0200", "InitiatorName repeated across C-bit PDUs")
    print("ok: InitiatorName repeated across continued PDUs -> 0x0200")

    # Security stage with the allowed name, then the operational stage names someone else.
    c = Conn(port)
    c.send(login_bhs(0, 1, True), text([("InitiatorName", allowed), ("TargetName", iqn), ("SessionType", "Normal"),
                                        ("AuthMethod", "None")]))
    bhs, _ = c.recv()
    assert bhs is not None and status(bhs) == "0000" and bhs[1] & 0x80, "security stage refused"
    c.send(login_bhs(1, 3, True, cmd_sn=1), text([("InitiatorName", other)] + op))
    expect_refused(c, "0200", "InitiatorName changed in the operational stage")
    print("ok: InitiatorName changed in a later request -> 0x0200")

    # libiscsi's way: the same names again in the operational stage, same values: accepted.
    c = Conn(port)
    names = [("InitiatorName", allowed), ("TargetName", iqn), ("SessionType", "Normal")]
    c.send(login_bhs(0, 1, True), text(names + [("AuthMethod", "None")]))
    bhs, _ = c.recv()
    assert bhs is not None and status(bhs) == "0000", "security stage refused"
    c.send(login_bhs(1, 3, True), text(names + op))
    bhs, _ = c.recv()
    assert bhs is not None and status(bhs) == "0000", f"identical repeat refused: {status(bhs)}"
    assert bhs[1] & 0x80 and bhs[1] & 3 == 3, "identical repeat: no full feature phase"
    c.close()
    print("ok: identical declarations repeated in the operational stage -> logged in")

    # A name with a newline (not in the ACL): refused 0x0202; the log line must stay one line.
    c = Conn(port)
    c.send(login_bhs(1, 3, True), text([("InitiatorName", "iqn.2026-11.org.test:evil\nFORGED log line"),
                                        ("TargetName", iqn)] + op))
    expect_refused(c, "0202", "initiator outside the ACL")
    print("ok: initiator outside the ACL -> 0x0202")


def chap_login(port, iqn, source, user, secret):
    c = Conn(port, source)
    c.send(login_bhs(0, 0, False), text([("InitiatorName", "iqn.2026-11.org.test:chap"), ("TargetName", iqn),
                                         ("SessionType", "Normal"), ("AuthMethod", "CHAP")]))
    bhs, data = c.recv()
    if bhs is None:
        return "closed"
    if status(bhs) != "0000":
        return status(bhs)
    c.send(login_bhs(0, 0, False), text([("CHAP_A", "7,5")]))
    bhs, data = c.recv()
    if bhs is None:
        return "closed"
    if status(bhs) != "0000":
        return status(bhs)
    keys = parse_text(data)
    algorithm = {"7": hashlib.sha256, "5": hashlib.md5}[keys["CHAP_A"]]
    challenge = bytes.fromhex(keys["CHAP_C"][2:])
    response = algorithm(bytes([int(keys["CHAP_I"])]) + secret.encode() + challenge).hexdigest()
    c.send(login_bhs(0, 1, True), text([("CHAP_N", user), ("CHAP_R", "0x" + response)]))
    bhs, data = c.recv()
    c.close()
    return "closed" if bhs is None else status(bhs)


def burst(port, iqn, source, user, secret, seconds):
    """Wrong-secret logins back to back for `seconds`: prints "CHECKED REFUSED" (0201 / 0301 counts)."""
    import time
    checked = refused = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        answer = chap_login(port, iqn, source, user, secret)
        if answer == "0201":
            checked += 1
        elif answer == "0301":
            refused += 1
        else:
            sys.exit(f"unexpected answer {answer} in the burst")
    print(checked, refused)


def penalty(port, iqn, blocked, other, user, secret, wrong, block_seconds):
    """Fails from `blocked` until a failure is checked (a fresh block of at most `block_seconds`
    begins), then at once: the right secret from `other`, the right secret from `blocked`; then
    after the block, the right secret from `blocked` again. Prints the three statuses."""
    import time
    for _ in range(200):
        if chap_login(port, iqn, blocked, user, wrong) == "0201":
            break
    else:
        sys.exit("no wrong secret was ever checked")
    start = time.monotonic()
    from_other = chap_login(port, iqn, other, user, secret)
    while_blocked = chap_login(port, iqn, blocked, user, secret)
    assert time.monotonic() - start < block_seconds / 2, "too slow to test inside the block"
    time.sleep(block_seconds + 0.2)
    after = chap_login(port, iqn, blocked, user, secret)
    print(from_other, while_blocked, after)


if __name__ == "__main__":
    if sys.argv[1] == "repeat":
        repeat(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "burst":
        burst(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], float(sys.argv[7]))
    elif sys.argv[1] == "penalty":
        penalty(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7], sys.argv[8],
                float(sys.argv[9]))
    elif sys.argv[1] == "chap":
        print(chap_login(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]))
    else:
        sys.exit(f"unknown command {sys.argv[1]}")
