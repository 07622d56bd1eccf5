// Fuzz target: a whole NBD server connection (nbd_bridge/handshake.cpp option haggling, then
// nbd_bridge/transmission.cpp requests) over a MemoryExport, driven through a real socketpair on
// one io_context. Input: everything the client sends, after which the client closes its side.
// Spec: NBD proto.md "Fixed newstyle negotiation", "Option types", "Transmission".
// Invariants: the connection ends (no hang: libFuzzer's -timeout catches one), nothing crashes or
// leaks (ASan), and every byte the server sends starts with the newstyle greeting.
#include <utility>

#include <sys/socket.h>

#include <memory>
#include <vector>

#include <spdlog/spdlog.h>

#include "fuzz_support.hpp"
#include "iserkit/common/asio.hpp"
#include "nbd_bridge/memory_export.hpp"
#include "nbd_bridge/protocol.hpp"
#include "nbd_bridge/transmission.hpp"

using namespace iserkit;
using namespace iserkit::nbd;

namespace {

Awaitable<void> client(asio::local::stream_protocol::socket& s, std::vector<std::byte> input,
                       std::vector<std::byte>& received) {
  boost::system::error_code ec;
  co_await asio::async_write(s, asio::buffer(input), use_awaitable_ec(ec));
  s.shutdown(asio::socket_base::shutdown_send, ec);
  std::array<std::byte, 4096> buf;
  for (;;) {
    const std::size_t n = co_await s.async_read_some(asio::buffer(buf), use_awaitable_ec(ec));
    if (ec || n == 0) break;
    if (received.size() < 64) received.insert(received.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* raw, std::size_t size) {
  static const bool quiet = [] {
    spdlog::set_level(spdlog::level::off);
    return true;
  }();
  (void)quiet;
  if (size > 64 * 1024) return 0;
  const auto* bytes = reinterpret_cast<const std::byte*>(raw);

  asio::io_context io;
  asio::local::stream_protocol::socket ours(io), theirs(io);
  asio::local::connect_pair(ours, theirs);
  Socket server_socket(io);
  server_socket.assign(asio::generic::stream_protocol(AF_UNIX, SOCK_STREAM), theirs.release());

  auto exported = std::make_shared<MemoryExport>(MemoryExportOptions{
      .size_bytes = 1u << 20, .name = "fuzz", .min_block_size_bytes = 1, .preferred_block_size_bytes = 4096,
      .max_block_size_bytes = 64 * 1024});
  ConnectionOptions options;
  options.handshake.max_payload_cap_bytes = 64 * 1024;
  options.max_buffered_bytes = 1u << 20;
  options.max_discard_bytes = 1u << 20;
  auto connection = Connection::create(std::move(server_socket), exported, options);

  std::vector<std::byte> received;
  asio::co_spawn(io, connection->run(), asio::detached);
  asio::co_spawn(io, client(ours, std::vector<std::byte>(bytes, bytes + size), received), asio::detached);
  io.run();

  // The server speaks first: NBDMAGIC ("NBDMAGIC") then IHAVEOPT (proto.md "Newstyle negotiation").
  if (received.size() >= 8) FUZZ_CHECK(std::string_view(reinterpret_cast<const char*>(received.data()), 8) == "NBDMAGIC");
  return 0;
}
