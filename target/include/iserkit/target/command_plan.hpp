// The values the SCSI device server and the transport exchange about one command (phase 1's
// CommandPlan, phase 2's ScsiOutcome; scsi_dispatcher.hpp runs them) and a logical unit's counters
// (LogicalUnitStats, unit_stats()), without the dispatcher or the unit: no Asio, no backends, so
// the target's sans-I/O session engine includes this header and not scsi_dispatcher.hpp.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>

#include "iserkit/scsi/opcodes.hpp"
#include "iserkit/scsi/sense.hpp"

namespace iserkit::target {

class LogicalUnit;  // logical_unit.hpp

/// Counters of one logical unit: the per-LUN metrics (iserkit_target_lun_*, docs/metrics.md).
/// Relaxed atomics: the connections bump them (no lock), the metrics read them at scrape time.
struct LogicalUnitStats {
  /// SCSI commands executed, indexed by OpKind (read, write, other; target/src/target_stats.hpp).
  std::array<std::atomic<std::uint64_t>, 3> commands{};
  /// Payload bytes of the commands that ended GOOD, by the same kinds (read: Data-In, write: Data-Out).
  std::array<std::atomic<std::uint64_t>, 3> bytes{};
  std::atomic<std::uint64_t> errors{0};           ///< responses other than GOOD and UNIT ATTENTION
  std::atomic<std::uint64_t> unit_attentions{0};  ///< CHECK CONDITION with UNIT ATTENTION (SAM-5 §5.14)
  /// Bytes the copy manager (EXTENDED COPY, WRITE USING TOKEN) wrote into this unit that moved
  /// inside the kernel (BlockBackend::copy_from(): io_uring splice), never in a user-space buffer.
  std::atomic<std::uint64_t> copy_bytes_in_kernel{0};
  /// Bytes the copy manager wrote into this unit through its user-space buffer (a backend read,
  /// then a write): memory and RBD LUNs, mixed kinds, overlapping ranges of one file, a refusal.
  std::atomic<std::uint64_t> copy_bytes_user_space{0};
};

/// `unit`'s counters (LogicalUnit::stats(), for callers that see only this header).
LogicalUnitStats& unit_stats(const LogicalUnit& unit) noexcept;

/// Which way a command's data moves (SAM-5 §5.4.3).
enum class DataDirection : std::uint8_t {
  none,         ///< no data phase
  to_target,    ///< Data-Out: the initiator sends data (WRITE, UNMAP parameter list, WRITE SAME block)
  from_target,  ///< Data-In: the target returns data (READ, INQUIRY, ...)
};

/// The target port an I_T nexus goes through (SPC-5 §7.7.6.5, §7.7.6.6): its relative target port
/// identifier and the target port group it belongs to. The iSCSI target uses the portal group tag
/// for both (one target port per portal group).
struct TargetPort {
  std::uint16_t relative_port = 1;
  std::uint16_t group = 1;
};

/// Task management functions with device-server side effects (SAM-5 §7). Aborting tasks is the
/// transport's job; these establish unit attentions and drop RESERVE(6) reservations.
enum class TaskManagement : std::uint8_t {
  logical_unit_reset,  ///< SAM-5 §7.7: UA BUS DEVICE RESET FUNCTION OCCURRED for every nexus of the LU
  target_warm_reset,   ///< SAM-5 §7.10 (iSCSI TARGET WARM RESET): every LU, UA POWER ON, RESET, OR BUS DEVICE RESET
  target_cold_reset,   ///< iSCSI TARGET COLD RESET: as warm, UA POWER ON OCCURRED
};

/// The result of phase 2 (or of an immediate answer): SCSI status, sense and how much data-in was
/// produced.
struct ScsiOutcome {
  scsi::Status status = scsi::Status::good;
  /// Sense data with CHECK CONDITION. The transport encodes it with scsi::encode_sense in
  /// SenseFormat::fixed (D_SENSE is 0 in the control mode page) and sends it as the SCSI Response
  /// data segment (RFC 7143 §11.4.7.2: two-byte SenseLength first).
  std::optional<scsi::SenseData> sense;
  /// Bytes of data-in written to the start of the buffer (<= the buffer size); 0 for other
  /// directions and for CHECK CONDITION.
  std::uint32_t data_length_bytes = 0;

  /// GOOD status with `data_length_bytes` bytes of data-in.
  static ScsiOutcome good(std::uint32_t data_length_bytes = 0) noexcept { return {scsi::Status::good, std::nullopt, data_length_bytes}; }
  /// CHECK CONDITION with `sense`.
  static ScsiOutcome check_condition(const scsi::SenseData& sense) noexcept { return {scsi::Status::check_condition, sense, 0}; }
  /// RESERVATION CONFLICT (SPC-5 §5.14.1), no sense.
  static ScsiOutcome reservation_conflict() noexcept { return {scsi::Status::reservation_conflict, std::nullopt, 0}; }
};

/// The result of phase 1 for one command.
///
/// How the transport uses it:
/// - `rejected()`: answer at once with `early_outcome()` (CHECK CONDITION with `error`, or
///   RESERVATION CONFLICT); do not call execute(); do not ask for Data-Out (no R2T) and discard any
///   immediate/unsolicited data the command carried.
/// - otherwise allocate a buffer of exactly `transfer_length_bytes` bytes (when not 0), receive the
///   Data-Out into it for to_target, then call execute() with it.
/// - `direction` is none exactly when `transfer_length_bytes` is 0.
/// - Residuals are the transport's (RFC 7143 §11.4.5): compare the initiator's Expected Data
///   Transfer Length (EDTL) with `transfer_length_bytes` for to_target, and with the outcome's
///   `data_length_bytes` for from_target. When EDTL < transfer_length_bytes for a to_target
///   command, call shorten_transfer(plan, EDTL): if it returns true the command runs on the EDTL
///   bytes that arrive (a WRITE of fewer blocks; the response carries the overflow residual); if
///   false answer CHECK CONDITION ILLEGAL REQUEST / INVALID FIELD IN INFORMATION UNIT with the
///   overflow residual and do not call execute(). For from_target still call execute() with a
///   full-size buffer and send only min(EDTL, data_length_bytes) bytes (overflow residual =
///   data_length_bytes - EDTL).
struct CommandPlan {
  DataDirection direction = DataDirection::none;
  /// Exact number of bytes the command moves: READ/WRITE blocks × block size, INQUIRY/REPORT LUNS/
  /// MODE SENSE the allocation length (at most max_data_in_allocation_bytes), UNMAP the parameter
  /// list length, WRITE SAME one block, COMPARE AND WRITE twice the blocks.
  std::uint32_t transfer_length_bytes = 0;
  /// Set: the command failed validation; answer CHECK CONDITION with this sense, skip execute().
  std::optional<scsi::SenseData> error;
  /// Set: the command conflicts with a reservation; answer RESERVATION CONFLICT, skip execute().
  bool conflict = false;
  /// Set by the transport when the task is aborted while execute() runs (ABORT TASK, ABORT TASK
  /// SET, a reset, the session's end: SAM-5 §7). A command that waits long for a device operation
  /// reads it and returns early, leaving the operation running: SANITIZE with IMMED = 0 (the
  /// sanitize operation continues, SBC-4 §4.11). The transport ignores that command's outcome.
  /// Written and read on the thread that runs execute() (the session's io_context): execute()
  /// takes the plan by reference, so the transport sets it on the object it passed.
  bool abort_requested = false;

  /// True when the command is answered without execute().
  [[nodiscard]] bool rejected() const noexcept { return error.has_value() || conflict; }
  /// The immediate answer of a rejected plan.
  [[nodiscard]] ScsiOutcome early_outcome() const noexcept {
    return conflict ? ScsiOutcome::reservation_conflict() : ScsiOutcome::check_condition(*error);
  }

  // --- Everything below is private to the SCSI layer: read by execute(), not by the transport. ---
  scsi::Opcode opcode = scsi::Opcode::test_unit_ready;  ///< byte 0 of the CDB
  const LogicalUnit* unit = nullptr;  ///< the addressed logical unit; nullptr = no LU at this LUN
  std::uint64_t lba = 0;              ///< first logical block (media commands)
  std::uint64_t blocks = 0;           ///< logical blocks (media commands, after 0 → "to the end")
  bool fua = false;                   ///< FUA bit of a WRITE
  bool unmap = false;                 ///< WRITE SAME UNMAP bit
  bool ndob = false;                  ///< WRITE SAME (16) NDOB bit
  std::uint8_t bytchk = 0;            ///< VERIFY / WRITE AND VERIFY BYTCHK
  bool write_protected = false;       ///< the LU refused writes when planned (read-only or SWP)
  bool software_write_protect = false;  ///< SWP of the control mode page when planned
  /// A WRITE-type command whose transfer may be cut to whole blocks (RFC 7143 §11.4.5.1 overflow).
  bool shortenable = false;
  /// A command whose Data-Out must be exactly `transfer_length_bytes` (COMPARE AND WRITE, WRITE
  /// SAME): check it with check_data_out_length().
  bool exact_data_out = false;
  TargetPort port;  ///< the target port of the nexus (VPD 0x83)
  bool explicit_alua = false;  ///< SET TARGET PORT GROUPS is supported (standard INQUIRY TPGS 11b)
};

/// For a plan with `exact_data_out`: an EDTL above the length the CDB implies is an error
/// (SBC-4 §5.3.1, §5.50: the Data-Out of COMPARE AND WRITE is exactly 2 × NUMBER OF LOGICAL
/// BLOCKS blocks, of WRITE SAME exactly one block). Returns the CHECK CONDITION (ILLEGAL REQUEST,
/// INVALID FIELD IN CDB) to answer with, or nullopt when the length is acceptable. An EDTL below
/// is left to shorten_transfer() (which refuses such plans).
std::optional<scsi::SenseData> check_data_out_length(const CommandPlan& plan, std::uint32_t edtl_bytes) noexcept;

/// Cuts a to_target plan to `edtl_bytes` when the command allows it (plain WRITE-type commands and
/// whole blocks): the command then writes only the first edtl_bytes / block size blocks.
/// Returns: true if the plan was shortened (or needed no change), false if the command must fail.
bool shorten_transfer(CommandPlan& plan, std::uint32_t edtl_bytes) noexcept;

}  // namespace iserkit::target
