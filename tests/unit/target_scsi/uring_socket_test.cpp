// UringSocketSender: a TcpDatamover's gather sends as SQEs on the io_context's io_uring ring, over
// a real loopback TCP connection (order, large batches past the socket buffers, a gone peer,
// close with a send in flight), and the --socket-io choice against the kernel probe.
#include "backend/uring_socket.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

#include "iserkit/common/copy_counter.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/datamover/tcp_datamover.hpp"
#include "../common/datamover_pair.hpp"

namespace iserkit::target::detail {
namespace {

using asio::ip::tcp;
using datamover::Datamover;
using datamover::PduOut;
using datamover::TcpDatamover;

using datamover::test::IntoBuffer;
using datamover::test::nop_batch;
using datamover::test::pattern;
using datamover::test::pause;

// The shared loopback pair, the client sending through a UringSocketSender (Policy::always) where
// the ring can be made.
struct Pair : datamover::test::Pair {
  UringSocketSender* sender = nullptr;
  explicit Pair(int buffer_bytes = 0) : datamover::test::Pair(buffer_bytes) {
    auto made = UringSocketSender::create(io.get_executor(), UringSocketSender::Policy::always);
    if (made) {
      sender = made->get();
      client->set_socket_sender(std::move(*made));
    }
  }
};

bool ring_sends_possible() {
  const auto& f = socket_io_features();
  return f.ring && f.sendmsg && f.send;
}

TEST(UringSocketSender, AWholeBatchArrivesInOrderWithoutCopies) {
  if (!ring_sends_possible()) GTEST_SKIP() << "no io_uring sends here: " << socket_io_features().error;
  Pair p;
  ASSERT_NE(p.sender, nullptr);
  p.server->set_max_recv_data_segment_length(1 << 20);
  const auto payload = pattern(65537);
  std::vector<std::byte> landing(payload.size());
  IntoBuffer placement;
  placement.target = landing;
  const std::uint64_t copied_before = copied_payload_bytes();
  p.run([&]() -> Awaitable<void> {
    for (std::uint32_t round = 0; round < 3; ++round) {
      std::vector<PduOut> batch;
      batch.push_back(datamover::make_pdu(iscsi::NopOut{.itt = iscsi::Itt{round * 10 + 1}}));
      batch.push_back(datamover::make_pdu(iscsi::DataOut{.itt = iscsi::Itt{round * 10 + 2}}, payload));
      batch.push_back(datamover::make_pdu(iscsi::NopOut{.itt = iscsi::Itt{round * 10 + 3}}));
      EXPECT_EQ(p.client->try_send_now(batch), Datamover::SendNow::queued);
      EXPECT_FALSE(co_await p.client->finish_send());
      for (std::uint32_t k = 1; k <= 3; ++k) {
        auto in = co_await p.server->receive(k == 2 ? &placement : nullptr);
        EXPECT_TRUE(in);
        if (!in) co_return;
        EXPECT_EQ(to_u32(iscsi::itt_of(in->bhs)), round * 10 + k);
        if (k == 2) {
          EXPECT_TRUE(std::equal(payload.begin(), payload.end(), landing.begin(), landing.end()));
        }
      }
    }
    // One buffer (a header-only PDU): IORING_OP_SEND.
    auto one = nop_batch(99);
    EXPECT_EQ(p.client->try_send_now(one), Datamover::SendNow::queued);
    EXPECT_FALSE(co_await p.client->finish_send());
    auto in = co_await p.server->receive(nullptr);
    EXPECT_TRUE(in && to_u32(iscsi::itt_of(in->bhs)) == 99u);
  });
  EXPECT_EQ(p.sender->started(), 4u);
  EXPECT_EQ(copied_payload_bytes() - copied_before, 0u);
}

TEST(UringSocketSender, ABatchLargerThanTheSocketBuffersIsSentWhole) {
  if (!ring_sends_possible()) GTEST_SKIP() << "no io_uring sends here";
  Pair p(16 * 1024);
  p.server->set_max_recv_data_segment_length(4 << 20);
  const auto big = pattern(3 << 20);
  p.run([&]() -> Awaitable<void> { co_await datamover::test::expect_queued_data_then_nop(p, big); });
}

TEST(UringSocketSender, AGonePeerFailsTheSendAndEverySendAfter) {
  if (!ring_sends_possible()) GTEST_SKIP() << "no io_uring sends here";
  Pair p;
  p.server.reset();
  p.run([&]() -> Awaitable<void> {
    std::error_code ec;
    for (std::uint32_t i = 0; i < 100 && !ec; ++i) {
      auto one = nop_batch(i);
      switch (p.client->try_send_now(one)) {
        case Datamover::SendNow::queued: ec = co_await p.client->finish_send(); break;
        case Datamover::SendNow::refused: ec = co_await p.client->send_batch(std::move(one)); break;
        case Datamover::SendNow::sent: break;
      }
      co_await pause(p.io, std::chrono::milliseconds(2));
    }
    EXPECT_EQ(ec, make_error_code(errc::connection_closed));
    auto again = nop_batch(1000);
    EXPECT_EQ(p.client->try_send_now(again), Datamover::SendNow::refused);
    EXPECT_EQ(co_await p.client->send_batch(std::move(again)), make_error_code(errc::connection_closed));
  });
}

TEST(UringSocketSender, AbortWithASendBlockedOnAFullSocketEndsIt) {
  if (!ring_sends_possible()) GTEST_SKIP() << "no io_uring sends here";
  Pair p(16 * 1024);
  const auto big = pattern(8 << 20);  // far more than the buffers: blocked until the peer reads
  p.run([&]() -> Awaitable<void> {
    std::vector<PduOut> batch;
    batch.push_back(datamover::make_pdu(iscsi::DataOut{.itt = iscsi::Itt{1}}, big));
    EXPECT_EQ(p.client->try_send_now(batch), Datamover::SendNow::queued);
    co_await pause(p.io, std::chrono::milliseconds(20));
    p.client->abort();  // no shutdown(): only the cancel can end the ring's send
    EXPECT_TRUE(co_await p.client->finish_send());
  });
}

TEST(UringSocketSender, DestroyedWithASendInFlightLeavesNothingBehind) {
  if (!ring_sends_possible()) GTEST_SKIP() << "no io_uring sends here";
  Pair p(16 * 1024);
  const auto big = pattern(8 << 20);
  std::vector<PduOut> batch;
  batch.push_back(datamover::make_pdu(iscsi::DataOut{.itt = iscsi::Itt{1}}, big));
  EXPECT_EQ(p.client->try_send_now(batch), Datamover::SendNow::queued);
  p.io.run_for(std::chrono::milliseconds(20));
  p.client.reset();  // cancels; the orphaned operation is freed by its CQE
  p.io.restart();
  p.io.run_for(std::chrono::milliseconds(50));
}

TEST(UringSocketSender, JoinPendingSendsOnTheRingOnlyWithBackendSqesWaiting) {
  if (!ring_sends_possible()) GTEST_SKIP() << "no io_uring sends here";
  Pair p;
  auto made = UringSocketSender::create(p.io.get_executor(), UringSocketSender::Policy::join_pending);
  ASSERT_TRUE(made);
  UringSocketSender* sender = made->get();
  p.client->set_socket_sender(std::move(*made));
  p.run([&]() -> Awaitable<void> {
    // Nothing waits for a submit (queue depth 1): refused, the datamover's own sendmsg sends it.
    auto alone = nop_batch(1);
    EXPECT_EQ(p.client->try_send_now(alone), Datamover::SendNow::sent);
    EXPECT_EQ(sender->started(), 0u);
    // A backend SQE (a NOP here) waits for the pass's submit: the send joins it.
    bool nop_done = false;
    asio::co_spawn(p.io, [&]() -> Awaitable<void> {
      EXPECT_EQ(co_await uring_run([](io_uring_sqe* sqe) { io_uring_prep_nop(sqe); }), 0);
      nop_done = true;
    }, asio::detached);
    co_await asio::post(p.io, asio::use_awaitable);  // the NOP's coroutine prepares its SQE
    auto joined = nop_batch(2);
    EXPECT_EQ(p.client->try_send_now(joined), Datamover::SendNow::queued);
    EXPECT_EQ(sender->started(), 1u);
    EXPECT_FALSE(co_await p.client->finish_send());
    for (std::uint32_t want : {1u, 2u}) {
      auto in = co_await p.server->receive(nullptr);
      EXPECT_TRUE(in && to_u32(iscsi::itt_of(in->bhs)) == want);
    }
    co_await pause(p.io, std::chrono::milliseconds(10));
    EXPECT_TRUE(nop_done);
  });
}

TEST(UringService, CompletionsWakeTheLoopThroughTheRingDescriptorOrTheEventfd) {
  if (!socket_io_features().ring) GTEST_SKIP() << "no io_uring here";
  for (const char* eventfd : {"0", "1"}) {  // the ring's own descriptor, then $ISERKIT_URING_EVENTFD=1
    ::setenv("ISERKIT_URING_EVENTFD", eventfd, 1);
    asio::io_context io;
    int completed = 0;
    asio::co_spawn(io, [&]() -> Awaitable<void> {
      // One at a time: each completion has to wake the loop on its own.
      for (int i = 0; i < 5; ++i) {
        asio::steady_timer t(io);
        t.expires_after(std::chrono::milliseconds(1));
        co_await t.async_wait(asio::use_awaitable);
        const int res = co_await uring_run([](io_uring_sqe* sqe) { io_uring_prep_nop(sqe); });
        EXPECT_EQ(res, 0);
        ++completed;
      }
    }, asio::detached);
    io.run_for(std::chrono::seconds(5));
    EXPECT_EQ(completed, 5) << "ISERKIT_URING_EVENTFD=" << eventfd;
  }
  ::unsetenv("ISERKIT_URING_EVENTFD");
}

TEST(SocketIo, TheChoiceFollowsTheModeAndTheProbe) {
  SocketIoFeatures none;  // a kernel without io_uring (or a seccomp filter that forbids it)
  EXPECT_FALSE(socket_sends_on_ring(SocketIo::uring, none));
  EXPECT_FALSE(socket_sends_on_ring(SocketIo::automatic, none));
  EXPECT_FALSE(socket_sends_on_ring(SocketIo::epoll, none));
  SocketIoFeatures no_sendmsg{.ring = true, .sendmsg = false, .send = true};
  EXPECT_FALSE(socket_sends_on_ring(SocketIo::uring, no_sendmsg));
  SocketIoFeatures all{.ring = true, .sendmsg = true, .send = true, .send_zc = true, .recv_multishot = true,
                       .buf_ring = true, .fast_poll = true};
  EXPECT_TRUE(socket_sends_on_ring(SocketIo::uring, all));
  EXPECT_FALSE(socket_sends_on_ring(SocketIo::epoll, all));
  // The probe on this kernel is consistent with itself.
  const auto& here = socket_io_features();
  if (!here.ring) {
    EXPECT_FALSE(here.error.empty());
  }
  if (here.send_zc) {
    EXPECT_TRUE(here.sendmsg);
  }
  EXPECT_EQ(selected_socket_io(SocketIo::epoll), "epoll");
  EXPECT_EQ(selected_socket_io(SocketIo::uring), ring_sends_possible() ? "uring" : "epoll");
}

TEST(SocketIo, OptionSpellings) {
  EXPECT_EQ(*parse_socket_io("auto"), SocketIo::automatic);
  EXPECT_EQ(*parse_socket_io("URING"), SocketIo::uring);
  EXPECT_EQ(*parse_socket_io("epoll"), SocketIo::epoll);
  EXPECT_FALSE(parse_socket_io("kqueue"));
  EXPECT_FALSE(parse_socket_io(""));
  EXPECT_EQ(to_string(SocketIo::automatic), "auto");
  EXPECT_EQ(to_string(SocketIo::uring), "uring");
}

}  // namespace
}  // namespace iserkit::target::detail
