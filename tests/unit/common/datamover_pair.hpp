// Shared by the TcpDatamover tests (tests/unit/common/tcp_datamover_test.cpp) and the target's
// io_uring socket sender tests (tests/unit/target_scsi/uring_socket_test.cpp): a connected pair of
// TcpDatamovers on 127.0.0.1, a placement into one buffer, a payload pattern, small batches and
// the check that a queued [DataOut, NopOut] batch arrives whole while finish_send() completes.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/datamover/tcp_datamover.hpp"

namespace iserkit::datamover::test {

// A connected pair of TcpDatamovers on 127.0.0.1 plus the io_context that drives them.
struct Pair {
  asio::io_context io;
  std::unique_ptr<TcpDatamover> client;
  std::unique_ptr<TcpDatamover> server;
  /// `buffer_bytes` > 0: the client's send and the server's receive buffer that small (SO_SNDBUF,
  /// SO_RCVBUF; the kernel doubles the value), so a large send cannot go out at once.
  explicit Pair(int buffer_bytes = 0) {
    using asio::ip::tcp;
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    tcp::socket c(io);
    c.connect(acceptor.local_endpoint());
    tcp::socket s = acceptor.accept();
    if (buffer_bytes > 0) {
      c.set_option(asio::socket_base::send_buffer_size(buffer_bytes));
      s.set_option(asio::socket_base::receive_buffer_size(buffer_bytes));
    }
    client = std::make_unique<TcpDatamover>(std::move(c));
    server = std::make_unique<TcpDatamover>(std::move(s));
  }
  template <class F>
  void run(F f) {
    bool done = false;
    asio::co_spawn(io, [&]() -> Awaitable<void> { co_await f(); done = true; }, asio::detached);
    io.restart();  // an earlier run() that ran out of work left the context stopped
    io.run_for(std::chrono::seconds(10));
    ASSERT_TRUE(done) << "coroutine did not finish";
  }
};

// Places every data segment at the start of `target`.
struct IntoBuffer : DataPlacement {
  std::span<std::byte> target;
  std::span<std::byte> place(const iscsi::Bhs&, std::uint32_t length) noexcept override {
    return length <= target.size() ? target.first(length) : std::span<std::byte>{};
  }
};

inline std::vector<std::byte> pattern(std::size_t n) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>(i * 31 + 7);
  return v;
}

/// A batch of one header-only NOP-Out with ITT `itt`.
inline std::vector<PduOut> nop_batch(std::uint32_t itt) {
  std::vector<PduOut> batch;
  batch.push_back(make_pdu(iscsi::NopOut{.itt = iscsi::Itt{itt}}));
  return batch;
}

/// Suspends the calling coroutine for `d` on `io`'s timers.
inline Awaitable<void> pause(asio::io_context& io, std::chrono::milliseconds d) {
  asio::steady_timer t(io);
  t.expires_after(d);
  co_await t.async_wait(asio::use_awaitable);
}

/// What a send spawned beside the test's coroutine gave back: its error (errc::timeout until it
/// ended) and whether it ended.
struct Spawned {
  std::error_code ec = make_error_code(errc::timeout);
  bool done = false;
};

/// Spawns `op()` (an Awaitable<std::error_code>: send(), finish_send(), ...) on `io`; `out` gets
/// its result.
template <class Op>
void spawn_send(asio::io_context& io, Spawned& out, Op op) {
  asio::co_spawn(io, [&out, op = std::move(op)]() mutable -> Awaitable<void> {
    out.ec = co_await op();
    out.done = true;
  }, asio::detached);
}

/// try_send_now() sends a NOP-Out with ITT `itt` at once (the way out is idle), and the server
/// receives it.
inline Awaitable<void> expect_nop_sent_at_once(Pair& p, std::uint32_t itt) {
  auto batch = nop_batch(itt);
  EXPECT_EQ(p.client->try_send_now(batch), Datamover::SendNow::sent);
  auto in = co_await p.server->receive(nullptr);
  EXPECT_TRUE(in && to_u32(iscsi::itt_of(in->bhs)) == itt);
}

/// Sends [DataOut ITT 1 carrying `payload`, NopOut ITT 2] with try_send_now(), which must queue
/// the batch; runs finish_send() beside the server's receives and checks that both PDUs arrive in
/// order, the payload whole in the placed buffer, and that finish_send() then succeeded.
inline Awaitable<void> expect_queued_data_then_nop(Pair& p, const std::vector<std::byte>& payload) {
  std::vector<std::byte> landing(payload.size());
  IntoBuffer placement;
  placement.target = landing;
  std::vector<PduOut> batch;
  batch.push_back(make_pdu(iscsi::DataOut{.itt = iscsi::Itt{1}}, payload));
  batch.push_back(make_pdu(iscsi::NopOut{.itt = iscsi::Itt{2}}));
  EXPECT_EQ(p.client->try_send_now(batch), Datamover::SendNow::queued);
  Spawned finish;
  spawn_send(p.io, finish, [&] { return p.client->finish_send(); });
  auto data = co_await p.server->receive(&placement);
  EXPECT_TRUE(data && to_u32(iscsi::itt_of(data->bhs)) == 1u);
  EXPECT_TRUE(std::equal(payload.begin(), payload.end(), landing.begin(), landing.end()));
  auto nop = co_await p.server->receive(nullptr);
  EXPECT_TRUE(nop && to_u32(iscsi::itt_of(nop->bhs)) == 2u);
  co_await pause(p.io, std::chrono::milliseconds(20));
  EXPECT_TRUE(finish.done);
  EXPECT_FALSE(finish.ec);
}

}  // namespace iserkit::datamover::test
