// ALUA in the target's device server (SPC-5 §5.16): TPGS in standard INQUIRY, REPORT TARGET PORT
// GROUPS (§6.36), the relative target port and target port group designators of VPD 0x83
// (§7.7.6.5, §7.7.6.6), and what each asymmetric access state lets a nexus run; states that move
// (AluaMoving: a shared PortGroupTable, ASYMMETRIC ACCESS STATE CHANGED, transitioning, the write
// fence, SET TARGET PORT GROUPS (SPC-4 §6.45) through a stand-in coordinator).
#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>
#include <vector>

#include "iserkit/scsi/alua.hpp"
#include "iserkit/scsi/cdb.hpp"
#include "iserkit/scsi/inquiry.hpp"
#include "iserkit/target/backends.hpp"
#include "iserkit/target/scsi_dispatcher.hpp"
#include "test_support.hpp"

namespace iserkit::target {
namespace {

using scsi::Lun;
using scsi::Status;

using test::raw;

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
  // READ CAPACITY through a standby port: Linux's sd reads the size only when it scans the path,
  // so a refusal left the standby path a 0-byte disk that failed all I/O after a failover (lab
  // scenario alua-multipathd). It reports the LU's real size without touching the medium.
  const auto rc16 = run(s, scsi::read_capacity16());
  ASSERT_EQ(rc16.outcome.status, Status::good);
  const auto cap16 = scsi::parse_read_capacity16(rc16.data_in);
  ASSERT_TRUE(cap16);
  EXPECT_GT(cap16->last_lba, 0u);
  const auto rc10 = run(s, scsi::read_capacity10());
  ASSERT_EQ(rc10.outcome.status, Status::good);
  const auto cap10 = scsi::parse_read_capacity10(rc10.data_in);
  ASSERT_TRUE(cap10);
  EXPECT_EQ(cap10->last_lba, cap16->last_lba);
  expect_not_ready(run(s, raw({0x9e, 0x12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0})), 0x0b);  // GET LBA STATUS: still refused
  EXPECT_EQ(backend_->total(), 0);
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


// ---- States that move (target/README.md "ALUA failover"): a PortGroupTable shared with a
// coordinator, here a fake one that records what SET TARGET PORT GROUPS asked for. ----

/// AluaTransitions that moves group 1 (local) and group 2 (a peer's) at once, as the failover
/// coordinator does, unless `hold` is set (then nothing moves: the hand-over never finishes).
class FakeTransitions : public AluaTransitions {
 public:
  explicit FakeTransitions(std::shared_ptr<PortGroupTable> table) : table_(std::move(table)) {}
  bool is_local(std::uint16_t id) const noexcept override { return id == 1; }
  void request(bool active) noexcept override {
    requests.push_back(active);
    if (hold) return;
    table_->set_states({{1, active ? AluaState::active_optimized : AluaState::standby},
                        {2, active ? AluaState::standby : AluaState::active_optimized}});
  }
  std::vector<bool> requests;
  bool hold = false;

 private:
  std::shared_ptr<PortGroupTable> table_;
};

class AluaMoving : public Alua {
 protected:
  void SetUp() override {
    Alua::SetUp();
    auto t = PortGroupTable::make({{.id = 1, .state = AluaState::active_optimized, .relative_ports = {1}},
                                   {.id = 2, .state = AluaState::standby, .relative_ports = {2}}});
    ASSERT_TRUE(t);
    table_ = *t;
    dispatcher_.share_port_groups(table_);
  }
  void explicit_alua() {
    transitions_ = std::make_shared<FakeTransitions>(table_);
    table_->set_transitions(transitions_);
  }
  static scsi::Cdb stpg(std::uint32_t length) { return scsi::set_target_port_groups(length); }
  static void expect_sense(const Run& r, scsi::SenseKey key, scsi::AscPair asc) {
    EXPECT_EQ(r.outcome.status, Status::check_condition);
    ASSERT_TRUE(r.outcome.sense);
    EXPECT_EQ(r.outcome.sense->key, key);
    EXPECT_EQ(r.outcome.sense->asc, asc.asc);
    EXPECT_EQ(r.outcome.sense->ascq, asc.ascq);
  }
  std::vector<scsi::TargetPortGroupDescriptor> states(NexusId n) {
    const auto r = run(n, rtpg());
    EXPECT_EQ(r.outcome.status, Status::good);
    auto g = scsi::parse_report_target_port_groups(r.data_in);
    EXPECT_TRUE(g);
    return g ? *g : std::vector<scsi::TargetPortGroupDescriptor>{};
  }

  std::shared_ptr<PortGroupTable> table_;
  std::shared_ptr<FakeTransitions> transitions_;
};

TEST_F(AluaMoving, AStateChangeRaisesAsymmetricAccessStateChangedOnEveryNexusOnce) {
  const NexusId a = nexus(1);
  const NexusId b = nexus(2);
  EXPECT_TRUE(table_->set_states({{1, AluaState::standby}, {2, AluaState::active_optimized}}));
  EXPECT_FALSE(table_->set_states({{1, AluaState::standby}}));  // no change, no new generation
  // SPC-5 §5.16.2.6: UNIT ATTENTION 2Ah/06h on each I_T nexus, through whichever port, once.
  for (NexusId n : {a, b}) {
    expect_sense(run(n, scsi::test_unit_ready()), scsi::SenseKey::unit_attention,
                 scsi::asc::asymmetric_access_state_changed);
  }
  expect_not_ready(run(a, scsi::test_unit_ready()), 0x0b);  // group 1 is standby now
  EXPECT_EQ(run(b, scsi::test_unit_ready()).outcome.status, Status::good);
  // REPORT TARGET PORT GROUPS says so.
  const auto g = states(a);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].state, AluaState::standby);
  EXPECT_EQ(g[1].state, AluaState::active_optimized);
  // A nexus opened after the change was noted has only its POWER ON attention; the next change
  // reaches it too.
  const NexusId c = nexus(1);
  EXPECT_TRUE(table_->set_states({{1, AluaState::active_optimized}}));
  expect_sense(run(c, scsi::test_unit_ready()), scsi::SenseKey::unit_attention,
               scsi::asc::asymmetric_access_state_changed);
}

TEST_F(AluaMoving, TransitioningRefusesWithStateTransitionButAnswersInquiryAndRtpg) {
  const NexusId a = nexus(1);
  table_->set_states({{1, AluaState::transitioning}});
  run(a, raw({0x03, 0, 0, 0, 252}));  // REQUEST SENSE takes the state-changed attention
  expect_not_ready(run(a, scsi::read16({.lba = 0, .blocks = 1})), 0x0a);
  expect_not_ready(run(a, scsi::write16({.lba = 0, .blocks = 1}), std::vector<std::byte>(512)), 0x0a);
  expect_not_ready(run(a, scsi::mode_sense10({})), 0x0a);
  EXPECT_EQ(run(a, scsi::inquiry({})).outcome.status, Status::good);
  EXPECT_EQ(run(a, scsi::report_luns()).outcome.status, Status::good);
  EXPECT_EQ(states(a)[0].state, AluaState::transitioning);
  EXPECT_EQ(backend_->total(), 0);
}

TEST_F(AluaMoving, AWritePlannedWhileActiveIsRefusedIfThePortLeftTheActiveStatesBeforeItRan) {
  const NexusId a = nexus(1);
  const std::vector<std::byte> block(512, std::byte{9});
  const auto cdb = scsi::write16({.lba = 3, .blocks = 1});
  // Planned (Data-Out on its way) while active/optimized, then the gateway hands over.
  CommandPlan p = dispatcher_.plan(a, Lun::from_index(0), cdb.span());
  ASSERT_FALSE(p.rejected());
  table_->set_states({{1, AluaState::transitioning}});
  std::vector<std::byte> buffer = block;
  const auto outcome = test::run(ctx_, dispatcher_.execute(a, Lun::from_index(0), cdb.span(), p, buffer));
  EXPECT_EQ(outcome.status, Status::check_condition);
  ASSERT_TRUE(outcome.sense);
  EXPECT_EQ(outcome.sense->ascq, 0x0a);
  EXPECT_EQ(backend_->writes, 0);  // fenced: nothing written by a port that is not active
  // UNMAP too (it holds the whole medium).
  table_->set_states({{1, AluaState::active_optimized}});
  run(a, raw({0x03, 0, 0, 0, 252}));
  const auto unmap = raw({0x42, 0, 0, 0, 0, 0, 0, 0, 24});
  std::vector<std::byte> list(24);
  list[1] = std::byte{22};
  list[3] = std::byte{16};
  list[15] = std::byte{1};  // LBA 1
  list[19] = std::byte{1};  // one block
  CommandPlan u = dispatcher_.plan(a, Lun::from_index(0), unmap.span());
  ASSERT_FALSE(u.rejected());
  table_->set_states({{1, AluaState::standby}});
  const auto o2 = test::run(ctx_, dispatcher_.execute(a, Lun::from_index(0), unmap.span(), u, list));
  ASSERT_TRUE(o2.sense);
  EXPECT_EQ(o2.sense->ascq, 0x0b);
  EXPECT_EQ(backend_->total(), 0);
}

TEST_F(AluaMoving, QuiesceWritesReturnsAndFlushes) {
  const NexusId a = nexus(1);
  EXPECT_EQ(run(a, scsi::write16({.lba = 0, .blocks = 1}), std::vector<std::byte>(512)).outcome.status, Status::good);
  bool done = false;
  asio::co_spawn(ctx_, [&]() -> Awaitable<void> {
    co_await dispatcher_.quiesce_writes();
    done = true;
  }, asio::detached);
  ctx_.restart();
  ctx_.run();
  EXPECT_TRUE(done);
  EXPECT_GE(backend_->flushes, 1);
}

TEST_F(AluaMoving, WithoutACoordinatorSetTargetPortGroupsIsNotSupportedAndTpgsIsImplicit) {
  const NexusId a = nexus(1);
  const auto list = scsi::encode_set_target_port_groups({{.id = 1, .state = AluaState::standby}});
  const auto r = run(a, stpg(static_cast<std::uint32_t>(list.size())));
  expect_sense(r, scsi::SenseKey::illegal_request, scsi::asc::invalid_command_operation_code);
  const auto inq = run(a, scsi::inquiry({}));
  EXPECT_EQ((static_cast<unsigned>(inq.data_in[5]) >> 4) & 3, 1u);  // TPGS 01b
}

TEST_F(AluaMoving, SetTargetPortGroupsMovesTheGatewayAndWaitsForTheStates) {
  explicit_alua();
  const NexusId a = nexus(1);
  const NexusId b = nexus(2);
  // SPC-5 §6.6.2: TPGS 11b (implicit and explicit); RTPG: T_SUP besides AO/AN/S/U_SUP.
  const auto inq = run(a, scsi::inquiry({}));
  EXPECT_EQ((static_cast<unsigned>(inq.data_in[5]) >> 4) & 3, 3u);
  const auto rt = run(a, rtpg());
  EXPECT_EQ(static_cast<unsigned>(rt.data_in[5]), 0x8fu);
  // Through the standby port (SPC-5 §5.16.2.4.4 lets SET TARGET PORT GROUPS through): make group
  // 2 active/optimized → this gateway (group 1) goes standby.
  auto list = scsi::encode_set_target_port_groups({{.id = 2, .state = AluaState::active_optimized}});
  auto r = run(b, stpg(static_cast<std::uint32_t>(list.size())), list);
  EXPECT_EQ(r.outcome.status, Status::good);
  EXPECT_EQ(transitions_->requests, std::vector<bool>{false});
  EXPECT_EQ(table_->state(1), AluaState::standby);
  // The other nexus learns of it by unit attention; the states say so.
  expect_sense(run(a, scsi::read16({.lba = 0, .blocks = 1})), scsi::SenseKey::unit_attention,
               scsi::asc::asymmetric_access_state_changed);
  expect_not_ready(run(a, scsi::read16({.lba = 0, .blocks = 1})), 0x0b);
  // Asking for what already is: GOOD at once, nothing asked.
  run(b, raw({0x03, 0, 0, 0, 252}));
  list = scsi::encode_set_target_port_groups({{.id = 1, .state = AluaState::standby}, {.id = 2, .state = AluaState::active_optimized}});
  r = run(b, stpg(static_cast<std::uint32_t>(list.size())), list);
  EXPECT_EQ(r.outcome.status, Status::good);
  EXPECT_EQ(transitions_->requests.size(), 1u);
  // Back: group 1 active/optimized.
  list = scsi::encode_set_target_port_groups({{.id = 1, .state = AluaState::active_optimized}});
  r = run(a, stpg(static_cast<std::uint32_t>(list.size())), list);
  EXPECT_EQ(r.outcome.status, Status::good);
  EXPECT_EQ(transitions_->requests, (std::vector<bool>{false, true}));
  EXPECT_EQ(table_->state(1), AluaState::active_optimized);
  // SPC-5 §5.16.2.6: the nexus that asked gets no attention for it; the other one does.
  EXPECT_EQ(run(a, scsi::read16({.lba = 0, .blocks = 1})).outcome.status, Status::good);
  expect_sense(run(b, scsi::test_unit_ready()), scsi::SenseKey::unit_attention,
               scsi::asc::asymmetric_access_state_changed);
  // An empty list changes nothing.
  EXPECT_EQ(run(a, stpg(0)).outcome.status, Status::good);
}

TEST_F(AluaMoving, SetTargetPortGroupsRefusesBadParameterLists) {
  explicit_alua();
  const NexusId a = nexus(1);
  auto send = [&](const std::vector<scsi::SetTargetPortGroup>& groups) {
    const auto list = scsi::encode_set_target_port_groups(groups);
    return run(a, stpg(static_cast<std::uint32_t>(list.size())), list);
  };
  // SPC-4 §6.45.2: an unknown group, an unsupported state, two gateways active at once.
  expect_sense(send({{.id = 9, .state = AluaState::standby}}), scsi::SenseKey::illegal_request,
               scsi::asc::invalid_field_in_parameter_list);
  expect_sense(send({{.id = 1, .state = AluaState::unavailable}}), scsi::SenseKey::illegal_request,
               scsi::asc::invalid_field_in_parameter_list);
  expect_sense(send({{.id = 1, .state = AluaState::active_non_optimized}}), scsi::SenseKey::illegal_request,
               scsi::asc::invalid_field_in_parameter_list);
  expect_sense(send({{.id = 1, .state = AluaState::active_optimized}, {.id = 2, .state = AluaState::active_optimized}}),
               scsi::SenseKey::illegal_request, scsi::asc::invalid_field_in_parameter_list);
  // A list whose length is not 4 + 4n.
  const std::vector<std::byte> odd(6);
  expect_sense(run(a, stpg(6), odd), scsi::SenseKey::illegal_request, scsi::asc::parameter_list_length_error);
  // Another MAINTENANCE OUT service action; a huge list.
  expect_sense(run(a, raw({0xa4, 0x06})), scsi::SenseKey::illegal_request, scsi::asc::invalid_field_in_cdb);
  expect_sense(run(a, stpg(1u << 20)), scsi::SenseKey::illegal_request, scsi::asc::invalid_field_in_cdb);
  EXPECT_TRUE(transitions_->requests.empty());
  EXPECT_EQ(table_->state(1), AluaState::active_optimized);
}

}  // namespace
}  // namespace iserkit::target
