// SocketSender: the seam through which a TcpDatamover hands a gather write to someone else's
// submission machinery (the target's io_uring ring, target/src/backend/uring_socket.hpp) instead
// of calling sendmsg itself. common/ knows only this interface; whoever drives the event loop
// installs an implementation (TcpDatamover::set_socket_sender). Issue 23 item 3.
#pragma once

#include <sys/uio.h>

#include <cstddef>

#include "iserkit/common/completion.hpp"

namespace iserkit::datamover {

/// Sends gather lists on one socket for its TcpDatamover, one send in flight at a time. Used from
/// the thread that runs the datamover's executor only. Destroying it with a send in flight cancels
/// that send; its `done` and `result` are not touched afterwards.
class SocketSender {
 public:
  virtual ~SocketSender() = default;

  /// Starts one gather send of `count` buffers `iov` on the connected socket `fd`. The bytes the
  /// buffers point at must stay valid until `done` completes (the iovec array itself may go once
  /// start() returned). When the send ended, `*result` is set to the bytes sent (>= 0; fewer than
  /// asked is a short send the caller completes) or a negative errno, and then `done.complete()`
  /// runs on the loop's thread. Returns false when the send cannot be started (nothing was
  /// started, `done` is never completed): the caller sends itself.
  virtual bool start(int fd, const iovec* iov, std::size_t count, Completion& done, int& result) = 0;

  /// Asks the send in flight, if any, to end (the connection is closed or aborted): it completes
  /// soon, with what it sent or -ECANCELED. No effect when none is in flight.
  virtual void cancel() noexcept = 0;
};

}  // namespace iserkit::datamover
