"""One client for a whole target outage, shared by the give-up-reconnect tests
(nbd_give_up_reconnect_test.sh, fuse_give_up_reconnect_test.sh): once the target is killed its
reads fail with EIO after the replacement timeout (2 s), the next one at once; once the target is
restarted the same connection (or descriptor) reads the data written before the kill again, within
the back-off's cap + slack. It follows the test's go-ahead files in TMP (killed, restarted) and
writes its own (gave_up)."""
import errno
import os
import sys
import time


def wait_for(tmp, name, limit):
    """Waits for the test's go-ahead file NAME in TMP; exits (failing) after LIMIT s."""
    guard = time.monotonic() + limit
    while not os.path.exists(os.path.join(tmp, name)):
        if time.monotonic() > guard:
            sys.exit("no go-ahead %s within %d s" % (name, limit))
        time.sleep(0.05)


def mark(tmp, name):
    open(os.path.join(tmp, name), "w").close()


def through_outage(tmp, probe, read, error, errno_of, data, front, holder):
    """probe(): a read while the target is away; read(): the data written before the kill (len(data)
    bytes); both raise `error`, whose errno errno_of(e) gives. front: who logs in again ("bridge",
    "view"); holder: what reads throughout ("NBD connection", "descriptor")."""
    wait_for(tmp, "killed", 60)
    # Detection is immediate (the target's socket closes); the replacement timeout is 2 s.
    bound = 2 + 10
    start = time.monotonic()
    while True:
        try:
            probe()
        except error as e:
            if errno_of(e) != errno.EIO:
                sys.exit("expected EIO, got %s" % e)
            break
        if time.monotonic() - start > bound:
            sys.exit("reads still succeed %d s after the kill" % bound)
        time.sleep(0.1)
    print("  a read failed with EIO %.1f s after the kill" % (time.monotonic() - start), flush=True)
    t = time.monotonic()
    try:
        probe()
        sys.exit("a read after the replacement timeout succeeded with the target down")
    except error as e:
        if errno_of(e) != errno.EIO:
            sys.exit("after giving up: expected EIO, got %s" % e)
    if time.monotonic() - t > 1:
        sys.exit("a read after the replacement timeout was not failed at once (%.1f s)" % (time.monotonic() - t))
    print("  the next read failed at once with EIO", flush=True)
    mark(tmp, "gave_up")
    wait_for(tmp, "restarted", 120)
    # Back within the back-off's cap (5 s, jittered) + a login + slack for a loaded machine.
    bound = 5 + 25
    start = time.monotonic()
    while True:
        try:
            got = read()
            break
        except error as e:
            if errno_of(e) != errno.EIO:
                sys.exit("while the %s logs in again: expected EIO, got %s" % (front, e))
        if time.monotonic() - start > bound:
            sys.exit("no read succeeded within %d s of the restart" % bound)
        time.sleep(0.2)
    if got != data:
        sys.exit("the data read after the restart differs from what was written before the kill")
    print("  the same %s reads the data back %.1f s after the restart" % (holder, time.monotonic() - start),
          flush=True)
