// The byte stream one NBD connection runs on (layer 6): the accepted socket, plain or — after
// NBD_OPT_STARTTLS — wrapped in a TLS session (tls.hpp). The handshake and the transmission loop
// read and write through it and never see which one it is.
// Spec: NBD proto.md "TLS support" (after STARTTLS every byte in both directions is TLS records).
#pragma once

#include <array>
#include <chrono>
#include <memory>
#include <span>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/bytes.hpp"
#include "iserkit/common/empty_socket_guess.hpp"
#include "iserkit/common/handler_memory.hpp"
#include "iserkit/common/result.hpp"
#include "iserkit/common/write_remaining.hpp"
#include "iserkit/common/send_pass.hpp"

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

  /// How read_exact() reads (plain sockets; TLS ignores it).
  struct ReadOptions {
    /// These are a request's first bytes (its header): a burst of requests is counted in them
    /// for the send pass (set_send_pass()).
    bool starts_request = false;
    /// These are payload bytes: the ones taken from the read-ahead area are counted as a copy
    /// (copy_counter.hpp).
    bool payload = false;
    /// The socket read may also take up to this many bytes beyond `out` into the read-ahead area
    /// (at most read_ahead_capacity), which later read_exact() calls take first: the next request
    /// header after a WRITE payload. Bytes read ahead that turn out to be payload are copied out
    /// of the area (counted), so the caller asks only for what cannot be payload.
    std::size_t read_ahead = 0;
  };
  /// The most bytes read_exact() reads ahead (one NBD request header).
  static constexpr std::size_t read_ahead_capacity = 28;

  /// Reads exactly out.size() bytes (payload or header bytes; decrypted when TLS is on). Plain:
  /// bytes read ahead earlier first, then non-blocking reads, so a request that already arrived
  /// costs no suspension and no posted completion; it waits for the socket only when the socket
  /// has nothing.
  Awaitable<boost::system::error_code> read_exact(ByteSpan out, ReadOptions options);
  /// read_exact() with the default options (no read-ahead).
  Awaitable<boost::system::error_code> read_exact(ByteSpan out) { return read_exact(out, ReadOptions{}); }

  /// Joins the loop's send pass (common/send_pass.hpp; null: none): while read_exact() returns
  /// requests that had already arrived (a second one or more since the last wait), the pass is
  /// held, so the commands and replies they cause leave in one write per socket; it is released
  /// (posted) before the stream waits for the socket. Plain sockets only (TLS: never held).
  void set_send_pass(SendPass* pass) noexcept { pass_ = pass; }

  /// Ends the current burst: releases the send pass if this stream holds it (posted). The reader
  /// calls it before it waits for anything but the socket (flow control), whose progress needs
  /// the output the pass holds back.
  void end_burst();

  /// Writes every byte of `buffers` in order (encrypted into TLS records when TLS is on). Plain:
  /// one non-blocking gather write first (no suspension when the socket takes it all).
  Awaitable<boost::system::error_code> write_all(std::span<const asio::const_buffer> buffers);

  /// One non-blocking gather write on the calling thread (plain socket only; TLS: 0, nothing
  /// written): the bytes the socket took now, 0 when it would block. `ec` is set only for a real
  /// error. No write_all() may be outstanding. The rest is the caller's to write with write_all().
  std::size_t write_now(std::span<const asio::const_buffer> buffers, boost::system::error_code& ec);

  /// Whether reads and writes go through TLS (after NBD_OPT_STARTTLS).
  [[nodiscard]] bool is_tls() const noexcept { return static_cast<bool>(tls_); }

  /// `co_await write_rest(buffers, sent, ec)`: the rest of a write_now() that took `sent` bytes of
  /// `buffers`, on a plain socket (over TLS use write_all()); `ec` as write_all() returns it.
  /// Makes no coroutine frame and no allocation (write_remaining_op()). `buffers` may go once
  /// this returns; `ec` must outlive the wait. One write at a time (the connection's writer).
  auto write_rest(std::span<const asio::const_buffer> buffers, std::size_t sent, boost::system::error_code& ec) {
    rest_of(buffers, sent, write_rest_);
    return write_remaining_op(socket_, write_rest_, write_memory_, ec);
  }

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
  /// Input for a second request since the last wait is here without waiting: hold the pass.
  void hold_for_burst() noexcept;

  Socket socket_;
  std::unique_ptr<TlsSession> tls_;
  SendPass* pass_ = nullptr;
  bool holding_ = false;
  unsigned requests_since_wait_ = 0;
  bool socket_dry_ = true;  // the last read got less than it asked for: the socket was emptied
  EmptySocketGuess empty_guess_;  // at queue depth 1, skip the own read that would find nothing
  HandlerMemory read_memory_;     // the socket read's operation state (one read at a time)
  HandlerMemory write_memory_;    // write_all()'s socket write's operation state (one at a time)
  std::vector<asio::const_buffer> write_rest_;  // write_all()'s unwritten buffers (capacity kept)
  std::array<std::byte, read_ahead_capacity> staged_{};  // read ahead: [staged_begin_, staged_end_)
  std::size_t staged_begin_ = 0;
  std::size_t staged_end_ = 0;
};

}  // namespace iserkit::nbd
