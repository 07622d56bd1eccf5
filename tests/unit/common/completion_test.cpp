// Completion (one waiter, one shot) and Event (many waiters, resettable) on a real io_context.
#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <utility>

#include "iserkit/common/completion.hpp"
#include "iserkit/common/errors.hpp"

using namespace iserkit;

namespace {
// Runs what is ready; restart() because poll() stops the context once it runs out of work.
void run(asio::io_context& io) {
  io.restart();
  io.poll();
}
}  // namespace

TEST(Completion, WaiterGetsTheErrorCode) {
  asio::io_context io;
  Completion c;
  std::error_code got;
  asio::co_spawn(io, [&]() -> Awaitable<void> { co_await c.wait();
    got = c.error(); }, asio::detached);
  run(io);
  EXPECT_FALSE(c.done());
  c.complete(make_error_code(errc::timeout));
  c.complete();  // later calls are ignored
  run(io);
  EXPECT_EQ(got, make_error_code(errc::timeout));
}

TEST(Event, SetWakesEveryWaiterAndStaysSetUntilReset) {
  asio::io_context io;
  Event e;
  int woken = 0;
  auto waiter = [&]() -> Awaitable<void> {
    co_await e.wait();
    ++woken;
  };
  for (int i = 0; i < 3; ++i) asio::co_spawn(io, waiter(), asio::detached);
  run(io);
  EXPECT_EQ(woken, 0);
  EXPECT_EQ(e.waiting(), 3u);
  e.set();
  EXPECT_EQ(woken, 0);  // resumed through the executor, never inline
  run(io);
  EXPECT_EQ(woken, 3);
  EXPECT_EQ(e.waiting(), 0u);
  // Still set: a new waiter passes at once.
  asio::co_spawn(io, waiter(), asio::detached);
  run(io);
  EXPECT_EQ(woken, 4);
  e.reset();
  EXPECT_FALSE(e.is_set());
  asio::co_spawn(io, waiter(), asio::detached);
  run(io);
  EXPECT_EQ(woken, 4);
  EXPECT_EQ(e.waiting(), 1u);
  e.set();
  run(io);
  EXPECT_EQ(woken, 5);
}

TEST(Event, SetNowResumesTheWaiterInlineOnItsOwnThreadOnly) {
  asio::io_context io;
  Event e;
  int woken = 0;
  auto waiter = [&]() -> Awaitable<void> {
    while (true) {
      e.reset();
      co_await e.wait();
      ++woken;
    }
  };
  asio::co_spawn(io, waiter(), asio::detached);
  run(io);
  ASSERT_EQ(e.waiting(), 1u);
  // Not on a thread running io: set_now() behaves as set() (posted).
  e.set_now();
  EXPECT_EQ(woken, 0);
  run(io);
  EXPECT_EQ(woken, 1);
  ASSERT_EQ(e.waiting(), 1u);  // parked again
  // From a handler io runs: the waiter has run (and parked again) before set_now() returns.
  int seen_inside = -1;
  asio::post(io, [&] {
    e.set_now();
    seen_inside = woken;
  });
  run(io);
  EXPECT_EQ(seen_inside, 2);
  EXPECT_EQ(e.waiting(), 1u);
  // set() from the same place stays posted.
  asio::post(io, [&] {
    e.set();
    seen_inside = woken;
  });
  run(io);
  EXPECT_EQ(seen_inside, 2);
  EXPECT_EQ(woken, 3);
}

// The slot a parked handler lives in: small handlers in place, large ones on the heap; either is
// resumed (posted) or dropped (destroyed without running) exactly once.
TEST(WaiterSlot, ParksSmallAndLargeHandlersAndResumesOrDropsEachOnce) {
  asio::io_context io;
  auto owned = std::make_shared<int>(0);  // each handler holds a reference: dropping must release it
  int runs = 0;
  auto small = asio::bind_executor(io, [&runs, owned] { ++runs; });
  std::array<char, 256> big_payload{};
  big_payload[255] = 7;
  auto large = asio::bind_executor(io, [&runs, owned, big_payload] { runs += big_payload[255]; });
  static_assert(sizeof(large) > detail::WaiterSlot::inline_bytes, "must exercise the heap path");

  detail::WaiterSlot a;
  detail::WaiterSlot b;
  a.park(small);
  b.park(large);
  EXPECT_TRUE(a.parked_in_place());
  EXPECT_FALSE(b.parked_in_place());
  EXPECT_FALSE(a.empty());
  EXPECT_FALSE(b.empty());
  EXPECT_EQ(owned.use_count(), 5);  // the two named handlers, the two parked copies, `owned`
  a.resume(false);
  b.resume(false);
  EXPECT_TRUE(a.empty());
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(runs, 0);  // posted, not run inline
  run(io);
  EXPECT_EQ(runs, 8);
  EXPECT_EQ(owned.use_count(), 3);

  a.park(small);
  b.park(large);
  a.drop();
  b.drop();
  run(io);
  EXPECT_EQ(runs, 8);
  EXPECT_EQ(owned.use_count(), 3);
  {
    detail::WaiterSlot c;
    c.park(large);  // destroyed with the slot
    EXPECT_EQ(owned.use_count(), 4);
  }
  EXPECT_EQ(owned.use_count(), 3);
}

// An Event destroyed with coroutines parked in it (first in place, the others allocated) destroys
// their frames without resuming them (Asio unwinds a dropped coroutine through its executor).
TEST(Event, DestroyedWithWaitersDropsThemWithoutResuming) {
  asio::io_context io;
  auto alive = std::make_shared<int>(0);
  int woken = 0;
  {
    Event e;
    auto waiter = [&e, &woken](std::shared_ptr<int> hold) -> Awaitable<void> {
      co_await e.wait();
      ++woken;
      (void)hold;
    };
    for (int i = 0; i < 3; ++i) asio::co_spawn(io, waiter(alive), asio::detached);
    run(io);
    ASSERT_EQ(e.waiting(), 3u);
    EXPECT_EQ(alive.use_count(), 4);
  }
  run(io);
  EXPECT_EQ(alive.use_count(), 1);  // the three frames are gone
  EXPECT_EQ(woken, 0);
}

// The handler of a coroutine that waits (what Completion and Event park) takes no allocation:
// use_awaitable's handler, and await_op's (what Completion::wait and Event::wait make).
TEST(WaiterSlot, AnAwaitOpHandlerParksInPlace) {
  asio::io_context io;
  detail::WaiterSlot slot;
  NoResult none;
  bool resumed = false;
  asio::co_spawn(
      io,
      [&]() -> Awaitable<void> {
        co_await await_op(none, [&](auto make_handler) { slot.park(make_handler()); });
        resumed = true;
      },
      asio::detached);
  run(io);
  ASSERT_FALSE(slot.empty());
  EXPECT_TRUE(slot.parked_in_place());
  EXPECT_FALSE(resumed);
  slot.resume(false);
  run(io);
  EXPECT_TRUE(resumed);
}

TEST(WaiterSlot, AParkedCoroutineTakesNoAllocation) {
  asio::io_context io;
  detail::WaiterSlot slot;
  bool resumed = false;
  asio::co_spawn(
      io,
      [&]() -> Awaitable<void> {
        co_await asio::async_initiate<const asio::use_awaitable_t<>&, void()>(
            [&](auto handler) { slot.park(std::move(handler)); }, asio::use_awaitable);
        resumed = true;
      },
      asio::detached);
  run(io);
  ASSERT_FALSE(slot.empty());
  EXPECT_TRUE(slot.parked_in_place());
  slot.resume(false);
  run(io);
  EXPECT_TRUE(resumed);
}
