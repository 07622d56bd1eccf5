// Server with several event loops (nbd_bridge/server, iserkit-nbd --threads N): connections are
// accepted on the first loop and handed to the loop with the fewest open connections, where they
// call that loop's Export on that loop's thread. Two raw clients over a Unix socket, each with a
// fixed-newstyle handshake (NBD_OPT_EXPORT_NAME) and one 4 KiB WRITE, kept open together.
// Also run under ThreadSanitizer (scripts/test.sh): the hand-off crosses threads.
#include <utility>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <set>
#include <mutex>
#include <thread>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "nbd_bridge/event_loops.hpp"
#include "nbd_bridge/memory_export.hpp"
#include "nbd_bridge/protocol.hpp"
#include "nbd_bridge/server.hpp"
#include "client_bytes.hpp"

namespace iserkit::nbd {
namespace {

// A MemoryExport that records the thread of every write.
class ThreadRecordingExport final : public Export {
 public:
  ThreadRecordingExport()
      : inner_(std::make_shared<MemoryExport>(MemoryExportOptions{.size_bytes = 1u << 20, .name = "loops"})) {}
  [[nodiscard]] ExportInfo info() const override { return inner_->info(); }
  Awaitable<std::error_code> read(std::uint64_t offset_bytes, ByteSpan dest) override {
    co_return co_await inner_->read(offset_bytes, dest);
  }
  Awaitable<std::error_code> write(std::uint64_t offset_bytes, ConstByteSpan src, bool fua) override {
    {
      std::lock_guard lock(mutex_);
      writes_.push_back({std::this_thread::get_id(), offset_bytes, src.empty() ? std::byte{} : src[0]});
    }
    co_return co_await inner_->write(offset_bytes, src, fua);
  }
  Awaitable<std::error_code> flush() override { co_return co_await inner_->flush(); }
  Awaitable<std::error_code> trim(std::uint64_t offset_bytes, std::uint64_t length_bytes, bool fua) override {
    co_return co_await inner_->trim(offset_bytes, length_bytes, fua);
  }
  Awaitable<std::error_code> write_zeroes(std::uint64_t offset_bytes, std::uint64_t length_bytes, bool may_trim,
                                          bool fua) override {
    co_return co_await inner_->write_zeroes(offset_bytes, length_bytes, may_trim, fua);
  }

  struct Write {
    std::thread::id thread;
    std::uint64_t offset_bytes = 0;
    std::byte first{};
  };
  std::vector<Write> writes() const {
    std::lock_guard lock(mutex_);
    return writes_;
  }

 private:
  std::shared_ptr<MemoryExport> inner_;
  mutable std::mutex mutex_;
  std::vector<Write> writes_;
};

using test::put_export_name_handshake;
using test::put_request;

// A blocking client on the test thread.
class RawClient {
 public:
  explicit RawClient(const std::string& path) : fd_(::socket(AF_UNIX, SOCK_STREAM, 0)) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    path.copy(address.sun_path, sizeof address.sun_path - 1);
    connected_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  }
  ~RawClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] bool connected() const { return connected_; }
  bool send(const std::vector<std::byte>& bytes) const {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  // Reads exactly `n` bytes (false on EOF or error).
  bool receive(std::size_t n, std::vector<std::byte>& out) const {
    out.resize(n);
    std::size_t got = 0;
    while (got < n) {
      const ssize_t r = ::recv(fd_, out.data() + got, n - got, 0);
      if (r <= 0) return false;
      got += static_cast<std::size_t>(r);
    }
    return true;
  }
  // Reads until the server closes; true when it did.
  bool wait_closed() const {
    std::byte b[64];
    for (;;) {
      const ssize_t r = ::recv(fd_, b, sizeof b, 0);
      if (r == 0) return true;
      if (r < 0) return false;
    }
  }

 private:
  int fd_;
  bool connected_ = false;
};

// Handshake (FIXED_NEWSTYLE | NO_ZEROES, NBD_OPT_EXPORT_NAME "") and one 4 KiB WRITE of `fill`.
std::vector<std::byte> handshake_and_write(std::uint64_t offset, std::byte fill) {
  std::vector<std::byte> in;
  put_export_name_handshake(in);
  put_request(in, 1, 1, offset, 4096);  // NBD_CMD_WRITE
  in.insert(in.end(), 4096, fill);
  return in;
}

std::uint32_t reply_error(const std::vector<std::byte>& reply) {
  // greeting (18) + export name reply (10), then the simple reply: magic (4), error (4), cookie (8)
  std::uint32_t e = 0;
  for (std::size_t i = 32; i < 36; ++i) e = (e << 8) | std::to_integer<std::uint32_t>(reply.at(i));
  return e;
}

struct Loop {
  asio::io_context io{1};
  asio::executor_work_guard<asio::io_context::executor_type> guard = asio::make_work_guard(io);
  std::thread thread;
  std::thread::id id;
};

TEST(ServerLoops, ConnectionsGoToTheLeastLoadedLoopAndCallItsExportOnItsThread) {
  Loop loops[2];
  for (auto& l : loops) {
    l.thread = std::thread([&l] { l.io.run(); });
    l.id = l.thread.get_id();
  }
  auto first = std::make_shared<ThreadRecordingExport>();
  auto second = std::make_shared<ThreadRecordingExport>();
  const auto path = (std::filesystem::temp_directory_path() /
                     ("iserkit-loops-" + std::to_string(::getpid()) + ".sock")).string();
  std::vector<ServerLoopStats> stats;
  {
    Server server(loops[0].io, {ServerLoop{.io = &loops[0].io, .exported = first},
                                ServerLoop{.io = &loops[1].io, .exported = second}},
                  {.single_threaded = true});
    ASSERT_TRUE(server.listen_unix(path));

    RawClient a(path);
    ASSERT_TRUE(a.connected());
    std::vector<std::byte> reply;
    ASSERT_TRUE(a.send(handshake_and_write(0, std::byte{0xaa})));
    ASSERT_TRUE(a.receive(18 + export_name_reply_size + simple_reply_size, reply));
    EXPECT_EQ(reply_error(reply), 0u);
    // B connects while A is still open: it must go to the other loop.
    RawClient b(path);
    ASSERT_TRUE(b.connected());
    ASSERT_TRUE(b.send(handshake_and_write(8192, std::byte{0xbb})));
    ASSERT_TRUE(b.receive(18 + export_name_reply_size + simple_reply_size, reply));
    EXPECT_EQ(reply_error(reply), 0u);

    stats = server.loop_stats();
    ASSERT_EQ(stats.size(), 2u);
    for (std::size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(stats[i].open_connections, 1u) << "loop " << i;
      EXPECT_EQ(stats[i].connections, 1u) << "loop " << i;
      EXPECT_EQ(stats[i].requests, 1u) << "loop " << i;
    }
    EXPECT_EQ(server.connection_count(), 2u);

    std::vector<std::byte> disc;
    put_request(disc, 2, 2, 0, 0);  // NBD_CMD_DISC
    ASSERT_TRUE(a.send(disc));
    ASSERT_TRUE(b.send(disc));
    EXPECT_TRUE(a.wait_closed());
    EXPECT_TRUE(b.wait_closed());
    for (int i = 0; i < 500 && server.connection_count() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    EXPECT_EQ(server.connection_count(), 0u);
    stats = server.loop_stats();
    server.stop();
  }
  for (auto& l : loops) {
    l.guard.reset();
    l.io.stop();
    l.thread.join();
  }
  EXPECT_EQ(stats[0].open_connections + stats[1].open_connections, 0u);

  // Each connection wrote through its own loop's export, on that loop's thread.
  const auto w0 = first->writes();
  const auto w1 = second->writes();
  ASSERT_EQ(w0.size(), 1u);
  ASSERT_EQ(w1.size(), 1u);
  EXPECT_EQ(w0[0].thread, loops[0].id);
  EXPECT_EQ(w1[0].thread, loops[1].id);
  EXPECT_NE(w0[0].first, w1[0].first) << "both connections landed on one loop";
}

TEST(ServerLoops, OneLoopConstructorKeepsEverythingOnThatLoop) {
  asio::io_context io{1};
  auto exported = std::make_shared<ThreadRecordingExport>();
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  Server server(io, exported, {.single_threaded = true});
  ASSERT_TRUE(server.serve_connected(fds[0]));
  auto in = handshake_and_write(4096, std::byte{0x11});
  put_request(in, 2, 2, 0, 0);  // NBD_CMD_DISC
  ASSERT_EQ(::send(fds[1], in.data(), in.size(), MSG_NOSIGNAL), static_cast<ssize_t>(in.size()));
  io.run();
  ::close(fds[1]);
  const auto stats = server.loop_stats();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].connections, 1u);
  EXPECT_EQ(stats[0].requests, 1u);
  ASSERT_EQ(exported->writes().size(), 1u);
  EXPECT_EQ(exported->writes()[0].thread, std::this_thread::get_id());
}

// RFC 7143 §11.12.5: one initiator, one target, N sessions — each needs its own ISID.
TEST(ServerLoops, LoopIsidsAreDistinctRandomTypeWithNonZeroQualifiers) {
  for (int round = 0; round < 200; ++round) {
    const auto isids = loop_isids(64);
    ASSERT_EQ(isids.size(), 64u);
    std::set<std::array<std::byte, 6>> seen(isids.begin(), isids.end());
    EXPECT_EQ(seen.size(), isids.size()) << "two loops would share a session";
    for (const auto& isid : isids) {
      EXPECT_EQ(isid[0], std::byte{0x80}) << "type 10b (random)";
      EXPECT_FALSE(isid[4] == std::byte{0} && isid[5] == std::byte{0}) << "zero qualifier";
      EXPECT_TRUE(std::equal(isid.begin(), isid.begin() + 4, isids[0].begin())) << "same B and C fields";
    }
  }
}

TEST(ServerLoops, EventLoopsRunWorkersOnTheirOwnThreads) {
  EventLoops loops(3);
  ASSERT_EQ(loops.size(), 3u);
  EXPECT_NE(&loops.io(0), &loops.io(1));
  loops.start();
  std::promise<std::thread::id> ran1, ran2;
  asio::post(loops.io(1), [&] { ran1.set_value(std::this_thread::get_id()); });
  asio::post(loops.io(2), [&] { ran2.set_value(std::this_thread::get_id()); });
  const auto id1 = ran1.get_future().get();
  const auto id2 = ran2.get_future().get();
  EXPECT_NE(id1, std::this_thread::get_id());
  EXPECT_NE(id1, id2);
  loops.stop_and_join();
  loops.stop_and_join();  // idempotent
}

// The CI failure of 2026-11-29 (iserkit-nbd --threads 2 --on-give-up exit under ASan): loop 0's
// accept coroutine, still pending at exit, held a session whose timer lived on loop 1, and loop 1
// was destroyed first. Here each loop holds a pending handler that owns a timer of the other; the
// teardown must destroy both handlers while both loops' services exist (ASan sees the rest).
TEST(ServerLoops, PendingHandlersMayHoldObjectsOfAnotherLoop) {
  auto loops = std::make_unique<EventLoops>(2);
  loops->start();
  auto timer0 = std::make_shared<asio::steady_timer>(loops->io(0));
  auto timer1 = std::make_shared<asio::steady_timer>(loops->io(1));
  const std::weak_ptr<asio::steady_timer> watch0 = timer0, watch1 = timer1;
  // Loop 1 (running): a long wait whose handler owns loop 0's timer; started on loop 1's thread.
  std::promise<void> armed;
  asio::post(loops->io(1), [&, timer1, timer0]() mutable {
    timer1->expires_after(std::chrono::hours(1));
    timer1->async_wait([keep = std::move(timer0)](const boost::system::error_code&) {});
    armed.set_value();
  });
  armed.get_future().get();
  // Loop 0 (never run here): a queued handler that owns loop 1's timer.
  asio::post(loops->io(0), [keep = std::move(timer1)] {});
  timer0.reset();
  EXPECT_FALSE(watch0.expired());
  EXPECT_FALSE(watch1.expired());
  loops->shutdown();
  EXPECT_TRUE(watch0.expired()) << "the handler pending on loop 1 was not destroyed";
  EXPECT_TRUE(watch1.expired()) << "the handler pending on loop 0 was not destroyed";
  loops.reset();
}

}  // namespace
}  // namespace iserkit::nbd
