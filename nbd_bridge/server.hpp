// The NBD server (layer 6): listens on Unix-domain sockets and TCP (IPv4 and IPv6), adopts
// inherited listening sockets (systemd socket activation, LISTEN_FDS) or an already-connected socket
// (stdio mode, like `nbdkit -s`), and runs one Connection per client. With several event loops
// (ServerLoop, iserkit-nbd --threads N) it accepts on the first and hands each new connection to
// the loop with the fewest open connections, where it calls that loop's Export.
// Spec: NBD proto.md "Protocol phases" (TCP_NODELAY), "Handshake", "Transmission";
// sd_listen_fds(3) for the LISTEN_PID / LISTEN_FDS convention.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/result.hpp"
#include "nbd_bridge/export.hpp"
#include "nbd_bridge/tls.hpp"
#include "nbd_bridge/transmission.hpp"

namespace iserkit::nbd {

/// Server-wide policy. Sizes in bytes.
struct ServerOptions {
  bool read_only = false;                        ///< force NBD_FLAG_READ_ONLY (writes get NBD_EPERM)
  std::uint32_t max_payload_bytes = 32u << 20;   ///< cap on the advertised and accepted READ/WRITE length
  std::size_t max_requests_in_flight = 64;       ///< per connection
  std::size_t max_buffered_bytes = 64u << 20;    ///< per connection: payload bytes held before reading pauses
  std::size_t max_connections = 1024;            ///< further clients are accepted and closed at once
  /// Called on the connection's executor each time a connection ends, with the number still open
  /// (e.g. to exit after the last client in one-shot or socket-activation mode). May be empty.
  std::function<void(std::size_t open_connections)> on_connection_closed;
  /// `io` is run by one thread only (iserkit-nbd: the iSCSI session shares it). Connections then use
  /// its executor directly instead of a strand: no lock, no heap-held executor copy per handler
  /// (a strand costs ~17 allocations per 4 KiB request, measured with heaptrack).
  bool single_threaded = false;
  /// NBD_OPT_STARTTLS policy (proto.md "TLS support"): off, on (offered) or require.
  TlsMode tls_mode = TlsMode::off;
  /// The TLS credentials (tls.hpp); required when tls_mode is not off.
  std::shared_ptr<const TlsContext> tls;
  /// Time a client has from its accept to the end of the handshake (HandshakeOptions::limit);
  /// zero: none.
  std::chrono::milliseconds handshake_limit{10000};
  /// Payload bytes held by all connections now (READ/WRITE buffers between request and reply),
  /// summed here when set; each connection holds at most max_buffered_bytes.
  std::shared_ptr<std::atomic<std::uint64_t>> buffered_total;
};

/// One event loop the server may hand connections to, and the Export its connections call.
struct ServerLoop {
  asio::io_context* io = nullptr;    ///< the loop; must outlive the server's connections
  std::shared_ptr<Export> exported;  ///< called only from `io`'s executor; same info() on every loop
};

/// Counters of one loop (Server::loop_stats()).
struct ServerLoopStats {
  std::size_t open_connections = 0;  ///< connections running on the loop now
  std::uint64_t connections = 0;     ///< connections handed to the loop so far
  std::uint64_t requests = 0;        ///< NBD requests read on them so far (NBD_CMD_DISC not counted)
};

/// An NBD server for one Export (or one Export per event loop).
///
/// Usage:
/// ```
/// asio::io_context io;
/// nbd::Server server(io, std::make_shared<nbd::MemoryExport>(...), {.read_only = false});
/// server.listen_unix("/run/x.sock");              // and/or listen_tcp("::", 10809), adopt_listener(3)
/// io.run();                                         // until server.stop() and the clients are done
/// ```
/// Executor and thread: the server and each connection run on strands of `io`, so `io.run()` may be
/// called from several threads — unless ServerOptions::single_threaded, which promises one thread
/// per io_context. listen_*(), adopt_listener() and serve_connected() are meant for start-up (they
/// bind synchronously); stop() is thread-safe. Accept loops and connections keep their own state
/// alive, so the Server object may go away before `io` does; destroying it stops it.
class Server {
 public:
  /// One loop: listeners, accept loops and every connection on `io`, all calling `exported`.
  Server(asio::io_context& io, std::shared_ptr<Export> exported, ServerOptions options = {});
  /// Several loops: listeners and accept loops on `io`; each accepted (or serve_connected) socket
  /// goes to the loop of `loops` with the fewest open connections (ties in turn), where its
  /// Connection runs and calls that loop's Export. `loops` must not be empty; `io` may be one of
  /// them. ServerOptions limits (max_connections, buffered_total) count every loop together.
  /// on_connection_closed is then called on the closing connection's loop.
  Server(asio::io_context& io, std::vector<ServerLoop> loops, ServerOptions options = {});
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  /// Stops accepting (as stop()) and removes the Unix socket files this server created.
  ~Server();

  /// Listens on a Unix-domain stream socket at `path`. A stale socket file left at `path` is
  /// removed first; any other existing file is an error (std::errc::file_exists).
  /// Returns socket errors from bind/listen.
  Result<void> listen_unix(const std::string& path);

  /// Listens on TCP `host`:`port` (IPv4 or IPv6 literal or name; "" or "*" means every address,
  /// IPv6 and IPv4). Port 0 picks a free port. Returns the bound port, or a resolve/bind error.
  Result<std::uint16_t> listen_tcp(const std::string& host, std::uint16_t port);

  /// Accepts on an inherited listening socket `fd` (systemd socket activation). Takes ownership.
  /// Returns std::errc::not_a_socket if `fd` is not a socket.
  Result<void> adopt_listener(int fd);

  /// Serves one already-connected stream socket `fd` (stdio mode, e.g. libnbd's nbd_connect_command
  /// or `[ CMD ]` in nbdinfo). Takes ownership. Returns std::errc::not_a_socket if `fd` is not a socket.
  Result<void> serve_connected(int fd);

  /// Stops accepting and asks every connection to finish its in-flight requests and close.
  /// io.run() returns once they are done (if nothing else keeps `io` busy). Thread-safe.
  void stop();

  /// Connections currently open, on every loop. Thread-safe.
  [[nodiscard]] std::size_t connection_count() const noexcept;

  /// Per-loop counters, in the order of the loops given (one entry with the one-loop constructor).
  /// Thread-safe (relaxed atomics: each value is current, the set is not a snapshot).
  [[nodiscard]] std::vector<ServerLoopStats> loop_stats() const;

 private:
  struct State;
  struct Lane;
  static asio::any_io_executor connection_executor(State& state, Lane& lane);
  static std::size_t pick_lane(State& state) noexcept;
  struct Listener;
  static Awaitable<void> accept_loop(std::shared_ptr<State> state, std::shared_ptr<Listener> listener);
  static void start_connection(const std::shared_ptr<State>& state, std::size_t lane, Socket socket);
  Result<void> add_listener(asio::basic_socket_acceptor<asio::generic::stream_protocol> acceptor);

  std::shared_ptr<State> state_;
};

}  // namespace iserkit::nbd
