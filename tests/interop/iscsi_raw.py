"""Raw iSCSI over a TCP socket for the black-box tests (python3 stdlib only): framing (BHS, data
segment, padding, optional CRC32C data digest), Login Request headers and text key=value data
(RFC 7143 §11.12, §6, §13), a one-step login to full feature phase, SCSI Command headers, the
Data-In of a command and TEST UNIT READY until GOOD. Imported by tests/interop/target/bad_input.py
(and so limits.py, drain.py, reinstate.py, alua.py), tests/interop/acl/acl_login.py and
tests/integration/tenants/tenant_raw.py."""
import socket
import struct


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def pad(n):
    return (4 - n % 4) % 4


def text(pairs):
    return b"".join(f"{k}={v}".encode() + b"\0" for k, v in pairs)


def parse_text(data):
    return dict(p.decode(errors="replace").split("=", 1) for p in data.split(b"\0") if p)


def login_bhs(csg, nsg, transit, cont=False, itt=1, cmd_sn=1, isid=bytes([0x80, 0, 0, 1, 0, 0x42])):
    """A Login Request BHS (ISID `isid`, 6 bytes, default 0x800000010042; TSIH 0, CID 1);
    DataSegmentLength is set by send()."""
    flags = (0x80 if transit else 0) | (0x40 if cont else 0) | (csg << 2) | (nsg if transit else 0)
    return (bytes([0x43, flags, 0, 0, 0, 0, 0, 0]) + bytes(isid) + b"\0\0" +
            struct.pack(">IHHII", itt, 1, 0, cmd_sn, 0) + b"\0" * 16)


DEFAULT_ISID = bytes([0x80, 0, 0, 1, 0, 0x42])


def session_keys(initiator, target, *extra):
    """The keys of a Normal session's login, each once (a repeated key is refused, RFC 7143 §6.1):
    names, no digests, MaxRecvDataSegmentLength 65536 (bytes), then the (key, value) pairs in
    `extra`; an `extra` key already in the list replaces its value in place (RFC 7143 §13)."""
    keys = {"InitiatorName": initiator, "TargetName": target, "SessionType": "Normal", "HeaderDigest": "None",
            "DataDigest": "None", "MaxRecvDataSegmentLength": "65536"}
    keys.update(extra)
    return list(keys.items())


def login_step(c, pairs, isid=DEFAULT_ISID):
    """Sends one Login Request from operational negotiation straight to full feature phase (CSG 1,
    NSG 3, T bit) carrying `pairs`; returns its Login Response (BHS, data), or (None, None) when
    the target closed the connection instead. Asserts that the answer is a Login Response."""
    c.send(login_bhs(1, 3, True, isid=isid), text(pairs))
    bhs, data = c.recv()
    assert bhs is None or bhs[0] & 0x3F == 0x23, f"expected a Login Response, got opcode {bhs[0] & 0x3f:#x}"
    return bhs, data


def login_status(bhs):
    """A Login Response's Status-Class and Status-Detail as one number, e.g. 0x0301 (§11.13.5)."""
    return bhs[36] << 8 | bhs[37]


def full_feature_login(c, pairs, isid=DEFAULT_ISID):
    """login_step(), asserting success: status 0, T bit, NSG 3 and the ISID echoed. Sets
    c.exp_stat_sn (the response's StatSN + 1) and c.cmd_sn (its ExpCmdSN); returns (BHS, keys)."""
    bhs, data = login_step(c, pairs, isid)
    assert bhs is not None, "connection closed instead of a Login Response"
    assert login_status(bhs) == 0, f"login failed: status {login_status(bhs):#06x}"
    assert bhs[1] & 0x80 and bhs[1] & 3 == 3, "login did not reach full feature phase"
    assert bhs[8:14] == bytes(isid), "Login Response carries another ISID"
    c.exp_stat_sn = struct.unpack(">I", bhs[24:28])[0] + 1
    c.cmd_sn = struct.unpack(">I", bhs[28:32])[0]
    return bhs, parse_text(data)


class RawConn:
    """One TCP connection to 127.0.0.1:port from `source` (a 127.0.0.0/8 address)."""

    def __init__(self, port, source="127.0.0.1", timeout=10):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0))
        self.data_digest = False

    def send(self, bhs, data=b"", bad_digest=False):
        """Sends a PDU: sets DataSegmentLength, pads, adds the data digest when enabled."""
        bhs = bytearray(bhs)
        bhs[5:8] = len(data).to_bytes(3, "big")
        out = bytes(bhs) + data + b"\0" * pad(len(data))
        if self.data_digest and data:
            d = crc32c(data + b"\0" * pad(len(data)))
            if bad_digest:
                d ^= 1
            out += struct.pack("<I", d)
        self.s.sendall(out)

    def recv_exact(self, n):
        """n bytes, or None when the peer closed or reset the connection first."""
        buf = b""
        while len(buf) < n:
            try:
                chunk = self.s.recv(n - len(buf))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            buf += chunk
        return buf

    def recv(self):
        """(BHS, data segment) of the next PDU, or (None, None) when the connection ended."""
        bhs = self.recv_exact(48)
        if bhs is None:
            return None, None
        dsl = int.from_bytes(bhs[5:8], "big")
        data = self.recv_exact(dsl + pad(dsl) + (4 if self.data_digest and dsl else 0)) if dsl else b""
        return bhs, data[:dsl]

    def wait_closed(self, seconds):
        """True when the peer closes or resets the connection within `seconds` (0: has already
        done so; nothing blocks) without sending anything more first; False when a byte arrives
        (it is consumed) or the time passes. The socket's timeout is restored afterwards."""
        before = self.s.gettimeout()
        self.s.settimeout(seconds)
        try:
            return self.s.recv(1) == b""
        except ConnectionResetError:
            return True
        except (TimeoutError, BlockingIOError):
            return False
        finally:
            self.s.settimeout(before)

    def closed(self):
        try:
            return self.s.recv(1) == b""
        except (ConnectionResetError, socket.timeout):
            return True

    def close(self):
        self.s.close()


def scsi_bhs(c, cdb, edtl, read=False, write=False, final=True, immediate=False):
    """(ITT, BHS) of a SCSI Command (RFC 7143 §11.3) on `c` (its next_itt(), cmd_sn, exp_stat_sn;
    CmdSN advances unless `immediate`)."""
    itt = c.next_itt()
    flags = (0x80 if final else 0) | (0x40 if read else 0) | (0x20 if write else 0) | 1
    bhs = (bytes([0x01 | (0x40 if immediate else 0), flags, 0, 0, 0, 0, 0, 0]) + b"\0" * 8 +
           struct.pack(">IIII", itt, edtl, c.cmd_sn, c.exp_stat_sn) + cdb.ljust(16, b"\0"))
    if not immediate:
        c.cmd_sn += 1
    return itt, bhs


def until_ready(c):
    """TEST UNIT READY on `c` until GOOD (a new I_T nexus first hears a UNIT ATTENTION, SAM-5
    §5.14); returns (status, sense data) of each answer before the GOOD one."""
    answers = []
    for _ in range(10):
        _, bhs = scsi_bhs(c, bytes(6), 0)
        c.send(bhs)
        rbhs, data = c.recv()
        assert rbhs is not None and rbhs[0] & 0x3F == 0x21, "no SCSI Response to TEST UNIT READY"
        if rbhs[3] == 0:
            return answers
        answers.append((rbhs[3], data[2:]))
    raise AssertionError("unit attentions do not clear")


def collect_data_in(c, what="READ"):
    """Collects the Data-In of the command sent last on RawConn `c` until its status (in the final
    Data-In's S bit or a SCSI Response, RFC 7143 §11.7, §11.4); returns (status, data, sense), the
    sense without its SenseLength field (b"" when there is none). `what` names the command in the
    assertion messages."""
    out = b""
    while True:
        rbhs, data = c.recv()
        assert rbhs is not None, f"closed during {what}"
        op = rbhs[0] & 0x3F
        if op == 0x25:
            out += data
            if rbhs[1] & 1:
                return rbhs[3], out, b""
        elif op == 0x21:
            return rbhs[3], out, data[2:] if data else b""
        else:
            raise AssertionError(f"unexpected opcode {op:#x} during {what}")


def read_data_in(c):
    """The data of the READ sent last on RawConn `c` (collect_data_in), asserting its status GOOD."""
    status, out, _ = collect_data_in(c)
    assert status == 0, f"READ status {status:#x}"
    return out
