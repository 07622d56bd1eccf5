// One connection's byte stream, plain or TLS (see stream.hpp).
#include "nbd_bridge/stream.hpp"

#include "nbd_bridge/tls.hpp"

namespace iserkit::nbd {

Stream::Stream(Socket socket) : socket_(std::move(socket)) {}

Stream::~Stream() = default;

Awaitable<boost::system::error_code> Stream::read_exact(ByteSpan out) {
  if (tls_) co_return co_await tls_->read_exact(socket_, out);
  boost::system::error_code ec;
  co_await asio::async_read(socket_, asio::buffer(out.data(), out.size()), transfer_all_uncapped(),
                            use_awaitable_ec(ec));
  co_return ec;
}

Awaitable<boost::system::error_code> Stream::write_all(std::span<const asio::const_buffer> buffers) {
  if (tls_) co_return co_await tls_->write_all(socket_, buffers);
  boost::system::error_code ec;
  const std::size_t sent = iserkit::write_now(socket_, buffers, ec);
  if (ec || sent == asio::buffer_size(buffers)) co_return ec;
  std::vector<asio::const_buffer> rest;
  rest_of(buffers, sent, rest);
  co_await asio::async_write(socket_, std::span<const asio::const_buffer>(rest), transfer_all_uncapped(),
                             use_awaitable_ec(ec));
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
