// Completion (one waiter, one shot) and Event (many waiters, resettable) on a real io_context.
#include <gtest/gtest.h>

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
  asio::co_spawn(io, [&]() -> Awaitable<void> { got = co_await c.wait(); }, asio::detached);
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
