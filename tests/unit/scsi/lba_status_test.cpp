// GET LBA STATUS for the initiator (iserkit/scsi/lba_status.hpp): the CDB layout and the parameter
// data parser (SBC-4 §5.8.1 CDB, §5.8.2 parameter data, §5.8.3 LBA status descriptor).
#include "iserkit/scsi/lba_status.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "iserkit/scsi/block_cdb.hpp"

namespace iserkit::scsi {
namespace {

TEST(LbaStatus, CdbLayoutAndTheTargetParserAgree) {
  const Cdb cdb = get_lba_status16(0x0102030405060708ull, 8 + 16 * 4);
  ASSERT_EQ(cdb.size(), 16u);
  EXPECT_EQ(load_u8(cdb.bytes.data()), 0x9e);      // SERVICE ACTION IN (16)
  EXPECT_EQ(load_u8(cdb.bytes.data() + 1), 0x12);  // GET LBA STATUS
  EXPECT_EQ(load_be64(cdb.bytes.data() + 2), 0x0102030405060708ull);
  EXPECT_EQ(load_be32(cdb.bytes.data() + 10), 72u);
  auto parsed = parse_get_lba_status_cdb(cdb.span());
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->lba, 0x0102030405060708ull);
  EXPECT_EQ(parsed->allocation_length, 72u);
}

std::vector<std::byte> data_with(std::uint32_t parameter_length, int descriptors) {
  std::vector<std::byte> d(8 + 16 * static_cast<std::size_t>(descriptors));
  store_be32(d.data(), parameter_length);
  for (int i = 0; i < descriptors; ++i) {
    std::byte* p = d.data() + 8 + 16 * i;
    store_be64(p, 1000u * static_cast<unsigned>(i));
    store_be32(p + 8, 1000);
    store_u8(p + 12, static_cast<std::uint8_t>(0xf0 | (i % 3)));  // reserved high bits ignored
  }
  return d;
}

TEST(LbaStatus, ParsesDescriptors) {
  const auto d = data_with(4 + 16 * 3, 3);
  auto r = parse_lba_status(d);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[1].lba, 1000u);
  EXPECT_EQ((*r)[1].blocks, 1000u);
  EXPECT_EQ((*r)[1].provisioning_status, static_cast<std::uint8_t>(ProvisioningStatus::deallocated));
  EXPECT_EQ((*r)[2].provisioning_status, static_cast<std::uint8_t>(ProvisioningStatus::anchored));
}

TEST(LbaStatus, StopsAtParameterLengthAndAtTheBytesReceived) {
  // PARAMETER DATA LENGTH says one descriptor although three were sent: one.
  auto r = parse_lba_status(data_with(4 + 16, 3));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->size(), 1u);
  // It says three but only two and a half arrived (allocation length cut them): two.
  auto d = data_with(4 + 16 * 3, 3);
  d.resize(8 + 16 * 2 + 8);
  r = parse_lba_status(d);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->size(), 2u);
  // Header only: no descriptors; less than the header: an error.
  r = parse_lba_status(data_with(4, 0));
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->empty());
  EXPECT_FALSE(parse_lba_status(std::vector<std::byte>(7)));
}

}  // namespace
}  // namespace iserkit::scsi
