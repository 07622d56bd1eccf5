// ALUA codecs of both ends (scsi/alua.hpp): REPORT TARGET PORT GROUPS CDB and parameter
// data (SPC-5 §6.36), the ALUA sense conditions (SPC-5 §5.16.2.4, §5.16.2.6) and the target-port
// designators of VPD 0x83 (SPC-5 §7.7.6.5, §7.7.6.6).
#include <gtest/gtest.h>

#include "iserkit/common/errors.hpp"
#include "iserkit/scsi/alua.hpp"
#include "../support/byte_literals.hpp"

using namespace iserkit;
using namespace iserkit::scsi;

namespace {
using iserkit::test::bytes;
}  // namespace

TEST(Alua, ReportTargetPortGroupsCdbLayout) {
  const Cdb c = report_target_port_groups({.extended_header = true, .allocation_length = 0x01020304});
  ASSERT_EQ(c.size(), 12u);
  EXPECT_EQ(c.bytes[0], std::byte{0xa3});  // MAINTENANCE IN
  EXPECT_EQ(c.bytes[1], std::byte{0x2a});  // format 001b, service action 0Ah
  EXPECT_EQ(c.bytes[6], std::byte{0x01});
  EXPECT_EQ(c.bytes[9], std::byte{0x04});
  EXPECT_EQ(report_target_port_groups().bytes[1], std::byte{0x0a});
}

TEST(Alua, ReportTargetPortGroupsCdbParsesWhatTheBuilderMakes) {
  for (const bool extended : {false, true}) {
    const Cdb c = report_target_port_groups({.extended_header = extended, .allocation_length = 0x00102030});
    const auto o = parse_report_target_port_groups_cdb(c.span());
    ASSERT_TRUE(o);
    EXPECT_EQ(o->extended_header, extended);
    EXPECT_EQ(o->allocation_length, 0x00102030u);
  }
  // SPC-5 §6.36.1: PARAMETER DATA FORMAT 010b..111b are reserved; a short CDB is refused too.
  Cdb reserved = report_target_port_groups();
  reserved.bytes[1] = std::byte{0x4a};
  EXPECT_EQ(parse_report_target_port_groups_cdb(reserved.span()).error(), make_error_code(errc::invalid_argument));
  EXPECT_FALSE(parse_report_target_port_groups_cdb(bytes({0xa3, 0x0a, 0, 0})));
}

TEST(Alua, EncodedParameterDataHasTheStandardLayoutAndParsesBack) {
  const std::vector<TargetPortGroupDescriptor> groups{
      {.id = 1, .state = AccessState::active_optimized, .preferred = true, .relative_ports = {1}},
      {.id = 2, .state = AccessState::standby, .relative_ports = {2, 3}},
      {.id = 9, .state = AccessState::unavailable, .relative_ports = {}}};
  const auto data = encode_report_target_port_groups(
      groups, {.supported_states = SupportedAccessStates::active_optimized | SupportedAccessStates::standby});
  // 4-byte header, then 8 + 4, 8 + 8 and 8 bytes of descriptors (SPC-5 §6.36.2).
  const auto expected = bytes({0, 0, 0, 36,
                               0x80, 0x05, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1,
                               0x02, 0x05, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3,
                               0x03, 0x05, 0, 9, 0, 0, 0, 0});
  EXPECT_EQ(data, expected);
  auto parsed = parse_report_target_port_groups(data);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(*parsed, groups);

  const auto extended = encode_report_target_port_groups(groups, {.extended_header = true});
  ASSERT_EQ(extended.size(), data.size() + 4);
  EXPECT_EQ(extended[3], std::byte{40});    // RETURN DATA LENGTH counts the longer header
  EXPECT_EQ(extended[4], std::byte{0x10});  // FORMAT TYPE 001b
  parsed = parse_report_target_port_groups(extended);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(*parsed, groups);
}

TEST(Alua, ParsesTwoGroupsWithTheirPortsAndStates) {
  // SPC-5 §6.36.2 length-only header, group 1 active/optimized (PREF) with port 1, group 2
  // standby with ports 2 and 3.
  const auto data = bytes({0, 0, 0, 24,                                   // RETURN DATA LENGTH
                           0x80, 0x0f, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1,      // group 1, one port
                           0x02, 0x0f, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2});   // group 2, two ports…
  // …declares two ports but RETURN DATA LENGTH holds one: malformed.
  EXPECT_EQ(parse_report_target_port_groups(data).error(), make_error_code(errc::protocol_error));
  auto ok = bytes({0, 0, 0, 28,
                   0x80, 0x0f, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1,
                   0x02, 0x0f, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3});
  auto groups = parse_report_target_port_groups(ok);
  ASSERT_TRUE(groups);
  ASSERT_EQ(groups->size(), 2u);
  EXPECT_EQ((*groups)[0], (TargetPortGroupDescriptor{.id = 1, .state = AccessState::active_optimized,
                                                     .preferred = true, .relative_ports = {1}}));
  EXPECT_EQ((*groups)[1], (TargetPortGroupDescriptor{.id = 2, .state = AccessState::standby,
                                                     .preferred = false, .relative_ports = {2, 3}}));
}

TEST(Alua, ExtendedHeaderAndTruncatedDataKeepWholeGroups) {
  // Format 001b (byte 4 = 0x10), group 7 transitioning; then cut by the allocation length in the
  // middle of a second group: the first is kept.
  auto data = bytes({0, 0, 0, 28, 0x10, 0, 0, 0,
                     0x0f, 0x0f, 0, 7, 0, 0, 0, 1, 0, 0, 0, 9,
                     0x01, 0x0f, 0, 8, 0, 0, 0, 1});
  auto groups = parse_report_target_port_groups(data);
  ASSERT_TRUE(groups);
  ASSERT_EQ(groups->size(), 1u);
  EXPECT_EQ((*groups)[0].id, 7);
  EXPECT_EQ((*groups)[0].state, AccessState::transitioning);
  EXPECT_EQ((*groups)[0].relative_ports, std::vector<std::uint16_t>{9});
  EXPECT_FALSE(parse_report_target_port_groups(bytes({0, 0})));
}

TEST(Alua, SenseConditions) {
  auto cc = [](SenseKey key, std::uint8_t asc, std::uint8_t ascq) {
    ScsiResult r;
    r.status = Status::check_condition;
    r.sense = SenseData{.key = key, .asc = asc, .ascq = ascq};
    return r;
  };
  EXPECT_EQ(alua_condition(cc(SenseKey::unit_attention, 0x2a, 0x06)), AluaCondition::state_changed);
  EXPECT_EQ(alua_condition(cc(SenseKey::not_ready, 0x04, 0x0a)), AluaCondition::transitioning);
  EXPECT_EQ(alua_condition(cc(SenseKey::not_ready, 0x04, 0x0b)), AluaCondition::standby);
  EXPECT_EQ(alua_condition(cc(SenseKey::not_ready, 0x04, 0x0c)), AluaCondition::unavailable);
  EXPECT_EQ(alua_condition(cc(SenseKey::not_ready, 0x04, 0x02)), AluaCondition::none);
  EXPECT_EQ(alua_condition(cc(SenseKey::unit_attention, 0x29, 0x00)), AluaCondition::none);
  EXPECT_EQ(alua_condition(ScsiResult{}), AluaCondition::none);
  EXPECT_TRUE(processes_io(AccessState::active_non_optimized));
  EXPECT_FALSE(processes_io(AccessState::standby));
  EXPECT_EQ(to_string(AccessState::unavailable), "unavailable");
}

TEST(Alua, DesignatorsSplitByAssociation) {
  const Designator naa{.type = DesignatorType::naa, .association = Association::logical_unit,
                       .value = bytes({0x60, 1, 2, 3, 4, 5, 6, 7})};
  const Designator port{.type = DesignatorType::relative_target_port, .association = Association::target_port,
                        .value = bytes({0, 0, 0, 2})};
  const Designator group{.type = DesignatorType::target_port_group, .association = Association::target_port,
                         .value = bytes({0, 0, 0x01, 0x02})};
  const std::vector<Designator> page{naa, port, group};
  EXPECT_EQ(logical_unit_designators(page), std::vector<Designator>{naa});
  EXPECT_EQ(target_port_group_of(page), 0x0102);
  EXPECT_EQ(relative_target_port_of(page), 2);
  EXPECT_EQ(target_port_group_of({naa}), std::nullopt);
}

// SPC-4 §6.45: SET TARGET PORT GROUPS is MAINTENANCE OUT (A4h), service action 0Ah, with the
// PARAMETER LIST LENGTH in bytes 6..9; the list has a 4-byte header, then 4 bytes per group.
TEST(Alua, SetTargetPortGroupsCdbAndParameterListLayout) {
  const Cdb c = set_target_port_groups(12);
  ASSERT_EQ(c.size(), 12u);
  EXPECT_EQ(c.bytes[0], std::byte{0xa4});
  EXPECT_EQ(c.bytes[1], std::byte{0x0a});
  EXPECT_EQ(load_be32(c.bytes.data() + 6), 12u);
  const auto list = encode_set_target_port_groups(
      {{.id = 0x0102, .state = AccessState::active_optimized}, {.id = 7, .state = AccessState::standby}});
  EXPECT_EQ(list, bytes({0, 0, 0, 0, 0x00, 0, 0x01, 0x02, 0x02, 0, 0x00, 0x07}));
}

TEST(Alua, SetTargetPortGroupsParameterListParsesWhatTheEncoderMakes) {
  const std::vector<SetTargetPortGroup> groups{{.id = 1, .state = AccessState::standby},
                                               {.id = 65535, .state = AccessState::active_non_optimized}};
  const auto parsed = parse_set_target_port_groups(encode_set_target_port_groups(groups));
  ASSERT_TRUE(parsed);
  EXPECT_EQ(*parsed, groups);
  // The reserved bits of byte 0 and byte 1 are ignored; the state is bits 3..0.
  const auto r = parse_set_target_port_groups(bytes({0xff, 0xff, 0xff, 0xff, 0xf2, 0xff, 0, 9}));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0], (SetTargetPortGroup{.id = 9, .state = AccessState::standby}));
}

TEST(Alua, SetTargetPortGroupsParameterListOfBrokenLengthIsRefused) {
  EXPECT_TRUE(parse_set_target_port_groups({}));  // no list: no descriptor
  EXPECT_TRUE(parse_set_target_port_groups({})->empty());
  EXPECT_TRUE(parse_set_target_port_groups(bytes({0, 0, 0, 0})));  // the header alone
  for (const auto& bad : {bytes({0}), bytes({0, 0, 0}), bytes({0, 0, 0, 0, 0}), bytes({0, 0, 0, 0, 0, 0, 0, 1, 0})}) {
    const auto r = parse_set_target_port_groups(bad);
    ASSERT_FALSE(r) << bad.size();
    EXPECT_EQ(r.error(), make_error_code(errc::invalid_argument));
  }
}
