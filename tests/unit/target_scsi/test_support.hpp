// Test helpers for the target SCSI layer: run an awaitable to completion on a private io_context,
// build CDBs from their bytes, run one command through a ScsiDispatcher, and BlockBackend decorators
// that count calls (to prove a command never reached the backend) or hook reads (to abort a copy).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/scsi/cdb.hpp"
#include "iserkit/target/backends.hpp"
#include "iserkit/target/block_backend.hpp"
#include "iserkit/target/scsi_dispatcher.hpp"

namespace iserkit::target::test {

/// Runs `a` on `ctx` (this thread only) and returns its value; rethrows its exception.
template <class T>
T run(asio::io_context& ctx, Awaitable<T> a) {
  std::optional<T> out;
  std::exception_ptr error;
  asio::co_spawn(ctx, std::move(a), [&](std::exception_ptr e, T v) {
    error = e;
    if (!e) out = std::move(v);
  });
  ctx.restart();
  ctx.run();
  if (error) std::rethrow_exception(error);
  return std::move(*out);
}

/// A temporary LUN file of `bytes` in `dir`, named iserkit-`tag`-XXXXXX (removed at the end);
/// `path` stays empty when it could not be made.
struct TempLun {
  TempLun(const char* dir, std::uint64_t bytes, const char* tag) {
    std::string tmpl = std::string(dir) + "/iserkit-" + tag + "-XXXXXX";
    const int fd = ::mkstemp(tmpl.data());
    if (fd < 0) return;
    if (::ftruncate(fd, static_cast<off_t>(bytes)) == 0) path = tmpl;
    ::close(fd);
  }
  ~TempLun() {
    if (!path.empty()) ::unlink(path.c_str());
  }
  TempLun(const TempLun&) = delete;
  TempLun& operator=(const TempLun&) = delete;
  std::string path;
};

/// Why a test of io_uring file LUNs in `dir` cannot run here; empty when it can.
inline std::string uring_file_skip_reason(const char* dir) {
  if (auto r = probe_io_uring(); !r) return "io_uring unavailable: " + r.error().message();
  return ::access(dir, W_OK) == 0 ? std::string{} : std::string("no writable ") + dir;
}

/// A CDB from its bytes; the length comes from the opcode's group (zero-filled).
inline scsi::Cdb raw(std::initializer_list<unsigned> bytes) {
  scsi::Cdb c;
  std::size_t i = 0;
  for (auto b : bytes) c.bytes[i++] = static_cast<std::byte>(b);
  c.length = static_cast<std::uint8_t>(scsi::cdb_length_for(static_cast<std::uint8_t>(c.bytes[0])));
  return c;
}

/// A 16-byte CDB with an 8-byte LBA at byte 2 and a 4-byte length at byte 10 (READ/WRITE/VERIFY (16), ...).
inline scsi::Cdb lba16(unsigned opcode, std::uint64_t lba, std::uint32_t blocks, unsigned byte1 = 0) {
  scsi::Cdb c = raw({opcode, byte1});
  store_be64(c.bytes.data() + 2, lba);
  store_be32(c.bytes.data() + 10, blocks);
  return c;
}

/// COMPARE AND WRITE (SBC-4 §5.2): LBA at byte 2, NUMBER OF LOGICAL BLOCKS at byte 13.
inline scsi::Cdb compare_and_write(std::uint64_t lba, std::uint8_t blocks) {
  scsi::Cdb c = raw({0x89});
  store_be64(c.bytes.data() + 2, lba);
  c.bytes[13] = std::byte{blocks};
  return c;
}

/// Calls `on_read` before every read it forwards (to abort a copy between its chunks); with
/// `fail_reads` every read fails with EIO.
class HookedBackend final : public BlockBackend {
 public:
  explicit HookedBackend(std::shared_ptr<BlockBackend> inner) : inner_(std::move(inner)) {}
  const BackendCapabilities& capabilities() const noexcept override { return inner_->capabilities(); }
  Awaitable<Result<void>> read(std::uint64_t o, ByteSpan b) override {
    if (on_read) on_read();
    if (fail_reads) co_return fail(std::make_error_code(std::errc::io_error));
    co_return co_await inner_->read(o, b);
  }
  Awaitable<Result<void>> write(std::uint64_t o, ConstByteSpan b, Fua f) override { co_return co_await inner_->write(o, b, f); }
  Awaitable<Result<void>> flush() override { co_return co_await inner_->flush(); }
  Awaitable<Result<void>> discard(std::uint64_t o, std::uint64_t n) override { co_return co_await inner_->discard(o, n); }
  Awaitable<Result<void>> write_zeroes(std::uint64_t o, std::uint64_t n, Fua f) override {
    co_return co_await inner_->write_zeroes(o, n, f);
  }
  std::function<void()> on_read;
  bool fail_reads = false;

 private:
  std::shared_ptr<BlockBackend> inner_;
};

/// Forwards to another backend and counts each kind of call (a test's own double may derive from
/// it to keep the counts and change some calls).
class CountingBackend : public BlockBackend {
 public:
  explicit CountingBackend(std::shared_ptr<BlockBackend> inner) : inner_(std::move(inner)) {}
  const BackendCapabilities& capabilities() const noexcept override { return inner_->capabilities(); }
  Awaitable<Result<void>> read(std::uint64_t o, ByteSpan b) override {
    ++reads;
    co_return co_await inner_->read(o, b);
  }
  Awaitable<Result<void>> write(std::uint64_t o, ConstByteSpan b, Fua f) override {
    ++writes;
    if (f == Fua::yes) ++fua_writes;
    co_return co_await inner_->write(o, b, f);
  }
  Awaitable<Result<void>> flush() override {
    ++flushes;
    co_return co_await inner_->flush();
  }
  Awaitable<Result<void>> discard(std::uint64_t o, std::uint64_t n) override {
    ++discards;
    co_return co_await inner_->discard(o, n);
  }
  Awaitable<Result<void>> write_zeroes(std::uint64_t o, std::uint64_t n, Fua f) override {
    ++zero_writes;
    co_return co_await inner_->write_zeroes(o, n, f);
  }
  Awaitable<Result<AllocationExtent>> allocation(std::uint64_t o, std::uint64_t n) override {
    co_return co_await inner_->allocation(o, n);
  }
  [[nodiscard]] int total() const noexcept { return reads + writes + flushes + discards + zero_writes; }

  int reads = 0, writes = 0, fua_writes = 0, flushes = 0, discards = 0, zero_writes = 0;

 protected:
  std::shared_ptr<BlockBackend> inner_;
};

/// What one command through a ScsiDispatcher gave: its plan, its outcome and its Data-In.
struct CommandRun {
  CommandPlan plan;
  ScsiOutcome outcome;
  std::vector<std::byte> data_in;
};

/// Plans `cdb` for `nexus` on `lun` and, unless the plan is rejected, executes it on `ctx`;
/// `data_out` is a to_target command's Data-Out (its size must be the plan's transfer length).
inline CommandRun run_command(asio::io_context& ctx, ScsiDispatcher& dispatcher, NexusId nexus, scsi::Lun lun,
                              const scsi::Cdb& cdb, const std::vector<std::byte>& data_out = {}) {
  CommandRun r;
  r.plan = dispatcher.plan(nexus, lun, cdb.span());
  if (r.plan.rejected()) {
    r.outcome = r.plan.early_outcome();
    return r;
  }
  std::vector<std::byte> buffer(r.plan.transfer_length_bytes);
  if (r.plan.direction == DataDirection::to_target) {
    EXPECT_EQ(data_out.size(), buffer.size());
    std::copy_n(data_out.begin(), std::min(data_out.size(), buffer.size()), buffer.begin());
  }
  r.outcome = run(ctx, dispatcher.execute(nexus, lun, cdb.span(), r.plan, buffer));
  if (r.plan.direction == DataDirection::from_target) {
    buffer.resize(r.outcome.data_length_bytes);
    r.data_in = std::move(buffer);
  }
  return r;
}

/// Two logical units on memory backends, each behind a HookedBackend and a CountingBackend (LUN 0
/// the copy's source, LUN 1 its destination, read-only with `read_only_destination`), and two
/// nexuses with their unit attentions cleared: the fixture of the copy-offload tests
/// (extended_copy_test.cpp, token_copy_test.cpp).
class TwoUnitCopy : public ::testing::Test {
 protected:
  TwoUnitCopy(std::uint64_t lun_bytes, std::uint32_t block) : lun_bytes_(lun_bytes), block_(block) {}

  /// Adds LUN 0 and 1, their serial numbers `serial_prefix` + "0" and + "1".
  void add_units(const std::string& serial_prefix) {
    for (int i = 0; i < 2; ++i) {
      hooked[i] = std::make_shared<HookedBackend>(make_memory_backend({.size_bytes = lun_bytes_, .block_size_bytes = block_}));
      counting[i] = std::make_shared<CountingBackend>(hooked[i]);
      LogicalUnitOptions o;
      o.identity.serial = serial_prefix + std::to_string(i);
      o.read_only = i == 1 && read_only_destination;
      units[i] = std::make_shared<LogicalUnit>(counting[i], std::move(o));
      ASSERT_TRUE(dispatcher.add_logical_unit(static_cast<std::uint16_t>(i), units[i]));
    }
  }
  /// Opens `nexus` (from 192.0.2.1) and `other` (from `other_origin`) and takes the POWER ON /
  /// RESET unit attention of both units on each.
  void open_nexuses(std::string other_origin) {
    nexus = dispatcher.open_nexus("iqn.test:a,i,0x1", {}, "192.0.2.1");
    other = dispatcher.open_nexus("iqn.test:b,i,0x2", {}, std::move(other_origin));
    for (auto n : {nexus, other})
      for (int i = 0; i < 2; ++i) (void)command(raw({0x00}), {}, n, i);  // clear POWER ON, RESET
  }

  /// Runs `cdb` on LUN `lun` from `from` (default: `nexus`).
  CommandRun command(const scsi::Cdb& cdb, const std::vector<std::byte>& data = {}, NexusId from = {}, int lun = 0) {
    return run_command(ctx, dispatcher, from.value == 0 ? nexus : from, scsi::Lun::from_index(static_cast<std::uint16_t>(lun)),
                       cdb, data);
  }
  /// WRITE (16) of `blocks` blocks at `lba` with a pattern that differs per block and per `seed`.
  void write_pattern(int lun, std::uint64_t lba, std::uint32_t blocks, unsigned seed) {
    std::vector<std::byte> data(std::size_t{blocks} * block_);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = std::byte((i / block_ * 7 + seed + i) & 0xff);
    ASSERT_EQ(command(lba16(0x8a, lba, blocks), data, {}, lun).outcome.status, scsi::Status::good);
  }
  /// READ (16) of `blocks` blocks at `lba`.
  std::vector<std::byte> read(int lun, std::uint64_t lba, std::uint32_t blocks) {
    auto r = command(lba16(0x88, lba, blocks), {}, {}, lun);
    EXPECT_EQ(r.outcome.status, scsi::Status::good);
    return r.data_in;
  }

  /// REPORT SUPPORTED OPERATION CODES (reporting options 010b: one command with its service action,
  /// SPC-5 §6.35) says SUPPORT 011b (supported as the standard says) for each (opcode, service action).
  void expect_supported_as_standard(std::initializer_list<std::pair<unsigned, unsigned>> commands) {
    for (auto [opcode, sa] : commands) {
      scsi::Cdb c = raw({0xa3, 0x0c, 0x02, opcode});
      store_be16(c.bytes.data() + 4, static_cast<std::uint16_t>(sa));
      store_be32(c.bytes.data() + 6, 64);
      auto r = command(c);
      ASSERT_EQ(r.outcome.status, scsi::Status::good) << opcode << "/" << sa;
      EXPECT_EQ(load_u8(r.data_in.data() + 1) & 0x07, 0x03) << opcode << "/" << sa;
    }
  }

  /// What an interrupted copy gave: its outcome, and how many writes it made to LUN 1.
  struct Interrupted {
    ScsiOutcome outcome;
    int destination_writes = 0;
  };
  /// Plans and executes the copy `cdb` (Data-Out `list`) on `lun` from `nexus`, calling
  /// `at_second_read(plan)` as the copy reads LUN 0 the second time (between its first and second
  /// chunk): where a transport's abort or another nexus's reset comes in.
  Interrupted run_interrupted(const scsi::Cdb& cdb, const std::vector<std::byte>& list, scsi::Lun lun,
                              const std::function<void(CommandPlan&)>& at_second_read) {
    CommandPlan plan = dispatcher.plan(nexus, lun, cdb.span());
    EXPECT_FALSE(plan.rejected());
    if (plan.rejected()) return {plan.early_outcome()};
    int reads = 0;
    hooked[0]->on_read = [&] {
      if (++reads == 2) at_second_read(plan);
    };
    std::vector<std::byte> buffer = list;
    const int writes = counting[1]->writes;
    Interrupted r{.outcome = run(ctx, dispatcher.execute(nexus, lun, cdb.span(), plan, buffer))};
    hooked[0]->on_read = nullptr;
    r.destination_writes = counting[1]->writes - writes;
    return r;
  }

  bool read_only_destination = false;
  asio::io_context ctx;
  ScsiDispatcher dispatcher;
  std::shared_ptr<HookedBackend> hooked[2];
  std::shared_ptr<CountingBackend> counting[2];
  std::shared_ptr<LogicalUnit> units[2];
  NexusId nexus, other;

 private:
  std::uint64_t lun_bytes_;
  std::uint32_t block_;
};

}  // namespace iserkit::target::test
