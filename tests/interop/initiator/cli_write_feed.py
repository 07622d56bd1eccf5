#!/usr/bin/env python3
"""Runs `iserkit write` on a FIFO, feeds it, and signals it once it has read everything.

Usage: cli_write_feed.py FIFO DATA SIGNAL CMD...
Starts CMD (stdout and stderr inherited; SIGINT and SIGTERM at their default action, as in an
interactive shell, whatever this script inherited), writes DATA into FIFO, waits until CMD has
taken all of it (FIONREAD on the FIFO is 0: no timing guess), sends SIGNAL (SIGINT or SIGTERM) to
CMD and keeps the FIFO open until CMD has exited, so CMD never sees end of input.
Prints "status=N" (CMD's exit status) on stdout; exits 1 if CMD does not read or exit in 60 s.
"""
import array
import errno
import fcntl
import os
import signal
import subprocess
import sys
import termios
import time


def default_signals():
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def main():
    fifo, data_path, sig = sys.argv[1], sys.argv[2], getattr(signal, sys.argv[3])
    with open(data_path, "rb") as f:
        data = f.read()
    proc = subprocess.Popen(sys.argv[4:], preexec_fn=default_signals)
    deadline = time.monotonic() + 60
    try:
        # Open once CMD has opened its end (ENXIO until then); give up if CMD exits first.
        while True:
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError as e:
                if e.errno != errno.ENXIO:
                    raise
            if time.monotonic() > deadline or proc.poll() is not None:
                print("CMD did not open the FIFO", file=sys.stderr)
                return 1
            time.sleep(0.01)
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        pending = array.array("i", [1])
        while True:
            fcntl.ioctl(fd, termios.FIONREAD, pending, True)
            if pending[0] == 0:
                break
            if time.monotonic() > deadline or proc.poll() is not None:
                print("CMD did not read the whole FIFO", file=sys.stderr)
                return 1
            time.sleep(0.01)
        proc.send_signal(sig)
        status = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        os.close(fd)
    except subprocess.TimeoutExpired:
        print("CMD did not exit after the signal", file=sys.stderr)
        return 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    print(f"status={status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
