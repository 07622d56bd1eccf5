// TcpDatamover: iSCSI over TCP (RFC 7143 §11 framing: BHS, AHS, header digest, data segment,
// padding, data digest). Data segments are received straight into the placement's span and sent
// straight from the caller's span with one gather write: no user-space copy of payload.
#pragma once

#include <sys/uio.h>

#include <array>
#include <deque>
#include <memory>

#include "iserkit/common/completion.hpp"
#include "iserkit/common/empty_socket_guess.hpp"
#include "iserkit/datamover/datamover.hpp"
#include "iserkit/datamover/tcp_framer.hpp"

namespace iserkit::datamover {

class SocketSender;  // socket_sender.hpp

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

  /// Hands try_send_now()'s gather writes to `sender` (socket_sender.hpp; e.g. the target's
  /// io_uring ring) instead of a sendmsg of its own; null: sendmsg again. Not while a send is
  /// under way. The queued path (send(), send_batch() behind a running write) keeps sendmsg.
  void set_socket_sender(std::unique_ptr<SocketSender> sender) noexcept;
  /// The installed sender, or null.
  [[nodiscard]] SocketSender* socket_sender() const noexcept { return sender_.get(); }

  Awaitable<std::error_code> send(PduOut pdu) override;
  Awaitable<std::error_code> send_batch(std::vector<PduOut> pdus) override;
  /// One non-blocking gather write (sendmsg) of every PDU when no send is under way; with a
  /// socket sender installed the write is started there instead (SendNow::queued: finish_send()
  /// waits for it and writes what it left).
  SendNow try_send_now(std::vector<PduOut>& pdus) override;
  Awaitable<std::error_code> finish_send() override;
  Awaitable<Result<PduIn>> receive(DataPlacement* placement) override;
  /// Without suspending: a PDU whose bytes are here (read ahead) or readable now (non-blocking
  /// reads), else nullopt. Also nullopt after max_burst_pdus in a row, so receive() yields once.
  std::optional<Result<PduIn>> try_receive(DataPlacement* placement) override;
  void set_digests(bool header, bool data) noexcept override {
    header_digest_ = header;
    data_digest_ = data;
    framer_.set_digests(header, data);
  }
  void set_max_recv_data_segment_length(std::uint32_t bytes) noexcept override {
    framer_.set_max_recv_data_segment_length(bytes);
  }
  void set_drain_oversize(bool drain) noexcept override { framer_.set_drain_oversize(drain); }
  void set_send_pass(SendPass* pass) noexcept override { pass_ = pass; }
  /// Also called by fill() when the socket has nothing more, before waiting.
  void end_burst() override;
  void close() noexcept override;
  void abort() noexcept override;
  [[nodiscard]] std::string peer() const override { return peer_; }
  [[nodiscard]] std::string local() const override { return local_; }
  [[nodiscard]] Transport transport() const noexcept override { return Transport::tcp; }
  [[nodiscard]] asio::any_io_executor executor() const override { return executor_; }
  /// PDUs whose data segment was spliced from a pipe (PduOut::splice_from) so far.
  [[nodiscard]] std::uint64_t spliced_pdus() const noexcept { return spliced_pdus_; }

 private:
  struct Pending {
    PduOut* pdu;
    Completion* done;          // null for a batch's PDUs but its last
    std::error_code* result;   // null with done
  };
  static void finish(const Pending& pending, std::error_code result);
  /// Appends one PDU's gather list to write_buffers_ (its digests to write_digests_, which must
  /// have room reserved: the buffers point into it).
  void gather(PduOut& pdu);
  /// Writes queue_ in order until it is empty (a failed write fails what is left), with writing_
  /// set while it runs: send() and send_batch() start it only when writing_ is clear.
  Awaitable<void> write_queued();
  /// Starts write_buffers_ on the socket sender; false when it refused (nothing started).
  bool start_on_sender();
  /// try_send_now()'s PDUs into taken_ (kept until finish_send() wrote them); `pdus` is left
  /// empty with taken_'s former capacity.
  void take(std::vector<PduOut>& pdus) noexcept;
  /// The sender's send ended (sender_done_): its error, or none with what a short send left in
  /// write_rest_.
  boost::system::error_code sender_finished();
  /// Writes write_buffers_ whole (a non-blocking write, then write_remaining_op()); the socket's error.
  Awaitable<boost::system::error_code> write_gathered();
  /// write_queued() for a PDU whose data segment is in a pipe (PduOut::splice_from; gather() took
  /// its header): writes what was gathered, then splices the segment from the pipe to the socket,
  /// then gathers its padding. EINVAL with a data digest, EIO when the pipe holds fewer bytes.
  Awaitable<boost::system::error_code> write_spliced(const PduOut& pdu);
  /// Runs the framer with non-blocking reads until a PDU is whole (or the stream failed); nullopt
  /// when the socket has nothing more now.
  std::optional<Result<PduIn>> poll(DataPlacement* placement);
  /// Input for a PDU beyond the first since the last wait is here without waiting: hold the pass.
  void continue_burst() noexcept;

  asio::ip::tcp::socket socket_;
  asio::any_io_executor executor_;
  std::string peer_;
  std::string local_;
  bool header_digest_ = false;
  bool data_digest_ = false;
  bool writing_ = false;
  std::uint64_t spliced_pdus_ = 0;
  std::error_code send_error_;
  std::deque<Pending> queue_;
  // write_queued()'s working vectors, kept between calls so steady-state sends do not allocate.
  std::vector<asio::const_buffer> write_buffers_;
  std::vector<std::array<std::byte, 4>> write_digests_;
  std::vector<Pending> write_batch_;
  std::vector<asio::const_buffer> write_rest_;  // what the non-blocking first write left (write_now)
  std::vector<PduOut> taken_;                    // try_send_now()'s PDUs until finish_send() wrote them
  // The socket sender (socket_sender.hpp), its one send in flight and that send's iovecs.
  std::unique_ptr<SocketSender> sender_;
  std::vector<iovec> sender_iov_;
  Completion sender_done_;
  int sender_result_ = 0;
  bool sender_in_flight_ = false;
  // Receive framing (tcp_framer.hpp): zero copy, at most one BHS read ahead.
  TcpFramer framer_;
  // The send pass (send_pass.hpp): held while receive() returns PDUs that were already here.
  SendPass* pass_ = nullptr;
  bool holding_ = false;
  unsigned receives_since_wait_ = 0;  // receive() calls since the socket was last waited for
  bool socket_dry_ = true;            // the last read got less than it asked for: the socket was emptied
  bool after_unit_ = false;           // a PDU was returned and nothing was read since
  EmptySocketGuess empty_guess_;      // at queue depth 1, skip the own read that would find nothing
  HandlerMemory receive_memory_;      // receive()'s socket read's operation state (one at a time)
  HandlerMemory write_memory_;        // write_remaining_op()'s socket write's operation state (one at a time)
};

}  // namespace iserkit::datamover
