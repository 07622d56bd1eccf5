// SessionEngine: the initiator's full-feature-phase session as a sans-I/O state machine (layer 2).
// No Asio, no sockets, no coroutines, no clock of its own: decoded PDUs, submissions, placement
// questions and the time go in; PDUs to send (in the order they must leave), task completions and
// the end of the session come out (take_actions()). The coroutine driver (session.cpp) feeds it
// from one receive loop and one timer and drains its PDU batches through the Datamover in order.
//
// Rules it carries (RFC 7143, ErrorRecoveryLevel 0, one connection):
//  - CmdSN numbering and the window (§4.2.2.1, serial arithmetic): a SCSI command leaves only while
//    CmdSN ≤ MaxCmdSN; ExpCmdSN/MaxCmdSN are taken from every target PDU; queued commands go out
//    when MaxCmdSN opens the window. Immediate PDUs carry CmdSN without advancing it.
//  - ExpStatSN (§4.2.2.2) from every StatSN the target sends.
//  - Write data (§4.2.5.2, §11.7, §11.8): immediate data, unsolicited Data-Out up to
//    FirstBurstLength, solicited Data-Out answering R2Ts (R2TSN in order, each range inside the
//    transfer and at most MaxBurstLength), segments of at most the target's
//    MaxRecvDataSegmentLength, DataSN from 0 per sequence.
//  - Data-In (§11.7): DataSN in order, BufferOffset + length inside the read buffer (checked in
//    place() before any byte lands), status and residuals (U/O) with the S bit.
//  - Reject (§11.17) of a PDU with an outstanding ITT ends that task with a protocol error.
//  - Task management (§11.5/§11.6): ABORT TASK after a command timeout (RefCmdSN = its CmdSN); the
//    aborted task's ITT stays reserved until the TMF response. A "function complete" response ends
//    the tasks the function aborted (task_aborted).
//  - NOP-Out keepalive pings and NOP-In answers (§11.18/§11.19).
//  - Async Messages (§11.9): logout request → logout within Parameter3 seconds; drop connection(s)
//    → the session fails.
//  - Logout (§11.14): queued commands fail, commands in flight finish first, then the Logout
//    Request goes out; the session ends with its response.
//  - Text requests with continuation (§11.10/§11.11: C bit, TTT) for discovery.
//  - Connection recovery at ErrorRecoveryLevel 0 (§6.3.5 session reinstatement, §7.1): with a
//    replacement timeout, a failed connection (I/O error, unanswered ping, Async drop or logout
//    request, protocol error) does not end the session. Every SCSI command that had not completed
//    goes back to the queue in its CmdSN order (ahead of those never sent); the driver logs in
//    again with the same ISID and TSIH 0 and calls on_reconnected(), which numbers and sends them
//    afresh. A re-issued SYNCHRONIZE CACHE waits until every re-issued command before it
//    completed. UNIT ATTENTION 29h (power on/reset, I_T nexus loss) after a reinstatement is
//    retried, not reported. Past the replacement timeout every waiting command fails with
//    errc::session_lost; then either the session ends (EngineConfig::reconnect_after_give_up off)
//    or it is failed(): new commands fail at once, none is queued, and the driver's logins go on
//    until one succeeds (open-iscsi's replacement_timeout, with iscsid retrying for ever).
//
// STATES: the session's phase is one SessionPhase; it moves only along session_transitions (below:
// from, event, to, the rule with its RFC section), through transition(). A task's life is TaskState.
//
// THREADING: none; the owner calls it from one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "command_window.hpp"
#include "data_transfer.hpp"
#include "itt_table.hpp"
#include "ping_monitor.hpp"
#include "iserkit/common/buffer.hpp"
#include "iserkit/common/result.hpp"
#include "iserkit/common/transition_table.hpp"
#include "iserkit/datamover/pdu_io.hpp"
#include "iserkit/iscsi/response_codes.hpp"
#include "iserkit/initiator/session_types.hpp"
#include "iserkit/scsi/cdb.hpp"
#include "iserkit/scsi/lun.hpp"
#include "iserkit/scsi/sense.hpp"

namespace iserkit::initiator {

/// Identifies one task of a SessionEngine (never reused within an engine; 0 = none).
using TaskId = std::uint64_t;

/// Where a task is in its life.
enum class TaskState {
  queued_for_window,   ///< SCSI command waiting for the CmdSN window / the in-flight limit
  waiting_to_send,     ///< an immediate request (e.g. Logout) waiting for the commands in flight
  sent,                ///< its PDU is out; waiting for the response (or Data-In)
  awaiting_data,       ///< a write with part of its data still to be solicited by R2T
  timed_out_aborting,  ///< completed to its owner with errc::timeout; ITT reserved until the ABORT TASK answer
  done,                ///< completed (not tracked any more)
};

/// A SCSI task the target may still answer (its PDU is out, data may still be solicited).
inline bool active_scsi(TaskState s) noexcept { return s == TaskState::sent || s == TaskState::awaiting_data; }

/// The session's phase: one value at a time (RFC 7143 §8.1.3 session states, §8.1.1 connection
/// states for the logout). A task's own life is TaskState.
enum class SessionPhase : std::uint8_t {
  logged_in,         ///< full feature phase (§8.1.3 Q3 LOGGED_IN; connection S5): commands go out
  logging_out,       ///< a Logout that ends the session (S6 IN_LOGOUT): no new commands; ends with its response
  logout_requested,  ///< the target asked for a logout and recovery is on (S7 LOGOUT_REQUESTED):
                     ///< new commands queue; the session logs in again after the Logout Response
  recovering,        ///< no connection (§8.1.3 Q4 FAILED): commands wait for a login within the
                     ///< replacement timeout (§6.3.5 session reinstatement)
  failed,            ///< past the replacement timeout with EngineConfig::reconnect_after_give_up:
                     ///< new commands fail at once; the driver's logins go on
  ended,             ///< the session is over (§8.1.3 Q1 FREE); nothing leaves it
};

/// What moves the session from one phase to another (the inputs of SessionEngine, named).
enum class PhaseEvent : std::uint8_t {
  caller_logout,           ///< logout()
  target_requests_logout,  ///< an Async Message "logout requested" (§11.9.1, AsyncEvent 1)
  logout_finished,         ///< the Logout task ended: its response, a Reject, its timeout, no free ITT
  logout_deadline,         ///< the target's Parameter3 passed without the logout done (§11.9.1)
  connection_lost,         ///< connection_failed(), an unanswered ping, Async "drop", a protocol
                           ///< error, an ABORT TASK that did not end an RDMA task, fail_session_on_timeout
  reconnected,             ///< on_reconnected(): a new connection is logged in
  replacement_timeout,     ///< no login within EngineConfig::replacement_timeout
  closed,                  ///< fail_session(): the owner closes the session
};

/// One allowed move of SessionPhase: on `input` (a PhaseEvent) in phase `from` the session goes to
/// `to`; `rule` says when and why, with its RFC 7143 section (transition_table.hpp).
using SessionTransition = Transition<SessionPhase, PhaseEvent>;

/// Every phase change the initiator session makes: the map of its protocol rules (libnbd's state
/// table is the model). SessionEngine moves its phase only through a row of this table
/// (transition()); a pair (from, event) with no row leaves the phase as it is (the event is
/// ignored or refused in that phase). tests/unit/initiator/session_phase_test.cpp drives the
/// engine through every row and checks every other pair changes nothing.
inline constexpr SessionTransition session_transitions[] = {
    // from logged_in
    {SessionPhase::logged_in, PhaseEvent::caller_logout, SessionPhase::logging_out,
     "§11.14: queued commands fail; the Logout Request leaves once the commands in flight answered"},
    {SessionPhase::logged_in, PhaseEvent::target_requests_logout, SessionPhase::logging_out,
     "§11.9.1 without a replacement timeout: log out within Parameter3; the session then ends"},
    {SessionPhase::logged_in, PhaseEvent::target_requests_logout, SessionPhase::logout_requested,
     "§11.9.1 with a replacement timeout: log out within Parameter3, then log in again (§6.3.5)"},
    {SessionPhase::logged_in, PhaseEvent::connection_lost, SessionPhase::recovering,
     "§6.3.5, §7.1 with a replacement timeout: unfinished commands go back to the queue in CmdSN order"},
    {SessionPhase::logged_in, PhaseEvent::connection_lost, SessionPhase::ended,
     "§7.1.4.1 ErrorRecoveryLevel 0 without a replacement timeout: every task fails"},
    {SessionPhase::logged_in, PhaseEvent::closed, SessionPhase::ended, "the owner closes: every task fails"},
    // from logging_out
    {SessionPhase::logging_out, PhaseEvent::logout_finished, SessionPhase::ended,
     "§11.15: after the Logout Response the connection closes, whatever the answer"},
    {SessionPhase::logging_out, PhaseEvent::logout_deadline, SessionPhase::ended,
     "§11.9.1: the target drops the connection after Parameter3 anyway"},
    {SessionPhase::logging_out, PhaseEvent::connection_lost, SessionPhase::ended,
     "§11.14: the session was being closed; a lost connection just ends it"},
    {SessionPhase::logging_out, PhaseEvent::closed, SessionPhase::ended, "the owner closes: every task fails"},
    // from logout_requested
    {SessionPhase::logout_requested, PhaseEvent::caller_logout, SessionPhase::logging_out,
     "§11.14: the owner's logout takes over the one the target asked for; queued commands fail"},
    {SessionPhase::logout_requested, PhaseEvent::logout_finished, SessionPhase::recovering,
     "§11.15 then §6.3.5: the connection closes and the session logs in again"},
    {SessionPhase::logout_requested, PhaseEvent::logout_deadline, SessionPhase::recovering,
     "§11.9.1: Parameter3 passed; the connection is dropped and replaced (§6.3.5)"},
    {SessionPhase::logout_requested, PhaseEvent::connection_lost, SessionPhase::recovering,
     "§6.3.5: the connection to replace went early"},
    {SessionPhase::logout_requested, PhaseEvent::closed, SessionPhase::ended, "the owner closes: every task fails"},
    // from recovering
    {SessionPhase::recovering, PhaseEvent::reconnected, SessionPhase::logged_in,
     "§6.3.5: same ISID, TSIH 0; the queued commands are numbered and sent afresh, interrupted ones first"},
    {SessionPhase::recovering, PhaseEvent::replacement_timeout, SessionPhase::ended,
     "replacement timeout without reconnect_after_give_up: every task fails with session_lost"},
    {SessionPhase::recovering, PhaseEvent::replacement_timeout, SessionPhase::failed,
     "replacement timeout with reconnect_after_give_up: waiting commands fail with session_lost; logins go on"},
    {SessionPhase::recovering, PhaseEvent::caller_logout, SessionPhase::ended,
     "§11.14: no connection to log out on: the session just ends"},
    {SessionPhase::recovering, PhaseEvent::closed, SessionPhase::ended, "the owner closes: every task fails"},
    // from failed
    {SessionPhase::failed, PhaseEvent::reconnected, SessionPhase::logged_in,
     "§6.3.5: a login succeeded after giving up: commands are accepted again"},
    {SessionPhase::failed, PhaseEvent::caller_logout, SessionPhase::ended,
     "§11.14: no connection to log out on: the session just ends"},
    {SessionPhase::failed, PhaseEvent::closed, SessionPhase::ended, "the owner closes"},
};

/// The lookup over session_transitions (SessionTable::find(from, event, to): the row, or nullptr
/// when that move is not allowed).
using SessionTable = TransitionTable<session_transitions>;

/// The enumerator's name.
const char* to_string(SessionPhase phase) noexcept;
/// The enumerator's name.
const char* to_string(PhaseEvent event) noexcept;

/// What kind of request a task is.
enum class TaskKind { scsi, task_management, text, logout, ping };

/// The negotiated and configured values the engine runs with.
struct EngineConfig {
  WriteLimits limits;                              ///< from the operational parameters
  std::uint32_t max_commands_in_flight = 128;      ///< SCSI commands holding an ITT at once
  std::uint32_t max_queued_commands = 65536;       ///< submissions waiting beyond that; more → error
  std::chrono::milliseconds command_timeout{0};    ///< default per-command timeout; 0 = none
  std::chrono::milliseconds request_timeout{15000};  ///< TMF, text and Logout requests
  std::chrono::milliseconds nop_interval{0};       ///< keepalive: silence before a NOP-Out ping; 0 = off
  std::chrono::milliseconds nop_timeout{10000};    ///< how long a ping may stay unanswered
  /// A timed-out command ends the session (set from Capabilities::exposes_task_buffers — iSER: the
  /// target could still RDMA into the buffer the caller gets back; only closing the connection
  /// makes that impossible).
  bool fail_session_on_timeout = false;
  /// A timed-out command's owner hears errc::timeout only once the target answered its ABORT TASK
  /// with "function complete" or "task does not exist" (RFC 7143 §11.6.1), or once the connection
  /// is closed: until then the target may still RDMA into or out of the command's buffers through
  /// its per-command STag, so they must not go back to their owner. Any other end of the ABORT TASK
  /// (its own timeout, another response, a Reject) closes the connection first, with recovery
  /// when it is on. Set for iSER with per-command STags (Capabilities::rdma_data without
  /// exposes_task_buffers); TCP owners hear the timeout at once (late Data-In goes to scratch).
  bool hold_timed_out_until_aborted = false;
  /// How long the session waits for a new connection after losing one, with the commands queued;
  /// 0 = a lost connection ends the session (every task fails with the connection's error).
  std::chrono::milliseconds replacement_timeout{0};
  /// Past the replacement timeout: true = the session is failed(), not ended — its commands fail
  /// with errc::session_lost, new ones at once, while the driver keeps logging in again
  /// (EngineActions::gave_up; on_reconnected() makes it logged in again); false = it ends with
  /// errc::session_lost (EngineActions::ended).
  bool reconnect_after_give_up = false;
  /// After a reinstatement: how often one command with UNIT ATTENTION 29h is sent again.
  unsigned unit_attention_retries = 4;
};

/// The session's numbering at the end of login (RFC 7143 §11.12.8, §11.13).
struct EngineStart {
  SerialNumber cmd_sn{1};      ///< the leading Login Request's CmdSN: the first command's
  SerialNumber exp_cmd_sn{1};  ///< from the final Login Response
  SerialNumber max_cmd_sn{1};  ///< from the final Login Response
  SerialNumber exp_stat_sn{0}; ///< the final Login Response's StatSN + 1
};

/// One SCSI command as submitted. The spans are borrowed: they must stay valid until the task's
/// completion has been taken *and* every PDU borrowing them (OutgoingPdu::borrower) was sent.
struct ScsiSubmission {
  scsi::Lun lun;
  scsi::Cdb cdb;
  std::span<std::byte> data_in;         ///< read buffer, bytes; may be empty
  std::span<const std::byte> data_out;  ///< write buffer, bytes; may be empty
  iscsi::TaskAttribute attribute = iscsi::TaskAttribute::simple;
  std::chrono::milliseconds timeout{0};  ///< 0 = EngineConfig::command_timeout
  /// The datamover's descriptor of these buffers (Datamover::prepare_task_data()), passed through
  /// to the SCSI Command PDU (PduOut::task_data); null = none. Same lifetime as the spans.
  const datamover::TaskData* task_data = nullptr;
};

/// A PDU to send, in order. `borrower` is the task whose buffer the data segment points into
/// (0 when the PDU owns its data): that buffer must stay alive until the PDU was sent.
struct OutgoingPdu {
  datamover::PduOut pdu;
  TaskId borrower = 0;
};

/// A finished task.
struct TaskOutcome {
  TaskId id = 0;
  TaskKind kind = TaskKind::scsi;
  std::error_code error;             ///< empty on success
  scsi::ScsiResult result;           ///< SCSI commands
  /// Task management: the RFC 7143 §11.6.1 Response.
  iscsi::TaskManagementResponseCode tmf_response = iscsi::TaskManagementResponseCode::function_complete;
  std::vector<std::byte> text;       ///< text requests: the whole response text (all continuations)
};

/// Everything the engine wants done since the last take_actions().
struct EngineActions {
  std::vector<OutgoingPdu> pdus;         ///< send in this order
  std::vector<TaskOutcome> completions;  ///< deliver to the tasks' owners
  /// Set once, when the session ended (failure, close or logout): close the connection.
  std::optional<std::error_code> ended;
  /// The connection failed and the session is recovering (why): close the connection, drop the
  /// PDUs not sent yet (the engine sends them again), log in again and call on_reconnected().
  std::optional<std::error_code> connection_lost;
  /// Set once per recovery, when the replacement timeout passed with reconnect_after_give_up
  /// (errc::session_lost): the waiting commands failed; keep logging in again.
  std::optional<std::error_code> gave_up;
  [[nodiscard]] bool empty() const noexcept {
    return pdus.empty() && completions.empty() && !ended && !connection_lost && !gave_up;
  }
};

class SessionEngine {
 public:
  using Clock = std::chrono::steady_clock;
  using TimePoint = Clock::time_point;

  SessionEngine(EngineConfig config, EngineStart start, TimePoint now);

  /// Queues a SCSI command; it goes out at once when the window and the in-flight limit allow
  /// (RFC 7143 §4.2.2.1), otherwise when they open. Returns its TaskId, or
  ///  - errc::invalid_argument: both buffers set (no bidirectional commands) or one above 4 GiB - 1;
  ///  - errc::session_closed: the session ended or is logging out (then: the error that ended it);
  ///  - errc::session_lost: failed() (past the replacement timeout, no connection yet);
  ///  - std::errc::resource_unavailable_try_again: max_queued_commands submissions already wait.
  Result<TaskId> submit(const ScsiSubmission& command, TimePoint now);
  /// Sends a task management request (immediate, RFC 7143 §11.5). Errors: session_closed,
  /// std::errc::resource_unavailable_try_again when no ITT is free.
  Result<TaskId> submit_task_management(const TaskManagementOptions& request, TimePoint now);
  /// Sends a Text Request carrying `text` (encoded key=value pairs, RFC 7143 §11.10) and gathers
  /// the response across continuations (C bit; an empty Text Request echoing the TTT asks for the
  /// rest, §11.11.2). Errors as submit_task_management().
  Result<TaskId> submit_text(std::vector<std::byte> text, TimePoint now);
  /// Starts a Logout (close the session, RFC 7143 §11.14): queued commands fail with
  /// session_closed, the request goes out once no command is in flight (timed-out commands whose
  /// ABORT TASK is still unanswered do not hold it back). Returns the logout task.
  /// Errors: session_closed when the session already ended or is logging out.
  Result<TaskId> logout(TimePoint now);

  /// DataPlacement: where a Data-In data segment of `length` bytes goes — a span of the task's read
  /// buffer at BufferOffset when it lies inside it (RFC 7143 §11.7.6), else empty (scratch: the
  /// PDU is then refused in on_pdu). The task is marked as being received into until on_pdu().
  std::span<std::byte> place(const iscsi::Bhs& bhs, std::uint32_t length) noexcept;
  /// One received PDU (its data segment already placed). PduIn::pdu_error (data digest error,
  /// oversize segment) fails the task it belongs to.
  void on_pdu(const datamover::PduIn& pdu, TimePoint now);
  /// Timeouts: commands, requests, keepalive pings, a target-requested logout.
  void on_timer(TimePoint now);
  /// The next time on_timer() has something to do; TimePoint::max() when nothing is pending.
  [[nodiscard]] TimePoint next_deadline() const noexcept;
  /// The connection failed or was closed (or the caller closes the session): every task ends
  /// with `ec`. A task whose buffer a receive is filling ends only with the following on_pdu() or
  /// on_receive_ended().
  void fail_session(std::error_code ec);
  /// The receive that place() was answered for ended without a PDU (connection error).
  void on_receive_ended() noexcept;
  /// The connection failed (I/O error, peer closed it). With a replacement timeout the session
  /// starts recovering (EngineActions::connection_lost); without one, or while a logout the
  /// caller asked for is under way, it ends as fail_session(ec) does.
  void connection_failed(std::error_code ec, TimePoint now);
  /// A new connection is logged in (same ISID, TSIH 0: RFC 7143 §6.3.5) with numbering `start`
  /// and write limits `limits` (its negotiated values): the queued commands go out again, the
  /// interrupted ones first, in their old order. Ignored unless recovering().
  void on_reconnected(EngineStart start, WriteLimits limits, TimePoint now);
  /// Recovery over a transport whose peer reaches the buffers itself (iSER): points a queued SCSI
  /// command at the descriptor the new connection's datamover prepared for it
  /// (Datamover::prepare_task_data(), whose STags RFC 7145 §9.2 puts in the SCSI Command) and at
  /// that descriptor's `data_in` / `data_out` (bytes; the sizes submitted). Call between the lost
  /// connection and on_reconnected(). Returns false, changing nothing, unless the task is a SCSI
  /// command waiting in the queue with buffers of those sizes.
  bool rebind_task_data(TaskId id, std::span<std::byte> data_in, std::span<const std::byte> data_out,
                        const datamover::TaskData* task_data) noexcept;
  /// Ends a SCSI command waiting in the queue with `ec` (e.g. its buffers could not be prepared on
  /// the new connection: std::errc::not_enough_memory). Returns false when it is not queued.
  bool fail_queued(TaskId id, std::error_code ec);
  /// True between a lost connection and on_reconnected() (or the end of the session), also once
  /// failed(): SessionPhase::recovering or SessionPhase::failed.
  [[nodiscard]] bool recovering() const noexcept {
    return phase_ == SessionPhase::recovering || phase_ == SessionPhase::failed;
  }
  /// True while recovering past the replacement timeout (EngineConfig::reconnect_after_give_up):
  /// submit() fails at once with errc::session_lost until on_reconnected().
  [[nodiscard]] bool failed() const noexcept { return phase_ == SessionPhase::failed; }
  /// The driver tries another login (SessionStats::reconnect_attempts).
  void count_reconnect_attempt() noexcept { ++stats_.reconnect_attempts; }
  /// When recovering(): when the connection was lost.
  [[nodiscard]] TimePoint recovering_since() const noexcept { return recovering_since_; }

  /// Takes what the engine wants done (see EngineActions).
  EngineActions take_actions();
  /// Optionally hands a carried-out take_actions() result back so its vectors' capacity is reused
  /// (no heap allocation per batch in steady state).
  void recycle_actions(EngineActions&& taken) noexcept;
  [[nodiscard]] bool has_actions() const noexcept { return !actions_.empty(); }

  /// True until the session ended or a logout started (a logout the target asked for while
  /// recovery is on keeps accepting: the session reconnects after it).
  [[nodiscard]] bool accepting() const noexcept {
    return phase_ != SessionPhase::ended && phase_ != SessionPhase::logging_out;
  }
  /// True until the session ended.
  [[nodiscard]] bool open() const noexcept { return phase_ != SessionPhase::ended; }
  /// Where the session is (see session_transitions for how it moves).
  [[nodiscard]] SessionPhase phase() const noexcept { return phase_; }
  /// The row of session_transitions the last phase change took; nullptr before the first.
  [[nodiscard]] const SessionTransition* last_transition() const noexcept { return last_transition_; }
  /// How many phase changes the session made (each one a row of session_transitions).
  [[nodiscard]] std::uint64_t transitions_taken() const noexcept { return transitions_taken_; }
  /// Why the session ended (empty while open).
  [[nodiscard]] std::error_code error() const noexcept { return error_; }
  /// The state of a task; done for unknown ones.
  [[nodiscard]] TaskState state(TaskId id) const noexcept;
  /// SCSI commands holding an ITT (sent, awaiting data, or aborting).
  [[nodiscard]] std::uint32_t commands_holding_itt() const noexcept { return scsi_holding_itt_; }
  /// SCSI commands waiting for the window or the in-flight limit.
  [[nodiscard]] std::size_t commands_queued() const noexcept { return queue_.size(); }
  /// ITTs in use (all kinds).
  [[nodiscard]] std::uint32_t itts_in_use() const noexcept { return itts_.size(); }
  [[nodiscard]] const CommandWindow& window() const noexcept { return window_; }
  [[nodiscard]] SerialNumber exp_stat_sn() const noexcept { return exp_stat_sn_; }
  [[nodiscard]] const SessionStats& stats() const noexcept { return stats_; }

 private:
  struct Task {
    TaskId id = 0;
    TaskKind kind = TaskKind::scsi;
    TaskState state = TaskState::queued_for_window;
    iscsi::Itt itt = iscsi::reserved_itt;
    ScsiSubmission command;
    DataInTracker data_in_tracker;
    std::uint32_t next_r2t_sn = 0;
    std::uint32_t solicited_bytes_left = 0;  ///< write bytes not yet sent or solicited
    SerialNumber cmd_sn;
    TimePoint deadline = TimePoint::max();
    std::chrono::milliseconds timeout{0};
    TaskOutcome outcome;
    bool report = true;                      ///< false for the engine's own (ping, ABORT TASK after timeout)
    bool receiving = false;                  ///< place() handed out its buffer; on_pdu pending
    std::optional<std::error_code> deferred;  ///< an end that waits for that receive
    std::uint64_t dispatch_seq = 0;          ///< order in which SCSI commands went out
    bool replaying = false;                  ///< re-issued after a reconnect, not completed yet
    bool replay_barrier = false;             ///< a re-issued SYNCHRONIZE CACHE: waits for those
    unsigned unit_attention_retries = 0;
    unsigned replays = 0;                    ///< how often it was put back after a lost connection
    // task management
    TaskManagementOptions tmf;
    TaskId aborts = 0;                       ///< ABORT TASK after a timeout: the timed-out task
    bool timeout_held = false;               ///< timed out; its owner hears it when the abort ends
    // text
    std::vector<std::byte> request_text;
  };

  Task& new_task(TaskKind kind);
  Task* find(TaskId id) noexcept;
  Task* by_itt(iscsi::Itt itt) const noexcept;
  bool take_itt(Task& t);
  void release(Task& t);
  void complete(Task& t, std::error_code ec);
  /// Moves phase_ to `to` on `event` when session_transitions has that row; otherwise logs the
  /// refused move and returns false, changing nothing.
  bool transition(PhaseEvent event, SessionPhase to) noexcept;
  /// A connection carries the session (logged in, or logging out on it).
  [[nodiscard]] bool connected() const noexcept {
    return phase_ == SessionPhase::logged_in || phase_ == SessionPhase::logging_out ||
           phase_ == SessionPhase::logout_requested;
  }
  /// A Logout is under way (the owner's or the target's).
  [[nodiscard]] bool in_logout() const noexcept {
    return phase_ == SessionPhase::logging_out || phase_ == SessionPhase::logout_requested;
  }
  /// The Logout of `event` (caller_logout: reported to its owner; target_requests_logout: the
  /// engine's own), from logged_in or logout_requested.
  Result<TaskId> start_logout(PhaseEvent event, TimePoint now);
  void end_session(std::error_code ec, PhaseEvent event);
  void give_up();
  /// Completes every task with `ec`, in submission order, and drops the queue of unsent ones.
  void fail_every_task(std::error_code ec);
  void pump(TimePoint now);
  void dispatch(Task& t, TimePoint now);
  void send_request(Task& t, TimePoint now);
  void send_data_out(Task& t, iscsi::Ttt ttt, std::uint32_t offset, std::uint32_t length);
  void time_out(Task& t, TimePoint now);
  void update(SerialNumber exp_cmd_sn, SerialNumber max_cmd_sn);
  void update_stat_sn(SerialNumber stat_sn);
  void maybe_send_logout(TimePoint now);
  void after_tmf(const Task& tmf);
  void resolve_deferred(Task& t);
  void end_aborted(TaskId aborted);
  void lose_connection(std::error_code ec, PhaseEvent event);
  void requeue(Task& t);
  bool absorb_unit_attention(Task& t);

  void handle(const iscsi::DataIn& h, const datamover::PduIn& in, TimePoint now);
  void handle(const iscsi::ScsiResponse& h, const datamover::PduIn& in, TimePoint now);
  void handle(const iscsi::R2t& h, const datamover::PduIn& in, TimePoint now);
  void handle(const iscsi::NopIn& h, const datamover::PduIn& in, TimePoint now);
  void handle(const iscsi::Reject& h, const datamover::PduIn& in, TimePoint now);
  void handle(const iscsi::AsyncMessage& h, const datamover::PduIn& in, TimePoint now);
  void handle(const iscsi::LogoutResponse& h, const datamover::PduIn& in, TimePoint now);
  void handle(const iscsi::TaskManagementResponse& h, const datamover::PduIn& in, TimePoint now);
  void handle(const iscsi::TextResponse& h, const datamover::PduIn& in, TimePoint now);
  template <class Other>
  void handle(const Other&, const datamover::PduIn& in, TimePoint now);

  EngineConfig config_;
  CommandWindow window_;
  SerialNumber exp_stat_sn_;
  IttTable<Task> itts_;
  std::unordered_map<TaskId, Task> tasks_;  // node-based: Task* stay valid
  std::deque<TaskId> queue_;                // SCSI commands waiting for the window, FIFO
  TaskId next_id_ = 1;
  std::uint32_t scsi_holding_itt_ = 0;
  SessionPhase phase_ = SessionPhase::logged_in;
  const SessionTransition* last_transition_ = nullptr;
  std::uint64_t transitions_taken_ = 0;
  TaskId logout_task_ = 0;
  std::error_code error_;
  PingMonitor ping_;
  TaskId ping_task_ = 0;
  TimePoint logout_deadline_ = TimePoint::max();  // a target-requested logout must be done by then
  Task* receiving_ = nullptr;       // the task place() handed a buffer span of, until on_pdu
  TaskId placed_for_pdu_ = 0;       // while handling a PDU: the task its data segment landed in
  TimePoint last_now_;
  // recovery
  TimePoint recovering_since_{};
  TimePoint recovery_deadline_ = TimePoint::max();
  std::uint64_t next_dispatch_seq_ = 1;
  std::uint32_t replaying_in_flight_ = 0;
  SessionStats stats_;
  EngineActions actions_;
  // Reused so steady-state commands allocate neither a task node nor action vectors
  // (docs/performance.md); erase_task() resets an ended task's node and keeps it.
  static constexpr std::size_t max_spare_task_nodes = 256;
  EngineActions spare_actions_;
  std::vector<decltype(tasks_)::node_type> spare_task_nodes_;
  void erase_task(TaskId id);
};

}  // namespace iserkit::initiator
