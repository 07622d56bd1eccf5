// Session teardown: nothing of a Session outlives its end. A coroutine of the driver parked on one
// of the session's own events (not an Asio operation) must not keep the session alive in a cycle:
//  - a logout while the session recovers (no connection to log out on) ends it, and every loop
//    hears that (before the fix, the sender stayed parked on outbox_ready holding the session:
//    ~14 KB leaked in iserkit-nbd stopped by SIGTERM while reconnecting, LSan);
//  - an open session whose io_context is destroyed without a logout is destroyed with it once
//    its owner lets go (a weak observer proves Session::Impl was freed).
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <utility>

#include "fake_datamover.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/datamover/tcp_datamover.hpp"
#include "session_rig.hpp"

using namespace iserkit;
using namespace iserkit::initiator;
using namespace std::chrono_literals;
using test::FakeDatamover;

namespace {

// A session whose target is gone for good: every reconnect is refused (and counted), the
// back-off between them 1..4 ms, and a weak observer of the session.
struct RefusingReconnects {
  explicit RefusingReconnects(std::chrono::milliseconds replacement_timeout) {
    SessionOptions options;
    options.replacement_timeout = replacement_timeout;
    options.reconnect_delay_min = 1ms;
    options.reconnect_delay_max = 4ms;
    Reconnector reconnect = [this]() -> Awaitable<Result<Reconnected>> {
      ++attempts;
      co_return fail(std::errc::connection_refused);
    };
    rig.start(std::make_unique<FakeDatamover>(rig.io.get_executor()), std::move(options), {}, std::move(reconnect));
    observer = rig.session;
  }

  // Polls every millisecond, up to 2 s, until `done()` (session_rig.hpp's test::wait_until).
  template <class Pred>
  Awaitable<void> wait_until(Pred done) {
    return test::wait_until(rig.io, std::move(done), 2000ms);
  }

  // Runs `body` (not SessionRig::run(): it closes the session after the body, and close() would
  // end it anyway; iserkit-nbd only logs out) until the io_context runs out of work: the timer,
  // receive, send and reconnect loops all returned. Then dropping the session frees it, and the
  // reconnect loop makes no more attempts.
  template <class Body>
  void expect_every_loop_ends(Body body, const char* what) {
    asio::co_spawn(rig.io, std::move(body), asio::detached);
    rig.io.run_for(5s);
    EXPECT_TRUE(rig.io.stopped()) << "a session loop is still running after the logout ended the " << what;
    ASSERT_TRUE(logged_out.has_value());
    const int attempts_at_logout = attempts;
    rig.session.reset();
    EXPECT_TRUE(observer.expired()) << "a loop still holds the " << what << " after it ended";
    rig.io.restart();
    rig.io.run_for(50ms);
    EXPECT_EQ(attempts, attempts_at_logout) << "the reconnect loop went on after the logout";
  }

  int attempts = 0;
  std::weak_ptr<Session> observer;
  std::optional<Result<void>> logged_out;
  test::SessionRig rig{test::SessionRig::Deferred{}};  // last: destroyed first, with the reconnector
};

}  // namespace

TEST(SessionTeardown, LogoutWhileRecoveringEndsEveryLoopAndFreesTheSession) {
  RefusingReconnects s(30s);  // longer than the test: only the logout can end it
  s.expect_every_loop_ends(
      [&]() -> Awaitable<void> {
        s.rig.dm->push_error(make_error_code(errc::connection_closed));  // the target died
        co_await s.wait_until([&] { return s.rig.session->recovering() && s.attempts >= 2; });
        EXPECT_TRUE(s.rig.session->recovering());
        EXPECT_GE(s.attempts, 2) << "the reconnect loop never ran";
        s.logged_out = co_await s.rig.session->logout();
        EXPECT_FALSE(s.rig.session->is_open());
        EXPECT_FALSE(s.rig.session->recovering());
      },
      "session");
  ASSERT_TRUE(s.logged_out.has_value());
  ASSERT_FALSE(*s.logged_out);
  EXPECT_EQ(s.logged_out->error(), make_error_code(errc::session_closed));
}

// The same once the replacement timeout has passed (SessionState::failed, logins going on in the
// background): iserkit-nbd's and iserkit-fuse's shutdown logs out such a session, which must end
// every loop, the reconnect loop included, and free the session.
TEST(SessionTeardown, LogoutOfAFailedSessionEndsEveryLoopAndFreesTheSession) {
  RefusingReconnects s(10ms);
  s.expect_every_loop_ends(
      [&]() -> Awaitable<void> {
        s.rig.dm->push_error(make_error_code(errc::connection_closed));
        co_await s.wait_until([&] { return s.rig.session->state() == SessionState::failed; });
        EXPECT_EQ(s.rig.session->state(), SessionState::failed);
        const int attempts_when_failed = s.attempts;
        co_await s.wait_until([&] { return s.attempts >= attempts_when_failed + 2; });
        EXPECT_GE(s.attempts, attempts_when_failed + 2) << "no login after the replacement timeout";
        s.logged_out = co_await s.rig.session->logout();
        EXPECT_EQ(s.rig.session->state(), SessionState::ended);
      },
      "failed session");
}

// An open, idle session over a real TcpDatamover (receive loop in an Asio read, timer loop in an
// Asio timer, sender parked on the session's own Event): the program stops its io_context without
// logging out, drops the session and destroys the io_context. The Asio operations' frames go with
// the io_context; the parked sender must not keep the session alive.
TEST(SessionTeardown, OpenSessionIsFreedWithItsIoContext) {
  std::weak_ptr<Session> observer;
  {
    asio::io_context io;
    using asio::ip::tcp;
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    tcp::socket c(io);
    c.connect(acceptor.local_endpoint());
    tcp::socket peer = acceptor.accept();
    auto session = start_session(io.get_executor(), std::make_unique<datamover::TcpDatamover>(std::move(c)), {}, {},
                                 "iqn.2026-01.test:t", test::fresh_login());
    observer = session;
    io.run_for(50ms);  // every loop is parked now
    EXPECT_TRUE(session->is_open());
    io.stop();
    session.reset();
    EXPECT_FALSE(observer.expired()) << "the loops parked in Asio operations still hold it";
  }  // the io_context is destroyed, and with it its pending operations and the frames awaiting them
  EXPECT_TRUE(observer.expired()) << "a parked session coroutine keeps Session::Impl alive (reference cycle)";
}
