// PayloadBudget / SharedPayloadBudget (target/src/payload_budget.hpp) and ConnectionAdmission
// (target/src/admission.hpp): the pure bookkeeping behind the target's resource bounds.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "admission.hpp"
#include "payload_budget.hpp"

namespace iserkit::target {
namespace {

constexpr std::uint64_t MiB = 1 << 20;

TEST(PayloadBudget, GrantsWhileBytesFit) {
  PayloadBudget b(64 * MiB);
  EXPECT_TRUE(b.request(1, 32 * MiB));
  EXPECT_TRUE(b.request(2, 32 * MiB));
  EXPECT_FALSE(b.request(3, 1));
  EXPECT_EQ(b.used(), 64 * MiB);
  EXPECT_EQ(b.queued(), 1u);
}

TEST(PayloadBudget, ReleaseGrantsQueuedRequestsInOrder) {
  PayloadBudget b(64 * MiB);
  ASSERT_TRUE(b.request(1, 64 * MiB));
  EXPECT_FALSE(b.request(2, 32 * MiB));
  EXPECT_FALSE(b.request(3, 16 * MiB));
  EXPECT_FALSE(b.request(4, 32 * MiB));
  EXPECT_EQ(b.release(64 * MiB), (std::vector<std::uint64_t>{2, 3}));
  EXPECT_EQ(b.used(), 48 * MiB);
  EXPECT_EQ(b.release(32 * MiB), (std::vector<std::uint64_t>{4}));
  EXPECT_EQ(b.used(), 48 * MiB);
}

TEST(PayloadBudget, NoOvertakingWhileAnEarlierRequestWaits) {
  PayloadBudget b(64 * MiB);
  ASSERT_TRUE(b.request(1, 48 * MiB));
  EXPECT_FALSE(b.request(2, 32 * MiB));
  // 8 MiB would fit, but request 2 came first: order is kept.
  EXPECT_FALSE(b.request(3, 8 * MiB));
  EXPECT_EQ(b.release(48 * MiB), (std::vector<std::uint64_t>{2, 3}));
}

TEST(PayloadBudget, RequestAboveTheLimitRunsAlone) {
  PayloadBudget b(16 * MiB);
  ASSERT_TRUE(b.request(1, 4 * MiB));
  EXPECT_FALSE(b.request(2, 32 * MiB));
  EXPECT_EQ(b.release(4 * MiB), (std::vector<std::uint64_t>{2}));
  EXPECT_EQ(b.used(), 32 * MiB);
  EXPECT_FALSE(b.request(3, 1));
  EXPECT_EQ(b.release(32 * MiB), (std::vector<std::uint64_t>{3}));
}

TEST(PayloadBudget, CancelWithdrawsAndLetsLaterRequestsIn) {
  PayloadBudget b(64 * MiB);
  ASSERT_TRUE(b.request(1, 40 * MiB));
  EXPECT_FALSE(b.request(2, 48 * MiB));
  EXPECT_FALSE(b.request(3, 16 * MiB));
  std::vector<std::uint64_t> granted;
  EXPECT_TRUE(b.cancel(2, granted));
  EXPECT_EQ(granted, (std::vector<std::uint64_t>{3}));
  EXPECT_EQ(b.used(), 56 * MiB);
  EXPECT_FALSE(b.cancel(3, granted));  // already granted
  EXPECT_FALSE(b.cancel(99, granted));  // unknown
}

TEST(SharedPayloadBudget, CallbackRunsOnGrantAndNeverAfterCancel) {
  SharedPayloadBudget b(10);
  int granted_a = 0;
  int granted_b = 0;
  ASSERT_TRUE(b.request(b.next_id(), 10, [] { FAIL() << "granted at once, no callback"; }));
  const auto a = b.next_id();
  const auto c = b.next_id();
  EXPECT_FALSE(b.request(a, 5, [&] { ++granted_a; }));
  EXPECT_FALSE(b.request(c, 5, [&] { ++granted_b; }));
  EXPECT_TRUE(b.cancel(c));
  b.release(10);
  EXPECT_EQ(granted_a, 1);
  EXPECT_EQ(granted_b, 0);
  EXPECT_FALSE(b.cancel(a));  // granted: the caller releases
  EXPECT_EQ(b.used(), 5u);
}

TEST(SharedPayloadBudget, FullEpisodesAreCountedAndNoticedOnce) {
  SharedPayloadBudget b(8, "tenant blue");
  EXPECT_EQ(b.name(), "tenant blue");
  EXPECT_EQ(b.limit(), 8u);
  EXPECT_FALSE(b.take_full_notice().has_value());  // never full yet
  ASSERT_TRUE(b.request(b.next_id(), 8, [] {}));
  EXPECT_EQ(b.full_episodes(), 0u);
  int granted = 0;
  EXPECT_FALSE(b.request(b.next_id(), 4, [&] { ++granted; }));
  EXPECT_FALSE(b.request(b.next_id(), 4, [&] { ++granted; }));
  EXPECT_EQ(b.full_episodes(), 1u);  // one episode, two waiters
  EXPECT_EQ(b.queued(), 2u);
  EXPECT_EQ(b.take_full_notice(), std::optional<std::uint64_t>(8));
  EXPECT_FALSE(b.take_full_notice().has_value());  // reported once
  b.release(8);
  EXPECT_EQ(granted, 2);
  EXPECT_EQ(b.queued(), 0u);
  // Full again: a new episode, noticed again.
  EXPECT_FALSE(b.request(b.next_id(), 1, [&] { ++granted; }));
  EXPECT_EQ(b.full_episodes(), 2u);
  EXPECT_EQ(b.take_full_notice(), std::optional<std::uint64_t>(8));
}

TEST(SharedPayloadBudget, ReleasesFromManyThreadsBalance) {
  SharedPayloadBudget b(4);
  std::atomic<int> grants{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        const auto id = b.next_id();
        if (b.request(id, 1, [&] { ++grants; })) {
          b.release(1);
        } else if (!b.cancel(id)) {
          b.release(1);  // granted meanwhile: give it back
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(b.used(), 0u);
}

TEST(ConnectionAdmission, EvictsTheOldestLoggingInAtTheLoginCap) {
  ConnectionAdmission a(100, 2);
  EXPECT_TRUE(a.on_accept(1).admit);
  EXPECT_TRUE(a.on_accept(2).admit);
  const auto d = a.on_accept(3);
  EXPECT_TRUE(d.admit);
  ASSERT_TRUE(d.evict.has_value());
  EXPECT_EQ(*d.evict, 1u);
  EXPECT_EQ(a.logging_in(), 2u);
  EXPECT_EQ(a.open(), 2u);
  a.on_closed(1);  // the evicted one closing later does not count twice
  EXPECT_EQ(a.open(), 2u);
}

TEST(ConnectionAdmission, LoggedInConnectionsAreNeverEvicted) {
  ConnectionAdmission a(3, 64);
  ASSERT_TRUE(a.on_accept(1).admit);
  ASSERT_TRUE(a.on_accept(2).admit);
  a.on_logged_in(1);
  a.on_logged_in(2);
  ASSERT_TRUE(a.on_accept(3).admit);
  // At the descriptor cap: the one still logging in (3) makes room.
  auto d = a.on_accept(4);
  EXPECT_TRUE(d.admit);
  EXPECT_EQ(d.evict, std::optional<std::uint64_t>(3));
  a.on_logged_in(4);
  // Every open connection is a session: refuse.
  d = a.on_accept(5);
  EXPECT_FALSE(d.admit);
  EXPECT_FALSE(d.evict.has_value());
  a.on_closed(5);  // never admitted: ignored
  EXPECT_EQ(a.open(), 3u);
  a.on_closed(2);
  EXPECT_TRUE(a.on_accept(6).admit);
}

TEST(ConnectionAdmission, AGroupAtItsLoginCapEvictsItsOwnOldest) {
  // Group 1 (a tenant) may have 2 connections logging in; the target 10.
  ConnectionAdmission a(100, 10, {{}, {.max_open = 0, .max_logging_in = 2}});
  ASSERT_TRUE(a.on_accept(1, 2).admit);  // group 2: no caps of its own
  ASSERT_TRUE(a.on_accept(2, 1).admit);
  ASSERT_TRUE(a.on_accept(3, 1).admit);
  auto d = a.on_accept(4, 1);
  EXPECT_TRUE(d.admit);
  EXPECT_EQ(d.evict, std::optional<std::uint64_t>(2));  // group 1's oldest, not group 2's older one
  EXPECT_EQ(a.logging_in(1), 2u);
  EXPECT_EQ(a.logging_in(2), 1u);
  EXPECT_EQ(a.logging_in(), 3u);
  a.on_closed(2);  // evicted: ignored
  EXPECT_EQ(a.open(), 3u);
}

TEST(ConnectionAdmission, AtTheTargetCapTheGroupWithTheMostLoggingInLoses) {
  ConnectionAdmission a(100, 4);
  ASSERT_TRUE(a.on_accept(1, 2).admit);  // group 2's connection is the oldest
  ASSERT_TRUE(a.on_accept(2, 1).admit);
  ASSERT_TRUE(a.on_accept(3, 1).admit);
  ASSERT_TRUE(a.on_accept(4, 1).admit);
  for (std::uint64_t id = 5; id < 50; ++id) {  // group 1 floods
    auto d = a.on_accept(id, 1);
    ASSERT_TRUE(d.admit);
    ASSERT_TRUE(d.evict.has_value());
    EXPECT_NE(*d.evict, 1u) << "group 2's only connection was evicted by group 1's flood";
  }
  EXPECT_EQ(a.logging_in(2), 1u);
  EXPECT_EQ(a.logging_in(), 4u);
  a.on_logged_in(1);  // group 2 completes its login
  EXPECT_EQ(a.logging_in(2), 0u);
  EXPECT_EQ(a.open(2), 1u);
}

TEST(ConnectionAdmission, AGroupWhoseOpenConnectionsAreSessionsIsRefusedAtItsOpenCap) {
  ConnectionAdmission a(100, 64, {{}, {.max_open = 2, .max_logging_in = 0}});
  ASSERT_TRUE(a.on_accept(1, 1).admit);
  ASSERT_TRUE(a.on_accept(2, 1).admit);
  a.on_logged_in(1);
  a.on_logged_in(2);
  auto d = a.on_accept(3, 1);
  EXPECT_FALSE(d.admit);
  EXPECT_FALSE(d.evict.has_value());
  EXPECT_TRUE(a.on_accept(4, 0).admit);  // another group is not affected
  a.on_closed(1);
  EXPECT_TRUE(a.on_accept(5, 1).admit);
  EXPECT_EQ(a.open(1), 2u);
  EXPECT_EQ(a.open(), 3u);
}

}  // namespace
}  // namespace iserkit::target
