// Task: the target's state for one SCSI command in the full-feature phase (RFC 7143 §3.2.4, §11.3,
// SAM-5 §4.8 "task"). Owned by the connection's task table (keyed by ITT) and by the coroutine that
// runs the command; the data buffer is the one Data-Out lands in and Data-In is sent from.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "iserkit/common/buffer.hpp"
#include "iserkit/common/completion.hpp"
#include "iserkit/datamover/datamover.hpp"
#include "iserkit/iscsi/pdu.hpp"
#include "iserkit/scsi/sense.hpp"
#include "iserkit/target/scsi_dispatcher.hpp"
#include "data_in.hpp"
#include "write_sequencer.hpp"

namespace iserkit::target {

struct Task : std::enable_shared_from_this<Task> {
  iscsi::ScsiCommand command;
  std::vector<std::byte> long_cdb;  ///< the whole CDB when it is longer than 16 bytes (Extended CDB AHS)
  CommandPlan plan;
  PooledBuffer buffer;              ///< Data-Out lands here, Data-In is sent from here
  std::optional<WriteSequencer> sequencer;  ///< present when the command carries write data (W, EDTL > 0)
  /// Set when the command is answered without execute() (UNIT ATTENTION, RESERVATION CONFLICT,
  /// a plan error, EDTL shorter than a write can use); `early_residual` goes with it.
  std::optional<ScsiOutcome> early;
  Residual early_residual;
  /// Bytes a to_target command asked for in its CDB before shorten_transfer() cut it to the EDTL
  /// (RFC 7143 §11.4.5.1 overflow residual); 0 for other commands.
  std::uint32_t wanted_out_bytes = 0;
  /// Set by the receive path when the data transfer failed (digest error, bad Data-Out).
  std::optional<scsi::SenseData> failure;
  bool data_complete = false;  ///< every byte the command needs has landed (set by the receive path)
  bool aborted = false;        ///< a task management function aborted it: send nothing more
  bool in_window = false;      ///< a non-immediate command: release a CmdSN window slot when done
  bool counted_immediate = false;  ///< an immediate command: counted against max_immediate_commands
  bool has_finish_waiter = false;
  std::uint32_t data_in_pdus = 0;  ///< DataSN of the next Data-In
  std::uint32_t immediate_bytes = 0;  ///< immediate data that came with the command
  /// iSER (RFC 7145 §9.2): the initiator's read and write buffers from the command's iSER header.
  std::optional<datamover::RemoteBuffer> remote_read;
  std::optional<datamover::RemoteBuffer> remote_write;
  /// The task's hold on the payload budgets (connection, then global; payload_budget.hpp).
  enum class Budget : std::uint8_t { none, waiting_connection, waiting_global, granted, abandoned };
  Budget budget = Budget::none;
  std::uint64_t budget_bytes = 0;
  std::uint64_t budget_id = 0;         ///< request id in the connection's budget
  std::uint64_t global_budget_id = 0;  ///< request id in the target's budget
  Completion budget_event;             ///< completes when the budget is granted, or on abort/close
  /// A write whose budget was not granted when the command arrived: its immediate and unsolicited
  /// data (at most FirstBurstLength) land in `buffer`, sized for them only, and move to a full
  /// buffer once granted.
  bool staging = false;
  Completion data_event;  ///< wakes the task coroutine when data arrived, it failed or was aborted
  Completion finished;    ///< completes when the task coroutine is done
  std::array<std::byte, 2 + scsi::max_sense_size_bytes> sense_segment{};

  [[nodiscard]] ConstByteSpan cdb() const noexcept {
    if (!long_cdb.empty()) return long_cdb;
    return command.cdb;
  }
  [[nodiscard]] iscsi::Itt itt() const noexcept { return command.itt; }
};

}  // namespace iserkit::target
