// CommandChannel: what carries SCSI commands to one logical unit — a Session (one I_T nexus) or a
// Multipath (several sessions, one per path, to the same logical unit). LunHandle works on either,
// so its splitting, read-modify-write, retries and VPD logic are the same for both. Layer 6
// (public API).
//
// THREADING: as Session (session.hpp): every call on the channel's executor, one thread.
// BUFFERS: execute() borrows the request's spans until its awaitable completes (also on error).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/buffer.hpp"
#include "iserkit/common/result.hpp"
#include "iserkit/iscsi/pdu.hpp"
#include "iserkit/scsi/cdb.hpp"
#include "iserkit/scsi/lun.hpp"
#include "iserkit/scsi/sense.hpp"

namespace iserkit::initiator {

/// One SCSI command as the session carries it (no iSCSI fields: ITT/CmdSN are the session's).
struct CommandRequest {
  scsi::Lun lun;                            ///< the logical unit
  scsi::Cdb cdb;                            ///< 6..16-byte CDB
  std::span<std::byte> data_in;             ///< read buffer, bytes (target → initiator); may be empty
  std::span<const std::byte> data_out;      ///< write buffer, bytes (initiator → target); may be empty
  iscsi::TaskAttribute attribute = iscsi::TaskAttribute::simple;
  std::chrono::milliseconds timeout{0};     ///< 0 = SessionOptions::command_timeout
};

/// The end of a command started with CommandChannel::start().
class CommandCallback {
 public:
  /// Called once with what execute() would have returned, on the channel's executor from its
  /// event processing (never from inside start()). Must not call into the channel: start a
  /// follow-up from a posted handler.
  virtual void command_done(Result<scsi::ScsiResult> result) noexcept = 0;

 protected:
  ~CommandCallback() = default;
};

/// Something that runs SCSI commands: Session, Multipath.
class CommandChannel {
 public:
  virtual ~CommandChannel() = default;
  /// Sends one SCSI command and waits for its status. Returns the ScsiResult (CHECK CONDITION is
  /// a successful return carrying sense) or a transport error; see Session::execute() and
  /// Multipath::execute() for the exact set. `request` need not outlive the call; its spans must.
  virtual Awaitable<Result<scsi::ScsiResult>> execute(const CommandRequest& request) = 0;
  /// execute() without a coroutine frame or posted completion (the data path's fast path):
  /// `done` hears the result later. Returns an error, and `done` is not called, when the command
  /// could not be submitted (the errors execute() returns before sending), or
  /// std::errc::operation_not_supported for a channel without this path (then use execute()).
  /// `request` need not outlive the call; its spans and `done` must, until command_done() ran.
  virtual Result<void> start(const CommandRequest& request, CommandCallback& done) {
    (void)request;
    (void)done;
    return fail(std::make_error_code(std::errc::operation_not_supported));
  }
  /// Where to lease data buffers for execute() so they need no copy (thread-safe; outlives the
  /// channel).
  [[nodiscard]] virtual BufferPool& buffer_pool() const noexcept = 0;
  /// The largest transfer one command should carry, bytes, imposed by the transport; 0 = none.
  [[nodiscard]] virtual std::uint32_t max_transfer_bytes() const noexcept = 0;
  /// The largest transfer one command should carry when the unit states no MAXIMUM TRANSFER
  /// LENGTH (VPD 0xb0), bytes; 0 = only max_transfer_bytes() applies. iSER: 512 KiB (tgt's RDMA
  /// buffers hold that much and it reports no limit).
  [[nodiscard]] virtual std::uint32_t unstated_max_transfer_bytes() const noexcept { return 0; }
  /// The executor every call must run on.
  [[nodiscard]] virtual asio::any_io_executor executor() const = 0;
};

}  // namespace iserkit::initiator
