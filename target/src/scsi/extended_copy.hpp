// Internal to the target's SCSI layer: the copy manager (SPC-4 §5.17 third-party copy, LID1 form):
// EXTENDED COPY (LID1, SPC-4 §6.4) with identification CSCD descriptors (E4h, SPC-4 §6.4.5.1,
// naming a logical unit by its NAA designator) and block device to block device segment
// descriptors (02h, SPC-4 §6.4.6.5), and RECEIVE COPY RESULTS (LID1, SPC-4 §6.18) COPY STATUS and
// OPERATING PARAMETERS.
//
// What a copy may reach: the logical units of the device server (ScsiDispatcher, one target node)
// the command came to, which is what the issuing I_T nexus can address (its target's LUN map), and
// those of the other target nodes of the process in the same tenant (CopyDomain) to which the same
// initiator (iSCSI name and network address) has an I_T nexus open — it logged in there, past that
// target's ACL and CHAP; their reservations are checked through that nexus. Any other designator (another tenant's LU, a
// target the initiator has not logged in to, none at all) is an unreachable copy target. Every check — descriptors, limits, designators, LBA ranges, write protection,
// reservations, a sanitize in progress — is made before the first byte moves. The data then moves
// inside the process through each logical unit's BlockBackend (read into one bounded buffer, write
// under the destination's range lock), chunk by chunk; an aborted command (ABORT TASK, a reset,
// the session's end: CommandPlan::abort_requested) stops between chunks.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <memory>
#include <mutex>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/bytes.hpp"
#include "iserkit/scsi/cdb.hpp"
#include "iserkit/scsi/sense.hpp"
#include "iserkit/target/scsi_dispatcher.hpp"
#include "held_statuses.hpp"

namespace iserkit::target::detail {

// --- The copy manager's limits (reported by RECEIVE COPY RESULTS, OPERATING PARAMETERS) ---

/// MAXIMUM CSCD DESCRIPTOR COUNT (SPC-4 §6.18.4): CSCD descriptors per EXTENDED COPY.
inline constexpr std::uint16_t xcopy_max_cscd_descriptors = 8;
/// MAXIMUM SEGMENT DESCRIPTOR COUNT: segment descriptors per EXTENDED COPY.
inline constexpr std::uint16_t xcopy_max_segment_descriptors = 16;
/// MAXIMUM DESCRIPTOR LIST LENGTH: CSCD plus segment descriptor list bytes (header excluded).
inline constexpr std::uint32_t xcopy_max_descriptor_list_bytes = 1024;
/// MAXIMUM SEGMENT LENGTH: bytes one segment descriptor may move (so one command moves at most
/// 16 × 32 MiB).
inline constexpr std::uint32_t xcopy_max_segment_bytes = 32u << 20;
/// MAXIMUM INLINE DATA LENGTH: no inline data (no inline or held data descriptors are offered).
inline constexpr std::uint32_t xcopy_max_inline_bytes = 0;
/// TOTAL CONCURRENT COPIES / MAXIMUM CONCURRENT COPIES: EXTENDED COPY commands running at once in
/// one device server; one more is answered BUSY.
inline constexpr std::uint16_t xcopy_max_concurrent_copies = 16;
/// Bytes read and written per backend call (the one buffer a running copy holds).
inline constexpr std::uint32_t xcopy_chunk_bytes = 1u << 20;
/// Copy statuses held for RECEIVE COPY RESULTS per device server; the oldest finished one goes
/// when a new one needs room.
inline constexpr std::size_t xcopy_max_held_statuses = 64;

// --- ASC/ASCQ of the copy manager (SPC-4 Annex D) ---

/// OPERATION IN PROGRESS: the LIST IDENTIFIER names a copy still running for this I_T nexus.
inline constexpr scsi::AscPair operation_in_progress{0x00, 0x16};
/// UNREACHABLE COPY TARGET: no logical unit this nexus may reach has the CSCD's designator.
inline constexpr scsi::AscPair unreachable_copy_target{0x08, 0x04};
/// COPY TARGET DEVICE NOT REACHABLE: a segment names a CSCD descriptor the list does not hold.
inline constexpr scsi::AscPair copy_target_device_not_reachable{0x0d, 0x02};
/// TOO MANY TARGET DESCRIPTORS (CSCD descriptors).
inline constexpr scsi::AscPair too_many_target_descriptors{0x26, 0x06};
/// UNSUPPORTED TARGET DESCRIPTOR TYPE CODE.
inline constexpr scsi::AscPair unsupported_target_descriptor_type_code{0x26, 0x07};
/// TOO MANY SEGMENT DESCRIPTORS.
inline constexpr scsi::AscPair too_many_segment_descriptors{0x26, 0x08};
/// UNSUPPORTED SEGMENT DESCRIPTOR TYPE CODE.
inline constexpr scsi::AscPair unsupported_segment_descriptor_type_code{0x26, 0x09};
/// INLINE DATA LENGTH EXCEEDED.
inline constexpr scsi::AscPair inline_data_length_exceeded{0x26, 0x0b};

/// LIST ID USAGE of the parameter list header (SPC-4 §6.4.3.2, table 109).
enum class ListIdUsage : std::uint8_t {
  hold = 0x0,         ///< 00b: hold the copy status for RECEIVE COPY RESULTS; LIST IDENTIFIER unique
  reserved = 0x1,     ///< 01b: reserved
  status_only = 0x2,  ///< 10b: hold the status only (no held data is offered either way)
  discard = 0x3,      ///< 11b: hold nothing; LIST IDENTIFIER not checked
};

/// An identification CSCD descriptor (E4h, SPC-4 §6.4.5.1) as received; resolved to a logical unit
/// when a segment uses it.
struct CscdDescriptor {
  std::uint16_t offset = 0;  ///< byte offset of the descriptor in the parameter list
  std::uint8_t peripheral_type = 0;  ///< PERIPHERAL DEVICE TYPE (00h: block device)
  std::uint8_t code_set = 0;         ///< designation descriptor CODE SET
  std::uint8_t association = 0;      ///< designation descriptor ASSOCIATION
  std::uint8_t designator_type = 0;  ///< designation descriptor DESIGNATOR TYPE (3h: NAA)
  std::vector<std::uint8_t> designator;  ///< DESIGNATOR, 0..20 bytes
  std::uint32_t block_length_bytes = 0;  ///< DISK BLOCK LENGTH (block device type specific parameters)
};

/// A block device to block device segment descriptor (02h, SPC-4 §6.4.6.5).
struct BlockSegment {
  std::uint16_t offset = 0;       ///< byte offset of the descriptor in the parameter list
  std::uint16_t source = 0;       ///< SOURCE CSCD DESCRIPTOR ID (an index into the CSCD list)
  std::uint16_t destination = 0;  ///< DESTINATION CSCD DESCRIPTOR ID
  std::uint16_t blocks = 0;       ///< BLOCK DEVICE NUMBER OF BLOCKS (source blocks; both sides have one block size)
  std::uint64_t source_lba = 0;
  std::uint64_t destination_lba = 0;
};

/// A decoded EXTENDED COPY (LID1) parameter list (SPC-4 §6.4.3).
struct ExtendedCopyParameters {
  std::uint8_t list_id = 0;  ///< LIST IDENTIFIER
  ListIdUsage usage = ListIdUsage::hold;
  std::vector<CscdDescriptor> cscds;
  std::vector<BlockSegment> segments;
};

/// Decodes and checks an EXTENDED COPY (LID1) parameter list of 16 bytes or more against the limits
/// above; nothing is resolved (designators, ranges: execute_extended_copy()).
/// Returns: the parameters, or ILLEGAL REQUEST with: PARAMETER LIST LENGTH ERROR when the header's
/// lengths need more bytes than the list holds or the descriptor lists exceed
/// xcopy_max_descriptor_list_bytes; INVALID FIELD IN PARAMETER LIST (field pointer) for LIST ID
/// USAGE 01b, a descriptor running past its list, a CSCD descriptor for a device other than a
/// block device, a segment descriptor of the wrong length; INLINE DATA LENGTH EXCEEDED;
/// TOO MANY TARGET DESCRIPTORS / TOO MANY SEGMENT DESCRIPTORS past the counts above;
/// UNSUPPORTED TARGET (CSCD) / SEGMENT DESCRIPTOR TYPE CODE for anything but E4h / 02h.
/// Spec: SPC-4 §6.4.3, §6.4.5, §6.4.6.5.
scsi::SenseOr<ExtendedCopyParameters> parse_extended_copy_parameters(ConstByteSpan list) noexcept;

/// The state of one copy for RECEIVE COPY RESULTS, COPY STATUS (SPC-4 §6.18.3).
struct CopyStatus {
  enum class State : std::uint8_t {
    in_progress = 0x00,            ///< COPY MANAGER STATUS 00h: operation in progress
    completed = 0x01,              ///< 01h: completed without errors
    completed_with_errors = 0x02,  ///< 02h: completed with errors
  };
  State state = State::in_progress;
  std::uint16_t segments_processed = 0;  ///< SEGMENTS PROCESSED
  std::uint64_t bytes_transferred = 0;   ///< TRANSFER COUNT (units: bytes)
};

/// Encodes the COPY STATUS parameter data (SPC-4 §6.18.3, 12 bytes; TRANSFER COUNT UNITS 00h, bytes).
std::vector<std::byte> encode_copy_status(const CopyStatus& status);

/// Encodes the OPERATING PARAMETERS parameter data (SPC-4 §6.18.4) with the limits above,
/// DATA SEGMENT GRANULARITY from `block_size_bytes` and the implemented descriptor codes 02h, E4h.
std::vector<std::byte> encode_operating_parameters(std::uint32_t block_size_bytes);

/// VPD page code of the Third-party Copy VPD page (SPC-4 §7.8.17).
inline constexpr std::uint8_t third_party_copy_vpd_page = 0x8f;

/// Encodes the payload (after the 4-byte page header) of the Third-party Copy VPD page (SPC-4
/// §7.8.17) for a logical unit of `block_size_bytes`: the Block Device ROD Limits (0000h, token
/// copy), Supported Commands (0001h: EXTENDED COPY LID1, POPULATE TOKEN, WRITE USING TOKEN,
/// RECEIVE COPY RESULTS COPY STATUS and OPERATING PARAMETERS, RECEIVE ROD TOKEN INFORMATION),
/// Parameter Data (0004h), Supported Descriptors (0008h: 02h, E4h), Supported CSCD Descriptor IDs
/// (000Ch: none above 07FFh), ROD Token Features (0106h), Supported ROD Types (0108h) and General
/// Copy Operations (8001h) descriptors, each padded to a multiple of 4 bytes; the same limits as
/// the OPERATING PARAMETERS and token_copy.hpp.
std::vector<std::byte> encode_third_party_copy_vpd(std::uint32_t block_size_bytes);

/// The copy manager's state of one device server: the statuses held for RECEIVE COPY RESULTS (by
/// I_T nexus and LIST IDENTIFIER) and the number of copies running. Thread-safe.
class CopyManager {
 public:
  /// Registers a copy of `nexus` with `list_id` as in progress. Returns false when one with that
  /// list id is still in progress for the nexus (OPERATION IN PROGRESS).
  bool begin(std::uint64_t nexus, std::uint8_t list_id) { return held_.begin(nexus, list_id, CopyStatus{}); }
  /// Updates the held status of a copy begin() registered.
  void update(std::uint64_t nexus, std::uint8_t list_id, const CopyStatus& status) { held_.update(nexus, list_id, status); }
  /// The held status of (`nexus`, `list_id`), or nullopt. A finished status is handed out once and
  /// then dropped (SPC-4 §6.18.3: held until it is sent).
  std::optional<CopyStatus> take(std::uint64_t nexus, std::uint8_t list_id) { return held_.take(nexus, list_id); }
  /// Drops the statuses of a nexus that ended.
  void forget(std::uint64_t nexus) { held_.forget(nexus); }
  /// Counts a copy as running unless xcopy_max_concurrent_copies are; false = refuse it (BUSY).
  bool try_start() noexcept;
  /// Ends what try_start() counted.
  void finish() noexcept;

 private:
  static bool running(const CopyStatus& s) noexcept { return s.state == CopyStatus::State::in_progress; }
  HeldStatuses<CopyStatus, std::uint8_t, xcopy_max_held_statuses, &CopyManager::running> held_;
  std::atomic<std::uint32_t> running_{0};
};

struct UnitState;      // scsi/device_state.hpp
class RangeLock;       // scsi/device_state.hpp
struct SanitizeState;  // scsi/sanitize.hpp

/// Fills the destination fields of `m` from `unit` (its backend, range lock, sanitize state, counters).
struct BlockMove;
void set_destination(BlockMove& m, UnitState& unit) noexcept;

/// One run of blocks for move_blocks(): `blocks` blocks of `block_size_bytes` from `source_lba`
/// of `source` to `destination_lba` of `destination` (both one block size; ranges checked).
struct BlockMove {
  BlockBackend* source = nullptr;  ///< nullptr: write zeroes (the block device zero ROD token)
  std::uint64_t source_lba = 0;
  BlockBackend* destination = nullptr;
  RangeLock* destination_ranges = nullptr;             ///< the destination LU's range lock
  const SanitizeState* destination_sanitize = nullptr;  ///< and its sanitize state
  LogicalUnitStats* destination_stats = nullptr;  ///< and its counters (copy_bytes_*); may be null
  std::uint64_t destination_lba = 0;
  std::uint64_t blocks = 0;
  std::uint32_t block_size_bytes = 0;
  bool backwards = false;  ///< copy the last chunk first (an overlapping destination above the source)
};

/// What a caller of move_blocks() adds to the move.
struct MoveHooks {
  scsi::SenseData aborted;  ///< the sense when the task is aborted between chunks
  /// Called after each chunk was read, before it is written; a returned outcome ends the move.
  std::function<std::optional<ScsiOutcome>()> after_read;
  /// Called after each chunk was written with its block count (progress).
  std::function<void(std::uint64_t)> moved;
  /// Checked with plan.abort_requested before each chunk (a background copy's stop); may be empty.
  std::function<bool()> stopped;
};

/// How move_blocks() moves one chunk that has a source.
enum class ChunkPath : std::uint8_t {
  in_kernel,   ///< BlockBackend::copy_from() on the destination: no user-space buffer
  user_space,  ///< read from the source into the copy's buffer, then written from it
};

/// The path move_blocks() tries first for the chunk of `blocks` blocks at block `first` of `m`:
/// in_kernel when the destination's backend can copy in the kernel
/// (BackendCapabilities::can_copy_in_kernel), the move has not been refused it before (`refused`:
/// an earlier copy_from() of this move answered EOPNOTSUPP, EXDEV or EINVAL) and, on one backend,
/// the chunk's source and destination blocks do not overlap (memmove: a chunk is read whole
/// before it is written; a pipe holds only part of it); user_space otherwise, and for zeroes (no
/// source). The backend may still refuse the chunk (another kind of source): then it goes through
/// the buffer, and so does the rest of the move.
ChunkPath chunk_path(const BlockMove& m, std::uint64_t first, std::uint64_t blocks, bool refused) noexcept;

/// The copy manager's chunk mover (EXTENDED COPY segments, WRITE USING TOKEN ranges): moves
/// `m.blocks` in chunks of at most buffer.size() bytes, each by chunk_path(): in the kernel
/// (destination.copy_from(source), under the destination's range lock, with after_read checked
/// after each part was read and before it is written) or through `buffer` (read from the source's
/// backend, then written under the destination's range lock), or zeroes (write_zeroes, no source).
/// The range lock cancels the ROD tokens of those blocks and waits for COMPARE AND WRITE; a
/// sanitize that started meanwhile is checked under it. Between chunks it stops when
/// plan.abort_requested or hooks.stopped() and yields to the io_context. Counts the bytes of each
/// chunk in m.destination_stats (copy_bytes_in_kernel or copy_bytes_user_space).
/// Returns nullopt when every block moved, else the outcome to end the command with (a backend
/// error's sense, SANITIZE IN PROGRESS, hooks.aborted, after_read's).
Awaitable<std::optional<ScsiOutcome>> move_blocks(const CommandPlan& plan, const BlockMove& m, ByteSpan buffer,
                                                  const MoveHooks& hooks);

/// Phase 1 of EXTENDED COPY (LID1): service action 00h only; PARAMETER LIST LENGTH 0 (nothing to
/// do), 16..16 + xcopy_max_descriptor_list_bytes, or PARAMETER LIST LENGTH ERROR before any data moves.
void plan_extended_copy(CommandPlan& plan, ConstByteSpan cdb) noexcept;
/// Phase 1 of RECEIVE COPY RESULTS (LID1): COPY STATUS (00h) and OPERATING PARAMETERS (03h); other
/// service actions get INVALID FIELD IN CDB.
void plan_receive_copy_results(CommandPlan& plan, ConstByteSpan cdb) noexcept;

/// Phase 2 of EXTENDED COPY from `nexus` with parameter list `list`: parses it, resolves every
/// CSCD a segment uses among `state`'s logical units and those of its copy domain the initiator
/// reaches, checks every segment, then copies.
/// Returns GOOD, or: the ILLEGAL REQUEST of parse_extended_copy_parameters(); COPY ABORTED with
/// UNREACHABLE COPY TARGET (no reachable LU has the designator), COPY TARGET DEVICE NOT REACHABLE
/// (a CSCD index past the list), or NO ADDITIONAL SENSE with a segment pointer (an LBA range past
/// the end of either logical unit); ILLEGAL REQUEST / INVALID FIELD IN PARAMETER LIST for a DISK
/// BLOCK LENGTH other than the unit's, differing block sizes, a segment above
/// xcopy_max_segment_bytes; DATA PROTECT / WRITE PROTECTED for a write-protected destination;
/// RESERVATION CONFLICT when a reservation bars the nexus from reading the source or writing the
/// destination; OPERATION IN PROGRESS; BUSY past xcopy_max_concurrent_copies; a backend error's
/// sense. No byte is written before all of these checks passed.
/// Spec: SPC-4 §6.4, §5.17.
Awaitable<ScsiOutcome> execute_extended_copy(const ScsiDispatcher::State& state, NexusId nexus, const CommandPlan& plan,
                                             ConstByteSpan list);
/// Phase 2 of RECEIVE COPY RESULTS: the held COPY STATUS of (`nexus`, LIST IDENTIFIER) or INVALID
/// FIELD IN CDB (byte 2) when none is held; the OPERATING PARAMETERS. Spec: SPC-4 §6.18.
ScsiOutcome execute_receive_copy_results(const ScsiDispatcher::State& state, NexusId nexus, const CommandPlan& plan,
                                         ConstByteSpan cdb, ByteSpan out);

}  // namespace iserkit::target::detail
