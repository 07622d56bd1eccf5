// The NBD server: listeners (Unix, TCP, inherited fds), stdio mode, and the set of live connections
// (see server.hpp). Spec: NBD proto.md "Protocol phases" (TCP_NODELAY); sd_listen_fds(3).
#include "nbd_bridge/server.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string_view>

#include "iserkit/common/log.hpp"

namespace iserkit::nbd {
namespace {

using Acceptor = asio::basic_socket_acceptor<asio::generic::stream_protocol>;
using GenericEndpoint = asio::generic::stream_protocol::endpoint;

std::error_code to_std(const boost::system::error_code& ec) { return {ec.value(), std::system_category()}; }

std::uint16_t port_of(const GenericEndpoint& endpoint) noexcept {
  const sockaddr* address = endpoint.data();
  if (address->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(address)->sin_port);
  if (address->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(address)->sin6_port);
  return 0;
}

/// The family and type of a socket fd, or an error if it is not a stream socket.
Result<int> stream_socket_family(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return fail(std::error_code(errno == ENOTSOCK ? ENOTSOCK : errno, std::generic_category()));
  }
  int type = 0;
  socklen_t type_length = sizeof type;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_length) != 0 || type != SOCK_STREAM) {
    return fail(std::errc::not_a_socket);
  }
  return static_cast<int>(address.ss_family);
}

asio::generic::stream_protocol protocol_for(int family) {
  return {family, family == AF_UNIX ? 0 : IPPROTO_TCP};
}

}  // namespace

struct Server::Listener {
  explicit Listener(Acceptor a) : acceptor(std::move(a)) {}
  Acceptor acceptor;
};

// One event loop connections may run on, with its export and the options its connections get.
struct Server::Lane {
  Lane(asio::io_context& loop, std::shared_ptr<Export> e) : io(loop), exported(std::move(e)) {}
  asio::io_context& io;
  std::shared_ptr<Export> exported;
  ConnectionOptions connection_options;
  std::atomic<std::size_t> open{0};         // connections running here now
  std::atomic<std::uint64_t> connections{0};  // connections handed here so far
  std::shared_ptr<std::atomic<std::uint64_t>> requests = std::make_shared<std::atomic<std::uint64_t>>(0);
};

struct Server::State {
  State(asio::io_context& io_context, std::vector<ServerLoop> loops, ServerOptions o)
      : io(io_context), strand(asio::make_strand(io_context)), options(o) {
    assert(!loops.empty());
    ConnectionOptions common;
    common.handshake.force_read_only = options.read_only;
    common.handshake.max_payload_cap_bytes = options.max_payload_bytes;
    common.handshake.tls_mode = options.tls_mode;
    common.handshake.tls = options.tls;
    common.handshake.limit = options.handshake_limit;
    common.max_requests_in_flight = std::max<std::size_t>(options.max_requests_in_flight, 1);
    common.max_buffered_bytes = options.max_buffered_bytes;
    common.buffered_total = options.buffered_total;  // one sum over every loop's connections
    common.batch_sends = options.single_threaded;    // a send pass needs a loop run by one thread
    for (auto& loop : loops) {
      assert(loop.io != nullptr && loop.exported);
      auto lane = std::make_unique<Lane>(*loop.io, std::move(loop.exported));
      lane->connection_options = common;
      lane->connection_options.pool = lane->exported->buffer_pool();  // e.g. the session's registered memory
      // ... asked again at each request: after a recovery the session's pool is the new connection's
      lane->connection_options.pool_source = [e = lane->exported] { return e->buffer_pool(); };
      lane->connection_options.requests_total = lane->requests;
      lanes.push_back(std::move(lane));
    }
  }
  asio::io_context& io;
  asio::strand<asio::io_context::executor_type> strand;  // listeners live here
  ServerOptions options;
  std::vector<std::unique_ptr<Lane>> lanes;  // fixed after construction
  std::atomic<std::size_t> next_lane{0};     // where the search for the least loaded lane starts
  std::atomic<std::size_t> active{0};
  std::mutex mutex;  // guards the members below
  bool stopped = false;
  std::vector<std::shared_ptr<Listener>> listeners;
  std::vector<std::weak_ptr<Connection>> connections;
  std::vector<std::string> unix_paths;
};

// Each connection gets its own strand, or its loop's executor when one thread runs that loop.
asio::any_io_executor Server::connection_executor(State& state, Lane& lane) {
  if (state.options.single_threaded) return lane.io.get_executor();
  return asio::make_strand(lane.io);
}

// The lane with the fewest open connections; ties go in turn, so clients that open their
// connections one after another (nbdcopy, nbd-client -C N) get one loop each.
std::size_t Server::pick_lane(State& state) noexcept {
  const std::size_t n = state.lanes.size();
  if (n == 1) return 0;
  const std::size_t start = state.next_lane.fetch_add(1, std::memory_order_relaxed) % n;
  std::size_t best = start;
  std::size_t best_open = state.lanes[start]->open.load(std::memory_order_relaxed);
  for (std::size_t i = 1; i < n; ++i) {
    const std::size_t k = (start + i) % n;
    const std::size_t open = state.lanes[k]->open.load(std::memory_order_relaxed);
    if (open < best_open) {
      best = k;
      best_open = open;
    }
  }
  return best;
}

Server::Server(asio::io_context& io, std::shared_ptr<Export> exported, ServerOptions options)
    : Server(io, std::vector<ServerLoop>{ServerLoop{.io = &io, .exported = std::move(exported)}}, options) {}

Server::Server(asio::io_context& io, std::vector<ServerLoop> loops, ServerOptions options)
    : state_(std::make_shared<State>(io, std::move(loops), options)) {}

Server::~Server() {
  stop();
  std::lock_guard lock(state_->mutex);
  for (const std::string& path : state_->unix_paths) ::unlink(path.c_str());
}

Result<void> Server::add_listener(Acceptor acceptor) {
  auto listener = std::make_shared<Listener>(std::move(acceptor));
  {
    std::lock_guard lock(state_->mutex);
    if (state_->stopped) return fail(std::errc::operation_canceled);
    state_->listeners.push_back(listener);
  }
  asio::co_spawn(state_->strand, accept_loop(state_, listener), asio::detached);
  return {};
}

Result<void> Server::listen_unix(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return fail(std::errc::file_exists);
    ::unlink(path.c_str());  // a stale socket from an earlier run
  }
  if (path.size() >= sizeof(sockaddr_un{}.sun_path)) return fail(std::errc::filename_too_long);
  Acceptor acceptor(state_->strand);
  boost::system::error_code ec;
  const GenericEndpoint endpoint{asio::local::stream_protocol::endpoint(path)};
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return fail(to_std(ec));
  {
    std::lock_guard lock(state_->mutex);
    state_->unix_paths.push_back(path);
  }
  log::info("nbd: listening on unix:{}", path);
  return add_listener(std::move(acceptor));
}

Result<std::uint16_t> Server::listen_tcp(const std::string& host, std::uint16_t port) {
  std::vector<asio::ip::tcp::endpoint> endpoints;
  if (host.empty() || host == "*") {
    endpoints.emplace_back(asio::ip::address_v6::any(), port);
    endpoints.emplace_back(asio::ip::address_v4::any(), port);
  } else {
    std::string_view name = host;
    if (name.size() >= 2 && name.front() == '[' && name.back() == ']') name = name.substr(1, name.size() - 2);
    asio::ip::tcp::resolver resolver(state_->io);
    boost::system::error_code ec;
    auto results = resolver.resolve(name, std::to_string(port), asio::ip::resolver_base::passive |
                                                                    asio::ip::resolver_base::numeric_service, ec);
    if (ec) return fail(to_std(ec));
    for (const auto& entry : results) endpoints.push_back(entry.endpoint());
  }
  // Bind every endpoint before accepting on any. With port 0 the first endpoint picks the port and the
  // others must get the same one; when that port is already taken in the other family (an ephemeral
  // port in use by some IPv4 connection, say), start over with a fresh port rather than return a port
  // that only half the addresses listen on.
  constexpr int kEphemeralAttempts = 16;
  std::error_code first_error;
  for (int attempt = 0; attempt < (port == 0 ? kEphemeralAttempts : 1); ++attempt) {
    std::vector<Acceptor> acceptors;
    std::vector<std::string> addresses;
    std::uint16_t bound_port = port;
    bool retry = false;
    for (auto endpoint : endpoints) {
      if (bound_port != 0) endpoint.port(bound_port);
      Acceptor acceptor(state_->strand);
      boost::system::error_code ec;
      const GenericEndpoint generic(endpoint);
      acceptor.open(generic.protocol(), ec);
      if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
      // Keep IPv6 listeners IPv6-only so an IPv4 listener on the same port can coexist.
      if (!ec && endpoint.address().is_v6()) acceptor.set_option(asio::ip::v6_only(true), ec);
      if (!ec) acceptor.bind(generic, ec);
      if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
      if (ec) {
        if (port == 0 && !acceptors.empty() && ec == asio::error::address_in_use) {
          retry = true;
          break;
        }
        if (!first_error) first_error = to_std(ec);
        log::debug("nbd: cannot listen on {}: {}", endpoint.address().to_string(), ec.message());
        continue;
      }
      bound_port = port_of(acceptor.local_endpoint(ec));
      acceptors.push_back(std::move(acceptor));
      addresses.push_back(endpoint.address().to_string());
    }
    if (retry) continue;  // the acceptors close as the vector goes away
    if (acceptors.empty()) break;
    for (std::size_t i = 0; i < acceptors.size(); ++i) {
      log::info("nbd: listening on tcp:[{}]:{}", addresses[i], bound_port);
      if (auto added = add_listener(std::move(acceptors[i])); !added) return fail(added.error());
    }
    return bound_port;
  }
  return fail(first_error ? first_error : std::make_error_code(std::errc::address_not_available));
}

Result<void> Server::adopt_listener(int fd) {
  auto family = stream_socket_family(fd);
  if (!family) return fail(family.error());
  Acceptor acceptor(state_->strand);
  boost::system::error_code ec;
  acceptor.assign(protocol_for(*family), fd, ec);
  if (ec) return fail(to_std(ec));
  log::info("nbd: accepting on inherited fd {}", fd);
  return add_listener(std::move(acceptor));
}

Result<void> Server::serve_connected(int fd) {
  auto family = stream_socket_family(fd);
  if (!family) return fail(family.error());
  const std::size_t lane = pick_lane(*state_);
  Socket socket(connection_executor(*state_, *state_->lanes[lane]));
  boost::system::error_code ec;
  socket.assign(protocol_for(*family), fd, ec);
  if (ec) return fail(to_std(ec));
  start_connection(state_, lane, std::move(socket));
  return {};
}

void Server::start_connection(const std::shared_ptr<State>& state, std::size_t lane_index, Socket socket) {
  boost::system::error_code ec;
  const int family = socket.local_endpoint(ec).protocol().family();
  if (family == AF_INET || family == AF_INET6) {
    // proto.md "Protocol phases": both sides SHOULD disable Nagle's algorithm on TCP.
    const int one = 1;
    ::setsockopt(socket.native_handle(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  if (state->active.load() >= state->options.max_connections) {
    log::warn("nbd: too many connections; refusing a client: limit={}", state->options.max_connections);
    return;  // the socket closes as it goes out of scope
  }
  Lane& lane = *state->lanes[lane_index];
  // The socket already belongs to the lane's loop (accepted or assigned there); from here on the
  // connection lives on that loop only. Counted before the next accept picks a lane.
  auto executor = socket.get_executor();
  auto connection = Connection::create(std::move(socket), lane.exported, lane.connection_options);
  {
    std::lock_guard lock(state->mutex);
    std::erase_if(state->connections, [](const std::weak_ptr<Connection>& c) { return c.expired(); });
    state->connections.push_back(connection);
    if (state->stopped) connection->request_stop();
  }
  ++state->active;
  lane.open.fetch_add(1, std::memory_order_relaxed);
  lane.connections.fetch_add(1, std::memory_order_relaxed);
  if (state->lanes.size() > 1) log::debug("nbd: connection handed to loop {}", lane_index);
  asio::co_spawn(executor, connection->run(), [state, connection, &lane](std::exception_ptr e) {
    if (e) log::error("nbd: connection ended with an exception");
    lane.open.fetch_sub(1, std::memory_order_relaxed);
    const std::size_t open = --state->active;
    if (state->options.on_connection_closed) state->options.on_connection_closed(open);
  });
}

Awaitable<void> Server::accept_loop(std::shared_ptr<State> state, std::shared_ptr<Listener> listener) {
  for (;;) {
    // The peer socket is made on the chosen loop, so the accepted connection never changes loop
    // (Asio registers it with that loop's reactor as the accept completes).
    const std::size_t lane = pick_lane(*state);
    Socket socket(connection_executor(*state, *state->lanes[lane]));
    boost::system::error_code ec;
    co_await listener->acceptor.async_accept(socket, use_awaitable_ec(ec));
    if (ec == asio::error::operation_aborted || !listener->acceptor.is_open()) co_return;
    if (ec) {
      // EMFILE, ENOBUFS, …: log, back off briefly, keep serving the clients we have.
      log::warn("nbd: accept: {}", ec.message());
      asio::steady_timer timer(state->strand, std::chrono::milliseconds(100));
      co_await timer.async_wait(use_awaitable_ec(ec));
      continue;
    }
    start_connection(state, lane, std::move(socket));
  }
}

void Server::stop() {
  auto state = state_;
  {
    std::lock_guard lock(state->mutex);
    if (state->stopped) return;
    state->stopped = true;
    for (auto& weak : state->connections) {
      if (auto connection = weak.lock()) connection->request_stop();
    }
  }
  asio::post(state->strand, [state] {
    std::lock_guard lock(state->mutex);
    for (auto& listener : state->listeners) {
      boost::system::error_code ignored;
      listener->acceptor.close(ignored);
    }
    state->listeners.clear();
  });
}

std::size_t Server::connection_count() const noexcept { return state_->active.load(); }

std::vector<ServerLoopStats> Server::loop_stats() const {
  std::vector<ServerLoopStats> out;
  out.reserve(state_->lanes.size());
  for (const auto& lane : state_->lanes) {
    out.push_back({.open_connections = lane->open.load(std::memory_order_relaxed),
                   .connections = lane->connections.load(std::memory_order_relaxed),
                   .requests = lane->requests->load(std::memory_order_relaxed)});
  }
  return out;
}

}  // namespace iserkit::nbd
