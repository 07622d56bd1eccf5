// One connection's byte stream, plain or TLS (see stream.hpp).
#include "nbd_bridge/stream.hpp"

#include "nbd_bridge/tls.hpp"

#include <algorithm>
#include <cstring>
#include <tuple>

#include "iserkit/common/await_op.hpp"
#include "iserkit/common/copy_counter.hpp"
#include "iserkit/common/write_remaining.hpp"

namespace iserkit::nbd {

namespace {
// Requests read back to back without a wait (read_exact() reads without blocking) before the
// stream yields the thread once: the bound of one burst, and so of how long the send pass is held.
constexpr unsigned max_burst_requests = 64;
}  // namespace

Stream::Stream(Socket socket) : socket_(std::move(socket)) {}

Stream::~Stream() { end_burst(); }

void Stream::end_burst() {
  requests_since_wait_ = 1;  // the read that now waits starts the next burst
  if (!holding_) return;
  holding_ = false;
  pass_->release_later(socket_.get_executor());
}

Awaitable<boost::system::error_code> Stream::read_exact(ByteSpan out, ReadOptions options) {
  if (tls_) {
    end_burst();
    co_return co_await tls_->read_exact(socket_, out);
  }
  boost::system::error_code ec;
  if (options.starts_request && ++requests_since_wait_ > max_burst_requests) {
    // A client whose requests never stop coming must not keep this thread (other connections,
    // the iSCSI session) or the send pass: end the burst and let the queued handlers run.
    end_burst();
    co_await asio::post(socket_.get_executor(), asio::use_awaitable);
    ++requests_since_wait_;
  }
  // What an earlier read took along first.
  std::size_t got = std::min(out.size(), staged_end_ - staged_begin_);
  if (got > 0) {
    std::memcpy(out.data(), staged_.data() + staged_begin_, got);
    if (options.payload) count_payload_copy(got);
    staged_begin_ += got;
    if (staged_begin_ == staged_end_) staged_begin_ = staged_end_ = 0;
  }
  if (got == out.size()) {
    if (options.starts_request) {
      hold_for_burst();
      empty_guess_.unit();
    }
    co_return ec;
  }
  // The read-ahead area is empty now.
  if (!socket_.non_blocking()) {
    socket_.non_blocking(true, ec);
    if (ec) co_return ec;
  }
  ec.clear();
  const std::size_t ahead = std::min(options.read_ahead, staged_.size());
  // Requests that come one per wake-up (queue depth 1): the own read below would find nothing.
  bool skip_own_read = options.starts_request && got == 0 && !socket_dry_ && !empty_guess_.worth_reading();
  while (got < out.size()) {
    const std::array<asio::mutable_buffer, 2> parts{asio::buffer(out.data() + got, out.size() - got),
                                                    asio::buffer(staged_.data(), ahead)};
    const std::size_t asked = asio::buffer_size(parts);
    std::size_t n = 0;
    if (!socket_dry_ && !skip_own_read) {
      // The last read filled all it asked for: more is probably there. Read it on this thread.
      n = socket_.read_some(parts, ec);
      if (ec && ec != asio::error::would_block && ec != asio::error::try_again) {
        end_burst();
        co_return ec;
      }
    }
    if (socket_dry_ || skip_own_read || ec) {
      // The socket had nothing, the last read came back short (it emptied the socket), or it is
      // guessed empty: the burst ends here. Asio's read tries once more and then waits (no
      // epoll_ctl, unlike async_wait).
      end_burst();
      skip_own_read = false;
      if (options.starts_request) empty_guess_.waiting();
      // await_op: no coroutine frame for the read itself (one allocation less per wait).
      std::tuple<boost::system::error_code, std::size_t> read{};
      co_await await_op(read, read_memory_, [&](auto make_handler) { socket_.async_read_some(parts, make_handler()); });
      std::tie(ec, n) = read;
      if (ec) co_return ec;
    } else {
      hold_for_burst();
    }
    socket_dry_ = n < asked;
    got += n;
    if (got > out.size()) {
      staged_end_ = got - out.size();
      got = out.size();
    }
  }
  if (options.starts_request) empty_guess_.unit();
  co_return ec;
}

void Stream::hold_for_burst() noexcept {
  if (pass_ == nullptr || holding_ || requests_since_wait_ < 2) return;
  pass_->hold();  // a second request of this burst: what the first ones caused waits for its end
  holding_ = true;
}

Awaitable<boost::system::error_code> Stream::write_all(std::span<const asio::const_buffer> buffers) {
  if (tls_) co_return co_await tls_->write_all(socket_, buffers);
  boost::system::error_code ec;
  const std::size_t sent = iserkit::write_now(socket_, buffers, ec);
  if (ec || sent == asio::buffer_size(buffers)) co_return ec;
  // The rest, one socket write at a time with its operation state in write_memory_
  // (write_remaining.hpp: no allocation per step of a reply that does not fit the socket buffer,
  // which is every 1 MiB read reply). One write_all() runs at a time (the connection's writer).
  rest_of(buffers, sent, write_rest_);
  co_await write_remaining_op(socket_, write_rest_, write_memory_, ec);
  co_return ec;
}

std::size_t Stream::write_now(std::span<const asio::const_buffer> buffers, boost::system::error_code& ec) {
  ec.clear();
  if (tls_) return 0;
  return iserkit::write_now(socket_, buffers, ec);
}

Awaitable<Result<void>> Stream::start_tls(const TlsContext& context) {
  auto session = co_await TlsSession::handshake(socket_, context);
  if (!session) co_return fail(session.error());
  tls_ = std::move(*session);
  co_return Result<void>{};
}

void Stream::close() noexcept {
  if (!socket_.is_open()) return;
  if (tls_) tls_->bye();
  abort();
}

void Stream::abort() noexcept {
  boost::system::error_code ignored;
  socket_.shutdown(asio::socket_base::shutdown_both, ignored);
  socket_.close(ignored);
}

}  // namespace iserkit::nbd
