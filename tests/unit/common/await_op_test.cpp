// await_op (common/await_op.hpp): one asynchronous wait inside an Asio coroutine with no coroutine
// frame of its own. Completion arguments, the no-wait case, an abandoned wait, and the heap
// allocations it saves (counted with a replaced operator new in this test binary only), also in
// its users on the data path (TcpDatamover's queued send).
#include <utility>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/await_op.hpp"
#include "iserkit/common/completion.hpp"
#include "iserkit/datamover/tcp_datamover.hpp"

namespace {
thread_local std::size_t allocations = 0;
}  // namespace

void* operator new(std::size_t n) {
  ++allocations;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace iserkit {
namespace {

using boost::system::error_code;

TEST(AwaitOp, TimerWaitStoresTheCompletionArgument) {
  asio::io_context io(1);
  std::optional<error_code> got;
  asio::co_spawn(io, [&]() -> Awaitable<void> {
    asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::milliseconds(1));
    error_code ec = asio::error::fault;
    co_await await_op(ec, [&](auto make_handler) { timer.async_wait(make_handler()); });
    got = ec;
  }, asio::detached);
  io.run();
  ASSERT_TRUE(got.has_value());
  EXPECT_FALSE(*got) << got->message();
}

TEST(AwaitOp, SocketReadStoresErrorAndByteCount) {
  asio::io_context io(1);
  asio::local::stream_protocol::socket a(io), b(io);
  asio::local::connect_pair(a, b);
  std::string seen;
  asio::co_spawn(io, [&]() -> Awaitable<void> {
    std::array<char, 16> buf{};
    std::tuple<error_code, std::size_t> r{asio::error::fault, 0};
    co_await await_op(r, [&](auto make_handler) { a.async_read_some(asio::buffer(buf), make_handler()); });
    EXPECT_FALSE(std::get<0>(r));
    seen.assign(buf.data(), std::get<1>(r));
    // End of stream comes back as an error code, not an exception.
    co_await await_op(r, [&](auto make_handler) { a.async_read_some(asio::buffer(buf), make_handler()); });
    EXPECT_EQ(std::get<0>(r), asio::error::eof);
  }, asio::detached);
  asio::write(b, asio::buffer(std::string("iscsi")));
  b.shutdown(asio::socket_base::shutdown_send);
  io.run();
  EXPECT_EQ(seen, "iscsi");
}

// initiate makes no handler: the coroutine goes on at once, before anything posted earlier runs.
TEST(AwaitOp, NoHandlerMadeResumesAtOnce) {
  asio::io_context io(1);
  std::string order;
  asio::co_spawn(io, [&]() -> Awaitable<void> {
    asio::post(io, [&] { order += "posted "; });
    NoResult none;
    co_await await_op(none, [](auto) {});
    order += "resumed ";
  }, asio::detached);
  io.run();
  EXPECT_EQ(order, "resumed posted ");
}

// A handler destroyed uncalled (its io_context destroyed) unwinds the coroutine: the frame's
// locals are destroyed, nothing resumes.
TEST(AwaitOp, AbandonedWaitUnwindsTheCoroutine) {
  auto alive = std::make_shared<int>(0);
  std::weak_ptr<int> watch = alive;
  bool resumed = false;
  {
    asio::io_context io(1);
    asio::co_spawn(io, [&, keep = std::move(alive)]() -> Awaitable<void> {
      asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::hours(1));
      error_code ec;
      co_await await_op(ec, [&](auto make_handler) { timer.async_wait(make_handler()); });
      resumed = true;
    }, asio::detached);
    io.run_for(std::chrono::milliseconds(5));
    EXPECT_FALSE(watch.expired());
  }
  EXPECT_FALSE(resumed);
  EXPECT_TRUE(watch.expired()) << "the abandoned coroutine's frame was not destroyed";
}

// Two coroutines that take turns, each waiting inside a nested coroutine (the shape of a receive
// loop calling the datamover's receive(), and a writer): with use_awaitable two frames are alive
// per wait (the nested coroutine's and the initiation's) and Asio caches one freed frame per
// thread, so every wait allocates; with await_op only the nested frame is left and the cache
// serves it.
template <bool Frameless>
std::size_t allocations_for_ping_pong(int rounds) {
  asio::io_context io(1);
  asio::steady_timer ping(io), pong(io);
  ping.expires_at(asio::steady_timer::time_point::max());
  pong.expires_at(asio::steady_timer::time_point::max());
  std::size_t before = 0, after = 0;
  auto wait = [](asio::steady_timer& t) -> Awaitable<void> {
    error_code ec;
    if constexpr (Frameless) {
      co_await await_op(ec, [&](auto make_handler) { t.async_wait(make_handler()); });
    } else {
      co_await t.async_wait(use_awaitable_ec(ec));
    }
  };
  asio::co_spawn(io, [&]() -> Awaitable<void> {
    for (int i = 0; i < rounds; ++i) {
      if (i == 10) before = allocations;
      co_await wait(ping);
      pong.cancel();
    }
    after = allocations;
    pong.cancel();
  }, asio::detached);
  asio::co_spawn(io, [&]() -> Awaitable<void> {
    for (int i = 0; i < rounds; ++i) {
      ping.cancel();
      co_await wait(pong);
    }
  }, asio::detached);
  io.run();
  return after - before;
}

TEST(AwaitOp, TakingTurnsAllocatesLessThanUseAwaitable) {
  constexpr int rounds = 1000;
  const std::size_t frameless = allocations_for_ping_pong<true>(rounds);
  const std::size_t with_frames = allocations_for_ping_pong<false>(rounds);
  std::cout << "allocations per round: await_op " << static_cast<double>(frameless) / (rounds - 10)
            << ", use_awaitable " << static_cast<double>(with_frames) / (rounds - 10) << "\n";
  EXPECT_LT(frameless, with_frames);
  EXPECT_LE(frameless, static_cast<std::size_t>(rounds / 100)) << "await_op should allocate nothing per wait";
}

// HandlerMemory (handler_memory.hpp): one block, used by one operation at a time; a second
// request while it is busy, or a larger one, goes to the heap and is given back there.
TEST(HandlerMemory, OneBlockAtATimeThenTheHeap) {
  HandlerMemory m;
  void* a = m.allocate(100);
  EXPECT_TRUE(m.in_use());
  EXPECT_EQ(m.heap_allocations(), 0u);
  void* b = m.allocate(100);  // busy: heap
  EXPECT_NE(a, b);
  EXPECT_EQ(m.heap_allocations(), 1u);
  m.deallocate(b);
  EXPECT_TRUE(m.in_use());
  m.deallocate(a);
  EXPECT_FALSE(m.in_use());
  void* big = m.allocate(HandlerMemory::block_bytes + 1);  // too large: heap
  EXPECT_EQ(m.heap_allocations(), 2u);
  EXPECT_FALSE(m.in_use());
  m.deallocate(big);
  EXPECT_EQ(m.allocate(8), a);  // the block again
  m.deallocate(a);
}

// A loop of socket reads through await_op with a HandlerMemory: after the first rounds, no heap
// allocation at all per read — the reactor operation's state lives in the memory, and the
// completion resumes the coroutine directly (same io_context) instead of through a type-erased
// function object. The same loop without the memory, while a second operation of the same kind
// is in flight (a long timer wait, as the target's io_uring eventfd wait is), allocates per read.
template <bool WithMemory>
std::size_t allocations_for_reads(int rounds, HandlerMemory& memory) {
  asio::io_context io(1);
  asio::local::stream_protocol::socket a(io), b(io);
  asio::local::connect_pair(a, b);
  asio::steady_timer other(io, std::chrono::hours(1));  // holds Asio's one cached block
  std::size_t before = 0, after = 0;
  asio::co_spawn(io, [&]() -> Awaitable<void> {
    std::array<char, 4> buf{};
    for (int i = 0; i < rounds; ++i) {
      if (i == 10) before = allocations;
      other.async_wait([](error_code) {});  // re-armed each round, as a loop's other wait is
      std::tuple<error_code, std::size_t> r{};
      if constexpr (WithMemory) {
        co_await await_op(r, memory, [&](auto make_handler) { a.async_read_some(asio::buffer(buf), make_handler()); });
      } else {
        co_await await_op(r, [&](auto make_handler) { a.async_read_some(asio::buffer(buf), make_handler()); });
      }
      EXPECT_FALSE(std::get<0>(r));
      other.cancel();
      asio::write(b, asio::buffer("x", 1));
    }
    after = allocations;
  }, asio::detached);
  asio::write(b, asio::buffer("x", 1));
  io.run();
  return after - before;
}

TEST(AwaitOp, ReadsWithHandlerMemoryDoNotAllocate) {
  constexpr int rounds = 500;
  HandlerMemory memory, unused;
  const std::size_t with_memory = allocations_for_reads<true>(rounds, memory);
  const std::size_t without = allocations_for_reads<false>(rounds, unused);
  std::cout << "allocations per read: with HandlerMemory " << static_cast<double>(with_memory) / (rounds - 10)
            << ", without " << static_cast<double>(without) / (rounds - 10) << "\n";
  EXPECT_EQ(memory.heap_allocations(), 0u);
  EXPECT_LE(with_memory, static_cast<std::size_t>(rounds / 100));
  EXPECT_GT(without, with_memory);
}

// Completion and Event resume their waiters through a post. With several of those posts in
// flight at once (a pass of 8 tasks completing: each task's waiter resumed, as the target's
// writer wakes and send pass releases are), Boost 1.74's per-thread cache (one block per kind)
// missed for all but one, and any_io_executor's post also made a type-erased function object:
// two allocations per resumption. Now the posted resumption comes from the thread's block cache
// (handler_memory.hpp: BlockCacheAllocator): nothing per round once warm.
TEST(Completion, ResumptionsInFlightTogetherDoNotAllocate) {
  constexpr int tasks = 8, rounds = 200;
  asio::io_context io(1);
  std::array<Completion, tasks> done;
  Completion all_resumed;  // the driver's own wait, through the same path
  std::array<Completion, tasks> go;
  int resumed = 0;
  std::size_t before = 0, after = 0;
  for (int t = 0; t < tasks; ++t) {
    asio::co_spawn(io, [&, t]() -> Awaitable<void> {
      for (int r = 0; r < rounds; ++r) {
        co_await done[t].wait();
        done[t].reset();
        if (++resumed % tasks == 0) all_resumed.complete();
        co_await go[t].wait();
        go[t].reset();
      }
    }, asio::detached);
  }
  asio::co_spawn(io, [&]() -> Awaitable<void> {
    for (int r = 0; r < rounds; ++r) {
      if (r == 10) before = allocations;
      for (auto& c : done) c.complete();  // 8 resumptions posted together
      co_await all_resumed.wait();
      all_resumed.reset();
      for (auto& c : go) c.complete();  // and 8 more
    }
    after = allocations;
  }, asio::detached);
  io.run();
  EXPECT_EQ(resumed, tasks * rounds);
  std::cout << "allocations per round of " << 2 * tasks + 1 << " resumptions: "
            << static_cast<double>(after - before) / (rounds - 10) << "\n";
  // Before the block cache: 14 allocations per round here (Asio's one cached block per kind
  // served some of the 17 resumptions).
  EXPECT_LE(after - before, static_cast<std::size_t>(rounds / 10)) << "posted resumptions should come from the block cache";
}

// The direct completion (await_op.hpp's associated_executor specialization) must not move a
// coroutine to another loop: a coroutine of io_context A waiting on a socket of io_context B
// (run by another thread) resumes on A's thread.
TEST(AwaitOp, ACompletionOnAnotherLoopResumesOnTheCoroutinesOwn) {
  asio::io_context a_io(1), b_io(1);
  auto b_work = asio::make_work_guard(b_io);
  std::thread b_thread([&] { b_io.run(); });
  asio::local::stream_protocol::socket a(b_io), b(b_io);  // both on B's loop
  asio::local::connect_pair(a, b);
  std::thread::id resumed_on;
  bool on_a_loop = false;
  asio::co_spawn(a_io, [&]() -> Awaitable<void> {
    std::array<char, 4> buf{};
    std::tuple<error_code, std::size_t> r{};
    co_await await_op(r, [&](auto make_handler) { a.async_read_some(asio::buffer(buf), make_handler()); });
    resumed_on = std::this_thread::get_id();
    on_a_loop = a_io.get_executor().running_in_this_thread();
    EXPECT_EQ(std::get<1>(r), 1u);
  }, asio::detached);
  a_io.run_one();  // starts the coroutine; it waits on B's socket
  asio::write(b, asio::buffer("x", 1));
  a_io.restart();
  a_io.run_for(std::chrono::seconds(5));
  b_work.reset();
  b_io.stop();
  b_thread.join();
  EXPECT_EQ(resumed_on, std::this_thread::get_id());
  EXPECT_TRUE(on_a_loop);
}

// TcpDatamover's queued send: try_send_now() writes what the socket takes and leaves the rest to
// finish_send() (a 1 MiB Data-In that a slow reader's socket buffer cannot take at once: the
// target's 1 MiB read under load). Once warm, a round allocates nothing: finish_send() is one
// coroutine frame (Asio's per-thread cache serves it) that waits for the rest with
// write_remaining_op() in place, and the caller's batch vector gets the capacity of the one the
// datamover took before. Before: finish_send() -> write_rest() -> write_remaining(), three nested
// frames of different sizes that missed the one cached frame, and the batch's capacity kept by the
// datamover (about 4 allocations per round here; 1.06 per request in the target under load).
TEST(TcpDatamover, QueuedSendsDoNotAllocateOnceWarm) {
  using asio::ip::tcp;
  using datamover::Datamover;
  using datamover::PduOut;
  constexpr int rounds = 60, warm = 10;
  asio::io_context io(1);
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  tcp::socket c(io);
  c.connect(acceptor.local_endpoint());
  tcp::socket s = acceptor.accept();
  c.set_option(asio::socket_base::send_buffer_size(16 * 1024));  // a 256 KiB segment cannot go at once
  s.set_option(asio::socket_base::receive_buffer_size(16 * 1024));
  datamover::TcpDatamover client(std::move(c));
  const std::vector<std::byte> payload(256 * 1024, std::byte{7});
  // The peer reads every byte on a thread of its own (its allocations are not this thread's).
  const std::size_t total = rounds * (2 * iscsi::bhs_size + payload.size());
  std::thread reader([&s, total] {
    std::vector<char> buf(64 * 1024);
    std::size_t left = total;
    error_code ec;
    while (left > 0 && !ec) left -= s.read_some(asio::buffer(buf.data(), std::min(left, buf.size())), ec);
  });
  std::size_t before = 0, after = 0;
  int queued = 0;
  std::error_code failed;
  asio::co_spawn(io, [&]() -> Awaitable<void> {
    std::vector<PduOut> batch;  // reused, as the target's writer reuses its batches' vectors
    for (int i = 0; i < rounds; ++i) {
      if (i == warm) before = allocations;
      const auto itt = static_cast<std::uint32_t>(i);
      batch.push_back(datamover::make_pdu(iscsi::DataOut{.itt = iscsi::Itt{itt}}, payload));
      batch.push_back(datamover::make_pdu(iscsi::NopOut{.itt = iscsi::Itt{itt}}));
      switch (client.try_send_now(batch)) {
        case Datamover::SendNow::sent: break;
        case Datamover::SendNow::queued:
          ++queued;
          if (auto ec = co_await client.finish_send()) failed = ec;
          break;
        case Datamover::SendNow::refused: failed = std::make_error_code(std::errc::io_error); co_return;
      }
      batch.clear();
    }
    after = allocations;
  }, asio::detached);
  io.run();
  reader.join();
  EXPECT_FALSE(failed) << failed.message();
  EXPECT_GT(queued, rounds / 2) << "the socket took whole batches: the queued path was not exercised";
  std::cout << "allocations per queued send: " << static_cast<double>(after - before) / (rounds - warm) << "\n";
  EXPECT_LE(after - before, static_cast<std::size_t>((rounds - warm) / 10));
}

}  // namespace
}  // namespace iserkit
