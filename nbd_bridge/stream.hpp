// The byte stream one NBD connection runs on (layer 6): the accepted socket, plain or — after
// NBD_OPT_STARTTLS — wrapped in a TLS session (tls.hpp). The handshake and the transmission loop
// read and write through it and never see which one it is.
// Spec: NBD proto.md "TLS support" (after STARTTLS every byte in both directions is TLS records).
#pragma once

#include <chrono>
#include <memory>
#include <span>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/bytes.hpp"
#include "iserkit/common/result.hpp"

namespace iserkit::nbd {

/// The socket every connection runs on: a TCP, Unix-domain or inherited (stdio / systemd) socket.
using Socket = asio::generic::stream_protocol::socket;

class TlsContext;
class TlsSession;

/// A connected socket, plain until start_tls() succeeds and TLS from then on.
///
/// Errors of read_exact()/write_all() are Asio's: asio::error::eof when the peer closed (with or
/// without a TLS close_notify), asio::error::connection_aborted for a TLS failure (bad record,
/// failed MAC; logged with GnuTLS's message), or the socket's own error.
/// Executor: every call on the socket's executor (a strand or a single-threaded io_context). One
/// read and one write may be outstanding at once (the transmission loop's reader and writer).
class Stream {
 public:
  explicit Stream(Socket socket);
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();

  /// Reads exactly out.size() bytes (payload or header bytes; decrypted when TLS is on).
  Awaitable<boost::system::error_code> read_exact(ByteSpan out);

  /// Writes every byte of `buffers` in order (encrypted into TLS records when TLS is on). Plain:
  /// one non-blocking gather write first (no suspension when the socket takes it all).
  Awaitable<boost::system::error_code> write_all(std::span<const asio::const_buffer> buffers);

  /// One non-blocking gather write on the calling thread (plain socket only; TLS: 0, nothing
  /// written): the bytes the socket took now, 0 when it would block. `ec` is set only for a real
  /// error. No write_all() may be outstanding. The rest is the caller's to write with write_all().
  std::size_t write_now(std::span<const asio::const_buffer> buffers, boost::system::error_code& ec);

  /// Runs the server side of a TLS handshake with `context`'s credentials, bounded by its
  /// handshake timeout; on success every later read and write goes through TLS. Errors:
  /// std::errc::timed_out (the peer stalled), std::errc::permission_denied (the peer's
  /// certificate or PSK identity was refused, or the handshake failed; GnuTLS's reason is logged),
  /// errc::connection_closed (the peer left). On error the caller closes the connection.
  Awaitable<Result<void>> start_tls(const TlsContext& context);

  /// True once start_tls() succeeded.
  [[nodiscard]] bool tls_active() const noexcept { return tls_ != nullptr; }

  /// The underlying socket (shutdown, close, options, executor).
  Socket& socket() noexcept { return socket_; }

  /// Ends the connection in order (no write outstanding): a best-effort TLS close_notify (never
  /// waits), then shutdown and close.
  void close() noexcept;

  /// Ends the connection at once (hard disconnect; a write may be outstanding, so no TLS alert is
  /// sent, which could interleave with a half-sent record): shutdown and close.
  void abort() noexcept;

 private:
  Socket socket_;
  std::unique_ptr<TlsSession> tls_;
};

}  // namespace iserkit::nbd
