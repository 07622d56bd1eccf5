#!/usr/bin/env python3
"""Prints WCE of the Caching mode page (SBC-4 §6.5.5, MODE SENSE (6) page 08h) of LUN 0 of
target IQN on 127.0.0.1:PORT, as "wce=0" or "wce=1", through a raw iSCSI session
(tests/interop helpers). Used by rbd_two_gateways_test.sh: a gateway with peers must report no
volatile cache (librbd's cache off). Usage: caching_page.py PORT IQN
"""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "interop", "target"))
sys.path.insert(0, os.path.join(here, "..", "..", "interop"))
import bad_input as bi  # noqa: E402  (reads PORT IQN from argv)
from alua import command_in  # noqa: E402  (returns status, data, sense)
from iscsi_raw import full_feature_login, session_keys  # noqa: E402


def main():
    c = bi.Conn()
    full_feature_login(c, session_keys("iqn.2026-11.org.test:wce", bi.IQN))
    command_in(c, bytes([0x03, 0, 0, 0, 252, 0]), 252)  # REQUEST SENSE clears the POWER ON UA
    st, data, _ = command_in(c, bytes([0x1A, 0x08, 0x08, 0, 252, 0]), 252)  # DBD, page 08h, current
    assert st == 0 and len(data) >= 4, f"MODE SENSE (6) status {st:#x}"
    page = data[4 + data[3]:]
    assert page and page[0] & 0x3F == 0x08, f"no Caching mode page: {data.hex()}"
    print(f"wce={(page[2] >> 2) & 1}")


if __name__ == "__main__":
    main()
