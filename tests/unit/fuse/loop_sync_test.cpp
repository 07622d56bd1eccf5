// BlockRangeLock and SingleFlight on one io_context: overlapping write ranges are serialized in
// arrival order, disjoint ones run together, and a read-modify-write under the lock loses no update.
#include "fuse_fs/loop_sync.hpp"

#include <gtest/gtest.h>

#include <initializer_list>
#include <optional>
#include <vector>

namespace iserkit::fuse_fs {
namespace {

// Runs whatever is ready (restart: a poll that ran out of work leaves the io_context stopped).
void drain(asio::io_context& io) {
  io.restart();
  io.poll();
}

// Holds [first, last] until `release` completes; records when it got the range.
struct Holder {
  std::uint64_t first, last;
  bool got = false;
  Completion release;
};

void hold(asio::io_context& io, BlockRangeLock& lock, Holder& h) {
  asio::co_spawn(
      io,
      [&lock, &h]() -> Awaitable<void> {
        auto guard = co_await lock.lock(h.first, h.last);
        h.got = true;
        co_await h.release.wait();
      },
      asio::detached);
}

// Asks for each holder's range in turn, then runs what is ready.
void hold_all(asio::io_context& io, BlockRangeLock& lock, std::initializer_list<Holder*> holders) {
  for (Holder* h : holders) hold(io, lock, *h);
  drain(io);
}

// Releases the holders' ranges, runs what that wakes and checks that the lock is left empty.
void release_all(asio::io_context& io, BlockRangeLock& lock, std::initializer_list<Holder*> holders) {
  for (Holder* h : holders) h->release.complete();
  drain(io);
  EXPECT_EQ(lock.size(), 0u);
}

TEST(BlockRangeLock, DisjointRangesAreHeldTogether) {
  asio::io_context io;
  BlockRangeLock lock;
  Holder a{0, 3}, b{4, 7}, c{100, 100};
  hold_all(io, lock, {&a, &b, &c});
  EXPECT_TRUE(a.got && b.got && c.got);
  EXPECT_EQ(lock.held(), 3u);
  release_all(io, lock, {&a, &b, &c});
}

TEST(BlockRangeLock, OverlappingRangeWaitsForRelease) {
  asio::io_context io;
  BlockRangeLock lock;
  Holder a{0, 3}, b{3, 5};
  hold_all(io, lock, {&a, &b});
  EXPECT_TRUE(a.got);
  EXPECT_FALSE(b.got);  // block 3 is shared
  EXPECT_EQ(lock.held(), 1u);
  a.release.complete();
  drain(io);
  EXPECT_TRUE(b.got);
  release_all(io, lock, {&b});
}

TEST(BlockRangeLock, WaitersAreServedInArrivalOrder) {
  asio::io_context io;
  BlockRangeLock lock;
  Holder a{0, 3}, b{3, 4}, c{4, 6}, d{10, 11};
  hold_all(io, lock, {&a});
  hold_all(io, lock, {&b});
  hold_all(io, lock, {&c, &d});  // c does not overlap a, but overlaps b which asked first; d overlaps nobody
  EXPECT_TRUE(a.got);
  EXPECT_FALSE(b.got);
  EXPECT_FALSE(c.got);
  EXPECT_TRUE(d.got);
  a.release.complete();
  drain(io);
  EXPECT_TRUE(b.got);
  EXPECT_FALSE(c.got);
  b.release.complete();
  drain(io);
  EXPECT_TRUE(c.got);
  release_all(io, lock, {&c, &d});
}

TEST(BlockRangeLock, GuardMoveKeepsOneRelease) {
  asio::io_context io;
  BlockRangeLock lock;
  bool done = false;
  asio::co_spawn(
      io,
      [&]() -> Awaitable<void> {
        auto g1 = co_await lock.lock(0, 0);
        BlockRangeLock::Guard g2 = std::move(g1);
        EXPECT_FALSE(g1.owns());
        EXPECT_TRUE(g2.owns());
        EXPECT_EQ(lock.held(), 1u);
        g2.release();
        EXPECT_EQ(lock.size(), 0u);
        g2.release();  // second release is a no-op
        done = true;
      },
      asio::detached);
  io.run();
  EXPECT_TRUE(done);
}

// Two writers patch different bytes of the same 8-byte "block" by read-modify-write, suspending
// between the read and the write (as a SCSI READ then WRITE would). Under the lock both patches
// survive; this is what the FUSE view relies on for unaligned writes.
TEST(BlockRangeLock, ReadModifyWriteLosesNoUpdate) {
  asio::io_context io;
  BlockRangeLock lock;
  std::vector<int> block(8, 0);
  auto writer = [&](std::size_t at, int value) -> Awaitable<void> {
    auto guard = co_await lock.lock(0, 0);
    std::vector<int> copy = block;                                // READ
    co_await asio::post(io.get_executor(), asio::use_awaitable);  // the round trip
    copy[at] = value;                                             // modify
    block = copy;                                                 // WRITE
  };
  for (int i = 0; i < 8; ++i) asio::co_spawn(io, writer(static_cast<std::size_t>(i), i + 1), asio::detached);
  io.run();
  EXPECT_EQ(block, (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(SingleFlight, WaitersResumeWhenTheStepFinishes) {
  asio::io_context io;
  SingleFlight flight;
  int woken = 0;
  // A waiter that counts itself woken once wait() returns.
  const auto spawn_waiter = [&] {
    asio::co_spawn(
        io,
        [&]() -> Awaitable<void> {
          co_await flight.wait();
          ++woken;
        },
        asio::detached);
  };
  EXPECT_FALSE(flight.running());
  flight.start();
  for (int i = 0; i < 3; ++i) spawn_waiter();
  drain(io);
  EXPECT_EQ(woken, 0);
  flight.finish();
  drain(io);
  EXPECT_EQ(woken, 3);
  EXPECT_FALSE(flight.running());
  // Not running: wait() returns at once.
  spawn_waiter();
  drain(io);
  EXPECT_EQ(woken, 4);
}

}  // namespace
}  // namespace iserkit::fuse_fs
