// The target's socket I/O on its io_uring ring (issue 23 item 3): the kernel features probed once
// per process, the choice between the ring and epoll (--socket-io), and UringSocketSender, the
// datamover::SocketSender that prepares a TcpDatamover's gather send as an SQE on the I/O thread's
// UringService ring, so that it leaves in the same io_uring_enter as the backend's reads and
// writes of the pass (or at once when none is pending: never later than a sendmsg would).
#pragma once

#include <sys/socket.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/uring_ring.hpp"
#include "iserkit/datamover/socket_sender.hpp"
#include "iserkit/target/config.hpp"

namespace iserkit::target::detail {

/// What the running kernel's io_uring offers for socket I/O, probed once (io_uring_get_probe, a
/// throw-away ring's features, a provided-buffer ring registered and dropped again).
struct SocketIoFeatures {
  bool ring = false;            ///< an io_uring could be created at all
  bool sendmsg = false;         ///< IORING_OP_SENDMSG
  bool send = false;            ///< IORING_OP_SEND
  bool send_zc = false;         ///< IORING_OP_SEND_ZC (6.0+)
  bool recv_multishot = false;  ///< IORING_RECV_MULTISHOT: IORING_OP_RECV with SEND_ZC's kernel (both 6.0+)
  bool buf_ring = false;        ///< io_uring_register_buf_ring (provided buffer rings, 5.19+)
  bool fast_poll = false;       ///< IORING_FEAT_FAST_POLL (a socket op waits by poll, not a worker thread)
  std::string error;            ///< why `ring` is false (the errno text), else empty
};

/// The probe's result, computed on first use (thread-safe) and kept for the process.
const SocketIoFeatures& socket_io_features();

/// Whether `mode` puts TCP sends on the ring with `features`: epoll never; uring when SENDMSG and
/// SEND are there; automatic when they are and the measured default (docs/performance.md, issue
/// 23 item 3) is the ring.
bool socket_sends_on_ring(SocketIo mode, const SocketIoFeatures& features) noexcept;

/// "uring" or "epoll": what socket_sends_on_ring() picks for `mode` on this kernel.
std::string_view selected_socket_io(SocketIo mode);

/// A TcpDatamover's sends as IORING_OP_SEND (one buffer) or IORING_OP_SENDMSG (a gather list,
/// MSG_NOSIGNAL) on the ring of the io_context that runs the datamover. One send in flight.
class UringSocketSender final : public datamover::SocketSender {
 public:
  /// When a send goes on the ring.
  enum class Policy {
    /// Only when backend SQEs already wait for the pass's submit: the send shares that
    /// io_uring_enter (one system call less); else start() refuses and the datamover sends with
    /// sendmsg at once. A send on the ring costs its CQE's wake-up (eventfd read, epoll_ctl,
    /// epoll_wait) where sendmsg returns at once: measured, docs/performance.md issue 23 item 3.
    join_pending,
    /// Every send (tests; measurements).
    always,
  };
  /// A sender on the ring of `executor`'s io_context (created on first use). Errors: those of
  /// UringService::of (the errno of io_uring_queue_init and friends).
  static Result<std::unique_ptr<UringSocketSender>> create(const asio::any_io_executor& executor,
                                                           Policy policy = Policy::join_pending);
  ~UringSocketSender() override;
  UringSocketSender(const UringSocketSender&) = delete;
  UringSocketSender& operator=(const UringSocketSender&) = delete;

  /// See SocketSender::start. False also when more than IOV_MAX buffers are asked for, the ring
  /// is shut down or full, or (Policy::join_pending) no submit is pending.
  bool start(int fd, const iovec* iov, std::size_t count, Completion& done, int& result) override;
  void cancel() noexcept override;

  /// Sends started here so far (for tests).
  [[nodiscard]] std::uint64_t started() const noexcept { return started_; }

 private:
  struct Op : UringOp {
    msghdr msg{};
    std::vector<iovec> iov;  // the kernel's copy is made at issue; kept until the CQE regardless
    Completion* done = nullptr;
    int* result = nullptr;
    bool in_flight = false;
    bool orphaned = false;  // the sender is gone: the CQE frees the op
  };
  UringSocketSender(UringService& service, Policy policy);
  static void on_complete(UringOp& base) noexcept;

  UringService* service_;
  Policy policy_;
  Op* op_;  // owned; handed to its CQE when destroyed in flight
  std::uint64_t started_ = 0;
};

}  // namespace iserkit::target::detail
