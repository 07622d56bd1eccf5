// INQUIRY / VPD / READ CAPACITY / REPORT LUNS data codecs (SPC-5 §6.6.2, §7.7; SBC-4 §6.6, §5.20.2,
// §5.21.2; SPC-5 §6.33.2): fixed offsets and encode ↔ parse round trips.
#include <gtest/gtest.h>

#include <array>

#include "iserkit/common/errors.hpp"
#include "iserkit/scsi/inquiry.hpp"

namespace iserkit::scsi {
namespace {

TEST(Inquiry, StandardRoundTripAndLayout) {
  StandardInquiry d;
  d.vendor = "ACME";
  d.product = "SuperDisk";
  d.revision = "12";
  d.version_descriptors = {0x00a0, 0x0960};
  const auto bytes = encode_standard_inquiry(d);
  ASSERT_EQ(bytes.size(), 96u);
  EXPECT_EQ(static_cast<int>(bytes[3]) & 0x0f, 2);  // RESPONSE DATA FORMAT
  EXPECT_EQ(static_cast<int>(bytes[4]), 91);        // ADDITIONAL LENGTH
  EXPECT_EQ(static_cast<char>(bytes[8]), 'A');
  EXPECT_EQ(static_cast<char>(bytes[12]), ' ');  // space padded
  const auto p = parse_standard_inquiry(bytes);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->vendor, "ACME");
  EXPECT_EQ(p->product, "SuperDisk");
  EXPECT_EQ(p->revision, "12");
  EXPECT_EQ(p->version_descriptors, d.version_descriptors);
  EXPECT_TRUE(p->cmdque);
  EXPECT_FALSE(parse_standard_inquiry(ConstByteSpan(bytes.data(), 35)));
}

TEST(Inquiry, NoLogicalUnitQualifier) {
  StandardInquiry d;
  d.qualifier = PeripheralQualifier::not_supported;
  d.type = PeripheralType::unknown_or_none;
  const auto bytes = encode_standard_inquiry(d);
  EXPECT_EQ(static_cast<int>(bytes[0]), 0x7f);
  const auto p = parse_standard_inquiry(bytes);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->qualifier, PeripheralQualifier::not_supported);
}

TEST(Inquiry, DesignatorsRoundTrip) {
  Designator naa;
  naa.value = {std::byte{0x30}, std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}, std::byte{5}, std::byte{6}, std::byte{7}};
  Designator t10;
  t10.type = DesignatorType::t10_vendor_id;
  t10.code_set = CodeSet::ascii;
  t10.association = Association::target_device;
  t10.piv = true;
  t10.protocol_identifier = 5;
  const auto s = as_bytes("ACME    serial");
  t10.value.assign(s.begin(), s.end());
  const auto page = encode_vpd_page(vpd::device_identification, encode_designators({naa, t10}));
  EXPECT_EQ(static_cast<int>(page[1]), 0x83);
  EXPECT_EQ(static_cast<int>(page[4]), 0x01);  // protocol 0, binary
  EXPECT_EQ(static_cast<int>(page[5]), 0x03);  // LU association, NAA
  const auto p = parse_device_identification(page);
  ASSERT_TRUE(p);
  ASSERT_EQ(p->size(), 2u);
  EXPECT_EQ((*p)[0], naa);
  EXPECT_EQ((*p)[1], t10);
}

TEST(Inquiry, VpdSimplePages) {
  const std::array<std::byte, 3> pages{std::byte{0}, std::byte{0x80}, std::byte{0x83}};
  const auto p0 = parse_supported_vpd_pages(encode_vpd_page(vpd::supported_pages, pages));
  ASSERT_TRUE(p0);
  EXPECT_EQ(*p0, (std::vector<std::uint8_t>{0, 0x80, 0x83}));
  const auto sn = parse_unit_serial_number(encode_vpd_page(vpd::unit_serial_number, as_bytes("ABC123  ")));
  ASSERT_TRUE(sn);
  EXPECT_EQ(*sn, "ABC123");
  // Wrong page code / truncated page are rejected.
  EXPECT_FALSE(parse_unit_serial_number(encode_vpd_page(vpd::supported_pages, pages)));
  auto page = encode_vpd_page(vpd::unit_serial_number, as_bytes("ABC"));
  EXPECT_FALSE(parse_unit_serial_number(ConstByteSpan(page.data(), 5)));
}

TEST(Inquiry, BlockLimitsRoundTrip) {
  BlockLimits b{.wsnz = true, .optimal_transfer_length_granularity = 8, .maximum_transfer_length = 16384,
                .optimal_transfer_length = 2048, .maximum_prefetch_length = 0, .maximum_unmap_lba_count = 0x400000,
                .maximum_unmap_block_descriptor_count = 256, .optimal_unmap_granularity = 8, .ugavalid = true,
                .unmap_granularity_alignment = 3, .maximum_write_same_length = 0x123456789ull};
  const auto page = encode_block_limits(b);
  ASSERT_EQ(page.size(), 64u);
  EXPECT_EQ(load_be16(page.data() + 2), 0x3c);
  EXPECT_EQ(load_be32(page.data() + 8), 16384u);
  EXPECT_EQ(load_be32(page.data() + 24), 256u);
  const auto p = parse_block_limits(page);
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, b);
}

TEST(Inquiry, CharacteristicsAndProvisioning) {
  const auto c = encode_block_device_characteristics({.medium_rotation_rate = 1});
  EXPECT_EQ(load_be16(c.data() + 4), 1);
  EXPECT_EQ(parse_block_device_characteristics(c)->medium_rotation_rate, 1);
  // SBC-4 §6.6.2 byte 7: WABEREQ in bits 7:6, WACEREQ in 5:4, NOMINAL FORM FACTOR in 3:0.
  const BlockDeviceCharacteristics sanitizing{.medium_rotation_rate = 1, .nominal_form_factor = 3, .wabereq = 1, .wacereq = 2};
  const auto s = encode_block_device_characteristics(sanitizing);
  EXPECT_EQ(static_cast<int>(s[7]), 0x40 | 0x20 | 0x03);
  EXPECT_EQ(*parse_block_device_characteristics(s), sanitizing);
  LogicalBlockProvisioning l{.lbpu = true, .lbpws = true, .lbpws10 = true, .lbprz = 1,
                             .provisioning_type = ProvisioningType::thin};
  const auto page = encode_logical_block_provisioning(l);
  ASSERT_EQ(page.size(), 8u);
  EXPECT_EQ(static_cast<int>(page[5]), 0x80 | 0x40 | 0x20 | 0x04);
  EXPECT_EQ(static_cast<int>(page[6]), 2);
  EXPECT_EQ(*parse_logical_block_provisioning(page), l);
}

TEST(Inquiry, ReadCapacityRoundTrip) {
  std::array<std::byte, 32> buf{};
  encode_read_capacity10({.last_lba = 0xfffffffe, .block_length_bytes = 4096}, buf);
  EXPECT_EQ(load_be32(buf.data()), 0xfffffffeu);
  EXPECT_EQ(parse_read_capacity10(buf)->block_length_bytes, 4096u);
  ReadCapacity16Data d{.last_lba = 1ull << 36, .block_length_bytes = 512, .lbpme = true, .lbprz = true};
  encode_read_capacity16(d, buf);
  EXPECT_EQ(static_cast<int>(buf[14]), 0xc0);
  EXPECT_EQ(*parse_read_capacity16(buf), d);
  EXPECT_FALSE(parse_read_capacity16(ConstByteSpan(buf.data(), 31)));
}

TEST(Inquiry, ReportLunsRoundTripAndTruncation) {
  const std::vector<Lun> luns{Lun::from_index(0), Lun::from_index(3), Lun::from_index(300)};
  const auto data = encode_report_luns(luns);
  ASSERT_EQ(data.size(), 32u);
  EXPECT_EQ(load_be32(data.data()), 24u);
  EXPECT_EQ(*parse_report_luns(data), luns);
  const auto truncated = parse_report_luns(ConstByteSpan(data.data(), 16));
  ASSERT_TRUE(truncated);
  EXPECT_EQ(truncated->size(), 1u);
  EXPECT_EQ(*report_luns_full_size(ConstByteSpan(data.data(), 16)), 32u);
}

// SPC-5 §7.5.5 / SBC-4 §6.5.1: both header layouts, with and without WP and DPOFUA.
TEST(Inquiry, ModeParameterHeaderBothLayouts) {
  const auto bytes = [](std::initializer_list<int> v) {
    std::vector<std::byte> out;
    for (int b : v) out.push_back(static_cast<std::byte>(b));
    return out;
  };
  auto six = parse_mode_parameter_header(bytes({0x17, 0x00, 0x10, 0x08}), false);
  ASSERT_TRUE(six);
  EXPECT_EQ(*six, (ModeParameterHeader{.mode_data_length_bytes = 0x17, .dpofua = true,
                                       .block_descriptor_length_bytes = 8}));
  auto ten = parse_mode_parameter_header(bytes({0x01, 0x02, 0x05, 0x80, 0x01, 0x00, 0x00, 0x10, 0xaa}), true);
  ASSERT_TRUE(ten);
  EXPECT_EQ(*ten, (ModeParameterHeader{.mode_data_length_bytes = 0x102, .medium_type = 5, .write_protected = true,
                                       .dpofua = false, .block_descriptor_length_bytes = 16}));
  // A (6) header read as (10) is too short; nothing is guessed.
  EXPECT_EQ(parse_mode_parameter_header(bytes({0x03, 0x00, 0x10, 0x00}), true).error(),
            make_error_code(errc::malformed_pdu));
  EXPECT_FALSE(parse_mode_parameter_header({}, false));
}

}  // namespace
}  // namespace iserkit::scsi
