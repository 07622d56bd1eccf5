// ConnectionOptions::pool_source (nbd_bridge/transmission): the connection asks for the payload pool
// at every request, so a session whose pool changed (recovery onto a new iSER connection) gets its
// buffers from the new pool, not from the one the NBD connection started with. Driven over a real
// socketpair: a fixed-newstyle handshake (NBD_OPT_EXPORT_NAME), two 4 KiB WRITEs, NBD_CMD_DISC.
#include <utility>

#include <sys/socket.h>

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "nbd_bridge/memory_export.hpp"
#include "nbd_bridge/protocol.hpp"
#include "nbd_bridge/transmission.hpp"
#include "client_bytes.hpp"

namespace iserkit::nbd {
namespace {

// Counts allocations; the buffers themselves come from the shared heap pool.
class CountingPool final : public BufferPool {
 public:
  PooledBuffer allocate(std::size_t bytes) override {
    ++allocations;
    return HeapBufferPool::shared().allocate(bytes);
  }
  int allocations = 0;

 protected:
  void release(const Buffer&, std::size_t) noexcept override {}
};

using test::get_be;
using test::put_export_name_handshake;
using test::put_request;

// Writes `input`, waits `read_after` (0: not at all), then reads until the server closes. With
// `pending` set, stores how many bytes were waiting to be read when the reading began.
Awaitable<void> client(asio::local::stream_protocol::socket& s, std::vector<std::byte> input,
                       std::vector<std::byte>& received, std::chrono::milliseconds read_after = {},
                       std::size_t* pending = nullptr) {
  boost::system::error_code ec;
  co_await asio::async_write(s, asio::buffer(input), use_awaitable_ec(ec));
  if (read_after.count() > 0) {
    asio::steady_timer late(s.get_executor());
    late.expires_after(read_after);
    co_await late.async_wait(use_awaitable_ec(ec));
  }
  if (pending != nullptr) *pending = s.available(ec);
  std::array<std::byte, 4096> buf;
  for (;;) {
    const std::size_t n = co_await s.async_read_some(asio::buffer(buf), use_awaitable_ec(ec));
    if (ec || n == 0) break;
    received.insert(received.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
  }
}

TEST(PoolSource, EachRequestAllocatesFromTheExportsCurrentPool) {
  asio::io_context io;
  asio::local::stream_protocol::socket ours(io), theirs(io);
  asio::local::connect_pair(ours, theirs);
  Socket server_socket(io);
  server_socket.assign(asio::generic::stream_protocol(AF_UNIX, SOCK_STREAM), theirs.release());
  auto exported = std::make_shared<MemoryExport>(MemoryExportOptions{.size_bytes = 1u << 20, .name = "pool"});

  CountingPool first, second, stale;
  int asked = 0;
  ConnectionOptions options;
  options.pool = &stale;  // what the connection started with: must not be used once pool_source answers
  options.pool_source = [&]() -> BufferPool* { return ++asked == 1 ? &first : &second; };
  auto connection = Connection::create(std::move(server_socket), exported, options);

  std::vector<std::byte> in;
  put_export_name_handshake(in);
  for (std::uint64_t cookie = 1; cookie <= 2; ++cookie) {
    put_request(in, 1, cookie, cookie * 8192, 4096);  // NBD_CMD_WRITE
    in.insert(in.end(), 4096, static_cast<std::byte>(cookie));
  }
  put_request(in, 2, 3, 0, 0);  // NBD_CMD_DISC

  std::vector<std::byte> received;
  asio::co_spawn(io, connection->run(), asio::detached);
  asio::co_spawn(io, client(ours, std::move(in), received), asio::detached);
  io.run();

  EXPECT_EQ(first.allocations, 1) << "the first WRITE's payload comes from the pool current then";
  EXPECT_EQ(second.allocations, 1) << "the second WRITE's payload comes from the pool current then";
  EXPECT_EQ(stale.allocations, 0) << "the pool the connection started with must not be cached";
  // greeting (18) + export name reply (10, no zeroes), then two simple replies (16 each) with error 0
  constexpr std::size_t replies = 18 + export_name_reply_size;
  ASSERT_GE(received.size(), replies + 32);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(get_be(received, replies + 16 * i, 4), simple_reply_magic);
    EXPECT_EQ(get_be(received, replies + 16 * i + 4, 4), 0u) << "WRITE " << i + 1 << " failed";
  }
}

// A reply is first written on the request's own thread with one non-blocking gather write
// (Connection::enqueue); what the socket does not take goes to the writer coroutine. A 256 KiB
// READ reply over a socket with a small send buffer, to a client that starts reading late, is cut
// there: it must still arrive whole, after the WRITE's reply and in order.
TEST(ReplyWrite, ReadReplyLargerThanTheSocketBufferArrivesWholeAfterAPartialFirstWrite) {
  asio::io_context io;
  asio::local::stream_protocol::socket ours(io), theirs(io);
  asio::local::connect_pair(ours, theirs);
  theirs.set_option(asio::socket_base::send_buffer_size(8192));
  Socket server_socket(io);
  server_socket.assign(asio::generic::stream_protocol(AF_UNIX, SOCK_STREAM), theirs.release());
  auto exported = std::make_shared<MemoryExport>(MemoryExportOptions{.size_bytes = 1u << 20, .name = "big"});
  auto connection = Connection::create(std::move(server_socket), exported, ConnectionOptions{});

  constexpr std::size_t length = 256 * 1024;
  std::vector<std::byte> data(length);
  for (std::size_t i = 0; i < length; ++i) data[i] = static_cast<std::byte>((i * 13 + 5) & 0xff);
  std::vector<std::byte> in;
  put_export_name_handshake(in);
  put_request(in, 1, 1, 65536, length);  // NBD_CMD_WRITE
  in.insert(in.end(), data.begin(), data.end());
  put_request(in, 0, 2, 65536, length);  // NBD_CMD_READ
  put_request(in, 2, 3, 0, 0);           // NBD_CMD_DISC

  std::vector<std::byte> received;
  std::size_t pending = 0;
  asio::co_spawn(io, connection->run(), asio::detached);
  // The reply meets a full socket buffer first: the client reads only after 50 ms.
  asio::co_spawn(io, client(ours, std::move(in), received, std::chrono::milliseconds(50), &pending), asio::detached);
  io.run();

  constexpr std::size_t start = 18 + export_name_reply_size;  // greeting + export name reply
  ASSERT_EQ(received.size(), start + 16 + 16 + length);
  EXPECT_LT(pending, received.size()) << "the whole reply fit the socket at once: the partial path was not taken";
  EXPECT_EQ(get_be(received, start, 4), simple_reply_magic);
  EXPECT_EQ(get_be(received, start + 4, 4), 0u) << "the WRITE failed";
  EXPECT_EQ(get_be(received, start + 8, 8), 1u);
  EXPECT_EQ(get_be(received, start + 16, 4), simple_reply_magic);
  EXPECT_EQ(get_be(received, start + 20, 4), 0u) << "the READ failed";
  EXPECT_EQ(get_be(received, start + 24, 8), 2u);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), received.begin() + static_cast<std::ptrdiff_t>(start + 32)))
      << "the READ reply's data is not what was written";
}

// A connection over a socketpair (`ours` is the client's end) that only its run() holds, as the
// Server keeps them (weak references; the spawn's completion handler holds it until run() ends).
// `send_buffer` > 0 shrinks the server's send buffer. Returns the reference to watch.
std::weak_ptr<Connection> start_held_by_run(asio::io_context& io, asio::local::stream_protocol::socket& ours,
                                            int send_buffer = 0) {
  asio::local::stream_protocol::socket theirs(io);
  asio::local::connect_pair(ours, theirs);
  if (send_buffer > 0) theirs.set_option(asio::socket_base::send_buffer_size(send_buffer));
  Socket server_socket(io);
  server_socket.assign(asio::generic::stream_protocol(AF_UNIX, SOCK_STREAM), theirs.release());
  auto exported = std::make_shared<MemoryExport>(MemoryExportOptions{.size_bytes = 1u << 20, .name = "held"});
  auto connection = Connection::create(std::move(server_socket), exported, ConnectionOptions{});
  asio::co_spawn(io, connection->run(), [connection](const std::exception_ptr&) {});
  return connection;
}

// The writer is one coroutine per connection (Connection::write_loop): idle, it holds no reference
// to its connection, and it ends with it. A connection that only its run() holds whose client
// leaves at once, maybe before the writer first ran, must end, be destroyed, and let io.run()
// return; ASan checks that nothing touches it afterwards.
TEST(ReplyWrite, AConnectionNobodyHoldsEndsWithItsWriterAndIsDestroyed) {
  for (const bool with_read : {false, true}) {
    asio::io_context io;
    asio::local::stream_protocol::socket ours(io);
    const auto weak = start_held_by_run(io, ours);
    std::vector<std::byte> in;
    put_export_name_handshake(in);
    if (with_read) put_request(in, 0, 1, 0, 4096);  // a reply for the writer to send
    put_request(in, 2, 2, 0, 0);                    // NBD_CMD_DISC
    std::vector<std::byte> received;
    asio::co_spawn(io, client(ours, std::move(in), received), asio::detached);
    io.run();  // returns only once no coroutine of the connection is left
    EXPECT_TRUE(weak.expired()) << "the connection outlived its end (with_read=" << with_read << ")";
    EXPECT_GE(received.size(), 18 + export_name_reply_size + (with_read ? 16 + 4096 : 0));
  }
}

// A client that sends a READ and leaves without reading its reply: the reply does not fit the
// socket, the writer waits on it, the peer's close fails that write and hard-closes the connection.
// The writer must end with it (it holds the connection while it writes) and io.run() return.
TEST(ReplyWrite, AWriterWaitingOnAClientThatLeftEndsWithTheConnection) {
  asio::io_context io;
  asio::local::stream_protocol::socket ours(io);
  const auto weak = start_held_by_run(io, ours, 8192);
  std::vector<std::byte> in;
  put_export_name_handshake(in);
  put_request(in, 0, 1, 0, 512 * 1024);  // NBD_CMD_READ, far more than the socket buffers hold
  asio::co_spawn(
      io,
      [&]() -> Awaitable<void> {
        boost::system::error_code ec;
        co_await asio::async_write(ours, asio::buffer(in), use_awaitable_ec(ec));
        asio::steady_timer later(io);
        later.expires_after(std::chrono::milliseconds(50));  // the writer is waiting on the socket by now
        co_await later.async_wait(use_awaitable_ec(ec));
        ours.close();
      },
      asio::detached);
  io.run();
  EXPECT_TRUE(weak.expired()) << "the connection outlived its client";
}

}  // namespace
}  // namespace iserkit::nbd
