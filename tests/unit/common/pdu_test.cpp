// BHS encode/decode: fixed byte layouts from RFC 7143 §11 and round trips for every opcode.
#include "iserkit/iscsi/pdu.hpp"

#include <gtest/gtest.h>

#include "iserkit/common/errors.hpp"

namespace iserkit::iscsi {
namespace {

std::uint8_t at(const Bhs& b, std::size_t i) { return static_cast<std::uint8_t>(b[i]); }

TEST(Pdu, ScsiReadCommandMatchesRfc3720AppendixB4Bytes) {
  // The SCSI Read (10) PDU of RFC 3720 App. B.4, whose CRC32C is 0xd9963a56 (see crc32c.hex).
  const std::uint8_t expected[48] = {0x01, 0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                     0x14, 0, 0, 0, 0, 0, 0x04, 0, 0, 0, 0, 0x14, 0, 0, 0, 0x18,
                                     0x28, 0, 0, 0, 0, 0, 0, 0, 0x02, 0, 0, 0, 0, 0, 0, 0};
  ScsiCommand c{.immediate = false, .final = true, .read = true, .attribute = TaskAttribute::untagged,
                .itt = Itt{0x14000000}, .expected_data_transfer_length = 0x400, .cmd_sn = SerialNumber(0x14),
                .exp_stat_sn = SerialNumber(0x18)};
  c.cdb[0] = std::byte{0x28};
  c.cdb[8] = std::byte{0x02};
  const Bhs b = encode_bhs(c);
  for (std::size_t i = 0; i < 48; ++i) EXPECT_EQ(at(b, i), expected[i]) << "byte " << i;
  auto back = decode_bhs_as<ScsiCommand>(b);
  ASSERT_TRUE(back);
  EXPECT_TRUE(!back->immediate && back->final && back->read && !back->write);
  EXPECT_EQ(back->expected_data_transfer_length, 0x400u);
  EXPECT_EQ(back->cdb, c.cdb);
}

TEST(Pdu, LengthsAreSetSeparately) {
  Bhs b = encode_bhs(NopOut{});
  set_lengths(b, 2, 0x012345);
  EXPECT_EQ(total_ahs_length_words(b), 2);
  EXPECT_EQ(data_segment_length_bytes(b), 0x012345u);
  EXPECT_EQ(at(b, 5), 0x01);
  EXPECT_EQ(at(b, 7), 0x45);
}

TEST(Pdu, LoginRequestFlagsAndIsid) {
  LoginRequest r{.transit = true, .csg = LoginStage::security_negotiation, .nsg = LoginStage::operational_negotiation,
                 .isid = {std::byte{0x80}, std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}, std::byte{5}},
                 .tsih = 0, .itt = Itt{7}, .cid = 1, .cmd_sn = SerialNumber(9)};
  const Bhs b = encode_bhs(r);
  EXPECT_EQ(at(b, 0), 0x43);  // RFC 7143 §11.12: I bit always set
  EXPECT_EQ(at(b, 1), 0x81);  // T, CSG 0, NSG 1
  EXPECT_EQ(at(b, 8), 0x80);
  EXPECT_EQ(load_be16(&b[20]), 1);
  auto back = decode_bhs_as<LoginRequest>(b);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->nsg, LoginStage::operational_negotiation);
  EXPECT_EQ(back->isid, r.isid);
}

TEST(Pdu, NsgIsZeroWithoutTransit) {
  LoginResponse r{.transit = false, .csg = LoginStage::operational_negotiation, .nsg = LoginStage::full_feature_phase};
  EXPECT_EQ(at(encode_bhs(r), 1), 0x04);
}

TEST(Pdu, DataInStatSnOnlyWithStatusBit) {
  DataIn d{.final = true, .status_present = false, .itt = Itt{1}, .stat_sn = SerialNumber(77)};
  EXPECT_EQ(load_be32(&encode_bhs(d)[24]), 0u);
  d.status_present = true;
  d.residual_underflow = true;
  const Bhs b = encode_bhs(d);
  EXPECT_EQ(load_be32(&b[24]), 77u);
  EXPECT_EQ(at(b, 1), 0x83);
}

TEST(Pdu, UnknownOpcodeIsMalformed) {
  Bhs b{};
  b[0] = std::byte{0x1c};
  auto r = decode_bhs(b);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), make_error_code(errc::malformed_pdu));
}

TEST(Pdu, DecodeAsWrongTypeFails) {
  EXPECT_FALSE(decode_bhs_as<NopIn>(encode_bhs(NopOut{})));
}

template <class T>
void expect_round_trip(const T& value) {
  const Bhs b = encode_bhs(value);
  auto back = decode_bhs_as<T>(b);
  ASSERT_TRUE(back) << opcode_name(raw_opcode(b));
  EXPECT_EQ(encode_bhs(*back), b) << opcode_name(raw_opcode(b));
}

TEST(Pdu, EveryOpcodeRoundTrips) {
  const auto lun = scsi::Lun::from_index(3);
  const SerialNumber sn(0xfffffff0u);
  expect_round_trip(NopOut{.lun = lun, .itt = Itt{1}, .ttt = Ttt{2}, .cmd_sn = sn, .exp_stat_sn = sn + 1});
  expect_round_trip(ScsiCommand{.write = true, .attribute = TaskAttribute::ordered, .lun = lun, .itt = Itt{5},
                                .expected_data_transfer_length = 4096, .cmd_sn = sn});
  expect_round_trip(TaskManagementRequest{.function = TaskManagementFunction::logical_unit_reset, .lun = lun,
                                          .itt = Itt{9}, .ref_cmd_sn = sn, .exp_data_sn = 4});
  expect_round_trip(LoginRequest{.transit = true, .continue_ = false, .csg = LoginStage::operational_negotiation,
                                 .nsg = LoginStage::full_feature_phase, .tsih = 12, .itt = Itt{3}, .cid = 2});
  expect_round_trip(TextRequest{.final = true, .itt = Itt{4}, .cmd_sn = sn});
  expect_round_trip(DataOut{.final = true, .lun = lun, .itt = Itt{5}, .ttt = Ttt{6}, .data_sn = 3,
                            .buffer_offset = 8192});
  expect_round_trip(LogoutRequest{.reason = LogoutReason::close_connection, .itt = Itt{8}, .cid = 1});
  expect_round_trip(SnackRequest{.type = 1, .itt = Itt{8}, .beg_run = 2, .run_length = 3});
  expect_round_trip(NopIn{.itt = reserved_itt, .ttt = Ttt{4}, .stat_sn = sn, .exp_cmd_sn = sn, .max_cmd_sn = sn + 9});
  expect_round_trip(ScsiResponse{.residual_underflow = true, .status = 2, .itt = Itt{5}, .stat_sn = sn,
                                 .residual_count = 512});
  expect_round_trip(TaskManagementResponse{.response = 1, .itt = Itt{9}, .stat_sn = sn});
  expect_round_trip(LoginResponse{.transit = true, .csg = LoginStage::security_negotiation,
                                  .nsg = LoginStage::operational_negotiation, .tsih = 7, .status_class = 2,
                                  .status_detail = 3});
  expect_round_trip(TextResponse{.final = true, .continue_ = false, .itt = Itt{4}, .ttt = reserved_ttt});
  expect_round_trip(DataIn{.final = true, .status_present = true, .status = 0, .lun = lun, .itt = Itt{5},
                           .stat_sn = sn, .data_sn = 2, .buffer_offset = 65536});
  expect_round_trip(LogoutResponse{.itt = Itt{8}, .time2wait = 2, .time2retain = 20});
  expect_round_trip(R2t{.lun = lun, .itt = Itt{5}, .ttt = Ttt{77}, .r2t_sn = 1, .buffer_offset = 262144,
                        .desired_data_transfer_length = 65536});
  expect_round_trip(AsyncMessage{.event = AsyncEvent::logout_request, .parameter3 = 5});
  expect_round_trip(Reject{.reason = RejectReason::command_not_supported, .stat_sn = sn});
}

TEST(Pdu, ExtendedCdbAhsRoundTrips) {
  std::vector<std::byte> tail(16, std::byte{0xab});  // a 32-byte CDB: 16 bytes go in the AHS
  const Ahs a = extended_cdb_ahs(tail);
  const auto area = encode_ahs(std::span(&a, 1));
  ASSERT_EQ(area.size() % 4, 0u);
  EXPECT_EQ(load_be16(area.data()), 17);  // RFC 7143 §11.2.2.3: AHSLength = CDBLength - 15
  auto back = decode_ahs(area);
  ASSERT_TRUE(back);
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ((*back)[0].type, AhsType::extended_cdb);
  EXPECT_EQ((*back)[0].specific, tail);  // the CDB tail, without the reserved byte
}

TEST(Pdu, TruncatedAhsIsMalformed) {
  std::vector<std::byte> area(8);
  store_be16(area.data(), 40);
  EXPECT_FALSE(decode_ahs(area));
}

TEST(Pdu, PaddingToFourBytes) {
  EXPECT_EQ(padding_for(0), 0u);
  EXPECT_EQ(padding_for(1), 3u);
  EXPECT_EQ(padding_for(4), 0u);
  EXPECT_EQ(padding_for(4097), 3u);
}

}  // namespace
}  // namespace iserkit::iscsi
