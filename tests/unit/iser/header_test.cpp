// iSER header, Hello/HelloReply and CM private data codecs: fixed byte vectors (RFC 7145 §9.2-§9.4;
// layout as in Linux include/scsi/iser.h `struct iser_ctrl` and Wireshark packet-iser.c).
#include "iserkit/iser/header.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "iserkit/common/errors.hpp"
#include "../support/byte_literals.hpp"

namespace iserkit::iser {
namespace {

using iserkit::test::bytes;

std::array<std::byte, header_size> encode(const Header& h) {
  std::array<std::byte, header_size> out{};
  encode_header(h, out);
  return out;
}

TEST(IserHeader, ReadCommandSetsRsvReadStagAndVa) {
  // RFC 7145 §9.2: opcode 0x1 in the high nibble, RSV (0x04), Read STag at 16, Read Base Offset at 20.
  const auto out = encode({.read_valid = true, .read_stag = 0x11223344, .read_base_offset = 0x0000'7f00'dead'b000});
  const auto want = bytes({0x14, 0, 0, 0,  0, 0, 0, 0,  0, 0, 0, 0, 0, 0, 0, 0,
                           0x11, 0x22, 0x33, 0x44,  0x00, 0x00, 0x7f, 0x00, 0xde, 0xad, 0xb0, 0x00});
  EXPECT_EQ(std::vector<std::byte>(out.begin(), out.end()), want);
}

TEST(IserHeader, WriteCommandSetsWsvWriteStagAndVa) {
  const auto out = encode({.write_valid = true, .write_stag = 0xa1b2c3d4, .write_base_offset = 0x0102030405060708});
  const auto want = bytes({0x18, 0, 0, 0,  0xa1, 0xb2, 0xc3, 0xd4,  0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
                           0, 0, 0, 0,  0, 0, 0, 0, 0, 0, 0, 0});
  EXPECT_EQ(std::vector<std::byte>(out.begin(), out.end()), want);
}

TEST(IserHeader, ControlPduWithoutBuffersIsOpcodeOnly) {
  const auto out = encode({});
  EXPECT_EQ(out[0], std::byte{0x10});  // Linux ISCSI_CTRL / ISER_VER
  for (std::size_t i = 1; i < out.size(); ++i) EXPECT_EQ(out[i], std::byte{0}) << i;
}

TEST(IserHeader, FieldsWithoutValidBitAreNotWritten) {
  // RFC 7145 §9.2: STag/offset fields are only meaningful with WSV/RSV.
  const auto out = encode({.write_valid = false, .read_valid = false, .write_stag = 0xffffffff, .read_stag = 0x1});
  EXPECT_EQ(out[0], std::byte{0x10});
  EXPECT_EQ(load_be32(out.data() + 4), 0u);
  EXPECT_EQ(load_be32(out.data() + 16), 0u);
}

TEST(IserHeader, RoundTripBothDirections) {
  const Header h{.write_valid = true, .read_valid = true, .write_stag = 7, .write_base_offset = 0x1000 + 512,
                 .read_stag = 9, .read_base_offset = 0xffff'ffff'ffff'f000};  // declaration order
  const auto out = encode(h);
  EXPECT_EQ(out[0], std::byte{0x1c});
  auto back = decode_header(out);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, h);
}

TEST(IserHeader, DecodeIgnoresFieldsWhoseValidBitIsClear) {
  auto raw = bytes({0x10, 0, 0, 0,  1, 2, 3, 4,  1, 2, 3, 4, 5, 6, 7, 8,  9, 9, 9, 9,  1, 1, 1, 1, 1, 1, 1, 1});
  auto h = decode_header(raw);
  ASSERT_TRUE(h);
  EXPECT_FALSE(h->write_valid);
  EXPECT_FALSE(h->read_valid);
  EXPECT_EQ(h->write_stag, 0u);
  EXPECT_EQ(h->read_base_offset, 0u);
}

TEST(IserHeader, DecodeRejectsShortOrWrongOpcode) {
  auto shorter = bytes({0x10, 0, 0, 0});
  EXPECT_EQ(decode_header(shorter).error(), make_error_code(errc::malformed_pdu));
  std::array<std::byte, header_size> hello{};
  encode_hello({}, hello);
  EXPECT_EQ(decode_header(hello).error(), make_error_code(errc::malformed_pdu));
  std::array<std::byte, header_size> zero{};  // opcode 0 is not defined
  EXPECT_FALSE(peek_opcode(zero));
  EXPECT_EQ(*peek_opcode(hello), Opcode::hello);
}

TEST(IserHello, Layout) {
  // RFC 7145 §9.3: opcode 0x2, MaxVer/MinVer nibbles (10 = 0xa), iSER-IRD big-endian.
  std::array<std::byte, header_size> out{};
  encode_hello({.max_version = 10, .min_version = 10, .ird = 0x0010}, out);
  EXPECT_EQ(out[0], std::byte{0x20});
  EXPECT_EQ(out[1], std::byte{0xaa});
  EXPECT_EQ(out[2], std::byte{0x00});
  EXPECT_EQ(out[3], std::byte{0x10});
  for (std::size_t i = 4; i < out.size(); ++i) EXPECT_EQ(out[i], std::byte{0});
  auto back = decode_hello(out);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->ird, 16);
  EXPECT_EQ(back->max_version, 10);
}

TEST(IserHello, ReplyWithRejectAndOrd) {
  // RFC 7145 §9.4: opcode 0x3, REJ bit 0x01, MaxVer/CurVer, iSER-ORD.
  std::array<std::byte, header_size> out{};
  encode_hello_reply({.reject = true, .max_version = 10, .current_version = 10, .ord = 0x0102}, out);
  EXPECT_EQ(out[0], std::byte{0x31});
  EXPECT_EQ(out[1], std::byte{0xaa});
  EXPECT_EQ(out[2], std::byte{0x01});
  EXPECT_EQ(out[3], std::byte{0x02});
  auto back = decode_hello_reply(out);
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->reject);
  EXPECT_EQ(back->ord, 0x0102);
  EXPECT_FALSE(decode_hello(out));  // a HelloReply is not a Hello
}

TEST(IserHello, MaxBelowMinIsMalformed) {
  auto raw = bytes({0x20, 0x9a, 0, 0});
  EXPECT_FALSE(decode_hello(raw));
}

TEST(IserCm, RequestPrivateDataAsLinux) {
  // Linux include/scsi/iser.h: ISER_ZBVA_NOT_SUP 0x80, ISER_SEND_W_INV_NOT_SUP 0x40, 3 reserved bytes.
  EXPECT_EQ(encode_cm_request({}), (std::array<std::byte, 4>{std::byte{0xc0}, {}, {}, {}}));
  EXPECT_EQ(encode_cm_request({.zbva_not_supported = true, .send_with_invalidate_not_supported = false})[0],
            std::byte{0x80});
  auto back = decode_cm_request(bytes({0x80, 0, 0, 0, 0, 0}));  // IB pads private data: extra bytes ignored
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->zbva_not_supported);
  EXPECT_FALSE(back->send_with_invalidate_not_supported);
}

TEST(IserCm, ReplyPrivateData) {
  // Linux ISERT_ZBVA_NOT_USED 0x80, ISERT_SEND_W_INV_NOT_USED 0x40.
  EXPECT_EQ(encode_cm_reply({})[0], std::byte{0xc0});
  EXPECT_EQ(encode_cm_reply({.zbva_not_used = true, .send_with_invalidate_not_used = false})[0], std::byte{0x80});
  auto back = decode_cm_reply(bytes({0x40, 0, 0, 0}));
  ASSERT_TRUE(back);
  EXPECT_FALSE(back->zbva_not_used);
  EXPECT_TRUE(back->send_with_invalidate_not_used);
}

TEST(IserCm, MissingPrivateDataIsNullopt) {
  EXPECT_FALSE(decode_cm_request({}));
  EXPECT_FALSE(decode_cm_reply(bytes({0xc0, 0})));  // tgtd sends none; shorter than 4 is not ours
}

}  // namespace
}  // namespace iserkit::iser
