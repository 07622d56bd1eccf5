// ALUA in the target's device server (SPC-5 §5.16, implicit ALUA): TPGS in standard INQUIRY,
// REPORT TARGET PORT GROUPS (§6.36), the relative target port and target port group designators
// of VPD 0x83 (§7.7.6.5, §7.7.6.6), and what each asymmetric access state lets a nexus run.
#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>
#include <vector>

#include "iserkit/scsi/cdb.hpp"
#include "iserkit/scsi/inquiry.hpp"
#include "iserkit/target/backends.hpp"
#include "iserkit/target/scsi_dispatcher.hpp"
#include "test_support.hpp"

namespace iserkit::target {
namespace {

using scsi::Lun;
using scsi::Status;

scsi::Cdb raw(std::initializer_list<unsigned> bytes) {
  scsi::Cdb c;
  std::size_t i = 0;
  for (auto b : bytes) c.bytes[i++] = static_cast<std::byte>(b);
  c.length = static_cast<std::uint8_t>(scsi::cdb_length_for(static_cast<std::uint8_t>(c.bytes[0])));
  return c;
}

/// REPORT TARGET PORT GROUPS: MAINTENANCE IN, service action 0Ah, PARAMETER DATA FORMAT `format`.
scsi::Cdb rtpg(unsigned format = 0, std::uint32_t alloc = 1024) {
  scsi::Cdb c = raw({0xa3, (format << 5) | 0x0a});
  store_be32(c.bytes.data() + 6, alloc);
  return c;
}

class Alua : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = std::make_shared<test::CountingBackend>(make_memory_backend({.size_bytes = 1u << 20}));
    ASSERT_TRUE(dispatcher_.add_logical_unit(0, std::make_shared<LogicalUnit>(backend_, LogicalUnitOptions{})));
  }
  // Three portal groups, one target port each (relative port = group id, as the iSCSI target does).
  void three_groups(AluaState second, AluaState third) {
    ASSERT_TRUE(dispatcher_.set_port_groups({{.id = 1, .state = AluaState::active_optimized, .relative_ports = {1}},
                                             {.id = 2, .state = second, .relative_ports = {2}},
                                             {.id = 3, .state = third, .relative_ports = {3}}}));
  }
  NexusId nexus(std::uint16_t group) {
    const NexusId n = dispatcher_.open_nexus("iqn.2026-11.test:h,i,0x00000000000" + std::to_string(group),
                                             TargetPort{.relative_port = group, .group = group});
    // The new nexus's POWER ON unit attention comes first (SAM-5 §5.14), whatever the state.
    auto r = run(n, raw({0x03, 0, 0, 0, 252}));  // REQUEST SENSE reports and clears it
    EXPECT_EQ(r.outcome.status, Status::good);
    return n;
  }
  using Run = test::CommandRun;
  Run run(NexusId n, const scsi::Cdb& cdb, std::vector<std::byte> data_out = {}) {
    return test::run_command(ctx_, dispatcher_, n, Lun::from_index(0), cdb, data_out);
  }
  static void expect_not_ready(const Run& r, std::uint8_t ascq) {
    EXPECT_EQ(r.outcome.status, Status::check_condition);
    ASSERT_TRUE(r.outcome.sense);
    EXPECT_EQ(r.outcome.sense->key, scsi::SenseKey::not_ready);
    EXPECT_EQ(r.outcome.sense->asc, 0x04);
    EXPECT_EQ(r.outcome.sense->ascq, ascq);
  }

  asio::io_context ctx_;
  ScsiDispatcher dispatcher_;
  std::shared_ptr<test::CountingBackend> backend_;
};

TEST_F(Alua, StandardInquiryClaimsImplicitAlua) {
  const auto r = run(nexus(1), scsi::inquiry({}));
  ASSERT_EQ(r.outcome.status, Status::good);
  ASSERT_GE(r.data_in.size(), 6u);
  EXPECT_EQ((static_cast<unsigned>(r.data_in[5]) >> 4) & 3, 1u);  // TPGS = 01b
}

TEST_F(Alua, ReportTargetPortGroupsDefaultsToOneActiveOptimizedGroup) {
  const auto r = run(nexus(1), rtpg());
  ASSERT_EQ(r.outcome.status, Status::good);
  ASSERT_EQ(r.data_in.size(), 4u + 8u + 4u);
  EXPECT_EQ(load_be32(r.data_in.data()), 12u);  // RETURN DATA LENGTH: the bytes after it
  EXPECT_EQ(static_cast<unsigned>(r.data_in[4]) & 0x0f, 0u);  // active/optimized
  EXPECT_EQ(static_cast<unsigned>(r.data_in[5]), 0x0fu);      // U_SUP S_SUP AN_SUP AO_SUP
  EXPECT_EQ(load_be16(r.data_in.data() + 6), 1u);             // group 1
  EXPECT_EQ(static_cast<unsigned>(r.data_in[11]), 1u);        // one target port
  EXPECT_EQ(load_be16(r.data_in.data() + 14), 1u);            // relative target port 1
}

TEST_F(Alua, ReportTargetPortGroupsListsEveryGroupWithItsState) {
  three_groups(AluaState::active_non_optimized, AluaState::standby);
  const auto r = run(nexus(1), rtpg(1));  // extended header
  ASSERT_EQ(r.outcome.status, Status::good);
  ASSERT_EQ(r.data_in.size(), 8u + 3 * 12u);
  EXPECT_EQ(load_be32(r.data_in.data()), r.data_in.size() - 4);
  EXPECT_EQ(static_cast<unsigned>(r.data_in[4]), 0x10u);  // FORMAT TYPE 001b
  const unsigned want_state[] = {0, 1, 2};
  for (unsigned g = 0; g < 3; ++g) {
    const std::byte* d = r.data_in.data() + 8 + g * 12;
    EXPECT_EQ(static_cast<unsigned>(d[0]) & 0x0f, want_state[g]) << g;
    EXPECT_EQ(load_be16(d + 2), g + 1) << g;
    EXPECT_EQ(load_be16(d + 10), g + 1) << g;
  }
  // A format this device server does not know: INVALID FIELD IN CDB.
  const auto bad = run(nexus(1), rtpg(2));
  EXPECT_EQ(bad.outcome.status, Status::check_condition);
  // The allocation length cuts the data, the RETURN DATA LENGTH still tells the whole.
  const auto cut = run(nexus(1), rtpg(0, 8));
  ASSERT_EQ(cut.data_in.size(), 8u);
  EXPECT_EQ(load_be32(cut.data_in.data()), 36u);
}

TEST_F(Alua, DeviceIdentificationNamesTheNexusTargetPortAndGroup) {
  three_groups(AluaState::active_non_optimized, AluaState::standby);
  for (std::uint16_t g : {1, 2, 3}) {
    const auto r = run(nexus(g), scsi::inquiry({.evpd = true, .page_code = 0x83, .allocation_length = 512}));
    ASSERT_EQ(r.outcome.status, Status::good) << g;  // allowed even in standby
    auto ds = scsi::parse_device_identification(r.data_in);
    ASSERT_TRUE(ds) << g;
    bool port = false;
    bool group = false;
    for (const auto& d : *ds) {
      if (d.association != scsi::Association::target_port) continue;
      ASSERT_EQ(d.value.size(), 4u);
      if (d.type == scsi::DesignatorType::relative_target_port) port = load_be16(d.value.data() + 2) == g;
      if (d.type == scsi::DesignatorType::target_port_group) group = load_be16(d.value.data() + 2) == g;
    }
    EXPECT_TRUE(port) << g;
    EXPECT_TRUE(group) << g;
    // The logical unit's own designators are the same through every port (same LU on every path).
    EXPECT_EQ((*ds)[0].type, scsi::DesignatorType::naa);
  }
}

TEST_F(Alua, StandbyRefusesMediaAccessButAnswersInquiryAndReports) {
  three_groups(AluaState::standby, AluaState::unavailable);
  const NexusId s = nexus(2);
  expect_not_ready(run(s, scsi::read16({.lba = 0, .blocks = 1})), 0x0b);
  expect_not_ready(run(s, scsi::write16({.lba = 0, .blocks = 1}), std::vector<std::byte>(512)), 0x0b);
  expect_not_ready(run(s, scsi::test_unit_ready()), 0x0b);
  expect_not_ready(run(s, raw({0x35})), 0x0b);  // SYNCHRONIZE CACHE
  EXPECT_EQ(backend_->total(), 0);  // nothing reached the backend
  EXPECT_EQ(run(s, scsi::inquiry({})).outcome.status, Status::good);
  EXPECT_EQ(run(s, scsi::report_luns()).outcome.status, Status::good);
  EXPECT_EQ(run(s, rtpg()).outcome.status, Status::good);
  EXPECT_EQ(run(s, scsi::mode_sense10({})).outcome.status, Status::good);
  // Another group's nexus (active/optimized) is not affected.
  const NexusId a = nexus(1);
  EXPECT_EQ(run(a, scsi::read16({.lba = 0, .blocks = 1})).outcome.status, Status::good);
  EXPECT_EQ(backend_->reads, 1);
}

TEST_F(Alua, UnavailableAnswersOnlyInquiryReportLunsRtpgAndRequestSense) {
  three_groups(AluaState::standby, AluaState::unavailable);
  const NexusId u = nexus(3);
  expect_not_ready(run(u, scsi::read16({.lba = 0, .blocks = 1})), 0x0c);
  expect_not_ready(run(u, scsi::mode_sense10({})), 0x0c);
  expect_not_ready(run(u, raw({0xa3, 0x0c, 0, 0, 0, 0, 0, 0, 2, 0})), 0x0c);  // REPORT SUPPORTED OPCODES
  EXPECT_EQ(run(u, scsi::inquiry({})).outcome.status, Status::good);
  EXPECT_EQ(run(u, scsi::report_luns()).outcome.status, Status::good);
  EXPECT_EQ(run(u, rtpg()).outcome.status, Status::good);
  EXPECT_EQ(run(u, raw({0x03, 0, 0, 0, 252})).outcome.status, Status::good);
  EXPECT_EQ(backend_->total(), 0);
}

TEST_F(Alua, ActiveNonOptimizedRunsEverything) {
  three_groups(AluaState::active_non_optimized, AluaState::standby);
  const NexusId n = nexus(2);
  EXPECT_EQ(run(n, scsi::write16({.lba = 0, .blocks = 1}), std::vector<std::byte>(512, std::byte{7})).outcome.status,
            Status::good);
  const auto r = run(n, scsi::read16({.lba = 0, .blocks = 1}));
  ASSERT_EQ(r.outcome.status, Status::good);
  EXPECT_EQ(r.data_in, std::vector<std::byte>(512, std::byte{7}));
}

TEST_F(Alua, PortGroupsAreValidated) {
  EXPECT_FALSE(dispatcher_.set_port_groups({}));
  EXPECT_FALSE(dispatcher_.set_port_groups({{.id = 0}}));
  EXPECT_FALSE(dispatcher_.set_port_groups({{.id = 1, .relative_ports = {1}}, {.id = 1, .relative_ports = {2}}}));
  EXPECT_FALSE(dispatcher_.set_port_groups({{.id = 1, .relative_ports = {1}}, {.id = 2, .relative_ports = {1}}}));
  EXPECT_FALSE(dispatcher_.set_port_groups({{.id = 1, .relative_ports = {0}}}));
  // Common's AccessState has states this target never runs (nor advertises as supported).
  EXPECT_FALSE(dispatcher_.set_port_groups({{.id = 1, .state = AluaState::offline, .relative_ports = {1}}}));
  EXPECT_FALSE(dispatcher_.set_port_groups({{.id = 1, .state = AluaState::transitioning, .relative_ports = {1}}}));
  EXPECT_FALSE(parse_alua_state("offline"));
  EXPECT_EQ(dispatcher_.port_groups().size(), 1u);  // unchanged
  EXPECT_EQ(to_string(AluaState::active_non_optimized), "active/non-optimized");
  EXPECT_EQ(parse_alua_state("standby"), AluaState::standby);
  EXPECT_FALSE(parse_alua_state("Standby"));
}

TEST_F(Alua, ReportSupportedOperationCodesListsRtpg) {
  // REPORTING OPTIONS 010b: one command by opcode and service action (SPC-5 §6.35.3).
  scsi::Cdb c = raw({0xa3, 0x0c, 0x02, 0xa3, 0x00, 0x0a});
  store_be32(c.bytes.data() + 6, 64);
  const auto r = run(nexus(1), c);
  ASSERT_EQ(r.outcome.status, Status::good);
  ASSERT_GE(r.data_in.size(), 2u);
  EXPECT_EQ(static_cast<unsigned>(r.data_in[1]) & 0x07, 3u);  // SUPPORT: supported as in the standard
}

}  // namespace
}  // namespace iserkit::target
