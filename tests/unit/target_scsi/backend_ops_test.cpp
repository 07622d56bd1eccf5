// The SCSI layer's use of the optional BlockBackend operations and of backend errors, over a fake
// backend (a memory backend with the hooks the RBD backend has): the one errno → sense table
// (backend_errors.cpp), COMPARE AND WRITE through compare_and_write() (SBC-4 §5.3: MISCOMPARE with
// INFORMATION = the offset the backend reports) and its fallback, WRITE SAME through write_same()
// (SBC-4 §5.49/§5.50) and its fallback, and a resized medium: CAPACITY DATA HAS CHANGED to every
// I_T nexus, then READ CAPACITY and range checks with the new size (SBC-4 §4.6).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "iserkit/scsi/cdb.hpp"
#include "iserkit/scsi/inquiry.hpp"
#include "iserkit/target/backends.hpp"
#include "iserkit/target/scsi_dispatcher.hpp"
#include "scsi/handlers.hpp"
#include "test_support.hpp"

namespace iserkit::target {
namespace {

using scsi::AscPair;
using scsi::Lun;
using scsi::SenseKey;
using scsi::Status;

constexpr std::uint64_t lun_bytes = 4u << 20;

// --- the sense table ---

ScsiOutcome mapped(int e, bool writing) { return detail::backend_error_outcome({e, std::generic_category()}, writing); }

void expect_check(const ScsiOutcome& o, SenseKey key, AscPair pair) {
  EXPECT_EQ(o.status, Status::check_condition);
  ASSERT_TRUE(o.sense);
  EXPECT_EQ(o.sense->key, key);
  EXPECT_EQ(o.sense->asc_pair(), pair);
}

TEST(BackendErrorTable, MediaErrorsNameTheDirection) {
  expect_check(mapped(EIO, false), SenseKey::medium_error, scsi::asc::unrecovered_read_error);
  expect_check(mapped(EIO, true), SenseKey::medium_error, scsi::asc::write_error);
}

TEST(BackendErrorTable, SpaceAndProtection) {
  for (int e : {ENOSPC, EDQUOT})
    expect_check(mapped(e, true), SenseKey::data_protect, scsi::asc::space_allocation_failed_write_protect);
  for (int e : {EROFS, EPERM, EACCES}) expect_check(mapped(e, true), SenseKey::data_protect, scsi::asc::write_protected);
}

TEST(BackendErrorTable, FencedGatewayIsNotReadySoMultipathMovesOn) {
  // ESHUTDOWN is Ceph's EBLOCKLISTED.
  for (int e : {ESHUTDOWN, ENOTCONN}) expect_check(mapped(e, true), SenseKey::not_ready, AscPair{0x04, 0x0b});
}

TEST(BackendErrorTable, TransientErrorsAreBusyWithoutSense) {
  for (int e : {ETIMEDOUT, EAGAIN, EBUSY, ENOMEM}) {
    const auto o = mapped(e, false);
    EXPECT_EQ(o.status, Status::busy) << e;
    EXPECT_FALSE(o.sense) << e;
  }
}

TEST(BackendErrorTable, MiscompareRangeGoneAndUnknown) {
  expect_check(mapped(EILSEQ, true), SenseKey::miscompare, scsi::asc::miscompare_during_verify);
  expect_check(mapped(EINVAL, false), SenseKey::illegal_request, scsi::asc::lba_out_of_range);
  expect_check(mapped(ENOENT, false), SenseKey::not_ready, scsi::asc::medium_not_present);
  expect_check(mapped(EOPNOTSUPP, true), SenseKey::illegal_request, scsi::asc::invalid_command_operation_code);
  // An errno the table does not name, and an error of another category: HARDWARE ERROR.
  expect_check(mapped(EXDEV, false), SenseKey::hardware_error, scsi::asc::internal_target_failure);
  expect_check(detail::backend_error_outcome(std::make_error_code(std::io_errc::stream), true), SenseKey::hardware_error,
               scsi::asc::internal_target_failure);
  EXPECT_EQ(detail::outcome_of(Result<void>{}, true).status, Status::good);
}

// --- a backend with the optional operations ---

/// A memory backend plus compare_and_write / write_same hooks and a size that can change, with
/// counters. `decline` makes the hooks answer EOPNOTSUPP; `fail_with` makes every call fail.
class HookBackend final : public test::CountingBackend {
 public:
  HookBackend() : CountingBackend(make_memory_backend({.size_bytes = 64u << 20})), size_(lun_bytes) {
    caps_ = inner_->capabilities();
    caps_.size_bytes = lun_bytes;
  }
  const BackendCapabilities& capabilities() const noexcept override { return caps_; }
  std::uint64_t size_bytes() const noexcept override { return size_.load(); }
  void resize(std::uint64_t bytes) { size_.store(bytes); }

  Awaitable<Result<void>> read(std::uint64_t o, ByteSpan b) override {
    ++reads;
    if (fail_with) co_return fail(std::error_code(fail_with, std::generic_category()));
    co_return co_await inner_->read(o, b);
  }
  Awaitable<Result<void>> write(std::uint64_t o, ConstByteSpan b, Fua f) override {
    ++writes;
    if (fail_with) co_return fail(std::error_code(fail_with, std::generic_category()));
    co_return co_await inner_->write(o, b, f);
  }
  Awaitable<Result<void>> flush() override { co_return Result<void>{}; }
  // discard() and write_zeroes(): CountingBackend's, counted and forwarded. allocation(): the
  // BlockBackend default (everything mapped), not the memory backend's.
  Awaitable<Result<AllocationExtent>> allocation(std::uint64_t o, std::uint64_t n) override {
    co_return co_await BlockBackend::allocation(o, n);
  }
  Awaitable<Result<CompareAndWriteResult>> compare_and_write(std::uint64_t o, ConstByteSpan compare, ConstByteSpan data,
                                                             Fua f) override {
    ++caws;
    if (decline) co_return fail(std::make_error_code(std::errc::operation_not_supported));
    if (fail_with) co_return fail(std::error_code(fail_with, std::generic_category()));
    std::vector<std::byte> medium(compare.size());
    if (auto r = co_await inner_->read(o, medium); !r) co_return fail(r.error());
    const auto [a, b] = std::mismatch(compare.begin(), compare.end(), medium.begin());
    if (a != compare.end()) co_return CompareAndWriteResult{.mismatch_offset_bytes = std::uint64_t(a - compare.begin())};
    if (auto r = co_await inner_->write(o, data, f); !r) co_return fail(r.error());
    co_return CompareAndWriteResult{};
  }
  Awaitable<Result<void>> write_same(std::uint64_t o, std::uint64_t n, ConstByteSpan pattern, Fua f) override {
    ++write_sames;
    last_pattern_bytes = pattern.size();
    if (decline) co_return fail(std::make_error_code(std::errc::operation_not_supported));
    if (fail_with) co_return fail(std::error_code(fail_with, std::generic_category()));
    for (std::uint64_t at = 0; at < n; at += pattern.size())
      if (auto r = co_await inner_->write(o + at, pattern, f); !r) co_return r;
    co_return Result<void>{};
  }

  int caws = 0, write_sames = 0;  // reads, writes, discards, zero_writes: CountingBackend's
  std::size_t last_pattern_bytes = 0;
  bool decline = false;
  int fail_with = 0;

 private:
  BackendCapabilities caps_;
  std::atomic<std::uint64_t> size_;
};

using test::compare_and_write;

std::vector<std::byte> fill(std::size_t n, unsigned v) { return std::vector<std::byte>(n, static_cast<std::byte>(v)); }

class BackendOps : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = std::make_shared<HookBackend>();
    ASSERT_TRUE(dispatcher_.add_logical_unit(0, std::make_shared<LogicalUnit>(backend_, LogicalUnitOptions{})));
    a_ = dispatcher_.open_nexus("iqn.2026-11.test:a,i,0x000000000001");
    b_ = dispatcher_.open_nexus("iqn.2026-11.test:b,i,0x000000000002");
    run(a_, scsi::test_unit_ready());  // clear POWER ON
    run(b_, scsi::test_unit_ready());
  }

  using Run = test::CommandRun;
  Run run(NexusId nexus, const scsi::Cdb& cdb, std::vector<std::byte> data_out = {}) {
    return test::run_command(ctx_, dispatcher_, nexus, Lun::from_index(0), cdb, data_out);
  }
  std::vector<std::byte> read(std::uint64_t lba, std::uint32_t blocks) {
    auto r = run(a_, scsi::read16({.lba = lba, .blocks = blocks}));
    EXPECT_EQ(r.outcome.status, Status::good);
    return r.data_in;
  }

  asio::io_context ctx_;
  ScsiDispatcher dispatcher_;
  std::shared_ptr<HookBackend> backend_;
  NexusId a_, b_;
};

TEST_F(BackendOps, CompareAndWriteMatchGoesThroughTheBackendHook) {
  ASSERT_EQ(run(a_, scsi::write16({.lba = 8, .blocks = 2}), fill(1024, 0x11)).outcome.status, Status::good);
  backend_->reads = backend_->writes = 0;
  auto data = fill(1024, 0x11);
  const auto next = fill(1024, 0x22);
  data.insert(data.end(), next.begin(), next.end());
  const auto r = run(a_, compare_and_write(8, 2), data);
  EXPECT_EQ(r.outcome.status, Status::good);
  EXPECT_EQ(backend_->caws, 1);
  EXPECT_EQ(backend_->reads, 0);  // no generic read-compare-write
  EXPECT_EQ(backend_->writes, 0);
  EXPECT_EQ(read(8, 2), next);
}

TEST_F(BackendOps, CompareAndWriteMiscompareReportsTheBackendsOffset) {
  auto medium = fill(1024, 0x11);
  medium[700] = std::byte{0x99};
  ASSERT_EQ(run(a_, scsi::write16({.lba = 8, .blocks = 2}), medium).outcome.status, Status::good);
  auto data = fill(2048, 0x11);
  const auto r = run(a_, compare_and_write(8, 2), data);
  ASSERT_EQ(r.outcome.status, Status::check_condition);
  ASSERT_TRUE(r.outcome.sense);
  EXPECT_EQ(r.outcome.sense->key, SenseKey::miscompare);
  EXPECT_EQ(r.outcome.sense->asc_pair(), scsi::asc::miscompare_during_verify);
  ASSERT_TRUE(r.outcome.sense->information);
  EXPECT_EQ(*r.outcome.sense->information, 700u);  // SBC-4 §5.3.2: offset of the first differing byte
  EXPECT_EQ(read(8, 2), medium);                   // nothing written
}

TEST_F(BackendOps, CompareAndWriteFallsBackWhenTheBackendDeclines) {
  backend_->decline = true;
  auto medium = fill(512, 0x33);
  ASSERT_EQ(run(a_, scsi::write16({.lba = 3, .blocks = 1}), medium).outcome.status, Status::good);
  backend_->reads = backend_->writes = 0;
  auto data = fill(512, 0x33);
  const auto next = fill(512, 0x44);
  data.insert(data.end(), next.begin(), next.end());
  EXPECT_EQ(run(a_, compare_and_write(3, 1), data).outcome.status, Status::good);
  EXPECT_EQ(backend_->caws, 1);
  EXPECT_EQ(backend_->reads, 1);  // the generic path ran
  EXPECT_EQ(backend_->writes, 1);
  EXPECT_EQ(read(3, 1), next);
  // ... and its miscompare offset too.
  auto wrong = fill(1024, 0x44);
  wrong[5] = std::byte{0};
  const auto r = run(a_, compare_and_write(3, 1), wrong);
  ASSERT_TRUE(r.outcome.sense);
  EXPECT_EQ(r.outcome.sense->key, SenseKey::miscompare);
  EXPECT_EQ(r.outcome.sense->information.value_or(999), 5u);
}

TEST_F(BackendOps, CompareAndWriteBackendErrorGoesThroughTheTableWithoutFallback) {
  backend_->fail_with = ENOSPC;
  const auto r = run(a_, compare_and_write(3, 1), fill(1024, 0));
  expect_check(r.outcome, SenseKey::data_protect, scsi::asc::space_allocation_failed_write_protect);
  EXPECT_EQ(backend_->reads, 0);
  backend_->fail_with = ETIMEDOUT;
  EXPECT_EQ(run(a_, compare_and_write(3, 1), fill(1024, 0)).outcome.status, Status::busy);
}

TEST_F(BackendOps, WriteSameNonZeroBlockGoesThroughTheBackendHook) {
  const auto block = fill(512, 0x5a);
  const auto r = run(a_, scsi::write_same16({.lba = 100, .blocks = 64}), block);
  EXPECT_EQ(r.outcome.status, Status::good);
  EXPECT_EQ(backend_->write_sames, 1);
  EXPECT_EQ(backend_->last_pattern_bytes, 512u);  // one block handed over, not a replicated buffer
  EXPECT_EQ(backend_->writes, 0);
  const auto back = read(100, 64);
  EXPECT_TRUE(std::all_of(back.begin(), back.end(), [](std::byte b) { return b == std::byte{0x5a}; }));
  // A zero block and UNMAP = 1 keep their own paths.
  EXPECT_EQ(run(a_, scsi::write_same16({.lba = 100, .blocks = 8}), fill(512, 0)).outcome.status, Status::good);
  EXPECT_EQ(backend_->zero_writes, 1);
  EXPECT_EQ(run(a_, scsi::write_same16({.lba = 108, .blocks = 8, .unmap = true}), block).outcome.status, Status::good);
  EXPECT_EQ(backend_->discards, 1);
  EXPECT_EQ(backend_->write_sames, 1);
}

TEST_F(BackendOps, WriteSameFallsBackWhenTheBackendDeclinesAndMapsErrors) {
  backend_->decline = true;
  const auto block = fill(512, 0x6b);
  EXPECT_EQ(run(a_, scsi::write_same16({.lba = 10, .blocks = 4}), block).outcome.status, Status::good);
  EXPECT_EQ(backend_->write_sames, 1);
  EXPECT_GE(backend_->writes, 1);
  const auto back = read(10, 4);
  EXPECT_TRUE(std::all_of(back.begin(), back.end(), [](std::byte b) { return b == std::byte{0x6b}; }));
  backend_->decline = false;
  backend_->fail_with = EIO;
  expect_check(run(a_, scsi::write_same16({.lba = 10, .blocks = 4}), block).outcome, SenseKey::medium_error,
               scsi::asc::write_error);
}

TEST_F(BackendOps, ResizeRaisesCapacityDataHasChangedOnEveryNexus) {
  auto capacity = [&](NexusId n) {
    auto r = run(n, scsi::read_capacity16());
    EXPECT_EQ(r.outcome.status, Status::good);
    return scsi::parse_read_capacity16(r.data_in).value().last_lba + 1;
  };
  EXPECT_EQ(capacity(a_), lun_bytes / 512);
  backend_->resize(2 * lun_bytes);
  // SBC-4 §4.6: every I_T nexus gets the unit attention once, then sees the new size.
  for (NexusId n : {a_, b_}) {
    const auto r = run(n, scsi::read_capacity16());
    expect_check(r.outcome, SenseKey::unit_attention, scsi::asc::capacity_data_has_changed);
    EXPECT_EQ(capacity(n), 2 * lun_bytes / 512);
  }
  // The new blocks are addressable.
  EXPECT_EQ(run(a_, scsi::write16({.lba = lun_bytes / 512 + 5, .blocks = 1}), fill(512, 7)).outcome.status, Status::good);
  // Shrinking: again a unit attention, and the lost range is out of range without backend I/O.
  backend_->resize(lun_bytes / 2);
  expect_check(run(a_, scsi::test_unit_ready()).outcome, SenseKey::unit_attention, scsi::asc::capacity_data_has_changed);
  backend_->reads = 0;
  expect_check(run(a_, scsi::read16({.lba = lun_bytes / 512 - 1, .blocks = 1})).outcome, SenseKey::illegal_request,
               scsi::asc::lba_out_of_range);
  EXPECT_EQ(backend_->reads, 0);
  // No change, no unit attention.
  EXPECT_EQ(run(b_, scsi::read_capacity16()).outcome.status, Status::check_condition);  // b_'s pending one
  EXPECT_EQ(run(b_, scsi::test_unit_ready()).outcome.status, Status::good);
  EXPECT_EQ(run(a_, scsi::test_unit_ready()).outcome.status, Status::good);
}

}  // namespace
}  // namespace iserkit::target
