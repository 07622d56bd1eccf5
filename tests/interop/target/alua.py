#!/usr/bin/env python3
"""ALUA of iserkit-target (target/README.md "ALUA"), raw iSCSI: two portal groups, tpgt 1
active/optimized on PORT1 (127.0.0.1) and tpgt 2 standby on PORT2 (127.0.0.2).

Checks through each portal: the Login Response's TargetPortalGroupTag; TPGS = 01b in standard
INQUIRY; REPORT TARGET PORT GROUPS lists both groups with their states; VPD 0x83 names the
portal's relative target port and target port group and the same logical unit designators; READ
runs through the active group and gets NOT READY, 04h/0Bh through the standby one.
Both sessions use one InitiatorName and ISID: through two portal groups they are two sessions.
Usage: alua.py PORT1 IQN PORT2
"""
import os
import socket
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import bad_input as bi  # noqa: E402  (reads PORT IQN from argv)
from iscsi_raw import collect_data_in, full_feature_login, session_keys  # noqa: E402


class Conn(bi.Conn):
    """A connection to `address`:`port` (bi.Conn always dials 127.0.0.1:PORT)."""

    def __init__(self, address, port):  # noqa: super().__init__ would dial the first portal
        self.s = socket.create_connection((address, port), timeout=10)
        self.data_digest = False
        self.cmd_sn, self.exp_stat_sn, self.itt = 1, 0, 1


def login(port, address):
    c = Conn(address, port)
    _, keys = full_feature_login(c, session_keys("iqn.2026-11.org.test:alua", bi.IQN))
    return c, int(keys["TargetPortalGroupTag"])


def command_in(c, cdb, alloc):
    """A data-in command: (status, data, sense)."""
    itt, bhs = bi.scsi_bhs(c, cdb, alloc, read=alloc > 0)
    c.send(bhs)
    return collect_data_in(c, f"opcode {cdb[0]:#04x}")


def designators(page):
    out = []
    i = 4
    while i + 4 <= len(page):
        assoc, dtype, n = (page[i + 1] >> 4) & 3, page[i + 1] & 0x0F, page[i + 3]
        out.append((assoc, dtype, page[i + 4:i + 4 + n]))
        i += 4 + n
    return out


def check_portal(port, address, want_tag):
    c, tag = login(port, address)
    assert tag == want_tag, f"TargetPortalGroupTag {tag}, expected {want_tag}"
    # The new nexus's POWER ON unit attention: REQUEST SENSE reports and clears it (SAM-5 §5.14).
    st, _, _ = command_in(c, bytes([0x03, 0, 0, 0, 252, 0]), 252)
    assert st == 0, "REQUEST SENSE"
    st, inq, _ = command_in(c, bytes([0x12, 0, 0, 0, 96, 0]), 96)
    assert st == 0 and (inq[5] >> 4) & 3 == 1, "INQUIRY: TPGS is not 01b (implicit ALUA)"
    cdb = bytes([0xA3, 0x0A]) + bytes(4) + struct.pack(">I", 1024) + bytes(2)
    st, rtpg, _ = command_in(c, cdb, 1024)
    assert st == 0, f"REPORT TARGET PORT GROUPS status {st:#x}"
    assert struct.unpack(">I", rtpg[:4])[0] == len(rtpg) - 4
    groups = {}
    i = 4
    while i < len(rtpg):
        groups[struct.unpack(">H", rtpg[i + 2:i + 4])[0]] = rtpg[i] & 0x0F
        i += 8 + 4 * rtpg[i + 7]
    assert groups == {1: 0, 2: 2}, f"groups {groups}: expected 1 active/optimized, 2 standby"
    st, vpd, _ = command_in(c, bytes([0x12, 1, 0x83, 1, 0, 0]), 256)
    assert st == 0, "VPD 0x83"
    ds = designators(vpd)
    port_ids = {dtype: struct.unpack(">H", v[2:4])[0] for assoc, dtype, v in ds if assoc == 1}
    assert port_ids == {4: want_tag, 5: want_tag}, f"target port designators {port_ids}, expected {want_tag}"
    lu = [(dtype, v) for assoc, dtype, v in ds if assoc == 0]
    st, data, sense = command_in(c, bytes([0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0]), 512)
    if want_tag == 1:
        assert st == 0 and len(data) == 512, "READ through the active/optimized group failed"
    else:
        assert st == 0x02, f"READ through the standby group: status {st:#x}, expected CHECK CONDITION"
        assert sense[2] & 0x0F == 0x02 and sense[12:14] == b"\x04\x0b", \
            f"sense {sense[2] & 0x0f:#x} {sense[12:14].hex()}: expected NOT READY 04h/0Bh"
    print(f"ok: portal group {want_tag}: tag, TPGS, RTPG, VPD 0x83 and access as configured")
    return c, lu


def main():
    c1, lu1 = check_portal(bi.PORT, "127.0.0.1", 1)
    c2, lu2 = check_portal(int(sys.argv[3]), "127.0.0.2", 2)  # PORT2
    assert lu1 == lu2 and lu1, "the logical unit designators differ between the two paths"
    print("ok: the same logical unit designators on both paths")
    # Both sessions used the same InitiatorName and ISID, through two portal groups: two I_T
    # nexuses, so the second login did not reinstate (end) the first (RFC 7143 §6.3.5, SSID = ISID + TPGT).
    bi.nop_ping(c1)
    bi.nop_ping(c2)
    print("ok: the same ISID through another portal group is another session")
    print("PASS")


if __name__ == "__main__":
    main()
