// The device server's per-I_T-nexus and per-LU state through ScsiDispatcher (scsi_dispatcher.hpp):
// unit attentions (SAM-5 §5.14: after open_nexus, LUN reset, REPORTED LUNS DATA HAS CHANGED,
// REQUEST SENSE), RESERVE/RELEASE (6) and I_T nexus loss (SPC-2 §5.5.1), persistent reservations
// through PERSISTENT RESERVE IN/OUT CDBs (SPC-5 §6.17, §6.18), MODE SELECT SWP (SPC-5 §7.5.8),
// and the SBC-4 commands VERIFY (BYTCHK), COMPARE AND WRITE (with the range lock), ORWRITE, WRITE
// ATOMIC, PRE-FETCH, GET LBA STATUS, READ DEFECT DATA, REPORT SUPPORTED OPERATION CODES (RCTD,
// service actions), RFC 7143 §11.4.5.1 write overflow (shorten_transfer) and exact Data-Out sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>
#include <vector>

#include "iserkit/scsi/cdb.hpp"
#include "iserkit/target/backends.hpp"
#include "iserkit/target/scsi_dispatcher.hpp"
#include "scsi/device_state.hpp"
#include "test_support.hpp"

namespace iserkit::target {
namespace {

using scsi::Lun;
using scsi::Status;

constexpr std::uint64_t lun_bytes = 16u << 20;
constexpr std::uint64_t lun_blocks = lun_bytes / 512;

using test::raw;

using test::compare_and_write;
using test::lba16;

scsi::Cdb prout(unsigned sa, unsigned type) {
  scsi::Cdb c = raw({0x5f, sa, type});
  store_be32(c.bytes.data() + 5, 24);
  return c;
}

std::vector<std::byte> prout_params(std::uint64_t key, std::uint64_t sark) {
  std::vector<std::byte> p(24);
  store_be64(p.data(), key);
  store_be64(p.data() + 8, sark);
  return p;
}

std::vector<std::byte> fill(std::size_t n, unsigned v) { return std::vector<std::byte>(n, static_cast<std::byte>(v)); }

class DeviceState : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = std::make_shared<test::CountingBackend>(make_memory_backend({.size_bytes = lun_bytes}));
    ASSERT_TRUE(dispatcher_.add_logical_unit(0, std::make_shared<LogicalUnit>(backend_, LogicalUnitOptions{})));
    a_ = dispatcher_.open_nexus("iqn.2026-11.test:a,i,0x000000000001");
    b_ = dispatcher_.open_nexus("iqn.2026-11.test:b,i,0x000000000002");
    // Both start with POWER ON, RESET OR BUS DEVICE RESET OCCURRED: clear them.
    run(a_, scsi::test_unit_ready());
    run(b_, scsi::test_unit_ready());
  }

  using Run = test::CommandRun;
  Run run(NexusId nexus, const scsi::Cdb& cdb, std::vector<std::byte> data_out = {}) {
    return test::run_command(ctx_, dispatcher_, nexus, Lun::from_index(0), cdb, data_out);
  }
  static void expect_sense(const Run& r, scsi::SenseKey key, scsi::AscPair pair) {
    EXPECT_EQ(r.outcome.status, Status::check_condition);
    ASSERT_TRUE(r.outcome.sense);
    EXPECT_EQ(r.outcome.sense->key, key);
    EXPECT_EQ(r.outcome.sense->asc_pair(), pair);
  }
  Status status(NexusId n, const scsi::Cdb& cdb, std::vector<std::byte> data = {}) { return run(n, cdb, std::move(data)).outcome.status; }

  asio::io_context ctx_;
  ScsiDispatcher dispatcher_;
  std::shared_ptr<test::CountingBackend> backend_;
  NexusId a_, b_;
};

TEST_F(DeviceState, PowerOnUnitAttentionAfterOpenNexus) {
  const NexusId n = dispatcher_.open_nexus("iqn.2026-11.test:c,i,0x000000000003");
  // SAM-5 §5.14: INQUIRY neither reports nor clears it; the next other command does both.
  EXPECT_EQ(status(n, scsi::inquiry({})), Status::good);
  expect_sense(run(n, scsi::read16({.lba = 0, .blocks = 1})), scsi::SenseKey::unit_attention,
               scsi::asc::power_on_reset_or_bus_device_reset);
  EXPECT_EQ(backend_->reads, 0);  // the command was not run
  EXPECT_EQ(status(n, scsi::test_unit_ready()), Status::good);
  // The anonymous nexus never gets unit attentions.
  EXPECT_EQ(dispatcher_.plan(Lun::from_index(0), scsi::test_unit_ready().span()).rejected(), false);
}

TEST_F(DeviceState, RequestSenseReportsAndClearsTheUnitAttention) {
  dispatcher_.task_management(a_, Lun::from_index(0), TaskManagement::logical_unit_reset);
  const auto r = run(a_, scsi::request_sense({.allocation_length = 252}));
  ASSERT_EQ(r.outcome.status, Status::good);
  const auto sense = scsi::decode_sense(r.data_in);
  ASSERT_TRUE(sense);
  EXPECT_EQ(sense->key, scsi::SenseKey::unit_attention);
  EXPECT_EQ(sense->asc_pair(), scsi::asc::bus_device_reset_function_occurred);
  EXPECT_EQ(status(a_, scsi::test_unit_ready()), Status::good);
}

TEST_F(DeviceState, LunResetGivesEveryNexusAUnitAttention) {
  dispatcher_.task_management(a_, Lun::from_index(0), TaskManagement::logical_unit_reset);
  for (NexusId n : {a_, b_}) {
    expect_sense(run(n, scsi::test_unit_ready()), scsi::SenseKey::unit_attention, scsi::asc::bus_device_reset_function_occurred);
    EXPECT_EQ(status(n, scsi::test_unit_ready()), Status::good);
  }
  dispatcher_.task_management(a_, Lun::from_index(0), TaskManagement::target_cold_reset);
  expect_sense(run(b_, scsi::test_unit_ready()), scsi::SenseKey::unit_attention, scsi::asc::power_on_occurred);
}

TEST_F(DeviceState, ReportedLunsDataHasChanged) {
  ASSERT_TRUE(dispatcher_.add_logical_unit(1, std::make_shared<LogicalUnit>(make_memory_backend({.size_bytes = 1u << 20}),
                                                                            LogicalUnitOptions{})));
  // REPORT LUNS clears it (SPC-5 §6.33); nexus b still has it.
  EXPECT_EQ(status(a_, scsi::report_luns()), Status::good);
  EXPECT_EQ(status(a_, scsi::test_unit_ready()), Status::good);
  expect_sense(run(b_, scsi::test_unit_ready()), scsi::SenseKey::unit_attention, scsi::asc::reported_luns_data_has_changed);
}

TEST_F(DeviceState, Reserve6ConflictsAndNexusLossReleases) {
  ASSERT_EQ(status(a_, raw({0x16})), Status::good);
  EXPECT_EQ(status(a_, scsi::read16({.lba = 0, .blocks = 1})), Status::good);
  EXPECT_EQ(status(b_, scsi::read16({.lba = 0, .blocks = 1})), Status::reservation_conflict);
  EXPECT_EQ(status(b_, raw({0x16})), Status::reservation_conflict);
  EXPECT_EQ(status(b_, scsi::inquiry({})), Status::good);
  EXPECT_EQ(status(b_, raw({0x17})), Status::good);  // RELEASE by a non-holder: no effect
  EXPECT_EQ(status(b_, scsi::test_unit_ready()), Status::reservation_conflict);
  dispatcher_.close_nexus(a_);  // I_T nexus loss
  EXPECT_EQ(status(b_, raw({0x16})), Status::good);
  EXPECT_EQ(status(b_, raw({0x17})), Status::good);
}

TEST_F(DeviceState, LunResetReleasesReserve6) {
  ASSERT_EQ(status(a_, raw({0x16})), Status::good);
  dispatcher_.task_management(a_, Lun::from_index(0), TaskManagement::logical_unit_reset);
  run(b_, scsi::test_unit_ready());  // the unit attention
  EXPECT_EQ(status(b_, raw({0x16})), Status::good);
}

TEST_F(DeviceState, PersistentReservationAcrossNexuses) {
  EXPECT_EQ(status(a_, prout(0x6, 0), prout_params(0, 0xaa)), Status::good);
  EXPECT_EQ(status(a_, prout(0x1, 0x3), prout_params(0xaa, 0)), Status::good);  // EXCLUSIVE ACCESS
  EXPECT_EQ(status(b_, scsi::read16({.lba = 0, .blocks = 1})), Status::reservation_conflict);
  EXPECT_EQ(status(b_, scsi::inquiry({})), Status::good);
  EXPECT_EQ(status(b_, scsi::test_unit_ready()), Status::good);
  EXPECT_EQ(status(b_, raw({0x16})), Status::reservation_conflict);  // RESERVE(6) under a PR
  // PRIN READ RESERVATION from the other nexus.
  auto c = raw({0x5e, 0x01});
  store_be16(c.bytes.data() + 7, 64);
  const auto r = run(b_, c);
  ASSERT_EQ(r.outcome.status, Status::good);
  ASSERT_EQ(r.data_in.size(), 24u);
  EXPECT_EQ(load_be64(r.data_in.data() + 8), 0xaau);
  // PREEMPT from b (registered): a loses its registration and hears of it.
  EXPECT_EQ(status(b_, prout(0x6, 0), prout_params(0, 0xbb)), Status::good);
  EXPECT_EQ(status(b_, prout(0x4, 0x1), prout_params(0xbb, 0xaa)), Status::good);
  expect_sense(run(a_, scsi::test_unit_ready()), scsi::SenseKey::unit_attention, scsi::asc::registrations_preempted);
  EXPECT_EQ(status(a_, scsi::write16({.lba = 0, .blocks = 1}), fill(512, 1)), Status::reservation_conflict);
  EXPECT_EQ(status(a_, scsi::read16({.lba = 0, .blocks = 1})), Status::good);  // WRITE EXCLUSIVE now
  // The registration survives the nexus (SPC-5 §5.14.6).
  dispatcher_.close_nexus(b_);
  const NexusId b2 = dispatcher_.open_nexus("iqn.2026-11.test:b,i,0x000000000002");
  run(b2, scsi::test_unit_ready());
  EXPECT_EQ(status(b2, scsi::write16({.lba = 0, .blocks = 1}), fill(512, 1)), Status::good);
  // A parameter list other than 24 bytes is refused.
  auto bad = prout(0x0, 0);
  store_be32(bad.bytes.data() + 5, 20);
  expect_sense(run(b2, bad), scsi::SenseKey::illegal_request, scsi::asc::parameter_list_length_error);
}

TEST_F(DeviceState, ModeSelectSoftwareWriteProtect) {
  // MODE SELECT (6): 4-byte header, control page 0Ah with SWP.
  std::vector<std::byte> params(4 + 12);
  params[4] = std::byte{0x0a};
  params[5] = std::byte{0x0a};
  params[8] = std::byte{0x08};
  ASSERT_EQ(status(a_, raw({0x15, 0x10, 0, 0, 16}), params), Status::good);
  expect_sense(run(a_, scsi::write16({.lba = 0, .blocks = 1}), fill(512, 1)), scsi::SenseKey::data_protect,
               scsi::asc::write_protected);
  // The other nexus learns of it by a unit attention (SPC-5 §7.5.1).
  expect_sense(run(b_, scsi::test_unit_ready()), scsi::SenseKey::unit_attention, scsi::asc::mode_parameters_changed);
  const auto ms = run(b_, raw({0x1a, 0x08, 0x0a, 0, 255}));
  ASSERT_EQ(ms.outcome.status, Status::good);
  EXPECT_EQ(load_u8(ms.data_in.data() + 2) & 0x80, 0x80);   // WP in the device-specific parameter
  EXPECT_EQ(load_u8(ms.data_in.data() + 4 + 4) & 0x08, 0x08);  // SWP in the control page
  params[8] = std::byte{0};
  ASSERT_EQ(status(a_, raw({0x15, 0x10, 0, 0, 16}), params), Status::good);
  EXPECT_EQ(status(a_, scsi::write16({.lba = 0, .blocks = 1}), fill(512, 1)), Status::good);
  // An unknown page is an invalid field; SP = 1 is refused.
  params[4] = std::byte{0x19};
  expect_sense(run(a_, raw({0x15, 0x10, 0, 0, 16}), params), scsi::SenseKey::illegal_request,
               scsi::asc::invalid_field_in_parameter_list);
  expect_sense(run(a_, raw({0x15, 0x11, 0, 0, 16})), scsi::SenseKey::illegal_request, scsi::asc::invalid_field_in_cdb);
}

TEST_F(DeviceState, ModeSelectRefusesATruncatedSubpageHeader) {
  // A page with SPF=1 needs a 4-byte header (SPC-5 §7.5.7); a list that ends 2 or 3 bytes into it
  // is a parameter list length error, never a read past the list (found by fuzz_dispatcher).
  for (std::size_t tail : {2u, 3u}) {
    std::vector<std::byte> params(4 + tail);
    params[4] = std::byte{0x4a};  // SPF + control page
    params[5] = std::byte{0x01};
    const auto len = static_cast<std::uint8_t>(params.size());
    expect_sense(run(a_, raw({0x15, 0x10, 0, 0, len}), params), scsi::SenseKey::illegal_request,
                 scsi::asc::parameter_list_length_error);
  }
}

TEST_F(DeviceState, VerifyComparesWithBytchk) {
  const auto data = fill(4 * 512, 0x5a);
  ASSERT_EQ(status(a_, scsi::write16({.lba = 8, .blocks = 4}), data), Status::good);
  EXPECT_EQ(status(a_, lba16(0x8f, 8, 4, 0x02), data), Status::good);  // BYTCHK 01b
  auto bad = data;
  bad[700] = std::byte{0};
  const auto r = run(a_, lba16(0x8f, 8, 4, 0x02), bad);
  expect_sense(r, scsi::SenseKey::miscompare, scsi::asc::miscompare_during_verify);
  EXPECT_EQ(r.outcome.sense->information, 700u);  // offset of the first differing byte
  EXPECT_EQ(status(a_, lba16(0x8f, 8, 4, 0x06), fill(512, 0x5a)), Status::good);  // BYTCHK 11b: one block
  EXPECT_EQ(status(a_, lba16(0x8f, 8, 4, 0x00)), Status::good);                    // medium check only
  expect_sense(run(a_, lba16(0x8f, 8, 4, 0x04)), scsi::SenseKey::illegal_request, scsi::asc::invalid_field_in_cdb);
  expect_sense(run(a_, lba16(0x8f, 8, 4, 0x22)), scsi::SenseKey::illegal_request, scsi::asc::invalid_field_in_cdb);  // VRPROTECT
  expect_sense(run(a_, lba16(0x8f, lun_blocks, 1, 0x02)), scsi::SenseKey::illegal_request, scsi::asc::lba_out_of_range);
}

TEST_F(DeviceState, CompareAndWrite) {
  ASSERT_EQ(status(a_, scsi::write16({.lba = 4, .blocks = 2}), fill(1024, 'A')), Status::good);
  auto buffer = fill(1024, 'A');
  const auto next = fill(1024, 'B');
  buffer.insert(buffer.end(), next.begin(), next.end());
  const auto plan = dispatcher_.plan(a_, Lun::from_index(0), compare_and_write(4, 2).span());
  EXPECT_EQ(plan.transfer_length_bytes, 2048u);
  EXPECT_TRUE(plan.exact_data_out);
  EXPECT_EQ(status(a_, compare_and_write(4, 2), buffer), Status::good);
  auto rd = run(a_, scsi::read16({.lba = 4, .blocks = 2}));
  EXPECT_EQ(rd.data_in, next);
  // Now the verify data ('A') no longer matches: MISCOMPARE at offset 0, nothing written.
  const auto writes = backend_->writes;
  const auto r = run(a_, compare_and_write(4, 2), buffer);
  expect_sense(r, scsi::SenseKey::miscompare, scsi::asc::miscompare_during_verify);
  EXPECT_EQ(r.outcome.sense->information, 0u);
  EXPECT_EQ(backend_->writes, writes);
  // Data-Out longer than 2 × blocks is an error; shorter cannot be shortened.
  auto p = dispatcher_.plan(a_, Lun::from_index(0), compare_and_write(4, 1).span());
  EXPECT_TRUE(check_data_out_length(p, 4 * 512));
  EXPECT_FALSE(check_data_out_length(p, 2 * 512));
  EXPECT_FALSE(shorten_transfer(p, 512));
  // Zero blocks: nothing to do.
  EXPECT_EQ(status(a_, compare_and_write(4, 0)), Status::good);
}

TEST_F(DeviceState, RangeLockSerialisesOverlappingWriters) {
  detail::RangeLock lock;
  EXPECT_TRUE(lock.try_lock(10, 5));
  EXPECT_FALSE(lock.try_lock(14, 1));
  EXPECT_FALSE(lock.try_lock(0, 11));
  EXPECT_TRUE(lock.try_lock(15, 5));
  lock.unlock(10, 5);
  EXPECT_TRUE(lock.try_lock(0, 11));
}

TEST_F(DeviceState, OrWriteAndWriteAtomicAndPrefetch) {
  ASSERT_EQ(status(a_, scsi::write16({.lba = 0, .blocks = 1}), fill(512, 0x0f)), Status::good);
  EXPECT_EQ(status(a_, lba16(0x8b, 0, 1), fill(512, 0xf0)), Status::good);  // ORWRITE (16)
  EXPECT_EQ(run(a_, scsi::read16({.lba = 0, .blocks = 1})).data_in, fill(512, 0xff));
  scsi::Cdb atomic = raw({0x9c});
  store_be64(atomic.bytes.data() + 2, 2);
  store_be16(atomic.bytes.data() + 12, 1);
  EXPECT_EQ(status(a_, atomic, fill(512, 7)), Status::good);
  store_be16(atomic.bytes.data() + 10, 1);  // ATOMIC BOUNDARY: not supported
  expect_sense(run(a_, atomic, fill(512, 7)), scsi::SenseKey::illegal_request, scsi::asc::invalid_field_in_cdb);
  EXPECT_EQ(status(a_, lba16(0x90, 0, 8)), Status::good);  // PRE-FETCH (16)
  expect_sense(run(a_, lba16(0x90, lun_blocks, 1)), scsi::SenseKey::illegal_request, scsi::asc::lba_out_of_range);
}

TEST_F(DeviceState, GetLbaStatusFollowsTheMemoryChunks) {
  // Memory LUNs allocate 1 MiB chunks: write into the second chunk only.
  ASSERT_EQ(status(a_, scsi::write16({.lba = 2048, .blocks = 1}), fill(512, 1)), Status::good);
  scsi::Cdb c = raw({0x9e, 0x12});
  store_be64(c.bytes.data() + 2, 100);
  store_be32(c.bytes.data() + 10, 8 + 3 * 16);
  const auto r = run(a_, c);
  ASSERT_EQ(r.outcome.status, Status::good);
  ASSERT_EQ(r.data_in.size(), 8u + 3 * 16);
  EXPECT_EQ(load_be32(r.data_in.data()), 4u + 3 * 16);
  const std::byte* d = r.data_in.data() + 8;
  EXPECT_EQ(load_be64(d), 100u);  // the first descriptor starts at the STARTING LBA
  EXPECT_EQ(load_be32(d + 8), 2048u - 100);
  EXPECT_EQ(load_u8(d + 12), 1);  // deallocated
  EXPECT_EQ(load_be64(d + 16), 2048u);
  EXPECT_EQ(load_be32(d + 16 + 8), 2048u);
  EXPECT_EQ(load_u8(d + 16 + 12), 0);  // mapped
  EXPECT_EQ(load_u8(d + 32 + 12), 1);
  store_be64(c.bytes.data() + 2, lun_blocks);
  expect_sense(run(a_, c), scsi::SenseKey::illegal_request, scsi::asc::lba_out_of_range);
}

TEST_F(DeviceState, ReadDefectDataIsEmpty) {
  auto r = run(a_, raw({0x37, 0, 0x05, 0, 0, 0, 0, 0, 32}));
  ASSERT_EQ(r.outcome.status, Status::good);
  ASSERT_EQ(r.data_in.size(), 4u);
  EXPECT_EQ(load_u8(r.data_in.data() + 1), 0x05);
  EXPECT_EQ(load_be16(r.data_in.data() + 2), 0u);
  r = run(a_, raw({0xb7, 0x05, 0, 0, 0, 0, 0, 0, 0, 32}));
  EXPECT_EQ(r.data_in.size(), 8u);
}

TEST_F(DeviceState, ReportSupportedOpcodes) {
  scsi::Cdb all = raw({0xa3, 0x0c, 0x80});  // all commands, RCTD
  store_be32(all.bytes.data() + 6, 4096);
  auto r = run(a_, all);
  ASSERT_EQ(r.outcome.status, Status::good);
  const std::uint32_t length = load_be32(r.data_in.data());
  ASSERT_EQ(length % 20, 0u);  // 8-byte descriptors + 12-byte timeouts descriptors
  bool saw_prin_read_keys = false, saw_caw = false;
  for (std::size_t off = 4; off < 4 + length; off += 20) {
    const std::byte* d = r.data_in.data() + off;
    EXPECT_EQ(load_u8(d + 5) & 0x02, 0x02);  // CTDP
    EXPECT_EQ(load_be16(d + 8), 0x0au);      // timeouts descriptor length
    if ((load_u8(d + 5) & 0x01) == 0) {
      EXPECT_EQ(load_be16(d + 2), 0u);  // no SA without SERVACTV
    }
    saw_prin_read_keys |= load_u8(d) == 0x5e && load_be16(d + 2) == 0 && (load_u8(d + 5) & 0x01);
    saw_caw |= load_u8(d) == 0x89;
  }
  EXPECT_TRUE(saw_prin_read_keys);
  EXPECT_TRUE(saw_caw);
  // One command by opcode: READ (12) reports DPO/FUA as used.
  scsi::Cdb one = raw({0xa3, 0x0c, 0x01, 0xa8});
  store_be32(one.bytes.data() + 6, 64);
  r = run(a_, one);
  ASSERT_EQ(r.outcome.status, Status::good);
  EXPECT_EQ(load_u8(r.data_in.data() + 1) & 0x07, 0x03);
  EXPECT_EQ(load_u8(r.data_in.data() + 4), 0xa8);
  EXPECT_EQ(load_u8(r.data_in.data() + 5) & 0x18, 0x18);
  // PERSISTENT RESERVE IN has service actions: option 1 fails, option 2 works.
  one.bytes[3] = std::byte{0x5e};
  expect_sense(run(a_, one), scsi::SenseKey::illegal_request, scsi::asc::invalid_field_in_cdb);
  one.bytes[2] = std::byte{0x02};
  store_be16(one.bytes.data() + 4, 0x01);
  EXPECT_EQ(run(a_, one).outcome.status, Status::good);
}

TEST_F(DeviceState, WriteOverflowIsShortenedToWholeBlocks) {
  const auto write4 = scsi::write16({.lba = 0, .blocks = 4});
  auto p = dispatcher_.plan(a_, Lun::from_index(0), write4.span());
  ASSERT_TRUE(p.shortenable);
  EXPECT_FALSE(shorten_transfer(p, 200));  // not a whole block
  EXPECT_TRUE(shorten_transfer(p, 1024));
  EXPECT_EQ(p.blocks, 2u);
  EXPECT_EQ(p.transfer_length_bytes, 1024u);
  auto data = fill(1024, 9);
  EXPECT_EQ(test::run(ctx_, dispatcher_.execute(a_, Lun::from_index(0), write4.span(), p, data)).status, Status::good);
  EXPECT_EQ(run(a_, scsi::read16({.lba = 0, .blocks = 2})).data_in, data);
  auto q = dispatcher_.plan(a_, Lun::from_index(0), scsi::write16({.lba = 0, .blocks = 1}).span());
  EXPECT_TRUE(shorten_transfer(q, 0));
  EXPECT_EQ(q.direction, DataDirection::none);
  auto unmap_plan = dispatcher_.plan(a_, Lun::from_index(0), raw({0x42, 0, 0, 0, 0, 0, 0, 0, 24}).span());
  EXPECT_FALSE(shorten_transfer(unmap_plan, 8));
}

}  // namespace
}  // namespace iserkit::target
