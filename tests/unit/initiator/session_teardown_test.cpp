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

TEST(SessionTeardown, LogoutWhileRecoveringEndsEveryLoopAndFreesTheSession) {
  test::SessionRig rig(test::SessionRig::Deferred{});
  SessionOptions options;
  options.replacement_timeout = 30s;  // longer than the test: only the logout can end it
  options.reconnect_delay_min = 1ms;
  options.reconnect_delay_max = 4ms;
  int attempts = 0;
  Reconnector reconnect = [&attempts]() -> Awaitable<Result<Reconnected>> {
    ++attempts;
    co_return fail(std::errc::connection_refused);  // the target is gone for good
  };
  rig.start(std::make_unique<FakeDatamover>(rig.io.get_executor()), std::move(options), {}, std::move(reconnect));
  std::weak_ptr<Session> observer = rig.session;
  std::optional<Result<void>> logged_out;
  // Not SessionRig::run(): it closes the session after the body, and close() would end it anyway.
  // iserkit-nbd only logs out.
  asio::co_spawn(
      rig.io,
      [&]() -> Awaitable<void> {
        rig.dm->push_error(make_error_code(errc::connection_closed));  // the target died
        asio::steady_timer t(rig.io);
        for (int i = 0; i < 2000 && !(rig.session->recovering() && attempts >= 2); ++i) {
          t.expires_after(1ms);
          co_await t.async_wait(asio::use_awaitable);
        }
        EXPECT_TRUE(rig.session->recovering());
        EXPECT_GE(attempts, 2) << "the reconnect loop never ran";
        logged_out = co_await rig.session->logout();
        EXPECT_FALSE(rig.session->is_open());
        EXPECT_FALSE(rig.session->recovering());
      },
      asio::detached);
  rig.io.run_for(5s);
  // The io_context ran out of work: the timer, receive, send and reconnect loops all returned.
  EXPECT_TRUE(rig.io.stopped()) << "a session loop is still running after the logout ended the session";
  ASSERT_TRUE(logged_out.has_value());
  ASSERT_FALSE(*logged_out);
  EXPECT_EQ(logged_out->error(), make_error_code(errc::session_closed));
  const int attempts_at_logout = attempts;
  rig.session.reset();
  EXPECT_TRUE(observer.expired()) << "a loop still holds the session after it ended";
  rig.io.restart();
  rig.io.run_for(50ms);
  EXPECT_EQ(attempts, attempts_at_logout) << "the reconnect loop went on after the logout";
}

// The same once the replacement timeout has passed (SessionState::failed, logins going on in the
// background): iserkit-nbd's and iserkit-fuse's shutdown logs out such a session, which must end
// every loop, the reconnect loop included, and free the session.
TEST(SessionTeardown, LogoutOfAFailedSessionEndsEveryLoopAndFreesTheSession) {
  test::SessionRig rig(test::SessionRig::Deferred{});
  SessionOptions options;
  options.replacement_timeout = 10ms;
  options.reconnect_delay_min = 1ms;
  options.reconnect_delay_max = 4ms;
  int attempts = 0;
  Reconnector reconnect = [&attempts]() -> Awaitable<Result<Reconnected>> {
    ++attempts;
    co_return fail(std::errc::connection_refused);
  };
  rig.start(std::make_unique<FakeDatamover>(rig.io.get_executor()), std::move(options), {}, std::move(reconnect));
  std::weak_ptr<Session> observer = rig.session;
  std::optional<Result<void>> logged_out;
  int attempts_when_failed = -1;
  asio::co_spawn(
      rig.io,
      [&]() -> Awaitable<void> {
        rig.dm->push_error(make_error_code(errc::connection_closed));
        asio::steady_timer t(rig.io);
        for (int i = 0; i < 2000 && rig.session->state() != SessionState::failed; ++i) {
          t.expires_after(1ms);
          co_await t.async_wait(asio::use_awaitable);
        }
        EXPECT_EQ(rig.session->state(), SessionState::failed);
        attempts_when_failed = attempts;
        for (int i = 0; i < 2000 && attempts < attempts_when_failed + 2; ++i) {
          t.expires_after(1ms);
          co_await t.async_wait(asio::use_awaitable);
        }
        EXPECT_GE(attempts, attempts_when_failed + 2) << "no login after the replacement timeout";
        logged_out = co_await rig.session->logout();
        EXPECT_EQ(rig.session->state(), SessionState::ended);
      },
      asio::detached);
  rig.io.run_for(5s);
  EXPECT_TRUE(rig.io.stopped()) << "a session loop is still running after the logout ended the failed session";
  ASSERT_TRUE(logged_out.has_value());
  const int attempts_at_logout = attempts;
  rig.session.reset();
  EXPECT_TRUE(observer.expired()) << "a loop still holds the failed session after it ended";
  rig.io.restart();
  rig.io.run_for(50ms);
  EXPECT_EQ(attempts, attempts_at_logout) << "the reconnect loop went on after the logout";
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
