// Unit tests for scsi/third_party_copy.hpp: VPD 0x8f (SPC-4 §7.8.17) from fixed bytes laid out as
// the standard's tables give them, malformed pages, the EXTENDED COPY (LID1) parameter list
// (SPC-4 §6.4.3, §6.4.5.1, §6.4.6.5) byte by byte, and the split of a copy within the limits.
#include "iserkit/scsi/third_party_copy.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "iserkit/common/errors.hpp"
#include "../support/byte_literals.hpp"

using namespace iserkit;
using namespace iserkit::scsi;

namespace {

using iserkit::test::bytes;

// A page as iserkit-target and SPC-4 lay it out: Supported Commands (83h/00h, 84h/00h,03h),
// Parameter Data (8 CSCD, 16 segments, 1024 list bytes), Supported Descriptors (02h, E4h),
// Supported CSCD IDs (none), General Copy Operations (32 MiB segments, granularity 2^9).
std::vector<std::byte> sample_page() {
  auto p = bytes({0x00, 0x8f, 0x00, 0x00,
                  // 0001h, length 8: list length 7: 83h 1 00h, 84h 2 00h 03h
                  0x00, 0x01, 0x00, 0x08, 0x07, 0x83, 0x01, 0x00, 0x84, 0x02, 0x00, 0x03,
                  // 0004h, length 28
                  0x00, 0x04, 0x00, 0x1c, 0, 0, 0, 0, 0x00, 0x08, 0x00, 0x10, 0x00, 0x00, 0x04, 0x00,
                  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                  // 0008h, length 4: 2 codes
                  0x00, 0x08, 0x00, 0x04, 0x02, 0x02, 0xe4, 0x00,
                  // 000Ch, length 4
                  0x00, 0x0c, 0x00, 0x04, 0, 0, 0, 0,
                  // 8001h, length 32
                  0x80, 0x01, 0x00, 0x20, 0, 0, 0, 16, 0, 0, 0, 16, 0x02, 0x00, 0x00, 0x00, 9, 0, 0, 0,
                  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  p[3] = static_cast<std::byte>(p.size() - 4);
  return p;
}

TEST(ThirdPartyCopyVpd, ParsesTheLimitsOfEachDescriptor) {
  auto l = parse_third_party_copy_vpd(sample_page());
  ASSERT_TRUE(l);
  EXPECT_TRUE(l->extended_copy_lid1);
  EXPECT_TRUE(l->block_to_block);
  EXPECT_TRUE(l->identification_cscd);
  EXPECT_EQ(l->max_cscd_descriptors, 8);
  EXPECT_EQ(l->max_segment_descriptors, 16);
  EXPECT_EQ(l->max_descriptor_list_bytes, 1024u);
  EXPECT_EQ(l->max_segment_bytes, 32u << 20);
  EXPECT_EQ(l->data_segment_granularity_log2, 9);
}

TEST(ThirdPartyCopyVpd, RoundTripsThroughTheEncoder) {
  auto l = parse_third_party_copy_vpd(sample_page());
  ASSERT_TRUE(l);
  auto again = parse_third_party_copy_vpd(encode_third_party_copy_vpd(*l));
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *l);
}

TEST(ThirdPartyCopyVpd, ExtendedCopyOnlyWithServiceActionZero) {
  // 83h listed with service action 01h only (LID4): not the LID1 form.
  auto p = bytes({0x00, 0x8f, 0x00, 0x08, 0x00, 0x01, 0x00, 0x04, 0x03, 0x83, 0x01, 0x01});
  auto l = parse_third_party_copy_vpd(p);
  ASSERT_TRUE(l);
  EXPECT_FALSE(l->extended_copy_lid1);
  EXPECT_EQ(l->max_segment_descriptors, 0);
}

TEST(ThirdPartyCopyVpd, RefusesADescriptorPastThePageAndOtherPages) {
  auto p = bytes({0x00, 0x8f, 0x00, 0x06, 0x00, 0x04, 0x00, 0x1c, 0x00, 0x00});
  EXPECT_EQ(parse_third_party_copy_vpd(p).error(), make_error_code(errc::malformed_pdu));
  auto q = bytes({0x00, 0x8f, 0x00, 0x02, 0x00, 0x04});  // a header cut short
  EXPECT_EQ(parse_third_party_copy_vpd(q).error(), make_error_code(errc::malformed_pdu));
  auto r = sample_page();
  r[1] = std::byte{0xb0};
  EXPECT_FALSE(parse_third_party_copy_vpd(r));
  EXPECT_FALSE(parse_third_party_copy_vpd({}));
}

TEST(ExtendedCopyList, EncodesHeaderCscdAndSegmentDescriptors) {
  ExtendedCopyList list;
  list.list_id = 7;
  list.source_naa = bytes({0x61, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  list.destination_naa = bytes({0x52, 1, 2, 3, 4, 5, 6, 7});
  list.block_size_bytes = 4096;
  list.segments = {{.source_lba = 0x0102030405, .destination_lba = 9, .blocks = 0x1234}};
  const auto p = encode_extended_copy_list(list);
  ASSERT_EQ(p.size(), 16u + 64u + 28u);
  EXPECT_EQ(p[0], std::byte{7});
  EXPECT_EQ(p[1], std::byte{0x18});  // LIST ID USAGE 11b
  EXPECT_EQ(load_be16(p.data() + 2), 64);
  EXPECT_EQ(load_be32(p.data() + 8), 28u);
  EXPECT_EQ(load_be32(p.data() + 12), 0u);  // no inline data
  const std::byte* d0 = p.data() + 16;
  EXPECT_EQ(d0[0], std::byte{0xe4});
  EXPECT_EQ(d0[4], std::byte{0x01});
  EXPECT_EQ(d0[5], std::byte{0x03});
  EXPECT_EQ(d0[7], std::byte{16});
  EXPECT_EQ(d0[8], std::byte{0x61});
  EXPECT_EQ(load_be24(d0 + 29), 4096u);
  const std::byte* d1 = p.data() + 48;
  EXPECT_EQ(d1[7], std::byte{8});
  EXPECT_EQ(d1[8], std::byte{0x52});
  EXPECT_EQ(d1[16], std::byte{0});  // designator padded with zeroes
  const std::byte* s = p.data() + 80;
  EXPECT_EQ(s[0], std::byte{0x02});
  EXPECT_EQ(load_be16(s + 2), 0x18);
  EXPECT_EQ(load_be16(s + 4), 0);
  EXPECT_EQ(load_be16(s + 6), 1);
  EXPECT_EQ(load_be16(s + 10), 0x1234);
  EXPECT_EQ(load_be64(s + 12), 0x0102030405u);
  EXPECT_EQ(load_be64(s + 20), 9u);
  list.discard_status = false;
  EXPECT_EQ(encode_extended_copy_list(list)[1], std::byte{0});
}

TEST(ExtendedCopyList, CdbCarriesTheParameterListLength) {
  const Cdb c = extended_copy_cdb(108);
  EXPECT_EQ(c.length, 16);
  EXPECT_EQ(c.bytes[0], std::byte{0x83});
  EXPECT_EQ(c.bytes[1], std::byte{0x00});
  EXPECT_EQ(load_be32(c.bytes.data() + 10), 108u);
}

TEST(CopyCommandLimits, FromThePageTheBlockSizeAndACap) {
  auto l = parse_third_party_copy_vpd(sample_page());
  ASSERT_TRUE(l);
  // 32 MiB segments of 512-byte blocks exceed the 16-bit field: 65535 blocks; (1024 - 64) / 28 =
  // 34 segments fit the list, 16 are allowed.
  auto c = copy_command_limits(*l, 512, 0);
  EXPECT_EQ(c.max_segment_blocks, 65535u);
  EXPECT_EQ(c.max_segments, 16);
  // 4 KiB blocks: 32 MiB = 8192 blocks per segment.
  EXPECT_EQ(copy_command_limits(*l, 4096, 0).max_segment_blocks, 8192u);
  // A 64 MiB cap: 2 segments of 65535 blocks would be past it; 2 of 65535 = 67,107,840 bytes fit.
  c = copy_command_limits(*l, 512, 64u << 20);
  EXPECT_EQ(c.max_command_blocks() * 512, 2u * 65535u * 512u);
  // A tiny cap: one segment of 8 blocks.
  c = copy_command_limits(*l, 512, 4096);
  EXPECT_EQ(c.max_segment_blocks, 8u);
  EXPECT_EQ(c.max_segments, 1);
  // A list too short for two CSCD descriptors and a segment: nothing fits.
  ThirdPartyCopyLimits tight = *l;
  tight.max_descriptor_list_bytes = 80;
  EXPECT_EQ(copy_command_limits(tight, 512, 0).max_segments, 0);
  tight = *l;
  tight.max_cscd_descriptors = 1;
  EXPECT_EQ(copy_command_limits(tight, 512, 0).max_segments, 0);
}

TEST(CopyCommandLimits, SplitsARangeIntoSegments) {
  const CopyCommandLimits c{.max_segment_blocks = 100, .max_segments = 4};
  auto s = split_copy_segments(1000, 5000, 250, c);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0], (CopySegment{.source_lba = 1000, .destination_lba = 5000, .blocks = 100}));
  EXPECT_EQ(s[1], (CopySegment{.source_lba = 1100, .destination_lba = 5100, .blocks = 100}));
  EXPECT_EQ(s[2], (CopySegment{.source_lba = 1200, .destination_lba = 5200, .blocks = 50}));
  EXPECT_TRUE(split_copy_segments(0, 0, 0, c).empty());
}

}  // namespace
