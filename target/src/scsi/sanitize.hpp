// Internal to the target's SCSI layer: SANITIZE (SBC-4 §5.30) and the sanitize operation model of
// SBC-4 §4.11: the CDB and OVERWRITE parameter list parsers, the per-logical-unit sanitize state
// (idle, in progress with its progress indication, failed: the sanitize failure mode) and which
// commands that state lets through, and the background operation that sanitizes the medium in
// bounded steps on the backend's own I/O path (1 MiB writes for OVERWRITE, 64 MiB discards for
// BLOCK ERASE), so a SANITIZE with IMMED = 1 returns at once and one with IMMED = 0, an aborted
// command or a lost session never stops it; only stop_background_operations() (target shutdown)
// does. CRYPTOGRAPHIC ERASE is not offered (nothing is encrypted): ILLEGAL REQUEST, INVALID FIELD
// IN CDB, as for any unsupported service action (SBC-4 §5.30.2.1).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/bytes.hpp"
#include "iserkit/scsi/cdb.hpp"
#include "iserkit/scsi/sense.hpp"
#include "iserkit/target/logical_unit.hpp"
#include "iserkit/target/scsi_dispatcher.hpp"
#include "scsi/device_state.hpp"

namespace iserkit::target::detail {

/// NOT READY while a sanitize operation runs: LOGICAL UNIT NOT READY, SANITIZE IN PROGRESS (SPC-5
/// table "ASC and ASCQ assignments"; SBC-4 §4.11).
inline constexpr scsi::AscPair logical_unit_not_ready_sanitize_in_progress{0x04, 0x1b};
/// MEDIUM ERROR after a failed sanitize operation: SANITIZE COMMAND FAILED (SBC-4 §4.11).
inline constexpr scsi::AscPair sanitize_command_failed{0x31, 0x03};

/// SANITIZE service actions (SBC-4 §5.30.2.1, table "SANITIZE service action codes").
enum class SanitizeAction : std::uint8_t {
  overwrite = 0x01,
  block_erase = 0x02,
  cryptographic_erase = 0x03,
  exit_failure_mode = 0x1f,
};

/// A decoded SANITIZE CDB (SBC-4 §5.30.1).
struct SanitizeCdb {
  bool immed = false;  ///< IMMED: status as soon as the CDB and parameter list are checked
  bool ause = false;   ///< AUSE: a failure may be left with EXIT FAILURE MODE (unrestricted completion)
  SanitizeAction action = SanitizeAction::overwrite;
  std::uint16_t parameter_list_length_bytes = 0;  ///< PARAMETER LIST LENGTH, bytes
};

/// Decodes and checks a SANITIZE CDB for a logical unit with `block_size_bytes` blocks that does
/// (`block_erase_supported`) or does not offer BLOCK ERASE.
/// Returns: the CDB, or ILLEGAL REQUEST / INVALID FIELD IN CDB with a field pointer for: byte 1
/// bit 6 set (ZNR: not a zoned device, so reserved here), a non-zero byte 2..6, a reserved or
/// unsupported service action (CRYPTOGRAPHIC ERASE; BLOCK ERASE when not offered), a PARAMETER
/// LIST LENGTH outside 5..block size + 4 for OVERWRITE or not 0 for the other actions (SBC-4
/// §5.30.2.1 table footnote).
scsi::SenseOr<SanitizeCdb> parse_sanitize_cdb(ConstByteSpan cdb, std::uint32_t block_size_bytes,
                                              bool block_erase_supported) noexcept;

/// The OVERWRITE parameter list (SBC-4 §5.30.2.2).
struct OverwriteParameters {
  bool invert = false;             ///< INVERT: invert the pattern between consecutive passes
  std::uint8_t overwrite_count = 1;  ///< OVERWRITE COUNT: passes, 1..31
  std::vector<std::byte> pattern;  ///< INITIALIZATION PATTERN, 1..block size bytes
};

/// Decodes an OVERWRITE parameter list of a logical unit with `block_size_bytes` blocks.
/// Returns: the parameters, or ILLEGAL REQUEST / INVALID FIELD IN PARAMETER LIST (field pointer)
/// for: TEST not 00b (the test modes are not offered), OVERWRITE COUNT 0 (reserved), a non-zero
/// reserved byte 1, INITIALIZATION PATTERN LENGTH 0 or above the block size, or a pattern longer
/// than the list carries (PARAMETER LIST LENGTH - 4 bytes).
scsi::SenseOr<OverwriteParameters> parse_overwrite_parameters(ConstByteSpan list, std::uint32_t block_size_bytes) noexcept;

/// One logical block of an OVERWRITE pass: `pattern` repeated from the block's first byte and cut
/// at its end (SBC-4 §5.30.2.2), each byte inverted when `inverted`.
std::vector<std::byte> overwrite_block(ConstByteSpan pattern, std::uint32_t block_size_bytes, bool inverted);

/// True for the pass (0-based `pass` of `count`) that writes the inverted pattern: with INVERT the
/// passes alternate and the last one writes the pattern as given (SBC-4 §5.30.2.2: the first pass
/// is inverted when OVERWRITE COUNT is even).
bool overwrite_pass_inverted(bool invert, std::uint8_t count, std::uint8_t pass) noexcept;

/// True when the logical unit offers BLOCK ERASE: its backend deallocates (discard) and
/// deallocated blocks read back as zeroes (LBPRZ), so an erased block reads GOOD (WABEREQ 01b).
bool block_erase_supported(const LogicalUnit& unit) noexcept;

/// The sanitize state of one logical unit, shared by the device server and the background
/// operation (which keeps it alive). Thread-safe: `phase` is also read without the mutex (the
/// per-command check while idle costs one atomic load); every change is made under `mutex`.
struct SanitizeState {
  enum class Phase : std::uint8_t {
    idle,         ///< no sanitize operation, none failed
    in_progress,  ///< NOT READY, SANITIZE IN PROGRESS for all but a few commands
    failed,       ///< the sanitize failure mode: MEDIUM ERROR, SANITIZE COMMAND FAILED
  };
  /// How one sanitize operation ended, for the SANITIZE command (IMMED = 0) waiting for it.
  struct Outcome {
    bool done = false;
    std::optional<scsi::SenseData> failure;  ///< nullopt: completed without error
  };
  mutable std::mutex mutex;
  std::atomic<Phase> phase{Phase::idle};
  bool ause = false;           ///< AUSE of the operation in progress or failed
  std::uint16_t progress = 0;  ///< PROGRESS INDICATION: done / 65536 of the operation in progress
  std::atomic<bool> stop{false};  ///< set by stop_background_operations(): end at the next step

  /// The sense for a command `op` in the current state, or nullopt when it may run: while in
  /// progress everything but INQUIRY, REPORT LUNS and REQUEST SENSE gets NOT READY, LOGICAL UNIT
  /// NOT READY, SANITIZE IN PROGRESS with the progress indication (SBC-4 §4.11); in the failure
  /// mode everything but those, SANITIZE and MAINTENANCE IN (REPORT SUPPORTED OPERATION CODES,
  /// REPORT TARGET PORT GROUPS) gets MEDIUM ERROR, SANITIZE COMMAND FAILED.
  [[nodiscard]] std::optional<scsi::SenseData> refuses(scsi::Opcode op) const;
  /// What REQUEST SENSE reports when no unit attention is pending: the in-progress sense with its
  /// progress, the failure sense, or nullopt (idle).
  [[nodiscard]] std::optional<scsi::SenseData> current_sense() const;
};

/// NOT READY, LOGICAL UNIT NOT READY, SANITIZE IN PROGRESS with `progress` (/ 65536) in the
/// sense-key specific bytes (SKSV = 1; SPC-5 §4.4.2.4.4 progress indication).
scsi::SenseData sanitize_in_progress_sense(std::uint16_t progress) noexcept;

/// Phase 1 of SANITIZE (called by plan(); the sanitize state checks happen in execute()).
void plan_sanitize(CommandPlan& plan, ConstByteSpan cdb) noexcept;

/// Phase 2 of SANITIZE: EXIT FAILURE MODE, or checks the parameter list, enters the in-progress
/// state, waits for writes already on the medium (`ranges`), starts the background operation on
/// the caller's executor and, with IMMED = 0, waits for it (or for plan.abort_requested).
/// `unit_owner` keeps the logical unit alive for the background operation.
Awaitable<ScsiOutcome> execute_sanitize(const CommandPlan& plan, std::shared_ptr<LogicalUnit> unit_owner,
                                        std::shared_ptr<SanitizeState> state, RangeLock& ranges, ConstByteSpan cdb,
                                        ConstByteSpan parameter_list);

}  // namespace iserkit::target::detail
