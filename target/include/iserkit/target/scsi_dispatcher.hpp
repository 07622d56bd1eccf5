// The target's SCSI layer (layer 4): the device server of one target node. It owns the node's LUN
// map and runs commands in two phases so the transport can reject a command before moving data and
// can place Data-Out directly into the buffer the command will use:
//
//   1. plan(lun, cdb): parse and validate (opcode known, fields, LBA range, write protection).
//      Cheap, no I/O, no allocation that outlives the call. Says which way data flows and exactly
//      how many bytes the command wants to move, or gives the sense for an immediate CHECK CONDITION.
//   2. execute(lun, cdb, plan, data): run it (backend I/O), fill the data-in buffer, give the status.
//
// Implements SPC-5 (INQUIRY §6.6 + VPD §7.7, REPORT LUNS §6.33, TEST UNIT READY §6.47, REQUEST
// SENSE §6.39, MODE SENSE §6.13/§6.14 with the caching and control pages §7.5) and SBC-4 (READ/WRITE
// 6/10/12/16, READ CAPACITY 10/16, SYNCHRONIZE CACHE 10/16, UNMAP, WRITE SAME 10/16, VPD 0xb0-0xb2).
// Anything else: CHECK CONDITION, ILLEGAL REQUEST, INVALID COMMAND OPERATION CODE.
// Free of iSCSI types: no ITT, CmdSN, EDTL or PDU here.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/bytes.hpp"
#include "iserkit/common/result.hpp"
#include "iserkit/scsi/lun.hpp"
#include "iserkit/scsi/opcodes.hpp"
#include "iserkit/scsi/sense.hpp"
#include "iserkit/target/logical_unit.hpp"

namespace iserkit::target {

/// Which way a command's data moves (SAM-5 §5.4.3).
enum class DataDirection : std::uint8_t {
  none,         ///< no data phase
  to_target,    ///< Data-Out: the initiator sends data (WRITE, UNMAP parameter list, WRITE SAME block)
  from_target,  ///< Data-In: the target returns data (READ, INQUIRY, ...)
};

/// The result of phase 1 for one command.
///
/// How the transport uses it:
/// - `error` set: answer CHECK CONDITION with that sense at once; do not call execute(); do not ask
///   for Data-Out (no R2T) and discard any immediate/unsolicited data the command carried.
/// - otherwise allocate a buffer of exactly `transfer_length_bytes` bytes (when not 0), receive the
///   Data-Out into it for to_target, then call execute() with it.
/// - `direction` is none exactly when `transfer_length_bytes` is 0.
/// - Residuals are the transport's (RFC 7143 §11.4.5): compare the initiator's Expected Data
///   Transfer Length (EDTL) with `transfer_length_bytes` for to_target, and with the outcome's
///   `data_length_bytes` for from_target. When EDTL < transfer_length_bytes for a to_target
///   command, answer CHECK CONDITION ILLEGAL REQUEST / INVALID FIELD IN INFORMATION UNIT
///   (`scsi::asc::invalid_field_in_information_unit`) with an overflow residual and do not call
///   execute(); for from_target still call execute() with a full-size buffer and send only
///   min(EDTL, data_length_bytes) bytes (overflow residual = data_length_bytes - EDTL).
struct CommandPlan {
  DataDirection direction = DataDirection::none;
  /// Exact number of bytes the command moves: READ/WRITE blocks × block size, INQUIRY/REPORT LUNS/
  /// MODE SENSE the allocation length, UNMAP the parameter list length, WRITE SAME one block.
  std::uint32_t transfer_length_bytes = 0;
  /// Set: the command failed validation; answer CHECK CONDITION with this sense, skip execute().
  std::optional<scsi::SenseData> error;

  // --- Everything below is private to the SCSI layer: read by execute(), not by the transport. ---
  scsi::Opcode opcode = scsi::Opcode::test_unit_ready;  ///< byte 0 of the CDB
  const LogicalUnit* unit = nullptr;  ///< the addressed logical unit; nullptr = no LU at this LUN
  std::uint64_t lba = 0;              ///< first logical block (media commands)
  std::uint64_t blocks = 0;           ///< logical blocks (media commands, after 0 → "to the end")
  bool fua = false;                   ///< FUA bit of a WRITE
  bool unmap = false;                 ///< WRITE SAME UNMAP bit
  bool ndob = false;                  ///< WRITE SAME (16) NDOB bit
};

/// The result of phase 2: SCSI status, sense and how much data-in was produced.
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
};

/// The device server of one target node: its LUN map and the command handlers.
///
/// Thread-safety: build the LUN map (add_logical_unit) before sharing; after that plan() and
/// execute() may be called concurrently from any number of threads (each session on its own
/// io_context thread). No per-I_T-nexus state is kept: no unit attentions are reported, and
/// REQUEST SENSE returns NO SENSE (autosense is always used).
class ScsiDispatcher {
 public:
  ScsiDispatcher() = default;

  /// Adds logical unit `lu` at LUN index `lun_index` (0..16383; peripheral addressing below 256,
  /// flat space addressing above, see scsi::Lun::from_index).
  /// Errors: errc::invalid_argument if the index is taken, above 16383, or lu is null.
  Result<void> add_logical_unit(std::uint16_t lun_index, std::shared_ptr<LogicalUnit> lu);

  /// The LUNs in ascending index order (as REPORT LUNS lists them).
  [[nodiscard]] std::vector<scsi::Lun> luns() const;

  /// The logical unit at `lun`, or nullptr.
  [[nodiscard]] const LogicalUnit* find(scsi::Lun lun) const noexcept;

  /// Phase 1: parses and validates `cdb` for `lun`.
  /// Parameters: `cdb`: the CDB as received (6..16 bytes or more; trailing bytes beyond the
  /// opcode's CDB length are ignored). `lun`: may name no logical unit: INQUIRY then reports
  /// peripheral qualifier 011b / type 0x1f, REPORT LUNS and REQUEST SENSE work, and anything else
  /// fails with LOGICAL UNIT NOT SUPPORTED (SPC-5 §4.6.5 / SAM-5 §5.9).
  /// Returns: the plan; `error` is set for INVALID COMMAND OPERATION CODE, INVALID FIELD IN CDB,
  /// LBA OUT OF RANGE, WRITE PROTECTED, LOGICAL UNIT NOT SUPPORTED. Never touches the backend.
  [[nodiscard]] CommandPlan plan(scsi::Lun lun, ConstByteSpan cdb) const noexcept;

  /// Phase 2: runs a command whose plan has no error.
  /// Parameters: `lun`, `cdb`: the same as given to plan(). `plan`: the value plan() returned.
  /// `data`: exactly plan.transfer_length_bytes bytes (empty when 0): for to_target the received
  /// Data-Out (read only); for from_target the buffer to fill (its content on entry is ignored).
  /// Returns: the outcome. Backend failures become CHECK CONDITION (MEDIUM ERROR / UNRECOVERED READ
  /// ERROR for reads, MEDIUM ERROR / WRITE ERROR for writes, DATA PROTECT / SPACE ALLOCATION FAILED
  /// for ENOSPC, HARDWARE ERROR / INTERNAL TARGET FAILURE otherwise). Parameter list errors
  /// (UNMAP) are found here, after the data arrived.
  /// Preconditions and lifetime: `cdb` and `data` stay valid until the awaitable completes; the
  /// dispatcher outlives the call.
  /// Executor and thread: co_await it from a coroutine on the session's io_context; backend I/O
  /// (io_uring) is driven by that io_context (see backends.hpp). Never throws except bad_alloc.
  Awaitable<ScsiOutcome> execute(scsi::Lun lun, ConstByteSpan cdb, const CommandPlan& plan, ByteSpan data) const;

 private:
  std::map<std::uint16_t, std::shared_ptr<LogicalUnit>> units_;
};

}  // namespace iserkit::target
