// Test helpers for the target SCSI layer: run an awaitable to completion on a private io_context,
// run one command through a ScsiDispatcher, and a BlockBackend decorator that counts calls (to prove a command never reached the backend).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <optional>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/scsi/cdb.hpp"
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

/// Forwards to another backend and counts each kind of call.
class CountingBackend final : public BlockBackend {
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

 private:
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

}  // namespace iserkit::target::test
