// StatusSocket: one coroutine accepts on a Unix socket; each client gets its own coroutine that
// writes the current document under a deadline (see status_socket.hpp for the bounds).
#include "iserkit/common/status_socket.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

namespace iserkit {

namespace local = asio::local;

struct StatusSocket::State {
  State(asio::any_io_executor ex, std::string p, std::function<std::string()> d, StatusSocketLimits l)
      : acceptor(ex), path(std::move(p)), document(std::move(d)), limits(l) {}
  local::stream_protocol::acceptor acceptor;
  std::string path;
  std::function<std::string()> document;
  StatusSocketLimits limits;
  std::size_t clients = 0;  // being answered now
  bool stopped = false;
};

namespace {

// Answers one client: the whole document, or nothing once `limits.write_timeout` has passed (a
// client that does not read is closed; the others are served meanwhile).
Awaitable<void> answer(std::shared_ptr<StatusSocket::State> state, local::stream_protocol::socket socket) {
  auto client = std::make_shared<local::stream_protocol::socket>(std::move(socket));
  asio::steady_timer deadline(client->get_executor(), state->limits.write_timeout);
  deadline.async_wait([weak = std::weak_ptr(client)](const boost::system::error_code& ec) {
    auto c = weak.lock();
    if (ec || !c) return;
    boost::system::error_code ignored;
    c->close(ignored);
  });
  const std::string text = state->document();
  boost::system::error_code ec;
  co_await asio::async_write(*client, asio::buffer(text), use_awaitable_ec(ec));
  deadline.cancel();
  client->close(ec);
  --state->clients;
}

Awaitable<void> serve(std::shared_ptr<StatusSocket::State> state) {
  while (!state->stopped) {
    boost::system::error_code ec;
    local::stream_protocol::socket client = co_await state->acceptor.async_accept(use_awaitable_ec(ec));
    if (ec) {
      if (state->stopped || ec == asio::error::operation_aborted) co_return;
      continue;  // EMFILE and the like: the daemon keeps serving; the next accept may work
    }
    if (state->stopped) co_return;
    if (state->clients >= state->limits.max_clients) {
      client.close(ec);  // over the bound: closed unanswered, the client may ask again
      continue;
    }
    ++state->clients;
    asio::co_spawn(state->acceptor.get_executor(), answer(state, std::move(client)), asio::detached);
  }
}

}  // namespace

Result<std::unique_ptr<StatusSocket>> StatusSocket::open(asio::any_io_executor ex, std::string path,
                                                         std::function<std::string()> document,
                                                         StatusSocketLimits limits) {
  if (path.size() >= sizeof(sockaddr_un{}.sun_path)) return fail(std::errc::filename_too_long);
  struct stat st{};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return fail(std::errc::file_exists);
    ::unlink(path.c_str());  // a stale socket from a daemon that did not clean up
  }
  auto state = std::make_shared<State>(ex, path, std::move(document), limits);
  boost::system::error_code ec;
  state->acceptor.open(local::stream_protocol(), ec);
  if (!ec) state->acceptor.bind(local::stream_protocol::endpoint(path), ec);
  if (!ec && ::chmod(path.c_str(), 0600) != 0) ec.assign(errno, boost::system::system_category());
  if (!ec) state->acceptor.listen(8, ec);
  if (ec) {
    ::unlink(path.c_str());
    return fail(std::error_code(ec.value(), std::generic_category()));
  }
  asio::co_spawn(ex, serve(state), asio::detached);
  return std::unique_ptr<StatusSocket>(new StatusSocket(std::move(state)));
}

StatusSocket::~StatusSocket() { stop(); }

void StatusSocket::stop() noexcept {
  if (!state_ || state_->stopped) return;
  state_->stopped = true;
  boost::system::error_code ec;
  state_->acceptor.close(ec);
  ::unlink(state_->path.c_str());
}

Result<std::string> query_status_socket(const std::string& path) {
  if (path.size() >= sizeof(sockaddr_un{}.sun_path)) return fail(std::errc::filename_too_long);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(std::error_code(errno, std::generic_category()));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    const int e = errno;
    ::close(fd);
    return fail(std::error_code(e, std::generic_category()));
  }
  std::string text;
  char chunk[4096];
  while (true) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return fail(std::error_code(e, std::generic_category()));
    }
    if (n == 0) break;
    text.append(chunk, static_cast<std::size_t>(n));
    if (text.size() > (1u << 20)) {
      ::close(fd);
      return fail(std::errc::message_size);
    }
  }
  ::close(fd);
  return text;
}

}  // namespace iserkit
