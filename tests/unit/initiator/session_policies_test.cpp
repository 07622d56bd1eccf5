// Sans-I/O session policies: the NOP-Out keepalive timer state (RFC 7143 §11.18/§11.19), the
// Async Message decisions (RFC 7143 §11.9.1) and LunHandle's retry policy (SAM-5 §5.3.1, §5.14).
// Time is injected: no sleeping, no timing assertions.
#include <gtest/gtest.h>

#include "async_events.hpp"
#include "ping_monitor.hpp"
#include "scsi/retry_policy.hpp"

using namespace iserkit;
using namespace iserkit::initiator;
using namespace std::chrono_literals;
using Action = PingMonitor::Action;

namespace {
const PingMonitor::Clock::time_point t0{};
}

TEST(PingMonitor, DisabledNeverActs) {
  PingMonitor p(0ms, 1000ms, t0);
  EXPECT_FALSE(p.enabled());
  EXPECT_EQ(p.on_tick(t0 + 1h), Action::none);
}

TEST(PingMonitor, PingsAfterSilenceAndDeclaresDeadAfterTimeout) {
  PingMonitor p(100ms, 500ms, t0);
  EXPECT_EQ(p.on_tick(t0 + 99ms), Action::none);
  EXPECT_EQ(p.next_check(), t0 + 100ms);
  EXPECT_EQ(p.on_tick(t0 + 100ms), Action::send_ping);
  p.on_ping_sent(t0 + 100ms);
  EXPECT_TRUE(p.ping_outstanding());
  EXPECT_EQ(p.next_check(), t0 + 600ms);
  EXPECT_EQ(p.on_tick(t0 + 599ms), Action::none);  // no second ping while one is out
  EXPECT_EQ(p.on_tick(t0 + 600ms), Action::connection_dead);
}

TEST(PingMonitor, AnswerResetsAndTrafficDefersPings) {
  PingMonitor p(100ms, 500ms, t0);
  p.on_ping_sent(t0 + 100ms);
  p.on_receive(t0 + 150ms);
  p.on_pong();
  EXPECT_FALSE(p.ping_outstanding());
  EXPECT_EQ(p.on_tick(t0 + 700ms), Action::send_ping);  // silent again since 150 ms
  p.on_receive(t0 + 690ms);
  EXPECT_EQ(p.on_tick(t0 + 700ms), Action::none);       // traffic is proof of life
  EXPECT_EQ(p.next_check(), t0 + 790ms);
}

TEST(PingMonitor, OtherTrafficDoesNotAnswerAPing) {
  PingMonitor p(100ms, 500ms, t0);
  p.on_ping_sent(t0 + 100ms);
  p.on_receive(t0 + 200ms);  // e.g. a Data-In: the ping itself still needs its NOP-In
  EXPECT_EQ(p.on_tick(t0 + 600ms), Action::connection_dead);
}

TEST(AsyncEvents, LogoutRequestWithinParameter3) {
  iscsi::AsyncMessage a;
  a.event = iscsi::AsyncEvent::logout_request;
  a.parameter3 = 7;
  auto d = decide_async(a);
  EXPECT_EQ(d.kind, AsyncDecision::Kind::logout);
  EXPECT_EQ(d.within, 7s);
  a.parameter3 = 0;
  EXPECT_EQ(decide_async(a).within, 1s);
}

namespace {
// The decision for an Async Message carrying only `event` (parameters zero).
AsyncDecision::Kind decision_for(iscsi::AsyncEvent event) {
  iscsi::AsyncMessage a;
  a.event = event;
  return decide_async(a).kind;
}
}  // namespace

TEST(AsyncEvents, DropConnectionFailsTheSession) {
  EXPECT_EQ(decision_for(iscsi::AsyncEvent::drop_connection), AsyncDecision::Kind::fail_session);
  EXPECT_EQ(decision_for(iscsi::AsyncEvent::drop_all_connections), AsyncDecision::Kind::fail_session);
}

TEST(AsyncEvents, OthersAreOnlyLogged) {
  EXPECT_EQ(decision_for(iscsi::AsyncEvent::scsi_async_event), AsyncDecision::Kind::ignore);
  EXPECT_EQ(decision_for(iscsi::AsyncEvent::request_text_negotiation), AsyncDecision::Kind::ignore);
}

namespace {
scsi::ScsiResult with_status(scsi::Status s, std::optional<scsi::SenseKey> key = std::nullopt) {
  scsi::ScsiResult r;
  r.status = s;
  if (key) {
    scsi::SenseData d;
    d.key = *key;
    d.asc = 0x29;  // POWER ON, RESET, OR BUS DEVICE RESET OCCURRED
    r.sense = d;
  }
  return r;
}
}  // namespace

TEST(RetryPolicy, UnitAttentionIsRetriedOnceAtOnce) {
  RetryPolicy p;
  const auto ua = with_status(scsi::Status::check_condition, scsi::SenseKey::unit_attention);
  EXPECT_EQ(p.next(ua), 0ms);
  EXPECT_EQ(p.next(ua), std::nullopt);
}

TEST(RetryPolicy, BusyAndTaskSetFullBackOffThenGiveUp) {
  RetryPolicy p({.busy_retries = 5, .first_backoff = 10ms, .max_backoff = 50ms});
  EXPECT_EQ(p.next(with_status(scsi::Status::busy)), 10ms);
  EXPECT_EQ(p.next(with_status(scsi::Status::task_set_full)), 20ms);
  EXPECT_EQ(p.next(with_status(scsi::Status::busy)), 40ms);
  EXPECT_EQ(p.next(with_status(scsi::Status::busy)), 50ms);  // capped
  EXPECT_EQ(p.next(with_status(scsi::Status::busy)), 50ms);
  EXPECT_EQ(p.next(with_status(scsi::Status::busy)), std::nullopt);
}

TEST(RetryPolicy, AFirstBackoffAboveTheCapWaitsTheCap) {
  RetryPolicy p({.busy_retries = 2, .first_backoff = 2000ms, .max_backoff = 1000ms});
  EXPECT_EQ(p.next(with_status(scsi::Status::busy)), 1000ms);
  EXPECT_EQ(p.next(with_status(scsi::Status::busy)), 1000ms);
  EXPECT_EQ(p.next(with_status(scsi::Status::busy)), std::nullopt);
}

TEST(RetryPolicy, OtherResultsAreFinal) {
  RetryPolicy p;
  EXPECT_EQ(p.next(with_status(scsi::Status::good)), std::nullopt);
  EXPECT_EQ(p.next(with_status(scsi::Status::check_condition, scsi::SenseKey::medium_error)), std::nullopt);
  EXPECT_EQ(p.next(with_status(scsi::Status::check_condition, scsi::SenseKey::illegal_request)), std::nullopt);
  EXPECT_EQ(p.next(with_status(scsi::Status::reservation_conflict)), std::nullopt);
  EXPECT_EQ(p.next(with_status(scsi::Status::check_condition)), std::nullopt);  // no sense: not a UA
}
