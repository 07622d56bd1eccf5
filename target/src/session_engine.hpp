// SessionEngine: the target's full-feature-phase session (one connection, ErrorRecoveryLevel 0) as
// a sans-I/O state machine. No Asio, no sockets, no coroutines, no clock of its own: received PDUs
// (header phase: place(); payload phase: on_pdu()), backend completions, payload-budget grants and
// the time go in; ordered actions come out (take_actions()): PDU batches to send in order, "execute
// task N on the backend", "release payload budget of task N" (requests go
// through SessionEngineHooks::request_budget, answered now or later with on_budget_granted()), device-server resets, and
// "close the connection". A driver (Connection) runs it from one receive loop and one timer.
//
// Rules it carries (RFC 7143):
//  - CmdSN window (§4.2.2.1, cmd_sn_window.hpp): commands outside [ExpCmdSN, MaxCmdSN] are silently
//    ignored; MaxCmdSN opens by one when a non-immediate command ends; every target PDU carries
//    ExpCmdSN/MaxCmdSN. Immediate commands bypass the window and are capped (Reject 0x06).
//  - StatSN (§4.2.2.2): advanced by each status-carrying PDU; R2T and the idle NOP-In carry it
//    without advancing it.
//  - The ITT table: a command reusing the ITT of a running task is Rejected (0x07, §11.17.1).
//  - Immediate data (§3.2.4.2, §13.11) only on writes, only with ImmediateData=Yes, at most
//    min(FirstBurstLength, EDTL) bytes; R2T / Data-Out sequencing (§11.7, §11.8,
//    write_sequencer.hpp); Data-Out lands in the task buffer at BufferOffset (no copy).
//  - Data-In (§11.7, iscsi/data_segmenter.hpp): segments of at most the initiator's MaxRecvDataSegmentLength,
//    F at the end of each MaxBurstLength sequence, DataSN from 0, status and residual (U/O, §11.4.5)
//    in the last Data-In when GOOD without sense, else a SCSI Response with sense. A read's Data-In
//    PDUs and its status leave in one ordered batch.
//  - Digest errors (§7.8): a command with a data digest error is discarded (Reject 0x02, CmdSN slot
//    given back); a Data-Out with one fails its task (CHECK CONDITION, PROTOCOL SERVICE CRC ERROR).
//  - Text requests with continuation (§11.10/§11.11: C bit, TTT).
//  - NOP-Out answered with NOP-In (§11.18/§11.19); after `idle_interval` without a PDU a NOP-In
//    ping (ITT 0xffffffff, a TTT of ours); no PDU within `ping_timeout` → close.
//  - Task management (§11.5): ABORT TASK (RefCmdSN rule for unknown tasks), ABORT/CLEAR TASK SET,
//    LOGICAL UNIT RESET, TARGET WARM/COLD RESET; the response leaves after the aborted tasks ended
//    (a task on the backend ends when its completion arrives); cold reset closes the connection.
//  - Logout (§11.14): running tasks are aborted; the response leaves once they ended; then close.
//  - Target shutdown (begin_drain()): an Async Message asks the initiator to log out (§11.9.1,
//    AsyncEvent 1); the CmdSN window stops opening; commands already received run and are answered;
//    then the connection closes.
//  - SNACK (§11.16) is rejected (ERL 0); discovery sessions (§4.3) carry only Text, NOP and Logout.
//
// STATES: a SCSI task's state is one TaskLife, the pair of its TaskState and its TaskBudget (not
// asked, queued, queued with unsolicited data in a staging buffer, granted while still staging,
// granted), and the pair is always a row of task_lives (below). The TaskState half moves only along
// task_transitions (from, event, to, the rule with its RFC section), through move(); the budget
// half only along budget_transitions, through move_budget(); both refuse a move that would leave
// task_lives. The lookups are iserkit::TransitionTable (transition_table.hpp). An answer fixed
// before the backend (the plan refused the command, or its data transfer failed) is one
// EarlyAnswer with its cause. Whether a task holds a CmdSN window slot or an immediate-command
// slot is its command's I bit. No flag beside these says anything about the task.
//
// THREADING: none; the owner calls it from one thread.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "iserkit/common/buffer.hpp"
#include "iserkit/common/serial_number.hpp"
#include "iserkit/common/transition_table.hpp"
#include "iserkit/datamover/pdu_io.hpp"
#include "iserkit/iscsi/negotiation.hpp"
#include "iserkit/iscsi/pdu.hpp"
#include "iserkit/iscsi/response_codes.hpp"
#include "iserkit/iscsi/text.hpp"
#include "iserkit/scsi/sense.hpp"
#include "iserkit/target/command_plan.hpp"
#include "cmd_sn_window.hpp"
#include "data_phase.hpp"
#include "target_stats.hpp"
#include "data_in.hpp"
#include "write_sequencer.hpp"

namespace iserkit::target {

/// Where a SCSI task is in its life (one value at a time; how it moves: task_transitions).
enum class TaskState : std::uint8_t {
  placed,               ///< its SCSI Command's header is in (place()); the PDU's payload phase is not over
  receiving_data,       ///< immediate / unsolicited / solicited Data-Out still to come, or about to run
  waiting_budget,       ///< its payload budget (write or read buffer) is queued: TaskBudget queued or queued_staging
  fetching_write_data,  ///< iSER: a GetWriteData (RDMA Read) fills the buffer until on_write_data()
  write_data_fetched,   ///< iSER: the RDMA Read brought every byte the command needs
  executing,            ///< handed to the backend (ExecuteTask); waiting for on_task_executed()
  sending_data_in,      ///< its Data-In / status batch is being produced (transient: it is done after)
  done,                 ///< status sent or ended; no longer in the table
  aborted_executing,    ///< a TMF, logout or close ended it on the backend: it leaves with on_task_executed()
  aborted_fetching,     ///< a TMF, logout or close ended it under an RDMA Read: it leaves with on_write_data()
};

/// What moves a SCSI task from one TaskState to another.
enum class TaskEvent : std::uint8_t {
  payload_received,    ///< its SCSI Command PDU's payload phase ended (on_pdu)
  refused,             ///< that PDU was discarded (digest error, Reject): the command never ran
  budget_short,        ///< SessionEngineHooks::request_budget did not grant it at once
  budget_granted,      ///< on_budget_granted(): it goes on
  get_data_started,    ///< iSER: GetWriteData asks for the write data beyond the immediate data
  get_data_done,       ///< iSER: on_write_data() without error
  get_data_failed,     ///< iSER: on_write_data() with an error (the connection closes)
  ready,               ///< every byte it needs is in and its buffer granted: ExecuteTask
  executed_read,       ///< the backend's GOOD read data goes out as Data-In
  answered,            ///< its status went out (SCSI Response or the last Data-In): it leaves the table
  aborted,             ///< a TMF, a Logout or the closed connection ends it
  completion_arrived,  ///< the backend or RDMA completion of an aborted task: it leaves the table
};

/// One allowed move of a task: on `input` (a TaskEvent) in state `from` it goes to `to`; `rule`
/// says why, with its RFC section (transition_table.hpp).
using TaskTransition = Transition<TaskState, TaskEvent>;

/// Every state change of a target SCSI task: the map of the rules the engine enforces on a task
/// (libnbd's state table is the model). SessionEngine changes EngineTask::state only through a row
/// of this table (a staying move, from == to, is no change); tests/unit/target_iscsi/
/// session_engine_table_test.cpp (TaskTable) drives the engine through every row.
inline constexpr TaskTransition task_transitions[] = {
    {TaskState::placed, TaskEvent::payload_received, TaskState::receiving_data,
     "RFC 7143 §11.3: the command and its immediate data are in; its data phase starts"},
    {TaskState::placed, TaskEvent::refused, TaskState::done,
     "§7.8, §11.17: a digest error or a Reject discards the command; it never ran; its CmdSN slot is given back"},
    {TaskState::placed, TaskEvent::aborted, TaskState::done, "the connection closed before the data segment came"},
    {TaskState::receiving_data, TaskEvent::budget_short, TaskState::waiting_budget,
     "its write or read buffer waits for the payload budget (unsolicited data waits in a staging buffer)"},
    {TaskState::receiving_data, TaskEvent::get_data_started, TaskState::fetching_write_data,
     "RFC 7145 §7.3.4 Get_Data: one RDMA Read from the Write STag, after the immediate data"},
    {TaskState::receiving_data, TaskEvent::ready, TaskState::executing,
     "§11.7, §11.8: every Data-Out the command needs is in (writes); the read buffer is granted (reads)"},
    {TaskState::receiving_data, TaskEvent::answered, TaskState::done,
     "answered without the backend (plan rejected, bad length, data phase error) once its Data-Out ended"},
    {TaskState::receiving_data, TaskEvent::aborted, TaskState::done,
     "§11.5.1, §11.14: not on the backend: it ends at once, nothing more is sent for it"},
    {TaskState::waiting_budget, TaskEvent::budget_granted, TaskState::receiving_data,
     "the budget is granted: staged data moves to the full buffer; R2Ts or the backend follow"},
    {TaskState::waiting_budget, TaskEvent::answered, TaskState::done,
     "§7.8: a Data-Out digest error fails it while it waits (CHECK CONDITION)"},
    {TaskState::waiting_budget, TaskEvent::aborted, TaskState::done, "§11.5.1, §11.14: it ends at once"},
    {TaskState::fetching_write_data, TaskEvent::get_data_done, TaskState::write_data_fetched,
     "RFC 7145 §7.3.4: the RDMA Read completed"},
    {TaskState::fetching_write_data, TaskEvent::get_data_failed, TaskState::receiving_data,
     "RFC 7145 §7.3.4: the RDMA Read failed: the buffer is free; closing the connection ends the task"},
    {TaskState::fetching_write_data, TaskEvent::aborted, TaskState::aborted_fetching,
     "the RDMA Read still writes into the buffer: the task ends with on_write_data()"},
    {TaskState::write_data_fetched, TaskEvent::ready, TaskState::executing, "every byte is in: the backend runs it"},
    {TaskState::write_data_fetched, TaskEvent::answered, TaskState::done,
     "a failure recorded during the RDMA Read (a stray Data-Out) is answered once the read ended"},
    {TaskState::executing, TaskEvent::executed_read, TaskState::sending_data_in,
     "§11.7: GOOD read data goes out as Data-In, the status in the last one (§11.7.4)"},
    {TaskState::executing, TaskEvent::answered, TaskState::done,
     "§11.4: SCSI Response with its status and sense (on iSER after the RDMA Write, RFC 7145 §7.3.5)"},
    {TaskState::executing, TaskEvent::aborted, TaskState::aborted_executing,
     "SAM-5 §7.2: the backend finishes first; no status is sent for it"},
    {TaskState::sending_data_in, TaskEvent::answered, TaskState::done,
     "§11.7.4: the last Data-In carries the status; the window opens before the initiator hears"},
    {TaskState::aborted_executing, TaskEvent::completion_arrived, TaskState::done,
     "the backend's completion of an aborted task: its buffer and budget come back; TMF/Logout answers may go"},
    {TaskState::aborted_fetching, TaskEvent::completion_arrived, TaskState::done,
     "the RDMA Read of an aborted task ended: its buffer and budget come back"},
};

/// The lookup over task_transitions (one load per move, built at compile time).
using TaskTable = TransitionTable<task_transitions>;
static_assert(std::size(task_transitions) <= 64, "rows taken are kept in a 64-bit mask (RowsTaken)");

/// Where a SCSI task's payload budget is (SessionEngineHooks::request_budget, payload_budget.hpp),
/// and so where its data lands. One value at a time; how it moves: budget_transitions.
enum class TaskBudget : std::uint8_t {
  none,             ///< not asked: no data, an early answer, or a read that has not reached the backend
  queued,           ///< asked and queued (on_budget_granted() comes later); no buffer yet
  queued_staging,   ///< asked and queued; unsolicited data lands in a FirstBurstLength staging buffer
  granted_staging,  ///< granted, but unsolicited data still lands in the staging buffer
  granted,          ///< granted: the task's full buffer is (or is about to be) allocated
};

/// What moves a task's payload budget from one TaskBudget to another.
enum class BudgetEvent : std::uint8_t {
  requested,    ///< SessionEngineHooks::request_budget was asked (the row's `to` says its answer)
  granted,      ///< on_budget_granted()
  staged_moved, ///< the unsolicited data ended: the staged bytes moved into the full buffer
};

/// One allowed move of a task's payload budget, as TaskTransition.
using BudgetTransition = Transition<TaskBudget, BudgetEvent>;

/// Every change of a target task's payload budget. SessionEngine changes EngineTask::budget only
/// through a row of this table (move_budget()); the ReleaseBudget that ends a task says `granted`
/// for granted_staging and granted. tests/unit/target_iscsi/session_engine_table_test.cpp
/// (BudgetTable) drives the engine through every row.
inline constexpr BudgetTransition budget_transitions[] = {
    {TaskBudget::none, BudgetEvent::requested, TaskBudget::granted,
     "granted at once: the full buffer is allocated now (a write at its header, a read when it can run)"},
    {TaskBudget::none, BudgetEvent::requested, TaskBudget::queued,
     "the budgets are short: the request waits; no R2T and no backend before the grant"},
    {TaskBudget::none, BudgetEvent::requested, TaskBudget::queued_staging,
     "RFC 7143 §3.2.4.2, §13.11: immediate / unsolicited data comes anyway: at most FirstBurstLength of "
     "it waits in a staging buffer"},
    {TaskBudget::queued, BudgetEvent::granted, TaskBudget::granted, "the grant came: the full buffer is allocated"},
    {TaskBudget::queued_staging, BudgetEvent::granted, TaskBudget::granted_staging,
     "the grant came while staging: the staged bytes move once the unsolicited data ended"},
    {TaskBudget::granted_staging, BudgetEvent::staged_moved, TaskBudget::granted,
     "the unsolicited data ended: it moves once (a counted copy) into the full buffer; R2Ts follow (§11.8)"},
};

/// The lookup over budget_transitions.
using BudgetTable = TransitionTable<budget_transitions>;

/// True when the budget was granted (a ReleaseBudget then gives it back rather than cancels it).
[[nodiscard]] constexpr bool budget_granted(TaskBudget b) noexcept {
  return b == TaskBudget::granted || b == TaskBudget::granted_staging;
}
/// True while unsolicited data lands in the staging buffer rather than the task's full buffer.
[[nodiscard]] constexpr bool budget_staging(TaskBudget b) noexcept {
  return b == TaskBudget::queued_staging || b == TaskBudget::granted_staging;
}

/// A SCSI task's whole state: where it is in its life and where its payload budget is, as one
/// value. TaskState and TaskBudget each move along their own table (task_transitions,
/// budget_transitions), and the pair is always a row of task_lives: SessionEngine refuses any move
/// of either half that would leave the table.
///
/// Why a checked pair rather than one folded enum (docs/architecture.md, "Target task states"): the
/// budget is independent of the protocol state while the task takes Data-Out (placed and
/// receiving_data hold all five budgets; so does done, the moment a task ends); folding would
/// turn those three states into fifteen, a protocol move into up to five rows, and hide the two
/// small tables a protocol rule and a budget rule are edited in. The pair keeps them and still states, in one
/// table, every combination a task can be in (no companion flag says anything about the task).
struct TaskLife {
  TaskState state = TaskState::placed;  ///< its place in the protocol (task_transitions)
  TaskBudget budget = TaskBudget::none;  ///< its payload budget (budget_transitions)
  friend constexpr bool operator==(TaskLife, TaskLife) noexcept = default;
};

/// One combination a task may be in, and what it means.
struct TaskLifeRow {
  TaskState state;
  TaskBudget budget;
  const char* meaning;
};

/// Every (TaskState, TaskBudget) a task can be in. SessionEngine changes EngineTask::life only to a
/// row of this table (and only along a row of task_transitions or budget_transitions);
/// tests/unit/target_iscsi/session_engine_table_test.cpp (TaskLifeTable) reaches every row by
/// driving the engine, and the fuzzer checks no move is ever refused.
inline constexpr TaskLifeRow task_lives[] = {
    {TaskState::placed, TaskBudget::none, "its header is in: no data to take, a read (asks at run time) or an early answer"},
    {TaskState::placed, TaskBudget::granted, "a write granted at its header: immediate data lands in its full buffer"},
    {TaskState::placed, TaskBudget::queued, "a write short of budget at its header, with no immediate or unsolicited data"},
    {TaskState::placed, TaskBudget::queued_staging,
     "a write short of budget at its header: its immediate data lands in the staging buffer (§13.11)"},
    {TaskState::placed, TaskBudget::granted_staging,
     "the grant came between the header and the end of its payload phase: the immediate data is staged"},
    {TaskState::receiving_data, TaskBudget::none, "no budget asked: no data, a read not yet runnable, or an early answer"},
    {TaskState::receiving_data, TaskBudget::queued, "asked and queued: advance() moves it to waiting_budget"},
    {TaskState::receiving_data, TaskBudget::queued_staging, "queued; unsolicited Data-Out still lands in the staging buffer"},
    {TaskState::receiving_data, TaskBudget::granted_staging,
     "granted while unsolicited Data-Out still lands in the staging buffer; it moves once that ended"},
    {TaskState::receiving_data, TaskBudget::granted, "granted: R2Ts / RDMA Read fill its full buffer, or it runs"},
    {TaskState::waiting_budget, TaskBudget::queued, "no R2T and no backend before the grant"},
    {TaskState::waiting_budget, TaskBudget::queued_staging, "its unsolicited data ended in the staging buffer; no grant yet"},
    {TaskState::waiting_budget, TaskBudget::granted_staging, "the grant just came (on_budget_granted): the staged bytes move next"},
    {TaskState::waiting_budget, TaskBudget::granted, "the grant just came (on_budget_granted): it goes on"},
    {TaskState::fetching_write_data, TaskBudget::granted, "iSER: the RDMA Read fills its granted buffer"},
    {TaskState::write_data_fetched, TaskBudget::granted, "iSER: every byte is in its granted buffer"},
    {TaskState::executing, TaskBudget::none, "on the backend without a data buffer (no data, zero length)"},
    {TaskState::executing, TaskBudget::granted, "on the backend with its granted buffer"},
    {TaskState::sending_data_in, TaskBudget::granted, "its Data-In leaves from the granted read buffer"},
    {TaskState::done, TaskBudget::none, "ended: nothing to give back"},
    {TaskState::done, TaskBudget::queued, "ended before its grant: ReleaseBudget cancels the request"},
    {TaskState::done, TaskBudget::queued_staging, "ended before its grant: ReleaseBudget cancels the request"},
    {TaskState::done, TaskBudget::granted_staging, "ended after its grant, still staging: ReleaseBudget gives it back"},
    {TaskState::done, TaskBudget::granted, "ended: ReleaseBudget gives it back (after its Data-In batch left)"},
    {TaskState::aborted_executing, TaskBudget::none, "aborted on the backend without a buffer: it ends at the completion"},
    {TaskState::aborted_executing, TaskBudget::granted, "aborted on the backend: buffer and budget come back at the completion"},
    {TaskState::aborted_fetching, TaskBudget::granted, "aborted under an RDMA Read: buffer and budget come back when it ends"},
};
static_assert(std::size(task_lives) <= 64, "rows taken are kept in a 64-bit mask (RowsTaken)");

/// Index + 1 of the row of task_lives for `life`; 0 when a task may not be there. A table built at
/// compile time: one load per check.
[[nodiscard]] constexpr std::size_t task_life_row(TaskLife life) noexcept {
  constexpr std::size_t states = static_cast<std::size_t>(TaskState::aborted_fetching) + 1;
  constexpr std::size_t budgets = static_cast<std::size_t>(TaskBudget::granted) + 1;
  constexpr auto index = [] {
    std::array<std::uint8_t, states * budgets> rows{};
    for (std::size_t k = 0; k < std::size(task_lives); ++k)
      rows[static_cast<std::size_t>(task_lives[k].state) * budgets + static_cast<std::size_t>(task_lives[k].budget)] =
          static_cast<std::uint8_t>(k + 1);
    return rows;
  }();
  const auto s = static_cast<std::size_t>(life.state);
  const auto b = static_cast<std::size_t>(life.budget);
  return s < states && b < budgets ? index[s * budgets + b] : 0;
}

/// The answer a SCSI task gives without the backend (a SCSI Response, RFC 7143 §11.4), fixed
/// before its data phase ended; it is sent once every Data-Out the task takes is in.
struct EarlyAnswer {
  /// Why the backend does not run it.
  enum class Cause : std::uint8_t {
    plan,          ///< the plan refused it or its lengths disagree: its Data-Out is still taken in full
    data_failure,  ///< its data transfer failed (§7.8 digest, §11.7 sequence): more Data-Out is rejected
  };
  Cause cause = Cause::plan;
  ScsiOutcome outcome;  ///< status and sense (data_length_bytes unused)
  Residual residual;    ///< U/O and count for the response (§11.4.5)
};

/// The enumerator's name.
constexpr const char* to_string(TaskState state) noexcept {
  switch (state) {
    case TaskState::placed: return "placed";
    case TaskState::receiving_data: return "receiving_data";
    case TaskState::waiting_budget: return "waiting_budget";
    case TaskState::fetching_write_data: return "fetching_write_data";
    case TaskState::write_data_fetched: return "write_data_fetched";
    case TaskState::executing: return "executing";
    case TaskState::sending_data_in: return "sending_data_in";
    case TaskState::done: return "done";
    case TaskState::aborted_executing: return "aborted_executing";
    case TaskState::aborted_fetching: return "aborted_fetching";
  }
  return "?";
}

/// The enumerator's name.
constexpr const char* to_string(TaskEvent event) noexcept {
  switch (event) {
    case TaskEvent::payload_received: return "payload_received";
    case TaskEvent::refused: return "refused";
    case TaskEvent::budget_short: return "budget_short";
    case TaskEvent::budget_granted: return "budget_granted";
    case TaskEvent::get_data_started: return "get_data_started";
    case TaskEvent::get_data_done: return "get_data_done";
    case TaskEvent::get_data_failed: return "get_data_failed";
    case TaskEvent::ready: return "ready";
    case TaskEvent::executed_read: return "executed_read";
    case TaskEvent::answered: return "answered";
    case TaskEvent::aborted: return "aborted";
    case TaskEvent::completion_arrived: return "completion_arrived";
  }
  return "?";
}

/// The enumerator's name.
constexpr const char* to_string(TaskBudget budget) noexcept {
  switch (budget) {
    case TaskBudget::none: return "none";
    case TaskBudget::queued: return "queued";
    case TaskBudget::queued_staging: return "queued_staging";
    case TaskBudget::granted_staging: return "granted_staging";
    case TaskBudget::granted: return "granted";
  }
  return "?";
}

/// The enumerator's name.
constexpr const char* to_string(BudgetEvent event) noexcept {
  switch (event) {
    case BudgetEvent::requested: return "requested";
    case BudgetEvent::granted: return "granted";
    case BudgetEvent::staged_moved: return "staged_moved";
  }
  return "?";
}

/// The negotiated and configured values of one session.
struct SessionEngineConfig {
  iscsi::OperationalParameters params;  ///< from the login
  bool discovery = false;               ///< a discovery session (RFC 7143 §4.3)
  std::uint16_t cid = 0;                ///< the connection's CID (Logout "close connection")
  SerialNumber exp_cmd_sn{0};           ///< ExpCmdSN after login
  SerialNumber stat_sn{0};              ///< the next StatSN after the final Login Response
  std::uint32_t cmd_window_depth = 128; ///< non-immediate commands outstanding at most (>= 1)
  std::uint32_t max_immediate_commands = 64;  ///< immediate SCSI commands (and TMFs) outstanding at most
  std::chrono::milliseconds idle_interval{0};   ///< silence before a NOP-In ping; 0 = off
  std::chrono::milliseconds ping_timeout{5000};  ///< how long the ping may stay unanswered
  /// Where SCSI response statuses (not GOOD), Rejects and TMF requests are counted (null: not
  /// counted); relaxed atomics, target_stats.hpp. Must outlive the engine.
  TargetStats* stats = nullptr;
  /// This session's own error count (null: not counted). Must outlive the engine.
  ConnectionStats* connection_stats = nullptr;
};

/// Synchronous, non-blocking questions the engine asks the SCSI layer and the target registry.
struct SessionEngineHooks {
  /// Phase 1 of a SCSI command (ScsiDispatcher::plan for this session's nexus).
  std::function<CommandPlan(const scsi::Lun& lun, ConstByteSpan cdb)> plan;
  /// Whether a logical unit exists at `lun` (TMF "LUN does not exist", RFC 7143 §11.6.1).
  std::function<bool(const scsi::Lun& lun)> lun_exists;
  /// The SendTargets answer for `value` (RFC 7143 Appendix C).
  std::function<iscsi::TextPairs(const std::string& value)> send_targets;
  /// Asks the payload budgets (payload_budget.hpp) for `bytes` for task `itt`: true when granted
  /// now; false when queued (the driver then calls on_budget_granted(itt) later). Empty: always
  /// granted. Every request is ended by exactly one ReleaseBudget action.
  std::function<bool(iscsi::Itt itt, std::uint64_t bytes)> request_budget;
};

/// Send these PDUs, in this order (one Datamover::send_batch). `keep` holds the task buffers the
/// data segments borrow: keep it alive until the batch was sent.
struct SendPdus {
  std::vector<datamover::PduOut> pdus;
  std::vector<PooledBuffer> keep;
};
/// Run the task on the backend (task(itt) gives LUN, CDB, plan and data buffer); report with
/// on_task_executed().
struct ExecuteTask {
  iscsi::Itt itt{0};
};
/// Give back (granted) or cancel (not yet granted) the payload budget the task asked for with
/// SessionEngineHooks::request_budget.
struct ReleaseBudget {
  iscsi::Itt itt{0};
  std::uint64_t bytes = 0;
  bool granted = false;
};
/// Get_Data (RFC 5047 §7.4; iSER: an RDMA Read, RFC 7145 §7.3.4): `length` bytes of the initiator's
/// write buffer (`source`, offset 0, as the command named it: Datamover::get_data()) into
/// task_data(itt) at `buffer_offset`; report with on_write_data().
struct GetWriteData {
  iscsi::Itt itt{0};
  datamover::PeerBuffer source;
  std::uint32_t buffer_offset = 0;  ///< bytes
  std::uint32_t length = 0;         ///< bytes
};
/// Put_Data (RFC 5047 §7.3; iSER: an RDMA Write, RFC 7145 §7.3.5): the first `bytes` of `buffer` to
/// the initiator's read buffer (`dest`, offset 0, as the command named it: Datamover::put_data()).
/// The task's status follows in a later SendPdus; a failure closes the connection.
struct PutReadData {
  iscsi::Itt itt{0};
  datamover::PeerBuffer dest;
  PooledBuffer buffer;
  std::uint32_t bytes = 0;
};
/// A reset's device-server side effects (SAM-5 §7.7, §7.10: unit attentions, reservations).
struct DeviceReset {
  scsi::Lun lun;
  TaskManagement what = TaskManagement::logical_unit_reset;
};
/// Close the connection (after the PDUs queued before this action were sent).
struct CloseConnection {
  std::string reason;
};
using EngineAction = std::variant<SendPdus, ExecuteTask, GetWriteData, PutReadData, ReleaseBudget, DeviceReset, CloseConnection>;

/// One SCSI task as the engine keeps it (read-only for the driver, through task()).
struct EngineTask {
  iscsi::ScsiCommand command;
  std::vector<std::byte> long_cdb;  ///< whole CDB when longer than 16 bytes (Extended CDB AHS)
  CommandPlan plan;
  PooledBuffer buffer;              ///< Data-Out lands here, Data-In is sent from here
  std::optional<WriteSequencer> sequencer;
  std::optional<EarlyAnswer> early;  ///< answered without the backend (and why)
  std::uint32_t wanted_out_bytes = 0;  ///< what a to_target CDB asked for before shorten_transfer()
  /// Its state and payload budget: always a row of task_lives, changed only along task_transitions
  /// (SessionEngine::move()) and budget_transitions (SessionEngine::move_budget()).
  TaskLife life;
  std::uint64_t budget_bytes = 0;  ///< bytes asked of the payload budget (0 while budget is none)
  std::uint32_t data_in_pdus = 0;  ///< DataSN of the next Data-In
  /// The initiator's read and write buffers when the transport moves the data itself (PduIn::peer_read,
  /// peer_write; iSER, RFC 7145 §9.2): opaque, handed to the data phase's actions as they came.
  std::optional<datamover::PeerBuffer> peer_read;
  std::optional<datamover::PeerBuffer> peer_write;

  [[nodiscard]] ConstByteSpan cdb() const noexcept {
    if (!long_cdb.empty()) return long_cdb;
    return command.cdb;
  }
  [[nodiscard]] iscsi::Itt itt() const noexcept { return command.itt; }
  /// True when its data transfer failed: more Data-Out for it is rejected (§11.17.1).
  [[nodiscard]] bool data_failed() const noexcept {
    return early && early->cause == EarlyAnswer::Cause::data_failure;
  }
};

/// The target session engine. See the file comment for the rules.
class SessionEngine final : private DataPhaseHost {
 public:
  using Clock = std::chrono::steady_clock;
  using TimePoint = Clock::time_point;

  /// `pool` gives the task buffers (the datamover's: registered memory on iSER); it must outlive
  /// the engine. `data_phase` moves the payload (make_data_phase(): R2T/Data-Out and Data-In on
  /// TCP, RDMA Read/Write actions on iSER). `now` starts the idle watch.
  SessionEngine(SessionEngineConfig config, SessionEngineHooks hooks, BufferPool& pool,
                std::unique_ptr<DataPhase> data_phase, TimePoint now);

  /// Header phase, before the data segment of `bhs` (`length` bytes) is read: validates SCSI
  /// Command (without AHS) and Data-Out headers and returns where the data segment lands (a task
  /// buffer slice), or an empty span for the datamover's scratch buffer. Never fails.
  std::span<std::byte> place(const iscsi::Bhs& bhs, std::uint32_t length) noexcept;
  /// Payload phase: the whole PDU arrived (`in.data` is where it landed; `in.pdu_error` a
  /// recoverable error: data digest, too long). Every received PDU goes through here, after place().
  void on_pdu(const datamover::PduIn& in, TimePoint now);

  /// The backend finished task `itt` with `outcome` (after ExecuteTask).
  void on_task_executed(iscsi::Itt itt, const ScsiOutcome& outcome);
  /// iSER: the GetWriteData of task `itt` finished (`error` empty on success; an error closes).
  void on_write_data(iscsi::Itt itt, std::error_code error);
  /// The payload budget asked for task `itt` (request_budget returned false) was granted.
  void on_budget_granted(iscsi::Itt itt);
  /// The connection closed (socket error, peer gone): every task is aborted; tasks on the backend
  /// still report on_task_executed(). No more PDUs are produced.
  void on_closed();

  /// Target shutdown (drain): normal sessions get an Async Message asking for a logout within
  /// `logout_within_seconds` (RFC 7143 §11.9.1, AsyncEvent 1, Parameter3; it carries and advances
  /// StatSN). From now on MaxCmdSN stays where it is, so the initiator can add at most the commands
  /// the window already allows; every command received runs and is answered as usual, and once no
  /// task, task management request or logout is left the engine closes (CloseConnection "target
  /// shutting down", after those answers). A Logout the initiator sends meanwhile ends it as usual.
  /// The driver bounds the whole drain with its own deadline (on_closed()).
  void begin_drain(std::uint16_t logout_within_seconds);
  /// True after begin_drain().
  [[nodiscard]] bool draining() const noexcept { return draining_; }

  /// Fires the idle watch: a NOP-In ping, or CloseConnection when the ping went unanswered.
  void on_timer(TimePoint now);
  /// When on_timer() must next be called; nullopt: no timer needed.
  [[nodiscard]] std::optional<TimePoint> next_deadline() const noexcept;

  /// The actions produced since the last call, in the order they must be carried out.
  std::vector<EngineAction> take_actions();
  /// Optionally hands a carried-out take_actions() vector back so its capacity is reused (no heap
  /// allocation per pass in steady state).
  void recycle_actions(std::vector<EngineAction>&& taken) noexcept;
  /// Optionally hands a sent SendPdus batch back (its PDUs and kept buffers are released here) so
  /// the capacity of its two vectors serves a later batch: no heap allocation per response in
  /// steady state. Only once the batch's bytes have left (its buffers are given back now).
  void recycle_batch(SendPdus&& sent) noexcept;

  /// The task with `itt`, or nullptr.
  [[nodiscard]] const EngineTask* task(iscsi::Itt itt) const noexcept;
  /// The task's data buffer, `plan.transfer_length_bytes` bytes (for ExecuteTask).
  [[nodiscard]] std::span<std::byte> task_data(iscsi::Itt itt) const noexcept;
  /// Tasks in the table (running, aborted but still on the backend).
  [[nodiscard]] std::size_t task_count() const noexcept { return tasks_.size(); }
  /// True once the Logout response was produced or the connection closed.
  [[nodiscard]] bool ended() const noexcept { return ended_; }
  [[nodiscard]] SerialNumber stat_sn() const noexcept { return stat_sn_; }
  /// Which rows of task_transitions tasks of this engine took.
  [[nodiscard]] RowsTaken task_rows_taken() const noexcept { return task_rows_taken_; }
  /// Which rows of budget_transitions tasks of this engine took.
  [[nodiscard]] RowsTaken budget_rows_taken() const noexcept { return budget_rows_taken_; }
  /// Which rows of task_lives tasks of this engine were in (the first, placed/none, once a task is placed).
  [[nodiscard]] RowsTaken life_rows_taken() const noexcept { return life_rows_taken_; }
  /// Task state and budget changes refused because task_transitions or budget_transitions has no
  /// row for them, or the pair they lead to is not in task_lives (0 unless a bug).
  [[nodiscard]] std::uint64_t task_moves_refused() const noexcept { return task_moves_refused_; }
  /// NOP-In pings the idle watch has sent (for the driver's log).
  [[nodiscard]] std::uint64_t pings_sent() const noexcept { return pings_sent_; }
  [[nodiscard]] const CmdSnWindow& window() const noexcept { return window_; }

 private:
  struct Current {
    bool header_done = false;
    bool ignored = false;
    bool admitted = false;
    std::optional<iscsi::RejectReason> reject;
    std::optional<DataOutError> data_out_error;
    std::optional<std::uint32_t> itt;  // the task the PDU belongs to (looked up again: it may end in between)
  };
  struct PendingTmf {
    iscsi::TaskManagementRequest request;
    iscsi::TaskManagementResponseCode response = iscsi::TaskManagementResponseCode::function_complete;
    std::vector<std::uint32_t> victims;  // ITTs still ending
  };
  struct PendingLogout {
    iscsi::LogoutRequest request;
    iscsi::LogoutResponseCode response = iscsi::LogoutResponseCode::closed_successfully;
    std::vector<std::uint32_t> victims;
  };

  std::span<std::byte> command_header(const iscsi::Bhs& bhs, ConstByteSpan ahs, std::uint32_t length);
  std::span<std::byte> data_out_header(const iscsi::Bhs& bhs, std::uint32_t length) noexcept;
  void on_scsi_command(const datamover::PduIn& in);
  void on_data_out(const datamover::PduIn& in);
  void on_nop_out(const iscsi::NopOut& h, const datamover::PduIn& in);
  void on_text(const iscsi::TextRequest& h, const datamover::PduIn& in);
  void on_logout(const iscsi::LogoutRequest& h);
  void on_task_management(const iscsi::TaskManagementRequest& h, const iscsi::Bhs& bhs);
  bool admit_non_command(bool immediate, SerialNumber cmd_sn);
  EngineTask* current_task() noexcept;

  void advance(EngineTask& task);
  void respond(EngineTask& task, scsi::Status status, const std::optional<scsi::SenseData>& sense, Residual residual);
  void send_data_in(EngineTask& task, std::uint32_t bytes, scsi::Status status, Residual residual);
  void fail_task(EngineTask& task, const scsi::SenseData& sense);
  void abort_task(EngineTask& task);
  /// Ends the task: ITT, window slot, immediate count. Its ReleaseBudget goes to `deferred` when
  /// given (the caller queues it after the PDUs that borrow the buffer), else to the actions.
  void end_task(std::uint32_t itt, TaskEvent event, std::optional<ReleaseBudget>* deferred = nullptr);
  /// Moves `task` to `to` on `event` when task_transitions has that row and (to, its budget) is a
  /// row of task_lives (from == to: no change); otherwise logs and counts the refused move and
  /// returns false, changing nothing.
  bool move(EngineTask& task, TaskEvent event, TaskState to) noexcept;
  /// As move(), for the task's payload budget along budget_transitions.
  bool move_budget(EngineTask& task, BudgetEvent event, TaskBudget to) noexcept;
  /// What move() and move_budget() share: `row` of `table` (0: it has none) and the row of
  /// task_lives for `next` must both exist; then both count as taken (in `rows` and
  /// life_rows_taken_) and the task's life is `next`; otherwise refuse() names the table that has
  /// no row for from --event--> to, and false.
  template <class Value, class Event>
  bool move_life(EngineTask& task, TaskLife next, std::size_t row, RowsTaken& rows, const char* table, Value from,
                 Event event, Value to) noexcept;
  /// Logs and counts a move refused because `table` has no row for it.
  void refuse(const EngineTask& task, const char* table, const char* from, const char* event, const char* to) noexcept;
  void drop_unstarted(EngineTask& task);
  void check_waiters();
  /// Asks SessionEngineHooks::request_budget for `bytes`; the budget goes to granted, or to
  /// `if_queued` (queued, or queued_staging when unsolicited data comes regardless). True: granted.
  bool request_budget(EngineTask& task, std::uint64_t bytes, TaskBudget if_queued);

  // DataPhaseHost (data_phase.hpp).
  void emit_r2t(const EngineTask& task, const R2tRequest& r2t) override;
  iscsi::Ttt allocate_ttt() noexcept override { return take_ttt(); }
  void emit_get_data(EngineTask& task, datamover::PeerBuffer source, std::uint32_t buffer_offset,
                     std::uint32_t length) override;
  void emit_data_in(EngineTask& task, std::uint32_t bytes, scsi::Status status, Residual residual) override {
    send_data_in(task, bytes, status, residual);
  }
  void emit_put_data(EngineTask& task, datamover::PeerBuffer dest, std::uint32_t bytes) override;
  void emit_status(EngineTask& task, scsi::Status status, const std::optional<scsi::SenseData>& sense,
                   Residual residual) override {
    respond(task, status, sense, residual);
  }

  void send(datamover::PduOut pdu, PooledBuffer keep = {});
  void send_reject(iscsi::RejectReason reason, const iscsi::Bhs& bhs);
  void close(std::string reason);
  SerialNumber take_stat_sn() noexcept {
    const SerialNumber v = stat_sn_;
    ++stat_sn_;
    return v;
  }
  iscsi::Ttt take_ttt() noexcept;
  template <class H>
  void stamp(H& header) const noexcept {
    header.exp_cmd_sn = window_.exp_cmd_sn();
    header.max_cmd_sn = window_.max_cmd_sn();
  }

  SessionEngineConfig config_;
  SessionEngineHooks hooks_;
  BufferPool& pool_;
  std::unique_ptr<DataPhase> data_phase_;
  CmdSnWindow window_;
  SerialNumber stat_sn_;
  std::uint32_t next_ttt_ = 1;
  std::uint32_t immediate_outstanding_ = 0;
  std::map<std::uint32_t, std::unique_ptr<EngineTask>> tasks_;  // by ITT
  std::vector<PendingTmf> tmfs_;
  std::optional<PendingLogout> logout_;
  Current current_;
  std::vector<EngineAction> actions_;
  // Kept for reuse, so steady-state commands allocate neither a task, its map node nor an actions
  // vector (docs/performance.md).
  static constexpr std::size_t max_spare_tasks = 256;
  static constexpr std::size_t max_spare_actions = 1024;
  std::vector<EngineAction> spare_actions_;
  // One per response of a pass: the writer joins a pass's batches into its first and gives the
  // rest back, so a pass of 32 READ responses needs 32 (64: a pass at the default CmdSN window).
  static constexpr std::size_t max_spare_batches = 64;
  std::vector<SendPdus> spare_batches_;  // empty vectors with capacity (recycle_batch)
  std::vector<std::unique_ptr<EngineTask>> spare_tasks_;
  std::vector<decltype(tasks_)::node_type> spare_task_nodes_;
  std::unique_ptr<EngineTask> new_task();
  void insert_task(std::uint32_t itt, std::unique_ptr<EngineTask> task);
  void recycle_task(std::unique_ptr<EngineTask> task) noexcept;
  bool ended_ = false;
  RowsTaken task_rows_taken_;
  RowsTaken budget_rows_taken_;
  RowsTaken life_rows_taken_;
  std::uint64_t task_moves_refused_ = 0;
  bool draining_ = false;  // begin_drain(): the window stays shut, close once idle
  // Idle watch.
  TimePoint last_rx_;
  std::optional<TimePoint> ping_deadline_;
  std::uint64_t pings_sent_ = 0;
  // Text Request state (RFC 7143 §11.10).
  std::vector<std::byte> text_in_;
  std::vector<std::byte> text_out_;
  std::size_t text_out_offset_ = 0;
  iscsi::Ttt text_ttt_ = iscsi::reserved_ttt;
};

}  // namespace iserkit::target
