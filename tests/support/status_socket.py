#!/usr/bin/env python3
"""A daemon's status socket (iserkit-target --status-socket, iserkit-nbd --status-socket): one JSON
document per connection (docs/metrics.md). Used by the shell tests as a module or as a command:

    status_socket.py SOCKET            the whole document
    status_socket.py SOCKET sessions   isid -> commands {read, write, other} of the normal sessions
"""
import json
import socket
import sys


def query(path):
    """The status document the socket at `path` answers with."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    return json.loads(data)


def normal_sessions(path):
    """isid -> commands {read, write, other} of every normal (not discovery) session."""
    return {x["isid"]: x["commands"] for x in query(path)["sessions"] if x["type"] == "normal"}


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[2] == "sessions":
        print(json.dumps(normal_sessions(sys.argv[1])))
    else:
        print(json.dumps(query(sys.argv[1])))
