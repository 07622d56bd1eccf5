#!/usr/bin/env python3
"""Writes the hand-made seed corpora of tests/fuzz/corpus/<target>/ (a few KiB each).

Each seed is named after the path it exercises (nbdkit fuzzing/testcase_dir style). Run it again
after changing a harness's input format; files it does not write (e.g. regression inputs named
crash-*) are left alone. Usage: tests/fuzz/make_corpus.py
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ISID = bytes([0x80, 1, 2, 3, 4, 5])


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def text(*pairs):
    return b"".join(k.encode() + b"=" + v.encode() + b"\0" for k, v in pairs)


def record(data):
    return struct.pack(">H", len(data)) + data


def bhs(opcode, byte1=0, rest=b"", dsl=0, ahs_words=0):
    b = bytearray(48)
    b[0] = opcode
    b[1] = byte1
    b[4] = ahs_words
    b[5:8] = dsl.to_bytes(3, "big")
    b[8:8 + len(rest)] = rest
    return bytes(b)


def login_request(csg, nsg, transit, itt=7, cmd_sn=1, exp_stat_sn=0, cont=False, dsl=0):
    b = bytearray(48)
    b[0] = 0x43
    b[1] = (0x80 if transit else 0) | (0x40 if cont else 0) | csg << 2 | nsg
    b[5:8] = dsl.to_bytes(3, "big")
    b[8:14] = ISID
    b[16:20] = itt.to_bytes(4, "big")
    b[24:28] = cmd_sn.to_bytes(4, "big")
    b[28:32] = exp_stat_sn.to_bytes(4, "big")
    return bytes(b)


def login_response(csg, nsg, transit, status=(0, 0), stat_sn=40, itt=7, tsih=0x1234):
    b = bytearray(48)
    b[0] = 0x23
    b[1] = (0x80 if transit else 0) | csg << 2 | nsg
    b[8:14] = bytes([0x80, 1, 2, 3, 0, 1])
    b[14:16] = tsih.to_bytes(2, "big")
    b[16:20] = itt.to_bytes(4, "big")
    b[24:28] = stat_sn.to_bytes(4, "big")
    b[28:32] = (1).to_bytes(4, "big")
    b[32:36] = (32).to_bytes(4, "big")
    b[36], b[37] = status
    return bytes(b)


SECURITY = text(("InitiatorName", "iqn.2026-11.org.test:init"), ("TargetName", "iqn.2026-11.org.iserkit:fuzz"),
                ("SessionType", "Normal"), ("AuthMethod", "CHAP,None"))
OPERATIONAL = text(("HeaderDigest", "CRC32C,None"), ("DataDigest", "None"), ("MaxRecvDataSegmentLength", "262144"),
                   ("InitialR2T", "No"), ("ImmediateData", "Yes"), ("MaxBurstLength", "1048576"),
                   ("FirstBurstLength", "262144"), ("MaxOutstandingR2T", "1"), ("ErrorRecoveryLevel", "0"),
                   ("DefaultTime2Wait", "2"), ("DefaultTime2Retain", "0"), ("DataPDUInOrder", "Yes"),
                   ("DataSequenceInOrder", "Yes"), ("MaxConnections", "1"))


def bhs_seeds():
    t = "fuzz_bhs"
    cdb = bytes([0x28, 0, 0, 0, 0, 8, 0, 0, 8, 0]) + bytes(6)
    write(t, "nop_out", bhs(0x40, 0x80, rest=bytes(8) + (1).to_bytes(4, "big") + b"\xff" * 4))
    write(t, "scsi_command_read10", bhs(0x01, 0xC1, rest=bytes([0, 0, 0, 0, 0, 0, 0, 0]) + (5).to_bytes(4, "big") +
                                        (4096).to_bytes(4, "big") + (1).to_bytes(4, "big") + bytes(4) + cdb))
    ahs = struct.pack(">HBB", 17, 1, 0) + bytes(range(16)) + bytes(3)
    write(t, "scsi_command_extended_cdb_ahs", bhs(0x01, 0x81, ahs_words=len(ahs) // 4) + ahs)
    write(t, "tmf_abort_task", bhs(0x42, 0x81))
    write(t, "login_request", login_request(0, 1, True))
    write(t, "text_request_sendtargets", bhs(0x04, 0x80, dsl=16))
    write(t, "data_out", bhs(0x05, 0x80, dsl=512))
    write(t, "logout_request", bhs(0x46, 0x80))
    write(t, "snack", bhs(0x10, 0x80))
    for op, name in [(0x20, "nop_in"), (0x21, "scsi_response"), (0x22, "tmf_response"), (0x23, "login_response"),
                     (0x24, "text_response"), (0x25, "data_in_status"), (0x26, "logout_response"), (0x31, "r2t"),
                     (0x32, "async_message"), (0x3f, "reject")]:
        write(t, name, bhs(op, 0x81 if op == 0x25 else 0x80, rest=bytes(8) + (9).to_bytes(4, "big")))
    bidi = struct.pack(">HBB", 5, 2, 0) + (8192).to_bytes(4, "big")
    write(t, "bidi_read_length_ahs", bhs(0x01, 0xE1, ahs_words=2) + bidi)


def text_seeds():
    t = "fuzz_text"
    write(t, "login_security", SECURITY)
    write(t, "operational_offers", OPERATIONAL)
    write(t, "sendtargets_response", text(("TargetName", "iqn.2026-11.org.example:vol1"),
                                          ("TargetAddress", "127.0.0.1:3260,1"), ("TargetAddress", "[::1]:3261,2"),
                                          ("TargetName", "iqn.2026-11.org.example:vol2")))
    write(t, "no_trailing_nul", b"MaxBurstLength=65536\0X-vendor.key=value")
    write(t, "iser_keys", text(("RDMAExtensions", "Yes"), ("InitiatorRecvDataSegmentLength", "8192"),
                               ("TargetRecvDataSegmentLength", "8192"), ("MaxOutstandingUnexpectedPDUs", "0")))
    write(t, "special_values", text(("HeaderDigest", "Reject"), ("DataDigest", "Irrelevant"), ("Foo", "NotUnderstood")))


def login_target_seeds():
    t = "fuzz_login_target"
    normal = (bytes([0]) + b"\1" + login_request(0, 1, True) + record(SECURITY) +
              b"\1" + login_request(1, 3, True) + record(OPERATIONAL))
    write(t, "security_then_operational", normal)
    write(t, "operational_only", bytes([0]) + b"\1" + login_request(1, 3, True) +
          record(text(("InitiatorName", "iqn.2026-11.org.test:init"), ("TargetName", "iqn.2026-11.org.iserkit:fuzz")) +
                 OPERATIONAL))
    write(t, "discovery", bytes([0]) + b"\1" + login_request(1, 3, True) +
          record(text(("InitiatorName", "iqn.2026-11.org.test:init"), ("SessionType", "Discovery"))))
    chap = (bytes([3]) + b"\1" + login_request(0, 0, False) + record(SECURITY) +
            b"\1" + login_request(0, 0, False) + record(text(("CHAP_A", "7,5"))) +
            b"\1" + login_request(0, 1, True) + record(text(("CHAP_N", "alice"), ("CHAP_R", "0x" + "00" * 32),
                                                            ("CHAP_I", "5"), ("CHAP_C", "0x" + "ab" * 32))))
    write(t, "chap_mutual", chap)
    write(t, "continued_text", bytes([16]) + b"\1" + login_request(0, 1, True, cont=True) + record(SECURITY[:20]) +
          b"\1" + login_request(0, 1, True) + record(SECURITY[20:]))
    write(t, "iser", bytes([4]) + b"\1" + login_request(1, 3, True) +
          record(text(("InitiatorName", "iqn.2026-11.org.test:init"), ("TargetName", "iqn.2026-11.org.iserkit:fuzz"),
                      ("RDMAExtensions", "Yes"), ("InitiatorRecvDataSegmentLength", "8192"))))
    write(t, "too_large", bytes([0]) + b"\3" + login_request(0, 1, True) + record(b""))


def login_initiator_seeds():
    t = "fuzz_login_initiator"
    ok = (bytes([1]) + b"\1" + login_response(0, 1, True) + record(text(("AuthMethod", "None"), ("TargetPortalGroupTag", "1"))) +
          b"\1" + login_response(1, 3, True, stat_sn=41) + record(OPERATIONAL))
    write(t, "security_then_operational", ok)
    write(t, "operational_only", bytes([0]) + b"\1" + login_response(1, 3, True) + record(OPERATIONAL))
    write(t, "discovery", bytes([8]) + b"\1" + login_response(1, 3, True) + record(text(("MaxRecvDataSegmentLength", "8192"))))
    write(t, "redirect", bytes([0]) + b"\1" + login_response(1, 3, False, status=(1, 1)) +
          record(text(("TargetAddress", "[::1]:3261,1"))))
    write(t, "status_error", bytes([0]) + b"\1" + login_response(1, 3, False, status=(2, 1)) + record(b""))
    chap = (bytes([2 | 4 | 1]) + b"\1" + login_response(0, 0, False) + record(text(("AuthMethod", "CHAP"))) +
            b"\1" + login_response(0, 0, False) + record(text(("CHAP_A", "7"), ("CHAP_I", "9"), ("CHAP_C", "0x" + "cd" * 32))) +
            b"\1" + login_response(0, 1, True) + record(text(("CHAP_N", "target"), ("CHAP_R", "0x" + "00" * 32))))
    write(t, "chap_mutual", chap)
    write(t, "iser", bytes([16]) + b"\1" + login_response(1, 3, True) +
          record(text(("RDMAExtensions", "Yes"), ("TargetRecvDataSegmentLength", "8192"),
                      ("MaxOutstandingUnexpectedPDUs", "0"))))


def chap_seeds():
    t = "fuzz_chap"
    write(t, "common_list", b"\0" + b"7,8,6,5")
    write(t, "common_hex", b"\0" + b"0x0a0B0c")
    write(t, "common_base64", b"\0" + b"0bAQIDBA==")
    write(t, "common_identifier", b"\0" + b"0xff")
    write(t, "common_name", b"\0" + b"SHA3-256")
    write(t, "target_one_way", b"\1" + record(text(("CHAP_A", "7,5"))) +
          record(text(("CHAP_N", "alice"), ("CHAP_R", "0x" + "11" * 32))))
    write(t, "target_mutual", b"\5" + record(text(("CHAP_A", "5"))) +
          record(text(("CHAP_N", "alice"), ("CHAP_R", "0b" + "A" * 24), ("CHAP_I", "1"), ("CHAP_C", "0x" + "22" * 16))))
    write(t, "initiator_one_way", b"\2" + record(text(("CHAP_A", "7"), ("CHAP_I", "3"), ("CHAP_C", "0x" + "33" * 32))))
    write(t, "initiator_mutual", b"\6" + record(text(("CHAP_A", "5"), ("CHAP_I", "4"), ("CHAP_C", "0x" + "44" * 16))) +
          record(text(("CHAP_N", "target"), ("CHAP_R", "0x" + "55" * 16))))


def command(cdb, lun=0, nexus=0, data=b"", edtl=None, skip_execute=False, splice_token=False):
    selector = lun | nexus << 2 | (16 if skip_execute else 0) | (32 if splice_token else 0)
    if edtl is None:
        edtl = len(data)
    return bytes([selector, len(cdb)]) + cdb + struct.pack(">I", edtl) + record(data)


def dispatcher_seeds():
    t = "fuzz_dispatcher"
    tur = bytes(6)
    inquiry = bytes([0x12, 0, 0, 0, 96, 0])
    vpd = lambda p: bytes([0x12, 1, p, 0, 255, 0])
    read10 = bytes([0x28, 0, 0, 0, 0, 8, 0, 0, 8, 0])
    write10 = bytes([0x2a, 0, 0, 0, 0, 16, 0, 0, 2, 0])
    read16 = bytes([0x88, 0]) + (100).to_bytes(8, "big") + (4).to_bytes(4, "big") + bytes(2)
    rc16 = bytes([0x9e, 0x10]) + bytes(8) + (32).to_bytes(4, "big") + bytes(2)
    report_luns = bytes([0xa0, 0, 0, 0, 0, 0]) + (4096).to_bytes(4, "big") + bytes(2)
    mode_sense = bytes([0x1a, 0, 0x3f, 0, 255, 0])
    sync = bytes([0x35, 0]) + bytes(8)
    unmap_list = struct.pack(">HH", 22, 16) + bytes(4) + (8).to_bytes(8, "big") + (8).to_bytes(4, "big") + bytes(4)
    unmap = bytes([0x42, 0, 0, 0, 0, 0, 0, 0, len(unmap_list), 0])
    ws16 = bytes([0x93, 0x08]) + (0).to_bytes(8, "big") + (16).to_bytes(4, "big") + bytes(2)
    caw = bytes([0x89, 0]) + (4).to_bytes(8, "big") + bytes(3) + bytes([1, 0, 0])
    pr_out = bytes([0x5f, 0, 0, 0, 0, 0, 0, 0, 24, 0])
    pr_params = (0).to_bytes(8, "big") + (0x1234).to_bytes(8, "big") + bytes(8)
    pr_in = bytes([0x5e, 0, 0, 0, 0, 0, 0, 0x10, 0, 0])
    lba_status = bytes([0x9e, 0x12]) + bytes(8) + (64).to_bytes(4, "big") + bytes(2)
    request_sense = bytes([0x03, 0, 0, 0, 252, 0])
    write(t, "inquiry_and_vpd", b"\0" + command(inquiry) + b"".join(command(vpd(p)) for p in (0, 0x80, 0x83, 0xb0, 0xb1, 0xb2)))
    write(t, "unit_attention_then_tur", b"\0" + command(tur) + command(tur) + command(request_sense, nexus=1))
    write(t, "read_write", b"\0" + command(write10, data=b"\xa5" * 1024) + command(read10, edtl=4096) + command(read16, lun=1))
    write(t, "capacity_luns_mode", b"\0" + command(rc16) + command(report_luns) + command(mode_sense) + command(sync))
    write(t, "unmap_write_same", b"\0" + command(unmap, data=unmap_list) + command(ws16, data=bytes(512)) +
          command(lba_status))
    write(t, "compare_and_write", b"\0" + command(caw, data=bytes(1024)))
    write(t, "persistent_reservations", b"\0" + command(pr_out, data=pr_params) + command(pr_in) +
          command(pr_out, nexus=1, data=pr_params))
    write(t, "read_only_write", b"\1" + command(write10, data=bytes(1024)))
    write(t, "write_shortened", b"\0" + command(write10, data=bytes(512), edtl=512))
    write(t, "no_such_lun", b"\0" + command(inquiry, lun=3) + command(read10, lun=2))
    # EXTENDED COPY (LID1) within LUN 0 (its NAA designator derives from the serial FUZZ0), then
    # RECEIVE COPY RESULTS COPY STATUS (list 7) and OPERATING PARAMETERS.
    naa0 = bytes.fromhex("6024953eeac3363d6095e96b291d23cf")
    cscd = bytes([0xe4, 0, 0, 0, 1, 3, 0, len(naa0)]) + naa0 + bytes(4) + bytes([0]) + (512).to_bytes(3, "big")
    segment = bytes([0x02, 0]) + (0x18).to_bytes(2, "big") + bytes(4) + bytes(2) + (8).to_bytes(2, "big") + \
        (0).to_bytes(8, "big") + (64).to_bytes(8, "big")
    xcopy_list = bytes([7, 0]) + len(cscd).to_bytes(2, "big") + bytes(4) + len(segment).to_bytes(4, "big") + bytes(4) + \
        cscd + segment
    xcopy = bytes([0x83, 0]) + bytes(8) + len(xcopy_list).to_bytes(4, "big") + bytes(2)
    copy_status = bytes([0x84, 0, 7]) + bytes(7) + (64).to_bytes(4, "big") + bytes(2)
    operating_parameters = bytes([0x84, 3]) + bytes(8) + (64).to_bytes(4, "big") + bytes(2)
    write(t, "extended_copy", b"\0" + command(xcopy, data=xcopy_list) + command(copy_status) +
          command(operating_parameters) + command(vpd(0x8f)))
    # Token copy (SBC-4): TEST UNIT READY (takes the unit attention), POPULATE TOKEN of 16
    # blocks of LUN 0 (list 5), RECEIVE ROD TOKEN
    # INFORMATION (the harness keeps the token), WRITE USING TOKEN with it spliced in, then with the
    # block device zero ROD token.
    ranges = (0).to_bytes(8, "big") + (16).to_bytes(4, "big") + bytes(4)
    pt_list = struct.pack(">HBBIIHH", 16 + len(ranges) - 2, 0, 0, 0, 0, 0, len(ranges)) + ranges
    pt = bytes([0x83, 0x10]) + bytes(4) + (5).to_bytes(4, "big") + len(pt_list).to_bytes(4, "big") + bytes(2)
    rrti = bytes([0x84, 0x07]) + (5).to_bytes(4, "big") + bytes(4) + (1024).to_bytes(4, "big") + bytes(2)
    destination = (64).to_bytes(8, "big") + (16).to_bytes(4, "big") + bytes(4)

    def wut_list(token, flags=0):
        return struct.pack(">HBB", 536 + len(destination) - 2, flags, 0) + bytes(4) + bytes(8) + token + bytes(6) + \
            struct.pack(">H", len(destination)) + destination
    zero_token = (0xffff0001).to_bytes(4, "big") + bytes(2) + (0x1f8).to_bytes(2, "big") + bytes(504)
    wut = bytes([0x83, 0x11]) + bytes(4) + (6).to_bytes(4, "big") + len(wut_list(bytes(512))).to_bytes(4, "big") + bytes(2)
    write(t, "token_copy", b"\0" + command(tur) + command(pt, data=pt_list) + command(rrti) +
          command(wut, data=wut_list(bytes(512)), splice_token=True) + command(wut, data=wut_list(zero_token)))
    # The same with IMMED = 1 (a background copy), then its RECEIVE ROD TOKEN INFORMATION (list 6).
    rrti6 = bytes([0x84, 0x07]) + (6).to_bytes(4, "big") + bytes(4) + (1024).to_bytes(4, "big") + bytes(2)
    write(t, "token_copy_immed", b"\0" + command(tur) + command(pt, data=pt_list) + command(rrti) +
          command(wut, data=wut_list(bytes(512), 0x01), splice_token=True) + command(rrti6))
    # Explicit ALUA (config bit 1): REPORT TARGET PORT GROUPS, then SET TARGET PORT GROUPS through
    # the standby nexus making its group 2 active/optimized, then I/O through both nexuses.
    rtpg = bytes([0xa3, 0x0a, 0, 0, 0, 0]) + (1024).to_bytes(4, "big") + bytes(2)
    stpg_list = bytes(4) + bytes([0x00, 0]) + (2).to_bytes(2, "big")
    stpg = bytes([0xa4, 0x0a, 0, 0, 0, 0]) + len(stpg_list).to_bytes(4, "big") + bytes(2)
    write(t, "alua_set_target_port_groups", b"\2" + command(rtpg) + command(read10, nexus=1, edtl=4096) +
          command(stpg, nexus=1, data=stpg_list) + command(tur) + command(read10, nexus=1, edtl=4096) +
          command(write10, data=bytes(1024)) + command(rtpg, nexus=1))


def scsi_data_seeds():
    t = "fuzz_scsi_data"
    write(t, "sense_fixed", bytes([0x70, 0, 5, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x24, 0, 0, 0xc0, 0, 2]))
    write(t, "sense_fixed_info", bytes([0xf0, 0, 3, 0, 0, 0x10, 0, 10, 0, 0, 0, 0, 0x11, 0, 0, 0, 0, 0]))
    write(t, "sense_descriptor", bytes([0x72, 5, 0x24, 0, 0, 0, 0, 20, 0, 10, 0x80, 0]) + (1 << 40).to_bytes(8, "big") +
          bytes([2, 6, 0, 0, 0xc0, 0, 2, 0]))
    write(t, "sense_deferred_truncated", bytes([0x71, 0, 6]))
    std = bytearray(36)
    std[2], std[3], std[4] = 6, 2, 31
    std[8:16] = b"ISERKIT "
    std[16:32] = b"FUZZ LUN        "
    std[32:36] = b"0001"
    write(t, "standard_inquiry", bytes(std))
    write(t, "vpd_supported", bytes([0, 0, 0, 6, 0, 0x80, 0x83, 0xb0, 0xb1, 0xb2]))
    write(t, "vpd_serial", bytes([0, 0x80, 0, 6]) + b"SN0001")
    write(t, "vpd_device_id", bytes([0, 0x83, 0, 12, 0x01, 0x03, 0, 8]) + (0x6001405123456789).to_bytes(8, "big"))
    write(t, "vpd_block_limits", bytes([0, 0xb0, 0, 0x3c]) + bytes(0x3c))
    # VPD 0x8f (SPC-4 §7.8.17): Supported Commands (83h/00h), Parameter Data, Supported
    # Descriptors (02h, E4h), General Copy Operations.
    tpc = (bytes([0, 1, 0, 4, 3, 0x83, 1, 0])
           + bytes([0, 4, 0, 0x1c]) + bytes(4) + struct.pack(">HHI", 8, 16, 1024) + bytes(16)
           + bytes([0, 8, 0, 4, 2, 2, 0xe4, 0])
           + bytes([0x80, 1, 0, 0x20]) + bytes(8) + struct.pack(">I", 32 << 20) + bytes([9]) + bytes(19))
    write(t, "vpd_third_party_copy", bytes([0, 0x8f]) + struct.pack(">H", len(tpc)) + tpc)
    write(t, "vpd_characteristics", bytes([0, 0xb1, 0, 0x3c, 0, 1]) + bytes(0x3a))
    write(t, "vpd_provisioning", bytes([0, 0xb2, 0, 4, 0, 0xe0, 2, 0]))
    write(t, "read_capacity10", (2047).to_bytes(4, "big") + (512).to_bytes(4, "big"))
    write(t, "read_capacity16", (2047).to_bytes(8, "big") + (512).to_bytes(4, "big") + bytes([0, 3, 0xc0, 0]) + bytes(16))
    write(t, "report_luns", (16).to_bytes(4, "big") + bytes(4) + bytes(8) + bytes([0x41, 0x2c]) + bytes(6))


def iser_seeds():
    t = "fuzz_iser"
    write(t, "control_wsv_rsv", bytes([0x1c, 0, 0, 0]) + (0x1111).to_bytes(4, "big") + (0x7f0000001000).to_bytes(8, "big") +
          (0x2222).to_bytes(4, "big") + (0x7f0000002000).to_bytes(8, "big") + bytes(48))
    write(t, "control_plain", bytes([0x10]) + bytes(27))
    write(t, "hello", bytes([0x20, 0, 0xaa, 0, 0, 16]) + bytes(22))
    write(t, "hello_reply_reject", bytes([0x31, 0, 0xaa, 0, 0, 4]) + bytes(22))
    write(t, "cm_private_data", bytes([0xc0, 0, 0, 0]))


def nbd_seeds():
    t = "fuzz_nbd"
    ihaveopt = b"IHAVEOPT"
    write(t, "greeting", b"NBDMAGIC" + ihaveopt + bytes([0, 3]))
    write(t, "option_go", ihaveopt + struct.pack(">II", 7, 10))
    write(t, "info_request", struct.pack(">I", 4) + b"fuzz" + struct.pack(">HHH", 2, 0, 3))
    write(t, "option_reply", struct.pack(">QIII", 0x3e889045565a9, 7, 1, 0))
    write(t, "request_read", struct.pack(">IHHQQI", 0x25609513, 0, 0, 1, 4096, 4096))
    write(t, "request_write_fua", struct.pack(">IHHQQI", 0x25609513, 1, 1, 2, 0, 512))
    write(t, "simple_reply", struct.pack(">IIQ", 0x67446698, 0, 1))
    write(t, "chunk_header", struct.pack(">IHHQI", 0x668e33ef, 1, 0x8001, 1, 10))
    write(t, "error_chunk", struct.pack(">IH", 5, 4) + b"oops" + struct.pack(">Q", 4096))
    q = b"base:allocation"
    write(t, "meta_context_request", struct.pack(">I", 4) + b"fuzz" + struct.pack(">II", 1, len(q)) + q)
    write(t, "block_status_payload", struct.pack(">IIIII", 1, 4096, 3, 512, 0))


def nbd_server_seeds():
    t = "fuzz_nbd_server"
    flags = struct.pack(">I", 3)

    def opt(option, data=b""):
        return b"IHAVEOPT" + struct.pack(">II", option, len(data)) + data

    def req(type_, offset, length, flags=0, cookie=1, data=b""):
        return struct.pack(">IHHQQI", 0x25609513, flags, type_, cookie, offset, length) + data

    go = opt(7, struct.pack(">I", 0) + struct.pack(">H", 3) + struct.pack(">HHH", 0, 1, 3))
    write(t, "go_read_write_flush_trim_disc",
          flags + opt(8) + go + req(1, 0, 512, data=b"\x5a" * 512) + req(0, 0, 4096, cookie=2) + req(3, 0, 0, cookie=3) +
          req(4, 4096, 4096, cookie=4) + req(6, 0, 8192, cookie=5) + req(2, 0, 0))
    write(t, "list_info_abort", flags + opt(3) + opt(6, struct.pack(">I", 4) + b"fuzz" + struct.pack(">H", 0)) + opt(2))
    write(t, "export_name", flags + opt(1, b"fuzz") + req(0, 0, 512) + req(2, 0, 0))
    q = b"base:allocation"
    set_meta = opt(10, struct.pack(">I", 0) + struct.pack(">II", 1, len(q)) + q)
    list_meta = opt(9, struct.pack(">II", 0, 0))
    write(t, "meta_context_block_status",
          flags + opt(8) + list_meta + set_meta + go + req(7, 0, 1 << 20) + req(7, 4096, 512, flags=8, cookie=2) +
          req(7, 0, 0, cookie=3) + req(2, 0, 0))
    write(t, "unknown_option_bad_request", flags + opt(99, b"xx") + go + req(77, 0, 0) + req(0, 1 << 40, 512))


def url_seeds():
    t = "fuzz_url"
    for i, u in enumerate(["iscsi://127.0.0.1", "iscsi://host:3261/", "iscsi://user%secret@[::1]:3261/iqn.2026-11.org.x:y/3",
                           "iser://10.0.0.1/iqn.2026-11.org.example:vol1/0", "iscsi://[fe80::1%25eth0]/iqn.x:y",
                           "automatic"]):
        write(t, f"url{i}", u.encode())


def config_seeds():
    t = "fuzz_config"
    write(t, "full", b'''listen = ["127.0.0.1:0", "[::1]:3261"]
block_size = 4096
threads = 2

[discovery]
chap_users = [{ user = "disco", secret = "discovery-secret" }]

[[targets]]
iqn = "iqn.2026-11.org.example:vol1"
alias = "vol1"
luns = ["mem:64M", "mem:1G"]
allowed_initiators = ["iqn.2026-11.org.example:host1"]
chap_users = [{ user = "alice", secret = "alice-secret-123" }]
mutual = { user = "vol1", secret = "target-secret-456" }
chap_algorithms = ["SHA-256", "MD5"]
''')
    write(t, "minimal", b'[[targets]]\niqn = "iqn.2026-11.org.example:a"\nluns = ["mem:1M"]\n')
    write(t, "syntax_error", b'[[targets]\niqn = \n')
    write(t, "sizes", b"64K")


def be32(v):
    return struct.pack(">I", v & 0xffffffff)


def pdu48(byte0, byte1=0, fields=None):
    """A 48-byte BHS with byte 0, byte 1 and {offset: bytes} written in."""
    b = bytearray(48)
    b[0] = byte0
    b[1] = byte1
    for off, val in (fields or {}).items():
        b[off:off + len(val)] = val
    return bytes(b)


# fuzz_initiator_engine: 4 config bytes, then steps (see the harness's header comment). The engine
# starts with: read 1024 (ITT selector 0), read 1536 on LUN 1 (1), write 8192 (2), write 700 (3),
# TEST UNIT READY (4), a Text Request (5), ABORT TASK of the first read (6).
INIT_OPS = {"nop_in": 0, "scsi_response": 1, "tmf_response": 2, "login_response": 3, "text_response": 4,
            "data_in": 5, "logout_response": 6, "r2t": 7, "async": 8, "reject": 9}
OPEN = 0xf3  # StatSN = ExpStatSN, window opened by 15


def target_pdu(kind, itt_selector, byte1=0, fields=None, data=b"", flags=OPEN):
    return (bytes([0, INIT_OPS[kind], itt_selector, flags]) + pdu48(0, byte1, fields) + record(data))


def timer_step(ms, times_ten=False):
    return bytes([4 | (8 if times_ten else 0)]) + struct.pack(">H", ms)


def data_in(itt_selector, data_sn, offset, data, status=None, residual=None):
    byte1, fields = 0, {36: be32(data_sn), 40: be32(offset)}
    if status is not None:
        byte1 = 0x81  # F and S
        fields[3] = bytes([status])
    if residual is not None:
        byte1 |= 0x02  # U
        fields[44] = be32(residual)
    return target_pdu("data_in", itt_selector, byte1, fields, data)


def scsi_response(itt_selector, status=0, sense=b"", residual=None):
    byte1, fields = 0x80, {3: bytes([status])}
    if residual is not None:
        byte1 |= 0x02
        fields[44] = be32(residual)
    data = struct.pack(">H", len(sense)) + sense if sense else b""
    return target_pdu("scsi_response", itt_selector, byte1, fields, data)


def r2t(itt_selector, ttt, r2t_sn, offset, length):
    return target_pdu("r2t", itt_selector, 0x80, {20: be32(ttt), 36: be32(r2t_sn), 40: be32(offset),
                                                   44: be32(length)})


def initiator_engine_seeds():
    t = "fuzz_initiator_engine"
    # config: ImmediateData + InitialR2T, FirstBurst 8192 / MaxBurst 16384, MRDSL 4096, 8 in
    # flight, window 15.
    cfg = bytes([0x03, 0x2c, 0x3b, 0x0f])
    write(t, "start_only", cfg)
    write(t, "reads_data_in_status", cfg + data_in(0, 0, 0, b"\x11" * 1024, status=0)
          + data_in(1, 0, 0, b"\x22" * 512) + data_in(1, 1, 512, b"\x33" * 1024, status=0))
    write(t, "read_residual_underflow", cfg + data_in(1, 0, 0, b"\x22" * 512, status=0, residual=1024)
          + scsi_response(4))
    sense = bytes([0x70, 0, 0x05, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x24, 0, 0, 0, 0, 0])
    write(t, "check_condition_sense", cfg + scsi_response(4, status=2, sense=sense))
    write(t, "write_r2t_data_out", cfg + r2t(2, 0x1000, 0, 8192 - 4096, 4096) + scsi_response(2)
          + r2t(3, 0x1001, 0, 0, 700) + scsi_response(3))
    write(t, "write_r2t_out_of_order", cfg + r2t(2, 0x1000, 1, 4096, 4096))
    write(t, "data_in_outside_buffer", cfg + data_in(0, 0, 1000, b"\x11" * 100, status=0))
    write(t, "data_in_digest_error", bytes([0]) + cfg[1:] + target_pdu("data_in", 0, 0x81, {}, b"\x11" * 64,
                                                                           flags=OPEN | 4))
    write(t, "text_continuation", cfg + target_pdu("text_response", 5, 0x40, {20: be32(0x99)},
                                                   b"TargetName=iqn.2026-11.org.test:a\0")
          + target_pdu("text_response", 5, 0x80, {20: be32(0xffffffff)}, b"TargetAddress=127.0.0.1:3260,1\0"))
    write(t, "tmf_abort_complete", cfg + target_pdu("tmf_response", 6, 0x80, {2: b"\x00"})
          + scsi_response(1))
    write(t, "nop_in_ping", bytes([0x0b]) + cfg[1:] + target_pdu("nop_in", 0xff, 0x80, {16: be32(0xffffffff),
                                                                                       20: be32(0x55)}, b"ping")
          + timer_step(60) + timer_step(60) + target_pdu("nop_in", 7, 0x80, {20: be32(0xffffffff)})
          + timer_step(200))
    write(t, "reject_of_command", cfg + target_pdu("reject", 0xff, 0x80, {2: b"\x09", 16: be32(0xffffffff)},
                                                   pdu48(0x01, 0x80, {16: be32(0x00010003)})))
    write(t, "async_logout_request", cfg + target_pdu("async", 0xff, 0x80, {16: be32(0xffffffff), 36: b"\x01",
                                                                            42: struct.pack(">H", 2)})
          + scsi_response(2) + scsi_response(3) + scsi_response(4) + timer_step(300, True))
    write(t, "async_drop_connection", cfg + target_pdu("async", 0xff, 0x80, {16: be32(0xffffffff), 36: b"\x02"}))
    write(t, "logout_with_commands", cfg + bytes([6, 0xf0, 0]) + data_in(0, 0, 0, b"\x11" * 1024, status=0)
          + scsi_response(4) + scsi_response(1) + scsi_response(2) + scsi_response(3)
          + target_pdu("logout_response", 7, 0x80, {2: b"\x00"}))
    write(t, "command_timeout_abort", bytes([0x17]) + cfg[1:] + timer_step(250) + timer_step(100)
          + target_pdu("tmf_response", 7, 0x80, {2: b"\x00"}) + timer_step(400))
    write(t, "closed_window_opens", cfg[:3] + b"\x00" + bytes([5, 0, 0x08, 0x00])
          + target_pdu("nop_in", 0xff, 0x80, {16: be32(0xffffffff), 20: be32(0xffffffff)}))
    write(t, "receive_fails_mid_data_in", cfg + bytes([0x0f, 0, 0, 0, 0x40]))


# fuzz_target_engine: 4 config bytes, then steps (see the harness's header comment).
TGT_OPS = {"nop_out": 0, "scsi_command": 1, "tmf": 2, "login": 3, "text": 4, "data_out": 5, "logout": 6,
           "snack": 7}
IN_ORDER = 0x01  # CmdSN = ExpCmdSN


def initiator_pdu(kind, byte0=0, byte1=0, fields=None, data=b"", flags=IN_ORDER, pick=0, ahs=None):
    out = bytes([0, TGT_OPS[kind], flags | (0x10 if ahs is not None else 0), pick]) + pdu48(byte0, byte1, fields)
    if ahs is not None:
        out += record(ahs)
    return out + record(data)


def cdb10(op, lba, blocks):
    return bytes([op, 0]) + be32(lba) + b"\x00" + struct.pack(">H", blocks) + b"\x00" + bytes(6)


def scsi_command(itt, cdb, edtl, read=False, write=False, final=True, data=b"", immediate=False, lun=0, ahs=None):
    byte1 = (0x80 if final else 0) | (0x40 if read else 0) | (0x20 if write else 0) | 1
    fields = {8: bytes([0, lun, 0, 0, 0, 0, 0, 0]), 16: be32(itt), 20: be32(edtl), 32: cdb[:16].ljust(16, b"\x00")}
    return initiator_pdu("scsi_command", 0x40 if immediate else 0, byte1, fields, data, ahs=ahs)


def data_out(itt, ttt, data_sn, offset, data, final=True, flags=0, pick=0):
    return initiator_pdu("data_out", 0, 0x80 if final else 0, {16: be32(itt), 20: be32(ttt), 36: be32(data_sn),
                                                                40: be32(offset)}, data, flags=flags, pick=pick)


def complete_step(fail=False):
    return bytes([5, 1 if fail else 0])


def target_engine_seeds():
    t = "fuzz_target_engine"
    # config: ImmediateData + InitialR2T, FirstBurst 8192 / MaxBurst 16384, MRDSL 4096, one R2T,
    # window 8, budget 256 KiB, 4 immediate commands.
    cfg = bytes([0x03, 0x2c, 0xe3, 0x36])
    write(t, "start_only", cfg)
    write(t, "read_data_in", cfg + scsi_command(1, cdb10(0x28, 0, 16), 8192, read=True) + complete_step())
    write(t, "inquiry_and_tur", cfg + scsi_command(1, bytes([0x12, 0, 0, 0, 96, 0]), 96, read=True)
          + scsi_command(2, bytes(6), 0) + bytes([6]))
    write(t, "write_r2t_data_out", cfg + scsi_command(3, cdb10(0x2a, 8, 8), 4096, write=True)
          + data_out(3, 0, 0, 0, b"\xab" * 4096, flags=0x04) + complete_step()
          + scsi_command(4, cdb10(0x28, 8, 8), 4096, read=True) + complete_step())
    unsolicited = bytes([0x01]) + cfg[1:]  # ImmediateData, InitialR2T=No
    write(t, "write_immediate_unsolicited", unsolicited
          + scsi_command(5, cdb10(0x2a, 0, 16), 8192, write=True, final=False, data=b"\x01" * 1024)
          + data_out(5, 0xffffffff, 0, 1024, b"\x02" * 7168) + complete_step())
    write(t, "write_short_edtl", cfg + scsi_command(6, cdb10(0x2a, 0, 8), 2048, write=True, data=b"\x03" * 2048)
          + complete_step())
    write(t, "data_out_digest_error", cfg + scsi_command(7, cdb10(0x2a, 0, 8), 4096, write=True)
          + data_out(7, 0, 0, 0, b"\xab" * 4096, flags=0x04 | 0x08))
    write(t, "tmf_abort_task", cfg + scsi_command(8, cdb10(0x28, 0, 16), 8192, read=True)
          + initiator_pdu("tmf", 0x40, 0x81, {16: be32(100), 20: be32(8)}, flags=0) + complete_step())
    write(t, "tmf_lun_reset_cold_reset", cfg + scsi_command(9, cdb10(0x2a, 0, 8), 4096, write=True)
          + initiator_pdu("tmf", 0x40, 0x85, {16: be32(101)}, flags=0)
          + initiator_pdu("tmf", 0x40, 0x87, {16: be32(102)}, flags=0))
    write(t, "text_send_targets", bytes([0x03, 0x2c, 0xe0, 0x36])
          + initiator_pdu("text", 0, 0xc0, {16: be32(10), 20: be32(0xffffffff)}, b"SendTar")
          + initiator_pdu("text", 0, 0x80, {16: be32(10), 20: be32(0xffffffff)}, b"gets=All\0")
          + initiator_pdu("text", 0, 0x80, {16: be32(10)}, b"", flags=IN_ORDER | 0x04))
    write(t, "discovery_session", bytes([0x07, 0x2c, 0xe3, 0x36])
          + initiator_pdu("text", 0, 0x80, {16: be32(11), 20: be32(0xffffffff)}, b"SendTargets=All\0")
          + scsi_command(12, bytes(6), 0))
    write(t, "nop_out_and_idle_ping", bytes([0x13]) + cfg[1:]
          + initiator_pdu("nop_out", 0x40, 0x80, {16: be32(13), 20: be32(0xffffffff)}, b"ping", flags=0)
          + bytes([4, 0, 150]) + initiator_pdu("nop_out", 0x40, 0x80, {16: be32(0xffffffff)}, flags=0x04)
          + bytes([4, 0, 150]) + bytes([4, 0, 100]))
    write(t, "logout_with_command_running", cfg + scsi_command(14, cdb10(0x28, 0, 16), 8192, read=True)
          + initiator_pdu("logout", 0x40, 0x80, {16: be32(15)}, flags=0) + complete_step())
    write(t, "budget_waits", cfg[:3] + b"\x30" + scsi_command(16, cdb10(0x28, 0, 8), 4096, read=True)
          + scsi_command(17, cdb10(0x28, 8, 8), 4096, read=True) + complete_step() + complete_step()
          + scsi_command(18, cdb10(0x2a, 0, 16), 8192, write=True, final=False, data=b"\x01" * 1024))
    write(t, "iser_write_and_read", bytes([0x0b]) + cfg[1:] + scsi_command(19, cdb10(0x2a, 0, 8), 4096, write=True)
          + complete_step() + complete_step() + scsi_command(20, cdb10(0x28, 0, 8), 4096, read=True)
          + complete_step())
    ext_cdb = cdb10(0x28, 0, 1)[:16]
    write(t, "long_cdb_ahs", cfg + scsi_command(21, ext_cdb, 512, read=True, ahs=struct.pack(">HB", 17, 1) + bytes(17))
          + complete_step())
    write(t, "snack_and_login_in_ffp", cfg + initiator_pdu("snack", 0, 0x80, {16: be32(0xffffffff)}, flags=0)
          + initiator_pdu("login", 0x40, 0x87, {}, flags=0) + scsi_command(1, bytes(6), 0)
          + scsi_command(1, bytes(6), 0))


def framer_pdu(itt, data=b"", ahs_words=0, header_digest=False, data_digest=False):
    """A Data-Out PDU on the wire; digests are left as zero bytes (wrong on purpose for some seeds)."""
    b = bytearray(bhs(0x05, 0x80, dsl=len(data), ahs_words=ahs_words))
    b[16:20] = be32(itt)
    out = bytes(b) + bytes(4 * ahs_words) + (bytes(4) if header_digest else b"")
    if data:
        out += data + bytes((4 - len(data) % 4) % 4) + (bytes(4) if data_digest else b"")
    return out


def tcp_framer_seeds():
    t = "fuzz_tcp_framer"
    stream = b"".join(framer_pdu(i, bytes([i]) * (i * 37 % 300)) for i in range(12))
    write(t, "plain_stream", bytes([0x04, 4, 0x11]) + stream)
    write(t, "placed_stream", bytes([0x0c, 5, 0x23]) + stream)
    write(t, "ahs_and_header_only", bytes([0x0c, 4, 0x05]) + framer_pdu(1, ahs_words=3) + framer_pdu(2, b"x" * 5, 1))
    write(t, "oversize_drained", bytes([0x04, 0, 0x31]) + framer_pdu(1, b"y" * 3000) + framer_pdu(2, b"z" * 9))
    write(t, "oversize_refused", bytes([0x00, 0, 0x31]) + framer_pdu(1, b"y" * 3000) + framer_pdu(2, b"z" * 9))
    write(t, "digests_wrong", bytes([0x07, 4, 0x09]) + framer_pdu(1, b"d" * 10, 0, True, True))
    write(t, "data_digest_only", bytes([0x06, 4, 0x09]) + framer_pdu(1, b"d" * 10, 0, False, True)
          + framer_pdu(2, b"e" * 7, 0, False, True))


if __name__ == "__main__":
    bhs_seeds()
    text_seeds()
    login_target_seeds()
    login_initiator_seeds()
    chap_seeds()
    dispatcher_seeds()
    scsi_data_seeds()
    iser_seeds()
    nbd_seeds()
    nbd_server_seeds()
    url_seeds()
    config_seeds()
    initiator_engine_seeds()
    target_engine_seeds()
    tcp_framer_seeds()
