// Interop (run through run_with_target.sh, which sets ISERKIT_TEST_URL and ISERKIT_TEST_TARGET_PID):
// the session's control paths against a real target — LOGICAL UNIT RESET (RFC 7143 §11.5), NOP-Out
// keepalive pings answered (§11.18/§11.19), and a target that stops answering (SIGSTOP) declared
// dead by the ping timeout, failing the session and its commands cleanly (errc::timeout).
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>

#include "iserkit/common/errors.hpp"
#include "iserkit/initiator/errors.hpp"
#include "iserkit/initiator/lun.hpp"
#include "iserkit/initiator/session.hpp"

#include "../../support/session_client.hpp"

using namespace iserkit;
using namespace iserkit::initiator;
using namespace std::chrono_literals;

namespace {

template <class Body>
void with_session(const SessionOptions& options, Body body) {
  test::with_session("ISERKIT_TEST_URL", "run_with_target.sh", options, body);
}

// Runs `body(session, lun, pid)` in a session (with_session) with the target (a process the test
// harness started, ISERKIT_TEST_TARGET_PID) frozen by SIGSTOP first: the connection stays up but
// silent; SIGCONT once the body is done (or did it itself).
template <class Body>
void with_target_frozen(const SessionOptions& options, Body body) {
  const char* pid_text = std::getenv("ISERKIT_TEST_TARGET_PID");
  if (pid_text == nullptr) GTEST_SKIP() << "ISERKIT_TEST_TARGET_PID not set";
  const pid_t pid = static_cast<pid_t>(std::atoi(pid_text));
  with_session(options, [pid, &body](Session& s, scsi::Lun lun) -> Awaitable<void> {
    const int stopped = ::kill(pid, SIGSTOP);
    EXPECT_EQ(stopped, 0);
    if (stopped != 0) co_return;
    struct Resume {
      pid_t pid;
      ~Resume() { ::kill(pid, SIGCONT); }
    } resume{pid};
    co_await body(s, lun, pid);
  });
}

Awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  t.expires_after(d);
  boost::system::error_code ec;
  co_await t.async_wait(use_awaitable_ec(ec));
}

}  // namespace

TEST(SessionControl, LunResetCompletesAndTheLunStillWorks) {
  with_session({}, [](Session& s, scsi::Lun lun) -> Awaitable<void> {
    auto r = co_await s.lun_reset(lun);
    EXPECT_TRUE(r) << (r ? "" : r.error().message());
    if (r) {
      EXPECT_TRUE(r->complete()) << "response=" << int(r->response);
    }
    // After the reset the unit may report UNIT ATTENTION once: LunHandle's retry policy absorbs it.
    auto h = co_await LunHandle::open(s.shared_from_this(), lun);
    EXPECT_TRUE(h) << (h ? "" : h.error().message());
    if (h) {
      auto cap = co_await h->read_capacity();
      EXPECT_TRUE(cap);
    }
  });
}

TEST(SessionControl, PingsAreAnswered) {
  SessionOptions o;
  o.nop_interval = 50ms;
  o.nop_timeout = 5000ms;
  with_session(o, [](Session& s, scsi::Lun) -> Awaitable<void> {
    for (int i = 0; i < 100 && s.stats().pings_answered < 2; ++i) co_await sleep_for(20ms);
    EXPECT_GE(s.stats().pings_sent, 2u);
    EXPECT_GE(s.stats().pings_answered, 2u);
    EXPECT_TRUE(s.is_open());
  });
}

TEST(SessionControl, SilentTargetIsDeclaredDead) {
  SessionOptions o;
  o.nop_interval = 100ms;
  o.nop_timeout = 400ms;
  o.replacement_timeout = 0ms;  // no recovery: the dead connection ends the session
  with_target_frozen(o, [](Session& s, scsi::Lun lun, pid_t) -> Awaitable<void> {
    CommandRequest req{.lun = lun, .cdb = scsi::test_unit_ready()};
    auto r = co_await s.execute(req);  // waits until the ping timeout fails the session
    EXPECT_FALSE(r);
    if (!r) {
      EXPECT_EQ(r.error(), make_error_code(errc::timeout)) << r.error().message();
    }
    EXPECT_FALSE(s.is_open());
    EXPECT_EQ(s.error(), make_error_code(errc::timeout));
  });
}

// Recovery against a real target: frozen for less than the replacement timeout, the command
// waits, the session logs in again once the target runs, and the command completes; frozen for
// longer, the command fails with errc::session_lost (after the ping timeout plus the replacement
// timeout; the exact time is not asserted), new ones fail at once, and once the target runs again
// the session's background logins make it serve commands again.
SessionOptions recovering_options(std::chrono::milliseconds replacement) {
  SessionOptions o;
  o.nop_interval = 100ms;
  o.nop_timeout = 400ms;
  o.replacement_timeout = replacement;
  o.connect_timeout = 500ms;
  o.login_timeout = 500ms;
  o.reconnect_delay_min = 50ms;
  o.reconnect_delay_max = 200ms;
  return o;
}

TEST(SessionControl, TargetFrozenShorterThanTheReplacementTimeoutOnlyDelays) {
  with_target_frozen(recovering_options(20s), [](Session& s, scsi::Lun lun, pid_t pid) -> Awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    asio::co_spawn(
        ex,
        [pid]() -> Awaitable<void> {
          co_await sleep_for(1500ms);  // past the ping timeout: the connection is declared dead
          ::kill(pid, SIGCONT);
        },
        asio::detached);
    CommandRequest req{.lun = lun, .cdb = scsi::test_unit_ready()};
    auto r = co_await s.execute(req);
    EXPECT_TRUE(r) << (r ? "" : r.error().message());
    EXPECT_TRUE(s.is_open());
    EXPECT_GE(s.stats().connections_lost, 1u);
    EXPECT_GE(s.stats().recoveries, 1u);
  });
}

TEST(SessionControl, TargetFrozenLongerThanTheReplacementTimeoutFailsWithSessionLost) {
  with_target_frozen(recovering_options(1s), [](Session& s, scsi::Lun lun, pid_t pid) -> Awaitable<void> {
    CommandRequest req{.lun = lun, .cdb = scsi::test_unit_ready()};
    auto r = co_await s.execute(req);
    EXPECT_FALSE(r);
    if (!r) {
      EXPECT_EQ(r.error(), make_error_code(errc::session_lost)) << r.error().message();
    }
    EXPECT_EQ(s.stats().gave_up, 1u);
    // Not given up for good (issue 24 item 6): failed, still logging in; a new command fails at once.
    EXPECT_TRUE(s.is_open());
    EXPECT_EQ(s.state(), SessionState::failed);
    auto late = co_await s.execute(req);
    EXPECT_FALSE(late);
    // The target runs again: a background login makes the same session serve commands.
    ::kill(pid, SIGCONT);
    for (int i = 0; i < 200 && s.state() != SessionState::logged_in; ++i) co_await sleep_for(50ms);
    EXPECT_EQ(s.state(), SessionState::logged_in) << "no login within 10 s of the target running again";
    auto served = co_await s.execute(req);
    EXPECT_TRUE(served) << (served ? "" : served.error().message());
    EXPECT_GE(s.stats().recoveries, 1u);
  });
}
