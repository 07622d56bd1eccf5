// One initiator session to a target a test script started, for the gtest clients the integration
// and interop scripts run (they name the target by an ISERKIT_TEST_*URL variable): connect, run the
// test's coroutine in the session, log out. Header-only test support.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>

#include "iserkit/initiator/session.hpp"
#include "iserkit/initiator/url.hpp"

namespace iserkit::test {

/// Runs `body(session, lun)` (a coroutine; lun: the URL's LUN, else 0) in a session with `options`
/// to the URL in the environment variable `variable`, logged out after; skips the test when the
/// variable is unset (`script` is the test script that sets it).
template <class Body>
void with_session(const char* variable, const char* script, const initiator::SessionOptions& options, Body body) {
  const char* text = std::getenv(variable);
  if (text == nullptr) GTEST_SKIP() << variable << " not set (run through " << script << ")";
  auto url = initiator::parse_url(text);
  ASSERT_TRUE(url);
  asio::io_context io;
  bool finished = false;
  asio::co_spawn(
      io,
      [&]() -> Awaitable<void> {
        auto session = co_await initiator::Session::connect(io.get_executor(), *url, options);
        EXPECT_TRUE(session) << (session ? "" : session.error().message());
        if (!session) co_return;
        co_await body(**session, scsi::Lun::from_index(url->lun.value_or(0)));
        if ((*session)->is_open()) (void)co_await (*session)->logout();
        finished = true;
      },
      asio::detached);
  io.run();
  EXPECT_TRUE(finished);
}

}  // namespace iserkit::test
