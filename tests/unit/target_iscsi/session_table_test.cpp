// Unit tests of SessionTable and SessionEnd (target/src/session_table.hpp): which sessions a
// reinstating login (RFC 7143 §6.3.5) finds, and the cross-thread "session ended" latch it waits on.
#include "session_table.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <utility>
#include <thread>

namespace iserkit::target {
namespace {

constexpr std::array<std::byte, 6> isid_a{std::byte{0x80}, std::byte{0}, std::byte{0}, std::byte{1}, std::byte{0},
                                          std::byte{0x42}};
constexpr std::array<std::byte, 6> isid_b{std::byte{0x80}, std::byte{0}, std::byte{0}, std::byte{1}, std::byte{0},
                                          std::byte{0x43}};

SessionTable::Entry entry(std::uint64_t id, std::uint16_t tsih, int* closes = nullptr) {
  return SessionTable::Entry{.id = id,
                             .tsih = tsih,
                             .close = [closes] {
                               if (closes) ++*closes;
                             },
                             .ended = std::make_shared<SessionEnd>()};
}

TEST(SessionKey, NamesFoldCaseIsidDoesNot) {
  // RFC 3722: iSCSI names compare case-insensitively; the ISID is binary.
  EXPECT_EQ(SessionKey::make("iqn.2026-11.org.Test:Host", isid_a, "IQN.2026-11.org.example:T"),
            SessionKey::make("iqn.2026-11.org.test:host", isid_a, "iqn.2026-11.org.example:t"));
  EXPECT_NE(SessionKey::make("iqn.x:h", isid_a, "iqn.y:t"), SessionKey::make("iqn.x:h", isid_b, "iqn.y:t"));
  EXPECT_NE(SessionKey::make("iqn.x:h", isid_a, "iqn.y:t"), SessionKey::make("iqn.x:h2", isid_a, "iqn.y:t"));
  EXPECT_NE(SessionKey::make("iqn.x:h", isid_a, "iqn.y:t"), SessionKey::make("iqn.x:h", isid_a, "iqn.y:t2"));
  // The same initiator port through another portal group: another I_T nexus, another session.
  EXPECT_NE(SessionKey::make("iqn.x:h", isid_a, "iqn.y:t", 1), SessionKey::make("iqn.x:h", isid_a, "iqn.y:t", 2));
  EXPECT_EQ(SessionKey::make("iqn.x:h", isid_a, "iqn.y:t"), SessionKey::make("iqn.x:h", isid_a, "iqn.y:t", 1));
}

TEST(SessionTable, SameIdentityReplacesOtherIdentitiesDoNot) {
  SessionTable table;
  const auto key = SessionKey::make("iqn.x:h", isid_a, "iqn.y:t");
  EXPECT_FALSE(table.replace(key, entry(1, 10)));
  // Another ISID, another target: separate sessions.
  EXPECT_FALSE(table.replace(SessionKey::make("iqn.x:h", isid_b, "iqn.y:t"), entry(2, 11)));
  EXPECT_FALSE(table.replace(SessionKey::make("iqn.x:h", isid_a, "iqn.y:t2"), entry(3, 12)));
  EXPECT_EQ(table.size(), 3u);
  // The same identity (names in another case): the old session is handed back to be ended.
  int closes = 0;
  auto old = table.replace(SessionKey::make("IQN.X:H", isid_a, "iqn.y:T"), entry(4, 13, &closes));
  ASSERT_TRUE(old);
  EXPECT_EQ(old->id, 1u);
  EXPECT_EQ(old->tsih, 10);
  EXPECT_EQ(table.tsih(key), 13);
  EXPECT_EQ(table.size(), 3u);
  EXPECT_EQ(closes, 0);  // closing is the caller's: the table only registers
}

TEST(SessionTable, AReplacedSessionEndingDoesNotRemoveItsSuccessor) {
  SessionTable table;
  const auto key = SessionKey::make("iqn.x:h", isid_a, "iqn.y:t");
  table.replace(key, entry(1, 10));
  table.replace(key, entry(2, 11));
  table.remove(key, 1);  // the old session's run() ends after the new one registered
  EXPECT_EQ(table.tsih(key), 11);
  table.remove(key, 2);
  EXPECT_FALSE(table.tsih(key));
  EXPECT_EQ(table.size(), 0u);
  EXPECT_FALSE(table.replace(key, entry(3, 12)));  // a fresh login after the end: nothing to end
}

TEST(SessionEnd, CallbacksRunOnceAtSetOrAtOnceAfter) {
  SessionEnd end;
  int before = 0;
  int after = 0;
  end.on_set([&] { ++before; });
  EXPECT_EQ(before, 0);
  EXPECT_FALSE(end.is_set());
  end.set();
  end.set();
  EXPECT_EQ(before, 1);
  end.on_set([&] { ++after; });
  EXPECT_EQ(after, 1);
  EXPECT_TRUE(end.is_set());
}

TEST(SessionEnd, WaiterOnOneThreadResumesOnItsOwnWhenAnotherThreadSets) {
  // The reinstating login's connection and the old session live on different I/O threads.
  SessionEnd end;
  asio::io_context waiter_context;
  std::atomic<bool> resumed{false};
  std::thread::id resumed_on;
  asio::co_spawn(
      waiter_context,
      [&]() -> Awaitable<void> {
        co_await end.wait();
        resumed_on = std::this_thread::get_id();
        resumed = true;
      },
      asio::detached);
  auto guard = asio::make_work_guard(waiter_context);
  std::thread waiter([&] { waiter_context.run(); });
  const auto waiter_id = waiter.get_id();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(resumed);  // nothing ended yet
  std::thread setter([&] { end.set(); });
  setter.join();
  for (int i = 0; i < 500 && !resumed; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  guard.reset();
  waiter.join();
  EXPECT_TRUE(resumed);
  EXPECT_EQ(resumed_on, waiter_id);
}

TEST(SessionEnd, WaitAfterSetReturnsAtOnce) {
  SessionEnd end;
  end.set();
  asio::io_context context;
  bool resumed = false;
  asio::co_spawn(
      context,
      [&]() -> Awaitable<void> {
        co_await end.wait();
        resumed = true;
      },
      asio::detached);
  context.run();
  EXPECT_TRUE(resumed);
}

// SessionEnd::wait_for (the reinstatement bound, ConnectionLimits::reinstate_timeout): `set_after`
// (nullopt: never) sets the latch from another thread that long after the wait began; returns
// what wait_for answered and how long it took.
std::pair<bool, std::chrono::steady_clock::duration> timed_wait(SessionEnd& end, std::chrono::milliseconds bound,
                                                                std::optional<std::chrono::milliseconds> set_after) {
  asio::io_context context;
  std::optional<bool> answer;
  const auto start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::duration took{};
  asio::co_spawn(
      context,
      [&]() -> Awaitable<void> {
        answer = co_await end.wait_for(bound);
        took = std::chrono::steady_clock::now() - start;
      },
      asio::detached);
  std::thread setter;
  if (set_after) setter = std::thread([&end, d = *set_after] {
    std::this_thread::sleep_for(d);
    end.set();
  });
  context.run_for(std::chrono::seconds(10));
  if (setter.joinable()) setter.join();
  EXPECT_TRUE(answer.has_value()) << "wait_for never returned";
  return {answer.value_or(false), took};
}

TEST(SessionEnd, WaitForGivesUpAfterTheBound) {
  using namespace std::chrono_literals;
  SessionEnd end;
  const auto [ended, took] = timed_wait(end, 100ms, std::nullopt);
  EXPECT_FALSE(ended);
  EXPECT_GE(took, 100ms);
  EXPECT_FALSE(end.is_set());
}

TEST(SessionEnd, WaitForReturnsWhenSetBeforeTheBound) {
  using namespace std::chrono_literals;
  SessionEnd end;
  const auto [ended, took] = timed_wait(end, 5000ms, 50ms);  // set from another thread
  EXPECT_TRUE(ended);
  EXPECT_LT(took, 5000ms);  // woken by set(), not by the bound
  SessionEnd already;
  already.set();
  EXPECT_TRUE(timed_wait(already, 5000ms, std::nullopt).first);
}

// Registers session `id` (TSIH `tsih`) under `key`; returns its end latch and the entry it replaced.
std::pair<std::shared_ptr<SessionEnd>, std::optional<SessionTable::Entry>> add(SessionTable& table, const SessionKey& key,
                                                                                std::uint64_t id, std::uint16_t tsih) {
  auto e = entry(id, tsih);
  auto end = e.ended;
  auto replaced = table.replace(key, std::move(e));
  return {end, std::move(replaced)};
}

TEST(SessionTable, FinishWithoutPredecessorRemovesAndSets) {
  SessionTable table;
  const auto key = SessionKey::make("iqn.x:h", isid_a, "iqn.y:t");
  const auto a_end = add(table, key, 1, 10).first;
  table.finish(key, 1, a_end);
  EXPECT_TRUE(a_end->is_set());
  EXPECT_FALSE(table.tsih(key));
}

// A login (B) that replaced session A but gave up waiting for it (reinstate_timeout) ends without
// a session; whoever replaces B next must still wait for A, else A's command could reach the LU
// after that newer session started (RFC 7143 §6.3.5).
TEST(SessionTable, ALoginThatGaveUpStandsForTheSessionItCouldNotEnd) {
  SessionTable table;
  const auto key = SessionKey::make("iqn.x:h", isid_a, "iqn.y:t");
  const auto a_end = add(table, key, 1, 10).first;
  auto [b_end, replaced] = add(table, key, 2, 11);
  ASSERT_TRUE(replaced);
  EXPECT_EQ(replaced->id, 1u);
  table.finish(key, 2, b_end, a_end);  // B refused (A still on the backend); B's run() is over
  EXPECT_FALSE(b_end->is_set());       // whoever waits for B waits for A
  EXPECT_EQ(table.tsih(key), 11);      // B stays registered for A meanwhile
  // C replaces B and, like B, gives up.
  auto [c_end, replaced_by_c] = add(table, key, 3, 12);
  replaced = std::move(replaced_by_c);
  ASSERT_TRUE(replaced);
  EXPECT_EQ(replaced->id, 2u);
  EXPECT_EQ(replaced->ended, b_end);
  table.finish(key, 3, c_end, b_end);
  EXPECT_FALSE(c_end->is_set());
  // A's command completes at last: A ends, and with it B and C, in that order; the table empties.
  table.finish(key, 1, a_end);
  EXPECT_TRUE(a_end->is_set());
  EXPECT_TRUE(b_end->is_set());
  EXPECT_TRUE(c_end->is_set());
  EXPECT_FALSE(table.tsih(key));
  EXPECT_EQ(table.size(), 0u);
}

TEST(SessionTable, AGaveUpLoginDoesNotUnregisterALaterSession) {
  SessionTable table;
  const auto key = SessionKey::make("iqn.x:h", isid_a, "iqn.y:t");
  const auto a_end = add(table, key, 1, 10).first;
  const auto b_end = add(table, key, 2, 11).first;
  table.finish(key, 2, b_end, a_end);
  table.replace(key, entry(3, 12));  // D logs in later and registers (it waited for B, hence A)
  table.finish(key, 1, a_end);
  EXPECT_TRUE(b_end->is_set());
  EXPECT_EQ(table.tsih(key), 12);  // B's late removal leaves D alone
}

}  // namespace
}  // namespace iserkit::target
