// Sense data encode/decode, fixed (SPC-5 §4.4.3) and descriptor (SPC-5 §4.4.2) formats.
#include <gtest/gtest.h>

#include <array>
#include <cerrno>

#include "iserkit/scsi/sense.hpp"

namespace iserkit::scsi {
namespace {

using Buf = std::array<std::byte, max_sense_size_bytes>;

TEST(Sense, FixedFormatBytes) {
  SenseData s = SenseData::make(SenseKey::illegal_request, asc::lba_out_of_range);
  s.information = 0x12345678;
  Buf buf{};
  ASSERT_EQ(encode_sense(s, SenseFormat::fixed, buf), 18u);
  EXPECT_EQ(static_cast<int>(buf[0]), 0xf0);  // VALID | 0x70
  EXPECT_EQ(static_cast<int>(buf[2]), 0x05);
  EXPECT_EQ(static_cast<int>(buf[3]), 0x12);
  EXPECT_EQ(static_cast<int>(buf[6]), 0x78);
  EXPECT_EQ(static_cast<int>(buf[7]), 10);
  EXPECT_EQ(static_cast<int>(buf[12]), 0x21);
  EXPECT_EQ(static_cast<int>(buf[13]), 0x00);
}

TEST(Sense, FixedRoundTripWithFieldPointer) {
  const SenseData s = SenseData::invalid_field_in_cdb(2, 5);
  Buf buf{};
  const auto n = encode_sense(s, SenseFormat::fixed, buf);
  EXPECT_EQ(static_cast<int>(buf[15]), 0x80 | 0x40 | 0x08 | 5);
  EXPECT_EQ(static_cast<int>(buf[17]), 2);
  const auto d = decode_sense(ConstByteSpan(buf.data(), n));
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, s);
}

TEST(Sense, FixedOmitsInformationAbove32Bits) {
  SenseData s = SenseData::make(SenseKey::medium_error, asc::unrecovered_read_error);
  s.information = 0x1'0000'0000ull;
  Buf buf{};
  const auto n = encode_sense(s, SenseFormat::fixed, buf);
  EXPECT_EQ(static_cast<int>(buf[0]), 0x70);  // VALID = 0
  const auto d = decode_sense(ConstByteSpan(buf.data(), n));
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->information.has_value());
}

TEST(Sense, DescriptorRoundTrip) {
  SenseData s = SenseData::make(SenseKey::medium_error, asc::write_error);
  s.information = 0x1122334455667788ull;
  s.sense_key_specific = std::array<std::uint8_t, 3>{0x80, 0x00, 0x10};
  Buf buf{};
  const auto n = encode_sense(s, SenseFormat::descriptor, buf);
  EXPECT_EQ(n, 8u + 12u + 8u);
  EXPECT_EQ(static_cast<int>(buf[0]), 0x72);
  EXPECT_EQ(static_cast<int>(buf[1]), 0x03);
  EXPECT_EQ(static_cast<int>(buf[2]), 0x0c);
  EXPECT_EQ(static_cast<int>(buf[7]), 20);
  EXPECT_EQ(static_cast<int>(buf[8]), 0x00);   // information descriptor
  EXPECT_EQ(static_cast<int>(buf[19]), 0x88);
  const auto d = decode_sense(ConstByteSpan(buf.data(), n));
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, s);
}

TEST(Sense, DescriptorMinimal) {
  const SenseData s = SenseData::make(SenseKey::data_protect, asc::write_protected);
  Buf buf{};
  const auto n = encode_sense(s, SenseFormat::descriptor, buf);
  EXPECT_EQ(n, 8u);
  const auto d = decode_sense(ConstByteSpan(buf.data(), n));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->key, SenseKey::data_protect);
  EXPECT_EQ(d->asc_pair(), asc::write_protected);
}

TEST(Sense, DecodeRejectsGarbage) {
  const std::array<std::byte, 4> bad{std::byte{0x55}, {}, {}, {}};
  EXPECT_FALSE(decode_sense(bad));
  EXPECT_FALSE(decode_sense({}));
}

TEST(Sense, DecodeTruncatedFixedKeepsKey) {
  // Only 8 bytes: the key is there, ASC/ASCQ are not.
  const std::array<std::byte, 8> t{std::byte{0x70}, {}, std::byte{0x06}, {}, {}, {}, {}, std::byte{10}};
  const auto d = decode_sense(t);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->key, SenseKey::unit_attention);
  EXPECT_EQ(d->asc, 0);
}

TEST(Sense, ScsiResultCheck) {
  EXPECT_TRUE(ScsiResult{}.check());
  ScsiResult r{Status::check_condition, SenseData::make(SenseKey::data_protect, asc::write_protected)};
  const auto c = r.check();
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error(), std::error_code(EROFS, std::generic_category()));
}

}  // namespace
}  // namespace iserkit::scsi
