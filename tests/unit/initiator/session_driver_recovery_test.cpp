// The Session driver's recovery end to end in-process: a real Session over FakeDatamover whose
// connection dies with a command in flight; the Reconnector hands it a new FakeDatamover (after a
// failed attempt), the command is sent again there and completes once; events reach the
// callback. Without a new connection within the replacement timeout the command fails with
// errc::session_lost and the callback hears "gave up".
#include <gtest/gtest.h>

#include <utility>

#include "fake_datamover.hpp"
#include "iserkit/common/errors.hpp"
#include "session_rig.hpp"

using namespace iserkit;
using namespace iserkit::initiator;
using namespace std::chrono_literals;
using test::CapturedPdu;
using test::FakeDatamover;
using test::fresh_login;
using test::expect_error;
using test::expect_good;
using test::read10;

namespace {

/// Plays a target that answers every read with one Data-In of 0x42 bytes carrying the status.
void answer_reads(FakeDatamover& d, const CapturedPdu& p) {
  const auto* c = p.as<iscsi::ScsiCommand>();
  if (c == nullptr || !c->read) return;
  iscsi::DataIn in;
  in.itt = c->itt;
  in.final = in.status_present = true;
  in.stat_sn = c->exp_stat_sn;
  in.exp_cmd_sn = c->cmd_sn + 1;
  in.max_cmd_sn = c->cmd_sn + 64;
  d.push(in, std::vector<std::byte>(c->expected_data_transfer_length, std::byte{0x42}));
}

std::size_t commands_in(const FakeDatamover& d) {
  std::size_t n = 0;
  for (const auto& p : d.sent()) n += p.as<iscsi::ScsiCommand>() != nullptr;
  return n;
}

// The shared driver rig (tests/unit/support/session_rig.hpp) with a Reconnector: the first
// connection dies as soon as a command is on it; reconnecting fails `fail_first_attempts` times
// (or always), then hands over a second FakeDatamover that answers reads.
// What the rig counts; a base before SessionRig, so it outlives the session that reports into it.
struct RecoveryRecord {
  int commands_on_first = 0;
  FakeDatamover* second = nullptr;
  int attempts = 0;
  std::vector<SessionEvent> events;
};

struct RecoveryRig : RecoveryRecord, test::SessionRig {
  explicit RecoveryRig(std::chrono::milliseconds replacement, int fail_first_attempts, bool never_reconnect = false)
      : SessionRig(Deferred{}) {
    SessionOptions options;
    options.replacement_timeout = replacement;
    options.reconnect_delay_min = 1ms;
    options.reconnect_delay_max = 4ms;
    options.on_event = [this](const SessionEvent& e) { events.push_back(e); };
    auto fake = std::make_unique<FakeDatamover>(io.get_executor());
    // Counted here: the session frees the lost connection's datamover once its loop has returned,
    // so the first datamover (`dm`) must not be read after the session recovered.
    fake->respond_with([this](FakeDatamover& d, const CapturedPdu& p) {
      if (p.as<iscsi::ScsiCommand>() == nullptr) return;
      ++commands_on_first;
      d.push_error(make_error_code(errc::connection_closed));
    });
    Reconnector reconnect = [this, fail_first_attempts, never_reconnect]() -> Awaitable<Result<Reconnected>> {
      ++attempts;
      if (never_reconnect || attempts <= fail_first_attempts) co_return fail(std::errc::connection_refused);
      auto f = std::make_unique<FakeDatamover>(io.get_executor());
      second = f.get();
      second->respond_with(answer_reads);
      co_return Reconnected{.datamover = std::move(f), .parameters = {}, .start = fresh_login(7)};
    };
    start(std::move(fake), std::move(options), {}, std::move(reconnect));
  }
};

}  // namespace

TEST(SessionDriverRecovery, CommandInFlightIsSentAgainOnTheNewConnectionAndCompletesOnce) {
  RecoveryRig rig(10s, /*fail_first_attempts=*/1);
  std::vector<std::byte> buffer(4096);
  rig.run([&]() -> Awaitable<void> {
    auto r = co_await rig.session->execute(read10(buffer));
    expect_good(r);
    EXPECT_TRUE(rig.session->is_open());
    EXPECT_FALSE(rig.session->recovering());
    // The new connection serves the next command directly.
    auto again = co_await rig.session->execute(read10(buffer));
    EXPECT_TRUE(again) << (again ? "" : again.error().message());
  });
  EXPECT_EQ(rig.commands_on_first, 1);
  ASSERT_NE(rig.second, nullptr);
  EXPECT_EQ(commands_in(*rig.second), 2u);
  EXPECT_EQ(buffer[0], std::byte{0x42});
  EXPECT_EQ(rig.attempts, 2);
  ASSERT_EQ(rig.events.size(), 2u);
  EXPECT_EQ(rig.events[0].kind, SessionEvent::Kind::connection_lost);
  EXPECT_EQ(rig.events[1].kind, SessionEvent::Kind::recovered);
  EXPECT_EQ(rig.events[1].attempts, 2u);
  const SessionStats& s = rig.session->stats();
  EXPECT_EQ(s.connections_lost, 1u);
  EXPECT_EQ(s.reconnect_attempts, 2u);
  EXPECT_EQ(s.recoveries, 1u);
  EXPECT_EQ(s.commands_reissued, 1u);
}

TEST(SessionDriverRecovery, NoNewConnectionWithinTheReplacementTimeoutFailsWithSessionLost) {
  RecoveryRig rig(200ms, 0, /*never_reconnect=*/true);
  std::vector<std::byte> buffer(512);
  rig.run([&]() -> Awaitable<void> {
    auto r = co_await rig.session->execute(read10(buffer));
    expect_error(r, make_error_code(errc::session_lost));
    auto late = co_await rig.session->execute(read10(buffer));
    expect_error(late, make_error_code(errc::session_lost));
    EXPECT_FALSE(rig.session->is_open());
  });
  EXPECT_GE(rig.attempts, 1);
  ASSERT_EQ(rig.events.size(), 2u);
  EXPECT_EQ(rig.events[0].kind, SessionEvent::Kind::connection_lost);
  EXPECT_EQ(rig.events[1].kind, SessionEvent::Kind::gave_up);
  EXPECT_EQ(rig.events[1].error, make_error_code(errc::session_lost));
  EXPECT_EQ(rig.session->stats().gave_up, 1u);
}

TEST(SessionDriverRecovery, WithoutAReconnectorALostConnectionFailsAtOnce) {
  test::SessionRig rig;
  rig.dm->respond_with([](FakeDatamover& d, const CapturedPdu& p) {
    if (p.as<iscsi::ScsiCommand>() != nullptr) d.push_error(make_error_code(errc::connection_closed));
  });
  std::vector<std::byte> buffer(512);
  rig.run([&]() -> Awaitable<void> {
    auto r = co_await rig.session->execute(read10(buffer));
    expect_error(r, make_error_code(errc::connection_closed));
  });
}
