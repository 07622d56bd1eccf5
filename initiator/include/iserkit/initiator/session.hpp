// The initiator session: login, the CmdSN window, the ITT table and the receive loop that places
// Data-In straight into the caller's buffer. One connection per session (MaxConnections=1),
// ErrorRecoveryLevel 0, over TCP or iSER (RFC 7145: the target moves the data by RDMA; see
// select_transports() and buffer_pool()). Implements RFC 7143 §4.2.2.1 (command numbering and window), §6 (login),
// §11.3–§11.9 (SCSI Command/Response, Data-In/Out, R2T, Async), §11.14–§11.19 (Logout, NOP),
// §11.17 (Reject). Layer 6 (public API) over layers 2–3 in initiator/src.
//
// THREADING: a Session lives on one executor (normally a single-threaded io_context) and every
// member function must be called — and every returned awaitable awaited — on that executor's thread.
// No locks; no thread hops per command. Other threads use BlockingClient (client.hpp) or post to
// executor(). Any number of execute() calls may be in flight at once.
//
// BUFFERS: execute() reads from and writes into the caller's spans directly (zero copy): Data-In is
// received into data_in at its BufferOffset, immediate/unsolicited/R2T data is sent from data_out.
// Both spans must stay valid until the awaitable completes — including when it completes with an
// error: by then no PDU references the buffer and no later Data-In can land in it.
// The connection's datamover prepares the spans for its transport (Datamover::prepare_task_data):
// over TCP they are used as they are; on iSER they are advertised to the target as STags — zero
// copy when they lie in memory from buffer_pool() (registered once), any other span through a
// registered bounce buffer (one counted copy). Where the transport lets the target touch the
// buffers by itself (iSER), a command that times out closes the connection, so the target can no
// longer RDMA into a buffer the caller got back. After a reconnect (SessionOptions::
// replacement_timeout) every re-issued command's buffers are prepared again by the new
// connection's datamover: it carries the new connection's STags, and a bounce buffer of the old
// one is given back.
// STATES (SessionState): logged_in → (connection lost) recovering, commands wait → (a login
// succeeds) logged_in, or (replacement timeout) failed: commands fail at once with
// errc::session_lost while logins go on with bounded back-off → (a login succeeds) logged_in.
// ended is final (close(), logout(), no recovery, or SessionOptions::reconnect_after_give_up off).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/buffer.hpp"
#include "iserkit/common/result.hpp"
#include "iserkit/initiator/command_channel.hpp"
#include "iserkit/initiator/options.hpp"
#include "iserkit/initiator/session_types.hpp"
#include "iserkit/initiator/url.hpp"
#include "iserkit/iscsi/negotiation.hpp"
#include "iserkit/iscsi/pdu.hpp"
#include "iserkit/scsi/cdb.hpp"
#include "iserkit/scsi/lun.hpp"
#include "iserkit/scsi/sense.hpp"

namespace iserkit::initiator {

/// Where a session stands (Session::state()); RFC 7143 §6.3.5 / open-iscsi's session states.
enum class SessionState {
  logged_in,   ///< a connection is logged in: commands go out
  recovering,  ///< the connection was lost; logging in again, commands wait (SessionOptions::replacement_timeout)
  /// The replacement timeout passed: commands fail at once with errc::session_lost (none is
  /// queued) while logins go on in the background (SessionOptions::reconnect_after_give_up); back
  /// to logged_in once one succeeds.
  failed,
  ended,       ///< closed, logged out, or failed for good: commands fail with Session::error()
};
/// "logged-in", "recovering", "failed", "ended".
const char* to_string(SessionState state) noexcept;

/// The background logins of a session that lost its connection (Session::reconnect_status()).
struct ReconnectStatus {
  unsigned attempts = 0;   ///< logins tried since the connection was last lost (failed ones included)
  /// When the next login starts (steady clock); nullopt while one is under way or none is planned
  /// (logged in, ended).
  std::optional<std::chrono::steady_clock::time_point> next_attempt;
  std::error_code last_error;  ///< why the last attempt failed (empty if none failed since the loss)
};

/// The transports Session::connect tries, in order: from_url → the URL's (iscsi:// TCP, iser://
/// iSER); tcp/iser → that one; automatic → iSER (when this build has it) then TCP.
std::vector<datamover::Transport> select_transports(const Url& url, TransportPolicy policy);

/// A logged-in iSCSI session (normal session type). Create with Session::connect(); share with
/// std::shared_ptr (the receive loop keeps the session alive until the connection ends).
class Session : public CommandChannel, public std::enable_shared_from_this<Session> {
 public:
  struct Impl;

  /// Connects to url.host:url.port and logs in to url.target (RFC 7143 §6): security stage with
  /// AuthMethod=None, or CHAP when options.chap or the URL has a user (RFC 7143 §12.1.3; mutual
  /// with options.chap.target_secret), unless options.security_stage is false; then the
  /// operational stage. With options.nop_interval a NOP-Out keepalive runs for the session. The
  /// transport follows options.transport and url.transport (select_transports()); on iSER the
  /// login runs over RDMA SENDs with RDMAExtensions=Yes (RFC 7145 §5, §6).
  /// Returns: the session, or
  ///  - errc::invalid_argument: the URL has no target name;
  ///  - errc::not_supported: iSER asked for but not built (WITH_ISER=OFF);
  ///  - std::errc::no_such_device: iSER asked for but no RDMA device reaches the host;
  ///  - errc::invalid_argument: CHAP credentials that do not fit (see resolve_credentials);
  ///  - errc::authentication_failed: mutual CHAP and the target failed to prove its identity;
  ///  - errc::timeout / socket errors: connect or login took too long / failed;
  ///  - a login_status_category() code: the target answered with status class 2 or 3 (0x0201 =
  ///    our CHAP credentials were refused), or redirected more than options.max_redirects times
  ///    (redirects, 0x0101/0x0102 with TargetAddress, are followed);
  ///  - errc::negotiation_failed / errc::protocol_error: the target broke RFC 7143 §6.
  /// Executor: everything runs on `ex`, which must be single-threaded (see THREADING above).
  static Awaitable<Result<std::shared_ptr<Session>>> connect(asio::any_io_executor ex, const Url& url,
                                                            SessionOptions options = {});

  /// Sends one SCSI command and waits for its status. Queues while the CmdSN window is closed or
  /// max_commands_in_flight commands hold an ITT (a timed-out command holds its ITT until its
  /// ABORT TASK is answered); never sends outside the window (RFC 7143 §4.2.2.1).
  /// Parameters: a command with a non-empty data_in is a read (R bit), a non-empty data_out a write
  /// (W bit); both empty = no data. ExpectedDataTransferLength = the span's size in bytes.
  /// Returns: the ScsiResult (status is data: CHECK CONDITION is a *successful* return carrying
  /// sense; residual_bytes/residual_overflow from the U/O bits), or
  ///  - errc::invalid_argument: both buffers set (bidirectional commands are not supported) or a
  ///    buffer above 4 GiB - 1;
  ///  - errc::session_lost: the connection dropped and no new one was logged in within
  ///    SessionOptions::replacement_timeout (until then the command waits and is sent again);
  ///    afterwards, in SessionState::failed, at once until a background login succeeds;
  ///  - errc::connection_closed: the connection dropped with replacement_timeout 0; the session is
  ///    failed from then on;
  ///  - errc::session_closed: the session had already failed or logged out;
  ///  - errc::timeout: the command timeout elapsed (the session stays usable over TCP; an ABORT
  ///    TASK goes to the target);
  ///  - errc::task_aborted: a task management function the target completed (ABORT TASK, LUN
  ///    RESET, …) ended the command without a status of its own;
  ///  - std::errc::resource_unavailable_try_again: 65536 commands already wait for the window;
  ///  - std::errc::not_enough_memory: the transport could not lease a bounce buffer (iSER, a span
  ///    outside buffer_pool());
  ///  - errc::data_digest_error: a Data-In arrived with a bad DataDigest (the command failed, the
  ///    session stays);
  ///  - errc::protocol_error: the target sent Data-In outside the buffer, an R2T outside the
  ///    transfer, or rejected the command (Reject PDU, RFC 7143 §11.17).
  /// Lifetime: see BUFFERS above. `request` itself need not outlive the call.
  Awaitable<Result<scsi::ScsiResult>> execute(const CommandRequest& request) override;
  /// execute() without a coroutine frame (CommandChannel::start()): the same checks, submission,
  /// recovery (re-sent after a reconnect) and results; `done` hears the result from the session's
  /// event processing. Errors returned at once: those execute() returns before sending.
  Result<void> start(const CommandRequest& request, CommandCallback& done) override;

  /// Sends a task management request and waits for its response (RFC 7143 §11.5, §11.6).
  /// Commands it ends come back with their own status (TASK ABORTED or CHECK CONDITION) when the
  /// target sends one first; otherwise a "function complete" answer ends the commands sent before
  /// it that the function names with errc::task_aborted.
  /// Returns: the response code, or errc::session_closed/connection_closed, errc::timeout,
  /// std::errc::resource_unavailable_try_again when no ITT is free.
  /// A timed-out command gets an ABORT TASK from the session by itself.
  Awaitable<Result<TaskManagementResult>> task_management(const TaskManagementOptions& options);
  /// LOGICAL UNIT RESET of `lun` (RFC 7143 §11.5.1 function 5, SAM-5 §7.7).
  Awaitable<Result<TaskManagementResult>> lun_reset(scsi::Lun lun);

  /// Logs out (close the session, RFC 7143 §11.14) after the commands in flight finish, then closes
  /// the connection. Commands started afterwards fail with errc::session_closed.
  /// Returns: success, or the error that ended the exchange (the connection is closed either way).
  Awaitable<Result<void>> logout();

  /// Closes the connection at once; commands in flight fail with errc::connection_closed.
  void close() noexcept;

  /// True until the session failed for good, was closed, or logged out (also while recovering,
  /// and in SessionState::failed: it still logs in again by itself).
  [[nodiscard]] bool is_open() const noexcept;
  /// True while the connection is lost and the session logs in again: commands wait — or, in
  /// SessionState::failed (past the replacement timeout), fail at once.
  [[nodiscard]] bool recovering() const noexcept;
  /// Where the session stands (see SessionState).
  [[nodiscard]] SessionState state() const noexcept;
  /// While recovering() (or failed): the logins tried and when the next one starts. Session's
  /// thread only.
  [[nodiscard]] ReconnectStatus reconnect_status() const noexcept;
  /// A hint that the target is probably reachable again (another session to it just logged in):
  /// when a background login waits for its turn (reconnect_status().next_attempt is set), it
  /// starts now and the back-off starts again from SessionOptions::reconnect_delay_min. No effect
  /// otherwise (logged in, a login under way, ended). Session's thread only; never fails.
  void reconnect_now() noexcept;
  /// While recovering(): when the connection was lost (steady clock).
  [[nodiscard]] std::chrono::steady_clock::time_point recovering_since() const noexcept;
  /// Why the session ended (empty while open).
  [[nodiscard]] std::error_code error() const noexcept;
  /// The negotiated operational parameters (lengths in bytes).
  [[nodiscard]] const iscsi::OperationalParameters& parameters() const noexcept;
  /// The target this session is logged in to.
  [[nodiscard]] const std::string& target_name() const noexcept;
  /// The peer address "ip:port".
  [[nodiscard]] std::string peer() const;
  /// The executor the session runs on.
  [[nodiscard]] asio::any_io_executor executor() const override;
  /// Counters (on the session's thread only).
  [[nodiscard]] const SessionStats& stats() const noexcept;
  /// The wire this session runs on.
  [[nodiscard]] datamover::Transport transport() const noexcept;
  /// The largest transfer one command should carry, bytes, imposed by the transport
  /// (datamover::Capabilities::max_transfer_bytes; on iSER SessionOptions::iser_max_transfer_bytes);
  /// 0 = no transport limit.
  [[nodiscard]] std::uint32_t max_transfer_bytes() const noexcept override;
  /// On iSER SessionOptions::iser_unstated_max_transfer_bytes (for units without a MAXIMUM
  /// TRANSFER LENGTH); 0 on TCP.
  [[nodiscard]] std::uint32_t unstated_max_transfer_bytes() const noexcept override;
  /// Where to lease data buffers for execute() so they need no copy: registered memory of the
  /// connection's RDMA device on iSER, HeapBufferPool::shared() on TCP. Thread-safe; outlives the
  /// session. The pools belong to the device (one protection domain per device, process
  /// lifetime), not to a connection: a buffer leased before a reconnect stays valid, and stays
  /// zero copy when the new connection is on the same device (else it is bounced, one counted
  /// copy). After a reconnect this returns the new connection's pool.
  [[nodiscard]] BufferPool& buffer_pool() const noexcept override;

  explicit Session(std::unique_ptr<Impl> impl);
  ~Session() override;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

 private:
  friend struct SessionInternals;  // the library's own uses (discovery's text requests)
  std::unique_ptr<Impl> impl_;
};

}  // namespace iserkit::initiator
