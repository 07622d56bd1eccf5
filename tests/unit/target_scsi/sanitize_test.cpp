// SANITIZE (SBC-4 §5.30) and the sanitize operation model (SBC-4 §4.11) of the target's SCSI
// layer: the CDB and OVERWRITE parameter list checks with their field pointers, OVERWRITE (passes,
// INVERT, pattern repetition) and BLOCK ERASE (deallocation) on a memory LUN, what REPORT
// SUPPORTED OPERATION CODES and VPD 0xb1 (WABEREQ) advertise, the in-progress state (NOT READY,
// SANITIZE IN PROGRESS with the progress indication for all but INQUIRY, REPORT LUNS and REQUEST
// SENSE; IMMED = 1 returns at once; an aborted IMMED = 0 command stops waiting, the operation goes
// on), the failure mode (MEDIUM ERROR, SANITIZE COMMAND FAILED; AUSE and EXIT FAILURE MODE),
// write protection, RESERVE(6) conflicts, the pace option and stop_background_operations().
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <initializer_list>
#include <memory>
#include <vector>

#include "iserkit/scsi/cdb.hpp"
#include "iserkit/scsi/inquiry.hpp"
#include "iserkit/target/backends.hpp"
#include "iserkit/target/scsi_dispatcher.hpp"
#include "scsi/sanitize.hpp"
#include "test_support.hpp"

namespace iserkit::target {
namespace {

using detail::OverwriteParameters;
using detail::SanitizeAction;
using scsi::Lun;
using scsi::SenseKey;
using scsi::Status;

constexpr std::uint32_t bs = 512;
constexpr std::uint64_t lun_bytes = 4u << 20;  // 4 MiB: four 1 MiB overwrite steps
constexpr std::uint64_t lun_blocks = lun_bytes / bs;

using test::raw;

/// SANITIZE with `byte1` (IMMED 0x80, AUSE 0x20, service action) and PARAMETER LIST LENGTH.
scsi::Cdb sanitize(unsigned byte1, std::uint16_t parameter_list_length = 0) {
  scsi::Cdb c = raw({0x48, byte1});
  store_be16(c.bytes.data() + 7, parameter_list_length);
  return c;
}

/// An OVERWRITE parameter list: byte 0 (INVERT, TEST, OVERWRITE COUNT), then the pattern.
std::vector<std::byte> overwrite_list(unsigned byte0, std::vector<std::byte> pattern) {
  std::vector<std::byte> p(4 + pattern.size());
  p[0] = std::byte(byte0);
  store_be16(p.data() + 2, static_cast<std::uint16_t>(pattern.size()));
  std::copy(pattern.begin(), pattern.end(), p.begin() + 4);
  return p;
}

scsi::Cdb read16(std::uint64_t lba, std::uint32_t blocks) { return test::lba16(0x88, lba, blocks); }
scsi::Cdb write16(std::uint64_t lba, std::uint32_t blocks) { return test::lba16(0x8a, lba, blocks); }

void expect_invalid_cdb_field(const scsi::SenseOr<detail::SanitizeCdb>& r, std::uint16_t byte) {
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().key, SenseKey::illegal_request);
  EXPECT_EQ(r.error().asc_pair(), scsi::asc::invalid_field_in_cdb);
  ASSERT_TRUE(r.error().sense_key_specific);
  EXPECT_EQ(load_be16(reinterpret_cast<const std::byte*>(r.error().sense_key_specific->data() + 1)), byte);
}

TEST(SanitizeCdb, ServiceActionsAndParameterListLengths) {
  const auto parse = [](const scsi::Cdb& c, bool block_erase = true) {
    return detail::parse_sanitize_cdb(c.span(), bs, block_erase);
  };
  auto o = parse(sanitize(0x80 | 0x20 | 0x01, bs + 4));
  ASSERT_TRUE(o);
  EXPECT_TRUE(o->immed);
  EXPECT_TRUE(o->ause);
  EXPECT_EQ(o->action, SanitizeAction::overwrite);
  EXPECT_EQ(o->parameter_list_length_bytes, bs + 4);
  EXPECT_TRUE(parse(sanitize(0x01, 5)));
  EXPECT_TRUE(parse(sanitize(0x02)));
  EXPECT_TRUE(parse(sanitize(0x1f)));
  // SBC-4 §5.30.2.1: OVERWRITE takes 5..block size + 4 bytes, the others none.
  for (std::uint16_t n : {0, 1, 4, static_cast<int>(bs) + 5}) expect_invalid_cdb_field(parse(sanitize(0x01, n)), 7);
  expect_invalid_cdb_field(parse(sanitize(0x02, 8)), 7);
  expect_invalid_cdb_field(parse(sanitize(0x1f, 8)), 7);
  // Reserved and unsupported service actions: CRYPTOGRAPHIC ERASE, and BLOCK ERASE when the LU
  // cannot deallocate.
  for (unsigned sa = 0; sa <= 0x1e; ++sa) {
    if (sa == 1 || sa == 2) continue;
    expect_invalid_cdb_field(parse(sanitize(sa)), 1);
  }
  expect_invalid_cdb_field(parse(sanitize(0x02), false), 1);
  // Byte 1 bit 6 (ZNR, zoned devices only) and bytes 2..6 are reserved.
  expect_invalid_cdb_field(parse(sanitize(0x40 | 0x02)), 1);
  for (std::size_t i = 2; i <= 6; ++i) {
    auto c = sanitize(0x02);
    c.bytes[i] = std::byte{1};
    expect_invalid_cdb_field(parse(c), static_cast<std::uint16_t>(i));
  }
}

TEST(SanitizeCdb, OverwriteParameterList) {
  const std::vector<std::byte> pattern{std::byte{0xaa}, std::byte{0x55}, std::byte{0x01}};
  auto p = detail::parse_overwrite_parameters(overwrite_list(0x80 | 3, pattern), bs);
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->invert);
  EXPECT_EQ(p->overwrite_count, 3);
  EXPECT_EQ(p->pattern, pattern);
  const auto invalid_at = [](const std::vector<std::byte>& list, std::uint16_t byte) {
    auto r = detail::parse_overwrite_parameters(list, bs);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().asc_pair(), scsi::asc::invalid_field_in_parameter_list);
    ASSERT_TRUE(r.error().sense_key_specific);
    EXPECT_EQ((*r.error().sense_key_specific)[2], byte);
  };
  invalid_at(overwrite_list(0, pattern), 0);          // OVERWRITE COUNT 00h is reserved
  invalid_at(overwrite_list(0x20 | 1, pattern), 0);   // TEST 01b: no test modes here
  auto reserved = overwrite_list(1, pattern);
  reserved[1] = std::byte{1};
  invalid_at(reserved, 1);
  invalid_at(overwrite_list(1, {}), 2);                                  // INITIALIZATION PATTERN LENGTH 0
  invalid_at(overwrite_list(1, std::vector<std::byte>(bs + 1)), 2);     // longer than a block
  auto short_list = overwrite_list(1, pattern);
  short_list.pop_back();                                                  // length says 3, 2 arrive
  invalid_at(short_list, 2);
}

TEST(SanitizeCdb, OverwritePassesAndBlocks) {
  // SBC-4 §5.30.2.2: with INVERT the first pass is inverted when the count is even; the last pass
  // always writes the pattern itself.
  EXPECT_FALSE(detail::overwrite_pass_inverted(true, 1, 0));
  EXPECT_TRUE(detail::overwrite_pass_inverted(true, 2, 0));
  EXPECT_FALSE(detail::overwrite_pass_inverted(true, 2, 1));
  EXPECT_FALSE(detail::overwrite_pass_inverted(true, 3, 0));
  EXPECT_TRUE(detail::overwrite_pass_inverted(true, 3, 1));
  EXPECT_FALSE(detail::overwrite_pass_inverted(false, 2, 0));
  const std::vector<std::byte> pattern{std::byte{1}, std::byte{2}, std::byte{3}};
  const auto block = detail::overwrite_block(pattern, bs, false);
  ASSERT_EQ(block.size(), bs);
  EXPECT_EQ(block[0], std::byte{1});
  EXPECT_EQ(block[3], std::byte{1});
  EXPECT_EQ(block[bs - 1], pattern[(bs - 1) % 3]);  // cut at the block's end
  EXPECT_EQ(detail::overwrite_block(pattern, bs, true)[1], std::byte{0xfd});
}

/// A backend decorator that holds every write while `hold` is set (a sanitize operation that is
/// visibly in progress) and fails writes with `fail_writes` (EIO) when set.
class GatedBackend final : public BlockBackend {
 public:
  explicit GatedBackend(std::shared_ptr<BlockBackend> inner) : inner_(std::move(inner)) {}
  const BackendCapabilities& capabilities() const noexcept override { return inner_->capabilities(); }
  Awaitable<Result<void>> read(std::uint64_t o, ByteSpan b) override { co_return co_await inner_->read(o, b); }
  Awaitable<Result<void>> write(std::uint64_t o, ConstByteSpan b, Fua f) override {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    while (hold) {
      timer.expires_after(std::chrono::milliseconds(1));
      boost::system::error_code ec;
      co_await timer.async_wait(use_awaitable_ec(ec));
    }
    ++writes;
    if (fail_writes) co_return fail(std::make_error_code(std::errc::io_error));
    co_return co_await inner_->write(o, b, f);
  }
  Awaitable<Result<void>> flush() override { co_return co_await inner_->flush(); }
  Awaitable<Result<void>> discard(std::uint64_t o, std::uint64_t n) override { co_return co_await inner_->discard(o, n); }
  Awaitable<Result<void>> write_zeroes(std::uint64_t o, std::uint64_t n, Fua f) override {
    co_return co_await inner_->write_zeroes(o, n, f);
  }
  Awaitable<Result<AllocationExtent>> allocation(std::uint64_t o, std::uint64_t n) override {
    co_return co_await inner_->allocation(o, n);
  }
  bool hold = false;
  bool fail_writes = false;
  int writes = 0;

 private:
  std::shared_ptr<BlockBackend> inner_;
};

class Sanitize : public ::testing::Test {
 protected:
  void SetUp() override { make_lun({}); }

  void make_lun(LogicalUnitOptions options) {
    memory = make_memory_backend({.size_bytes = lun_bytes, .block_size_bytes = bs});
    gated = std::make_shared<GatedBackend>(memory);
    dispatcher = std::make_unique<ScsiDispatcher>();
    ASSERT_TRUE(dispatcher->add_logical_unit(0, std::make_shared<LogicalUnit>(gated, std::move(options))));
    nexus = dispatcher->open_nexus("iqn.test,i,0x1");
    (void)command(raw({0x00}));  // clear POWER ON, RESET
  }

  test::CommandRun command(const scsi::Cdb& cdb, const std::vector<std::byte>& data = {}, NexusId from = {}) {
    return test::run_command(ctx, *dispatcher, from.value == 0 ? nexus : from, Lun{}, cdb, data);
  }

  /// Plans and starts `cdb` without waiting for the io_context to run out of work (a held
  /// sanitize operation keeps it busy); returns the outcome once it is there (pumping up to 5 s).
  struct Started {
    scsi::Cdb cdb;  // execute() reads it until it completes
    CommandPlan plan;
    std::vector<std::byte> buffer;
    std::optional<ScsiOutcome> outcome;
  };
  std::shared_ptr<Started> start(const scsi::Cdb& cdb, const std::vector<std::byte>& data = {}) {
    auto s = std::make_shared<Started>();
    s->cdb = cdb;
    s->plan = dispatcher->plan(nexus, Lun{}, s->cdb.span());
    if (s->plan.rejected()) {
      s->outcome = s->plan.early_outcome();
      return s;
    }
    s->buffer = data;
    s->buffer.resize(s->plan.transfer_length_bytes);
    asio::co_spawn(ctx, dispatcher->execute(nexus, Lun{}, s->cdb.span(), s->plan, s->buffer),
                   [s](std::exception_ptr, ScsiOutcome o) { s->outcome = o; });
    return s;
  }
  template <class Pred>
  bool pump(Pred done) {
    ctx.restart();
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done() && std::chrono::steady_clock::now() < until) ctx.run_one_for(std::chrono::milliseconds(5));
    return done();
  }
  /// Runs the io_context for about 50 ms.
  void settle() {
    ctx.restart();
    for (int i = 0; i < 10; ++i) ctx.run_one_for(std::chrono::milliseconds(5));
  }
  ScsiOutcome finish(const std::shared_ptr<Started>& s) {
    EXPECT_TRUE(pump([&] { return s->outcome.has_value(); }));
    return s->outcome.value_or(ScsiOutcome::good());
  }

  std::vector<std::byte> read_blocks(std::uint64_t lba, std::uint32_t blocks) {
    auto r = command(read16(lba, blocks));
    EXPECT_EQ(r.outcome.status, Status::good);
    return r.data_in;
  }

  asio::io_context ctx;
  std::shared_ptr<BlockBackend> memory;
  std::shared_ptr<GatedBackend> gated;
  std::unique_ptr<ScsiDispatcher> dispatcher;
  NexusId nexus;
};

TEST_F(Sanitize, OverwriteWritesThePatternEverywhere) {
  std::vector<std::byte> junk(bs, std::byte{'a'});
  ASSERT_EQ(command(write16(lun_blocks - 1, 1), junk).outcome.status, Status::good);
  gated->writes = 0;
  // Two passes with INVERT: the first writes ~pattern, the last the pattern itself.
  const std::vector<std::byte> pattern{std::byte{0x12}, std::byte{0x34}, std::byte{0x56}};
  const auto list = overwrite_list(0x80 | 2, pattern);
  const auto r = command(sanitize(0x01, static_cast<std::uint16_t>(list.size())), list);
  ASSERT_EQ(r.plan.direction, DataDirection::to_target);
  EXPECT_TRUE(r.plan.exact_data_out);
  ASSERT_EQ(r.outcome.status, Status::good);
  EXPECT_EQ(gated->writes, 2 * 4);  // 4 MiB in 1 MiB steps, twice
  const auto block = detail::overwrite_block(pattern, bs, false);
  EXPECT_EQ(read_blocks(0, 1), block);
  EXPECT_EQ(read_blocks(lun_blocks - 1, 1), block);
  EXPECT_EQ(read_blocks(lun_blocks / 2, 1), block);
}

TEST_F(Sanitize, BlockEraseDeallocatesAndIsAdvertised) {
  std::vector<std::byte> junk(8 * bs, std::byte{'a'});
  ASSERT_EQ(command(write16(0, 8), junk).outcome.status, Status::good);
  ASSERT_EQ(command(write16(lun_blocks - 8, 8), junk).outcome.status, Status::good);
  ASSERT_EQ(command(sanitize(0x02)).outcome.status, Status::good);
  EXPECT_EQ(read_blocks(0, 8), std::vector<std::byte>(8 * bs));
  EXPECT_EQ(read_blocks(lun_blocks - 8, 8), std::vector<std::byte>(8 * bs));
  // Deallocated, not written: the memory LU holds no chunk any more.
  auto extent = test::run(ctx, memory->allocation(0, lun_bytes));
  ASSERT_TRUE(extent);
  EXPECT_FALSE(extent->allocated);
  EXPECT_EQ(extent->length_bytes, lun_bytes);
  // VPD 0xb1: WABEREQ 01b (an erased block reads GOOD), WACEREQ 0 (no CRYPTOGRAPHIC ERASE).
  auto vpd = command(raw({0x12, 0x01, 0xb1, 0, 0xff}));
  ASSERT_EQ(vpd.outcome.status, Status::good);
  const auto b1 = scsi::parse_block_device_characteristics(vpd.data_in);
  ASSERT_TRUE(b1);
  EXPECT_EQ(b1->wabereq, 1);
  EXPECT_EQ(b1->wacereq, 0);
  // REPORT SUPPORTED OPERATION CODES, one command (REPORTING OPTIONS 011b): SANITIZE 01h, 02h and
  // 1Fh are supported (SUPPORT 011b), 03h is not (001b).
  const auto support = [&](unsigned sa) {
    scsi::Cdb c = raw({0xa3, 0x0c, 0x03, 0x48});
    store_be16(c.bytes.data() + 4, static_cast<std::uint16_t>(sa));
    store_be32(c.bytes.data() + 6, 64);
    auto r = command(c);
    EXPECT_EQ(r.outcome.status, Status::good);
    return r.data_in.empty() ? -1 : static_cast<int>(r.data_in[1]) & 0x07;
  };
  EXPECT_EQ(support(0x01), 3);
  EXPECT_EQ(support(0x02), 3);
  EXPECT_EQ(support(0x1f), 3);
  EXPECT_EQ(support(0x03), 1);
}

TEST_F(Sanitize, InProgressRefusesMediaAccessAndReportsProgress) {
  gated->hold = true;
  const auto list = overwrite_list(1, {std::byte{0xaa}});
  auto s = start(sanitize(0x80 | 0x01, static_cast<std::uint16_t>(list.size())), list);
  // IMMED = 1: GOOD once the CDB and parameter list are checked, the operation still held.
  ASSERT_EQ(finish(s).status, Status::good);
  for (const auto& cdb : {raw({0x00}), read16(0, 1), raw({0x1b, 0, 0, 0, 1}), sanitize(0x02)}) {
    const auto plan = dispatcher->plan(nexus, Lun{}, cdb.span());
    ASSERT_TRUE(plan.error) << static_cast<int>(cdb.bytes[0]);
    EXPECT_EQ(plan.error->key, SenseKey::not_ready);
    EXPECT_EQ(plan.error->asc_pair(), detail::logical_unit_not_ready_sanitize_in_progress);
    ASSERT_TRUE(plan.error->sense_key_specific);
    EXPECT_EQ((*plan.error->sense_key_specific)[0], 0x80);  // SKSV: a progress indication follows
  }
  // INQUIRY, REPORT LUNS and REQUEST SENSE run; REQUEST SENSE gives the progress.
  EXPECT_EQ(finish(start(raw({0x12, 0, 0, 0, 36}))).status, Status::good);
  EXPECT_EQ(finish(start(raw({0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0}))).status, Status::good);
  gated->hold = false;
  ASSERT_TRUE(pump([&] { return gated->writes >= 2; }));
  gated->hold = true;
  auto sense = start(raw({0x03, 0, 0, 0, 18}));
  ASSERT_EQ(finish(sense).status, Status::good);
  const auto decoded = scsi::decode_sense(sense->buffer);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->key, SenseKey::not_ready);
  EXPECT_EQ(decoded->asc_pair(), detail::logical_unit_not_ready_sanitize_in_progress);
  ASSERT_TRUE(decoded->sense_key_specific);
  const unsigned progress = (*decoded->sense_key_specific)[1] << 8 | (*decoded->sense_key_specific)[2];
  EXPECT_GE(progress, 0x4000u);  // at least one of four steps done
  EXPECT_LT(progress, 0x10000u);
  // Done: the LU is ready again and the medium holds the pattern.
  gated->hold = false;
  ASSERT_TRUE(pump([&] { return !dispatcher->plan(nexus, Lun{}, raw({0x00}).span()).error; }));
  EXPECT_EQ(read_blocks(lun_blocks - 1, 1), std::vector<std::byte>(bs, std::byte{0xaa}));
}

TEST_F(Sanitize, AbortedWaitEndsButTheOperationGoesOn) {
  gated->hold = true;
  const auto list = overwrite_list(1, {std::byte{0x5a}});
  auto s = start(sanitize(0x01, static_cast<std::uint16_t>(list.size())), list);  // IMMED = 0
  settle();
  EXPECT_FALSE(s->outcome);  // waits for the held operation
  s->plan.abort_requested = true;  // what the transport does on ABORT TASK or the session's end
  ASSERT_TRUE(pump([&] { return s->outcome.has_value(); }));
  EXPECT_TRUE(dispatcher->plan(nexus, Lun{}, raw({0x00}).span()).error);  // still in progress
  gated->hold = false;
  ASSERT_TRUE(pump([&] { return !dispatcher->plan(nexus, Lun{}, raw({0x00}).span()).error; }));
  EXPECT_EQ(read_blocks(0, 1), std::vector<std::byte>(bs, std::byte{0x5a}));
}

TEST_F(Sanitize, FailureModeRestrictedAndUnrestricted) {
  const auto list = overwrite_list(1, {std::byte{0x11}});
  const auto length = static_cast<std::uint16_t>(list.size());
  gated->fail_writes = true;
  auto r = command(sanitize(0x01, length), list);  // AUSE = 0: restricted completion
  ASSERT_EQ(r.outcome.status, Status::check_condition);
  EXPECT_EQ(r.outcome.sense->key, SenseKey::medium_error);
  EXPECT_EQ(r.outcome.sense->asc_pair(), detail::sanitize_command_failed);
  // The failure mode: media access fails, INQUIRY and REQUEST SENSE work.
  auto read = command(read16(0, 1));
  ASSERT_EQ(read.outcome.status, Status::check_condition);
  EXPECT_EQ(read.outcome.sense->asc_pair(), detail::sanitize_command_failed);
  EXPECT_EQ(command(raw({0x12, 0, 0, 0, 36})).outcome.status, Status::good);
  auto sense = command(raw({0x03, 0, 0, 0, 18}));
  EXPECT_EQ(scsi::decode_sense(sense.data_in)->asc_pair(), detail::sanitize_command_failed);
  // SBC-4 §5.30.1: after AUSE = 0 neither EXIT FAILURE MODE nor a sanitize with AUSE = 1 is taken.
  EXPECT_EQ(command(sanitize(0x1f)).outcome.sense->asc_pair(), scsi::asc::invalid_field_in_cdb);
  EXPECT_EQ(command(sanitize(0x20 | 0x01, length), list).outcome.sense->asc_pair(), scsi::asc::invalid_field_in_cdb);
  // A new sanitize with AUSE = 1 that fails leaves the unrestricted mode ...
  gated->fail_writes = false;
  ASSERT_EQ(command(sanitize(0x01, length), list).outcome.status, Status::good);  // AUSE 0, succeeds
  EXPECT_EQ(command(read16(0, 1)).outcome.status, Status::good);
  gated->fail_writes = true;
  EXPECT_EQ(command(sanitize(0x20 | 0x02)).outcome.status, Status::good);  // BLOCK ERASE does not write
  EXPECT_EQ(command(sanitize(0x20 | 0x01, length), list).outcome.status, Status::check_condition);
  // ... which EXIT FAILURE MODE ends.
  EXPECT_EQ(command(sanitize(0x1f)).outcome.status, Status::good);
  EXPECT_EQ(command(read16(0, 1)).outcome.status, Status::good);
  EXPECT_EQ(command(sanitize(0x1f)).outcome.status, Status::good);  // nothing to leave: GOOD
}

TEST_F(Sanitize, WriteProtectionAndReservations) {
  make_lun({.read_only = true});
  const auto list = overwrite_list(1, {std::byte{0x11}});
  auto r = command(sanitize(0x01, static_cast<std::uint16_t>(list.size())), list);
  ASSERT_EQ(r.outcome.status, Status::check_condition);
  EXPECT_EQ(r.outcome.sense->key, SenseKey::data_protect);
  EXPECT_EQ(command(sanitize(0x02)).outcome.sense->key, SenseKey::data_protect);
  EXPECT_EQ(command(sanitize(0x1f)).outcome.status, Status::good);  // changes nothing on the medium
  make_lun({});
  const auto other = dispatcher->open_nexus("iqn.other,i,0x2");
  (void)command(raw({0x00}), {}, other);
  ASSERT_EQ(command(raw({0x16}), {}, other).outcome.status, Status::good);  // RESERVE(6)
  EXPECT_EQ(command(sanitize(0x02)).outcome.status, Status::reservation_conflict);
  EXPECT_EQ(gated->writes, 0);
}

TEST_F(Sanitize, PacedOperationTakesItsTime) {
  make_lun({.sanitize_bytes_per_second = 40u << 20});  // 4 MiB at 40 MiB/s: about 100 ms
  const auto list = overwrite_list(1, {std::byte{0x33}});
  const auto begin = std::chrono::steady_clock::now();
  ASSERT_EQ(command(sanitize(0x01, static_cast<std::uint16_t>(list.size())), list).outcome.status, Status::good);
  EXPECT_GE(std::chrono::steady_clock::now() - begin, std::chrono::milliseconds(90));
  EXPECT_EQ(read_blocks(lun_blocks - 1, 1), std::vector<std::byte>(bs, std::byte{0x33}));
}

TEST_F(Sanitize, StopBackgroundOperationsEndsItInTheFailureMode) {
  gated->hold = true;
  const auto list = overwrite_list(1, {std::byte{0x22}});
  auto s = start(sanitize(0x01, static_cast<std::uint16_t>(list.size())), list);
  ASSERT_TRUE(pump([&] { return dispatcher->plan(nexus, Lun{}, raw({0x00}).span()).error.has_value(); }));
  dispatcher->stop_background_operations();
  gated->hold = false;
  const auto outcome = finish(s);
  ASSERT_EQ(outcome.status, Status::check_condition);
  EXPECT_EQ(outcome.sense->asc_pair(), detail::sanitize_command_failed);
  EXPECT_LE(gated->writes, 1);  // at most the step under way, no more
  EXPECT_EQ(dispatcher->plan(nexus, Lun{}, raw({0x00}).span()).error->asc_pair(), detail::sanitize_command_failed);
}

}  // namespace
}  // namespace iserkit::target
