// SendPass (common/send_pass.hpp): holds, deferral, the order flushers run in, and release_later()
// running after the handlers already queued.
#include "iserkit/common/send_pass.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace iserkit {
namespace {

struct Recorder : SendPass::Flusher {
  Recorder(std::vector<std::string>& log, std::string name) : log(log), name(std::move(name)) {}
  void flush_pass() override { log.push_back(name); }
  std::vector<std::string>& log;
  std::string name;
};

// A pass of its own io_context, and the log its Recorders write.
class SendPassTest : public ::testing::Test {
 protected:
  asio::io_context io;
  SendPass& pass = SendPass::of(io.get_executor());
  std::vector<std::string> log;
};

TEST_F(SendPassTest, NotHeldMeansSendNow) {
  Recorder a(log, "a");
  EXPECT_FALSE(pass.held());
  EXPECT_FALSE(pass.defer(a));
  EXPECT_EQ(pass.deferred(), 0u);
  EXPECT_EQ(&pass, &SendPass::of(io.get_executor())) << "one pass per execution context";
}

TEST_F(SendPassTest, FlushersRunOnceInDeferralOrderWhenTheLastHoldEnds) {
  Recorder a(log, "a"), b(log, "b");
  pass.hold();
  pass.hold();  // nested: a second holder
  EXPECT_TRUE(pass.defer(b));
  EXPECT_TRUE(pass.defer(a));
  EXPECT_TRUE(pass.defer(b));  // already armed: still one flush
  EXPECT_EQ(pass.deferred(), 2u);
  pass.release();
  EXPECT_TRUE(log.empty()) << "one holder is left";
  pass.release();
  EXPECT_EQ(log, (std::vector<std::string>{"b", "a"}));
  EXPECT_FALSE(pass.held());
  pass.release();  // an extra release is harmless
  EXPECT_EQ(log.size(), 2u);
}

TEST_F(SendPassTest, AFlusherDestroyedWhileDeferredIsForgotten) {
  Recorder a(log, "a");
  pass.hold();
  {
    Recorder gone(log, "gone");
    pass.defer(gone);
    pass.defer(a);
  }
  EXPECT_EQ(pass.deferred(), 1u);
  pass.release();
  EXPECT_EQ(log, (std::vector<std::string>{"a"}));
}

TEST_F(SendPassTest, ReleaseLaterRunsAfterTheHandlersAlreadyQueued) {
  Recorder a(log, "flush");
  pass.hold();
  // Work the holder started in this pass (posted first) defers; the release posted after it
  // flushes once, after all of it.
  asio::post(io, [&] { log.push_back("task 1"); EXPECT_TRUE(pass.defer(a)); });
  asio::post(io, [&] { log.push_back("task 2"); EXPECT_TRUE(pass.defer(a)); });
  pass.release_later(io.get_executor());
  io.run();
  EXPECT_EQ(log, (std::vector<std::string>{"task 1", "task 2", "flush"}));
  EXPECT_FALSE(pass.held());
}

TEST_F(SendPassTest, AFlushThatDefersAgainWithoutAHoldSendsNow) {
  struct Again : SendPass::Flusher {
    SendPass* pass = nullptr;
    int flushes = 0;
    bool deferred_in_flush = true;
    void flush_pass() override {
      ++flushes;
      deferred_in_flush = pass->defer(*this);
    }
  } f;
  f.pass = &pass;
  pass.hold();
  pass.defer(f);
  pass.release();
  EXPECT_EQ(f.flushes, 1);
  EXPECT_FALSE(f.deferred_in_flush) << "the pass is no longer held inside a flush";
}

}  // namespace
}  // namespace iserkit
