// TcpDatamover: RFC 7143 §11 framing over a TCP socket with gather writes and in-place receives.
#include "iserkit/datamover/tcp_datamover.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <cerrno>
#include <netinet/in.h>
#include <unistd.h>

#include "iserkit/common/netns.hpp"
#include "iserkit/datamover/socket_sender.hpp"
#include "iserkit/common/write_remaining.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <tuple>

#include "iserkit/common/await_op.hpp"
#include "iserkit/common/crc32c.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"

namespace iserkit::datamover {
namespace {

constexpr std::array<std::byte, 4> zero_pad{};
constexpr std::size_t max_batch_pdus = 64;
// PDUs received back to back without a wait (fill() reads without blocking) before receive()
// yields the thread once: the bound of one burst, and so of how long the send pass is held.
constexpr unsigned max_burst_pdus = 64;

std::error_code map_error(const boost::system::error_code& ec) {
  if (ec == asio::error::eof || ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
      ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor)
    return make_error_code(errc::connection_closed);
  return ec;  // boost::system::error_code converts to std::error_code
}

std::string format_endpoint(const asio::ip::tcp::endpoint& ep) {
  const auto addr = ep.address();
  return (addr.is_v6() ? "[" + addr.to_string() + "]" : addr.to_string()) + ":" + std::to_string(ep.port());
}

}  // namespace

TcpDatamover::TcpDatamover(asio::ip::tcp::socket socket)
    : socket_(std::move(socket)), executor_(socket_.get_executor()) {
  boost::system::error_code ec;
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  // Reads and writes are tried without blocking first (fill(), write_now()); Asio's async
  // operations work the same on a non-blocking socket.
  socket_.non_blocking(true, ec);
  if (auto ep = socket_.remote_endpoint(ec); !ec) peer_ = format_endpoint(ep);
  if (auto ep = socket_.local_endpoint(ec); !ec) local_ = format_endpoint(ep);
}

TcpDatamover::~TcpDatamover() {
  end_burst();
  close();
}

void TcpDatamover::set_socket_sender(std::unique_ptr<SocketSender> sender) noexcept {
  if (!sender_in_flight_) sender_ = std::move(sender);
}

void TcpDatamover::close() noexcept {
  // A send on the sender (an io_uring SQE) holds its own reference to the socket: closing our
  // descriptor would not end it. shutdown() below fails it too; cancel() makes sure.
  if (sender_in_flight_) sender_->cancel();
  boost::system::error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
}

void TcpDatamover::abort() noexcept {
  if (sender_in_flight_) sender_->cancel();  // as in close()
  boost::system::error_code ignored;
  // SO_LINGER on with a zero timeout: close(2) drops the unsent and unacknowledged bytes of the
  // send queue and sends an RST instead of a FIN, so an orphaned socket never retransmits them
  // to the peer later (a link that comes back). No shutdown() first: that would queue a FIN.
  socket_.set_option(asio::socket_base::linger(true, 0), ignored);
  socket_.close(ignored);
}

Awaitable<Result<std::unique_ptr<TcpDatamover>>> TcpDatamover::connect(asio::any_io_executor ex, std::string host,
                                                                       std::uint16_t port,
                                                                       std::chrono::milliseconds timeout,
                                                                       std::string netns) {
  boost::system::error_code ec;
  asio::ip::tcp::resolver resolver(ex);
  auto endpoints = co_await resolver.async_resolve(host, std::to_string(port), use_awaitable_ec(ec));
  if (ec) co_return fail(std::error_code(ec));
  struct State {
    explicit State(asio::any_io_executor e) : socket(e) {}
    asio::ip::tcp::socket socket;
    bool timed_out = false;
  };
  auto state = std::make_shared<State>(ex);
  asio::steady_timer timer(ex);
  timer.expires_after(timeout);
  timer.async_wait([state](const boost::system::error_code& e) {
    if (e) return;
    state->timed_out = true;
    boost::system::error_code ignored;
    state->socket.close(ignored);
  });
  if (netns.empty()) {
    co_await asio::async_connect(state->socket, endpoints, use_awaitable_ec(ec));
  } else {
    // Each socket is made by a thread inside the namespace, then connected from here.
    ec = asio::error::host_not_found;
    for (const auto& entry : endpoints) {
      const auto endpoint = entry.endpoint();
      int fd = -1;
      int socket_errno = 0;
      auto entered = netns::run_in(netns, [&] {
        fd = ::socket(endpoint.protocol().family(), SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
        if (fd < 0) socket_errno = errno;
      });
      if (!entered) {
        timer.cancel();
        co_return fail(entered.error());
      }
      if (fd < 0) {
        ec = boost::system::error_code(socket_errno, boost::system::system_category());
        continue;
      }
      boost::system::error_code ignored;
      state->socket.close(ignored);
      state->socket.assign(endpoint.protocol(), fd, ec);
      if (ec) {
        ::close(fd);
        continue;
      }
      co_await state->socket.async_connect(endpoint, use_awaitable_ec(ec));
      if (!ec || state->timed_out) break;
    }
  }
  timer.cancel();
  if (state->timed_out) co_return fail(errc::timeout);
  if (ec) co_return fail(std::error_code(ec));
  co_return std::make_unique<TcpDatamover>(std::move(state->socket));
}

void TcpDatamover::finish(const Pending& pending, std::error_code result) {
  if (pending.result != nullptr) *pending.result = result;
  if (pending.done != nullptr) pending.done->complete(result);
}

Awaitable<std::error_code> TcpDatamover::send(PduOut pdu) {
  if (send_error_) co_return send_error_;
  Completion done;
  std::error_code result;
  queue_.push_back({&pdu, &done, &result});
  if (!writing_) co_await write_queued();
  co_await done.wait();
  co_return result;
}

Awaitable<std::error_code> TcpDatamover::send_batch(std::vector<PduOut> pdus) {
  if (send_error_) co_return send_error_;
  if (pdus.empty()) co_return std::error_code{};
  // All of them enter the queue before any write starts: nothing can come between them. Only the
  // last one is waited for: the writer sends in queue order and a failed write fails everything
  // queued behind it, so when the last one went out, all of them did (no per-PDU completion).
  Completion done;
  std::error_code result;
  for (std::size_t i = 0; i + 1 < pdus.size(); ++i) queue_.push_back({&pdus[i], nullptr, nullptr});
  queue_.push_back({&pdus.back(), &done, &result});
  if (!writing_) co_await write_queued();
  co_await done.wait();
  co_return result;
}

void TcpDatamover::gather(PduOut& pdu) {
  auto& buffers = write_buffers_;
  auto& digests = write_digests_;
  buffers.emplace_back(pdu.bhs.data(), pdu.bhs.size());
  if (!pdu.ahs.empty()) buffers.emplace_back(pdu.ahs.data(), pdu.ahs.size());
  if (header_digest_) {
    auto crc = crc32c_update(crc32c_init, pdu.bhs);
    crc = crc32c_final(crc32c_update(crc, pdu.ahs));
    store_digest(digests.emplace_back().data(), crc);
    buffers.emplace_back(digests.back().data(), 4);
  }
  if (!pdu.data.empty() && pdu.splice_from < 0) {
    const auto pad = iscsi::padding_for(static_cast<std::uint32_t>(pdu.data.size()));
    buffers.emplace_back(pdu.data.data(), pdu.data.size());
    if (pad != 0) buffers.emplace_back(zero_pad.data(), pad);
    if (data_digest_) {
      auto crc = crc32c_update(crc32c_init, pdu.data);
      crc = crc32c_final(crc32c_update(crc, std::span(zero_pad).first(pad)));
      store_digest(digests.emplace_back().data(), crc);
      buffers.emplace_back(digests.back().data(), 4);
    }
  }
}

Datamover::SendNow TcpDatamover::try_send_now(std::vector<PduOut>& pdus) {
  // Only with nothing ahead of them: the PDUs of one connection leave in the order they were sent.
  if (send_error_ || writing_ || !queue_.empty() || pdus.empty()) return SendNow::refused;
  write_buffers_.clear();
  write_digests_.clear();
  if (header_digest_ || data_digest_) write_digests_.reserve(2 * pdus.size());  // buffers point into it
  for (auto& pdu : pdus) {
    // A data segment in a pipe leaves by splice from write_queued() (large reads: its coroutine
    // frames are nothing against the bytes). Nothing was written yet.
    if (pdu.splice_from >= 0) return SendNow::refused;
    gather(pdu);
  }
  if (sender_ && start_on_sender()) {
    // The sender has it (the io_uring ring: submitted with the pass's other SQEs); finish_send()
    // waits for its end. The PDUs stay here until then (their bytes are being sent).
    take(pdus);
    writing_ = true;
    return SendNow::queued;
  }
  boost::system::error_code ec;
  const std::span<const asio::const_buffer> all(write_buffers_);
  const std::size_t sent = write_now(socket_, all, ec);
  if (ec) {
    // The socket failed: later sends fail with the same error (send_batch() reports it).
    send_error_ = map_error(ec);
    return SendNow::refused;
  }
  if (sent == asio::buffer_size(all)) return SendNow::sent;
  // The socket took part of it: the rest leaves first, from finish_send(). Moving the vector
  // keeps the PDUs (and their BHS bytes the buffers point at) where they are.
  rest_of(all, sent, write_rest_);
  take(pdus);
  writing_ = true;  // sends from now on queue behind the rest
  return SendNow::queued;
}

bool TcpDatamover::start_on_sender() {
  sender_iov_.clear();
  for (const auto& b : write_buffers_)
    sender_iov_.push_back(iovec{.iov_base = const_cast<void*>(b.data()), .iov_len = b.size()});
  sender_done_.reset();
  sender_result_ = 0;
  if (!sender_->start(socket_.native_handle(), sender_iov_.data(), sender_iov_.size(), sender_done_, sender_result_))
    return false;
  sender_in_flight_ = true;
  return true;
}

void TcpDatamover::take(std::vector<PduOut>& pdus) noexcept {
  // A swap, not a move: the caller's vector gets taken_'s capacity back (finish_send() emptied
  // it), so a caller that reuses its batches (the target's writer) allocates nothing here.
  taken_.swap(pdus);
  pdus.clear();
}

boost::system::error_code TcpDatamover::sender_finished() {
  sender_in_flight_ = false;
  if (sender_result_ < 0) return {-sender_result_, boost::system::system_category()};
  // A short send: the rest leaves as after a short non-blocking write (Asio, in order).
  const std::span<const asio::const_buffer> all(write_buffers_);
  const auto sent = static_cast<std::size_t>(sender_result_);
  if (sent < asio::buffer_size(all)) rest_of(all, sent, write_rest_);
  return {};
}

Awaitable<std::error_code> TcpDatamover::finish_send() {
  // This coroutine's frame is the only one: the sender's end and the rest's writes are waited for
  // in place (Completion, write_remaining_op), not through nested coroutines. Each further frame
  // allocated on every queued send, the rest of a 1 MiB Data-In the socket did not take at once
  // (Asio 1.74 keeps one freed frame per thread, and three nested frames of different sizes
  // missed it every time: issue 23 item 4, the target's 1 MiB read under load).
  boost::system::error_code ec;
  if (sender_in_flight_) {
    co_await sender_done_.wait();
    ec = sender_finished();
  }
  if (!ec) co_await write_remaining_op(socket_, write_rest_, write_memory_, ec);
  taken_.clear();
  const std::error_code result = ec ? map_error(ec) : std::error_code{};
  if (result) {
    send_error_ = result;
    for (auto& p : queue_) finish(p, send_error_);
    queue_.clear();
  } else if (!queue_.empty()) {
    co_await write_queued();  // what was sent meanwhile waited behind the rest
  }
  writing_ = false;
  co_return result;
}

Awaitable<void> TcpDatamover::write_queued() {
  // Already set when finish_send() calls it (what queued behind the rest of try_send_now()'s PDUs).
  writing_ = true;
  // Members, not locals: only one write_queued() runs at a time (writing_), and keeping their
  // capacity saves three or four allocations per gather write in steady state.
  auto& buffers = write_buffers_;
  auto& digests = write_digests_;
  auto& batch = write_batch_;
  while (!queue_.empty()) {
    batch.clear();
    buffers.clear();
    digests.clear();
    const std::size_t n = std::min(queue_.size(), max_batch_pdus);
    if (header_digest_ || data_digest_) digests.reserve(2 * n);  // addresses into it must stay stable
    boost::system::error_code ec;
    for (std::size_t i = 0; i < n && !ec; ++i) {
      batch.push_back(queue_.front());
      queue_.pop_front();
      PduOut& pdu = *batch.back().pdu;
      gather(pdu);
      if (pdu.splice_from >= 0) ec = co_await write_spliced(pdu);
    }
    // First on this thread, without suspending: when the socket takes it all (the usual case) the
    // batch costs one sendmsg and no posted completion. What is left waits for the socket.
    if (!ec) ec = co_await write_gathered();
    const std::error_code result = ec ? map_error(ec) : std::error_code{};
    if (result) send_error_ = result;
    for (auto& p : batch) finish(p, result);
    if (send_error_) {
      for (auto& p : queue_) finish(p, send_error_);
      queue_.clear();
    }
  }
  writing_ = false;
}

Awaitable<boost::system::error_code> TcpDatamover::write_gathered() {
  boost::system::error_code ec;
  const std::span<const asio::const_buffer> all(write_buffers_);
  const std::size_t sent = write_now(socket_, all, ec);
  if (!ec && sent < asio::buffer_size(all)) {
    rest_of(all, sent, write_rest_);
    co_await write_remaining_op(socket_, write_rest_, write_memory_, ec);  // no frame per step
  }
  co_return ec;
}

Awaitable<boost::system::error_code> TcpDatamover::write_spliced(const PduOut& pdu) {
  const auto bytes = pdu.data.size();
  if (data_digest_) co_return boost::system::errc::make_error_code(boost::system::errc::invalid_argument);
  // Everything gathered before it and its own header first, in order.
  boost::system::error_code ec = co_await write_gathered();
  write_buffers_.clear();
  write_digests_.clear();  // nothing points into it any more (its capacity stays reserved)
  if (ec) co_return ec;
  // The pipe must hold every byte: splice from an emptied pipe would wait forever (its write end
  // is open) instead of failing.
  int in_pipe = 0;
  if (::ioctl(pdu.splice_from, FIONREAD, &in_pipe) != 0 || static_cast<std::size_t>(in_pipe) < bytes)
    co_return boost::system::errc::make_error_code(boost::system::errc::io_error);
  std::size_t left = bytes;
  while (left > 0) {
    const ssize_t n = ::splice(pdu.splice_from, nullptr, socket_.native_handle(), nullptr, left,
                               SPLICE_F_MOVE | SPLICE_F_NONBLOCK | SPLICE_F_MORE);
    if (n > 0) {
      left -= static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // The socket's buffer is full (the pipe holds the rest): wait until it takes more.
      co_await socket_.async_wait(asio::ip::tcp::socket::wait_write, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return ec;
      continue;
    }
    co_return n == 0 ? boost::system::errc::make_error_code(boost::system::errc::io_error)
                     : boost::system::error_code(errno, boost::system::system_category());
  }
  ++spliced_pdus_;
  // The data segment's padding (RFC 7143 §11.1) goes with what follows.
  if (const auto pad = iscsi::padding_for(static_cast<std::uint32_t>(bytes)); pad != 0)
    write_buffers_.emplace_back(zero_pad.data(), pad);
  co_return ec;
}

void TcpDatamover::continue_burst() noexcept {
  if (pass_ == nullptr || holding_ || receives_since_wait_ < 2) return;
  pass_->hold();
  holding_ = true;
}

void TcpDatamover::end_burst() {
  receives_since_wait_ = 1;  // the receive() that now waits is the first of the next burst
  if (!holding_) return;
  holding_ = false;
  pass_->release_later(executor_);
}

namespace {
/// The framer's spans as Asio buffers (at most three).
struct ReadBuffers {
  explicit ReadBuffers(const TcpFramer& framer) {
    for (const auto& span : framer.want()) parts[count++] = asio::buffer(span.data(), span.size());
  }
  [[nodiscard]] std::span<const asio::mutable_buffer> view() const noexcept { return std::span(parts.data(), count); }
  std::array<asio::mutable_buffer, 3> parts{};
  std::size_t count = 0;
};
}  // namespace

std::optional<Result<PduIn>> TcpDatamover::poll(DataPlacement* placement) {
  while (true) {
    if (auto pdu = framer_.next(placement)) {
      if (*pdu) {
        empty_guess_.unit();
        after_unit_ = true;
      }
      return pdu;
    }
    // The last read filled all it asked for: more is probably there. Read it on this thread —
    // unless PDUs come one per wake-up (queue depth 1): then Asio's read finds out alone.
    if (socket_dry_) return std::nullopt;
    if (after_unit_ && !framer_.has_staged_bytes() && !empty_guess_.worth_reading()) return std::nullopt;
    after_unit_ = false;
    const ReadBuffers buffers(framer_);
    const std::size_t asked = framer_.want_bytes();
    boost::system::error_code ec;
    const std::size_t n = socket_.read_some(buffers.view(), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) {
      socket_dry_ = true;
      return std::nullopt;
    }
    if (ec) {
      end_burst();  // the receive fails: nothing of this connection holds the pass any more
      return fail(map_error(ec));
    }
    framer_.consumed(n);
    socket_dry_ = n < asked;
  }
}

std::optional<Result<PduIn>> TcpDatamover::try_receive(DataPlacement* placement) {
  // A burst's bound: receive() ends it and yields the thread once (see receive()).
  if (receives_since_wait_ >= max_burst_pdus) return std::nullopt;
  auto pdu = poll(placement);
  if (pdu) {
    ++receives_since_wait_;
    if (*pdu) continue_burst();
  }
  return pdu;
}

Awaitable<Result<PduIn>> TcpDatamover::receive(DataPlacement* placement) {
  if (++receives_since_wait_ > max_burst_pdus) {
    // A peer whose PDUs never stop coming must not keep this thread (other connections) or the
    // send pass: end the burst and let the handlers queued meanwhile run.
    end_burst();
    co_await asio::post(executor_, asio::use_awaitable);
    ++receives_since_wait_;
  }
  while (true) {
    if (auto pdu = poll(placement)) {
      if (*pdu) continue_burst();  // its bytes were here without a wait
      co_return std::move(*pdu);
    }
    // The socket had nothing, the last read came back short (it emptied the socket), or it is
    // guessed empty: the burst ends here. Asio's read tries once more and then waits for the
    // socket (no epoll_ctl, unlike async_wait).
    end_burst();
    empty_guess_.waiting();
    after_unit_ = false;
    const ReadBuffers buffers(framer_);
    const std::size_t asked = framer_.want_bytes();
    // await_op: no coroutine frame for the read itself (one allocation less per wait).
    std::tuple<boost::system::error_code, std::size_t> read{};
    co_await await_op(read, receive_memory_,
                      [&](auto make_handler) { socket_.async_read_some(buffers.view(), make_handler()); });
    const auto [ec, n] = read;
    if (ec) co_return fail(map_error(ec));
    framer_.consumed(n);
    socket_dry_ = n < asked;
  }
}

}  // namespace iserkit::datamover
