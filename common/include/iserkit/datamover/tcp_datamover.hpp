// TcpDatamover: iSCSI over TCP (RFC 7143 §11 framing: BHS, AHS, header digest, data segment,
// padding, data digest). Data segments are received straight into the placement's span and sent
// straight from the caller's span with one gather write: no user-space copy of payload.
#pragma once

#include <array>
#include <deque>
#include <memory>

#include "iserkit/common/completion.hpp"
#include "iserkit/datamover/datamover.hpp"

namespace iserkit::datamover {

/// The TCP datamover for one connected socket (either role).
class TcpDatamover final : public Datamover {
 public:
  /// Takes ownership of a connected socket. Sets TCP_NODELAY.
  explicit TcpDatamover(asio::ip::tcp::socket socket);
  ~TcpDatamover() override;

  /// Connects to `host`:`port` (name or numeric, IPv4 or IPv6), trying each resolved address.
  /// `netns` (empty: the calling thread's namespace): the network namespace (/run/netns/NAME) the
  /// socket is created in (netns::run_in; names are still resolved in the caller's); the
  /// connection lives there for life. Creating each socket there costs a short-lived thread.
  /// Errors: resolver and connect errors, errc::timeout after `timeout`; netns::run_in's errors
  /// (ENOENT: no such namespace, EPERM: no CAP_SYS_ADMIN).
  static Awaitable<Result<std::unique_ptr<TcpDatamover>>> connect(asio::any_io_executor ex, std::string host,
                                                                  std::uint16_t port,
                                                                  std::chrono::milliseconds timeout,
                                                                  std::string netns = {});

  Awaitable<std::error_code> send(PduOut pdu) override;
  Awaitable<std::error_code> send_batch(std::vector<PduOut> pdus) override;
  Awaitable<Result<PduIn>> receive(DataPlacement* placement) override;
  void set_digests(bool header, bool data) noexcept override { header_digest_ = header; data_digest_ = data; }
  void set_max_recv_data_segment_length(std::uint32_t bytes) noexcept override { max_recv_ = bytes; }
  void set_drain_oversize(bool drain) noexcept override { drain_oversize_ = drain; }
  void set_send_pass(SendPass* pass) noexcept override { pass_ = pass; }
  /// Also called by fill() when the socket has nothing more, before waiting.
  void end_burst() override;
  void close() noexcept override;
  void abort() noexcept override;
  [[nodiscard]] std::string peer() const override { return peer_; }
  [[nodiscard]] std::string local() const override { return local_; }
  [[nodiscard]] Transport transport() const noexcept override { return Transport::tcp; }
  [[nodiscard]] asio::any_io_executor executor() const override { return executor_; }

 private:
  struct Pending {
    PduOut* pdu;
    Completion* done;          // null for a batch's PDUs but its last
    std::error_code* result;   // null with done
  };
  static void finish(const Pending& pending, std::error_code result);
  Awaitable<void> write_queued();
  /// Reads into `parts` until at least `minimum` bytes came (at most their total), returning the
  /// count: non-blocking reads on this thread while the socket has bytes (no suspension, no posted
  /// completion); once a read came back short or found nothing, the burst ends (the send pass is
  /// released) and Asio's async read takes over. Errors in `ec` (Asio's).
  Awaitable<std::size_t> fill(std::span<const asio::mutable_buffer> parts, std::size_t minimum,
                              boost::system::error_code& ec);
  /// Copies up to out.size() staged bytes into `out` (consumed); returns how many.
  std::size_t take(std::span<std::byte> out) noexcept;
  /// Reads exactly out.size() bytes: staged ones first, then the socket (no read-ahead).
  Awaitable<void> read_exact(std::span<std::byte> out, boost::system::error_code& ec);
  /// Completes a data segment into `dest` (its first `filled` bytes already there) and its
  /// trailer (padding, data digest): staged bytes first; the socket read of the rest also takes up
  /// to one BHS of the next PDU into the staging area.
  Awaitable<void> read_segment(std::span<std::byte> dest, std::size_t filled, std::span<std::byte> trailer,
                               boost::system::error_code& ec);
  /// Input for a PDU beyond the first since the last wait is here without waiting: hold the pass.
  void continue_burst() noexcept;

  asio::ip::tcp::socket socket_;
  asio::any_io_executor executor_;
  std::string peer_;
  std::string local_;
  bool header_digest_ = false;
  bool data_digest_ = false;
  std::uint32_t max_recv_ = 8192;
  bool drain_oversize_ = true;
  bool framing_lost_ = false;  // an oversize segment was refused unread: no further receive
  bool writing_ = false;
  std::error_code send_error_;
  std::deque<Pending> queue_;
  // write_queued()'s working vectors, kept between calls so steady-state sends do not allocate.
  std::vector<asio::const_buffer> write_buffers_;
  std::vector<std::array<std::byte, 4>> write_digests_;
  std::vector<Pending> write_batch_;
  std::vector<asio::const_buffer> write_rest_;  // what the non-blocking first write left (write_now)
  std::vector<std::byte> scratch_;
  // Lookahead (zero copy; staged_[staged_begin_, staged_end_)): the read of a data segment also
  // asks for up to one BHS of the next PDU, so a stream of PDUs with data costs one recvmsg each
  // instead of two. It never holds more than one BHS, so no payload byte is ever read into it (and
  // copied out of it). A larger read-ahead after header-only PDUs was measured (one recvmsg for a
  // run of SCSI Commands) and dropped: where such a run ends with a PDU that carries data, that
  // data's start would be copied out of the staging area (docs/performance.md).
  std::array<std::byte, iscsi::bhs_size> staged_{};
  std::size_t staged_begin_ = 0;
  std::size_t staged_end_ = 0;
  // The send pass (send_pass.hpp): held while receive() returns PDUs that were already here.
  SendPass* pass_ = nullptr;
  bool holding_ = false;
  unsigned receives_since_wait_ = 0;  // receive() calls since the socket was last waited for
  bool socket_dry_ = true;            // the last read got less than it asked for: the socket was emptied
};

}  // namespace iserkit::datamover
