// Internal to the target's SCSI layer: token copy (SBC-4 ROD token based copy, the
// Windows/Hyper-V "ODX" offload): POPULATE TOKEN (SBC-4, 83h/10h), WRITE USING TOKEN
// (SBC-4, 83h/11h), RECEIVE ROD TOKEN INFORMATION (SPC-4, SBC-4, 84h/07h) and
// the block device zero ROD token (SBC-4, ROD type FFFF0001h); the ROD token format of
// SPC-4 §5.17 (third-party copy, ROD tokens).
//
// The ROD type: point in time copy, change vulnerable (00800002h, SPC-4). A token
// stands for the data of its ranges when POPULATE TOKEN ran; it is not a snapshot: the first
// write to one of its blocks through this process (any command, from any nexus, EXTENDED COPY and
// WRITE USING TOKEN included: they all take the logical unit's RangeLock) cancels it, and WRITE
// USING TOKEN then fails with TOKEN CANCELLED (23h/08h) — also in the middle of a copy, after the
// chunk under way was checked. A token therefore never hands out data changed after POPULATE
// TOKEN. Writes that bypass the process (another program writing the backing file) are not seen.
//
// Tokens are 512 random-looking bytes: an 8-byte COPY MANAGER ROD TOKEN IDENTIFIER and 384 bytes
// (128..511) from the CSPRNG (OpenSSL RAND_bytes), compared in constant time; they live only in
// this process's memory (TokenStore::process()), bounded (token_max_total, token_max_per_nexus),
// each with an inactivity timeout. A token is usable only by a device server of the tenant that
// made it, and only while that server still holds its logical unit; anything else is TOKEN
// UNKNOWN (23h/04h), the same answer as for bytes that were never a token.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/bytes.hpp"
#include "iserkit/scsi/sense.hpp"
#include "iserkit/target/scsi_dispatcher.hpp"
#include "held_statuses.hpp"

namespace iserkit::target::detail {

class WriteWatches;  // scsi/device_state.hpp

// --- Limits (reported in the Third-party Copy VPD page, SPC-4 §7.8.17.4, .7, .8) ---

/// Bytes of a ROD token (SPC-4 §5.17, ROD tokens: ROD TOKEN LENGTH 01F8h).
inline constexpr std::size_t rod_token_bytes = 512;
/// MAXIMUM RANGE DESCRIPTORS: block device range descriptors per POPULATE TOKEN / WRITE USING TOKEN.
inline constexpr std::uint16_t token_max_range_descriptors = 64;
/// MAXIMUM BYTES IN BLOCK ROD (ROD token features) and the MAXIMUM TOKEN TRANSFER SIZE (in blocks)
/// of the block device ROD limits: bytes one token represents and one WRITE USING TOKEN writes.
inline constexpr std::uint64_t token_max_bytes = 256u << 20;
/// DEFAULT INACTIVITY TIMEOUT (seconds): INACTIVITY TIMEOUT 0 in POPULATE TOKEN.
inline constexpr std::uint32_t token_default_inactivity_seconds = 60;
/// MAXIMUM INACTIVITY TIMEOUT (seconds): a larger INACTIVITY TIMEOUT is INVALID FIELD IN PARAMETER LIST.
inline constexpr std::uint32_t token_max_inactivity_seconds = 600;
/// ROD tokens held by the process (all device servers); one more is refused (INSUFFICIENT
/// RESOURCES TO CREATE ROD TOKEN) unless an expired one makes room.
inline constexpr std::size_t token_max_total = 1024;
/// ROD tokens one I_T nexus may hold (alive, made by its POPULATE TOKENs).
inline constexpr std::size_t token_max_per_nexus = 128;
/// Largest PARAMETER LIST LENGTH of POPULATE TOKEN / WRITE USING TOKEN: what their 16-bit DATA
/// LENGTH can describe (bytes; the Data-Out buffer a peer can make the target hold per command).
inline constexpr std::uint32_t max_token_parameter_list_bytes = 0xffff + 2;
/// RECEIVE ROD TOKEN INFORMATION statuses held per device server; the oldest finished one goes
/// when a new one needs room.
inline constexpr std::size_t rod_max_held_statuses = 64;

// --- ROD types (SPC-4) and service actions ---

inline constexpr std::uint32_t rod_type_access_upon_reference = 0x00800000;
inline constexpr std::uint32_t rod_type_point_in_time_default = 0x00800001;
inline constexpr std::uint32_t rod_type_point_in_time_change_vulnerable = 0x00800002;
inline constexpr std::uint32_t rod_type_point_in_time_any = 0x0080ffff;
inline constexpr std::uint32_t rod_type_block_device_zero = 0xffff0001;
inline constexpr std::uint8_t populate_token_sa = 0x10;
inline constexpr std::uint8_t write_using_token_sa = 0x11;
inline constexpr std::uint8_t receive_rod_token_information_sa = 0x07;

// --- ASC/ASCQ (SPC-4 Annex D) ---

inline constexpr scsi::AscPair unsupported_token_type{0x23, 0x01};
inline constexpr scsi::AscPair token_unknown{0x23, 0x04};
inline constexpr scsi::AscPair token_expired{0x23, 0x07};
inline constexpr scsi::AscPair token_cancelled{0x23, 0x08};
inline constexpr scsi::AscPair token_deleted{0x23, 0x09};
inline constexpr scsi::AscPair invalid_token_length{0x23, 0x0a};
inline constexpr scsi::AscPair insufficient_resources_to_create_rod_token{0x55, 0x0d};

/// A block device range descriptor (SBC-4: LOGICAL BLOCK ADDRESS, NUMBER OF LOGICAL BLOCKS).
struct RangeDescriptor {
  std::uint64_t lba = 0;
  std::uint32_t blocks = 0;
};

/// A decoded POPULATE TOKEN parameter list (SBC-4 POPULATE TOKEN).
struct PopulateTokenParameters {
  bool immed = false;                     ///< IMMED
  bool rtv = false;                       ///< RTV: ROD TYPE is valid
  std::uint32_t inactivity_seconds = 0;   ///< INACTIVITY TIMEOUT (0: the default)
  std::uint32_t rod_type = 0;             ///< ROD TYPE (with rtv)
  std::vector<RangeDescriptor> ranges;
};

/// A decoded WRITE USING TOKEN parameter list (SBC-4 WRITE USING TOKEN).
struct WriteUsingTokenParameters {
  bool immed = false;                     ///< IMMED
  bool delete_token = false;              ///< DEL_TKN: the token is deleted when the command ends
  std::uint64_t offset_into_rod = 0;      ///< OFFSET INTO ROD (logical blocks)
  std::array<std::byte, rod_token_bytes> token{};
  std::vector<RangeDescriptor> ranges;
};

/// Decodes a POPULATE TOKEN parameter list.
/// Returns the parameters, or ILLEGAL REQUEST with PARAMETER LIST LENGTH ERROR (shorter than 16
/// bytes, or DATA LENGTH / BLOCK DEVICE RANGE DESCRIPTOR LIST LENGTH needing more than the list);
/// INVALID FIELD IN PARAMETER LIST (field pointer): INACTIVITY TIMEOUT above
/// token_max_inactivity_seconds (4), RTV with a ROD TYPE other than point in time (default,
/// change vulnerable, any) (8), a descriptor list length not a multiple of 16 or no descriptor
/// (14); TOO MANY SEGMENT DESCRIPTORS past token_max_range_descriptors. Spec: SBC-4 POPULATE TOKEN.
scsi::SenseOr<PopulateTokenParameters> parse_populate_token_parameters(ConstByteSpan list) noexcept;

/// Decodes a WRITE USING TOKEN parameter list (the ROD token is not checked here).
/// Returns the parameters, or ILLEGAL REQUEST with PARAMETER LIST LENGTH ERROR (shorter than 552
/// bytes, or the lengths needing more); INVALID FIELD IN PARAMETER LIST (534) for a descriptor
/// list length not a multiple of 16 or empty; TOO MANY SEGMENT DESCRIPTORS. Spec: SBC-4 WRITE USING TOKEN.
scsi::SenseOr<WriteUsingTokenParameters> parse_write_using_token_parameters(ConstByteSpan list) noexcept;

/// Checks `ranges` against a logical unit of `block_count` blocks: each inside the medium
/// (LOGICAL BLOCK ADDRESS OUT OF RANGE, INFORMATION = the LBA), together at most `max_blocks`
/// (INVALID FIELD IN PARAMETER LIST at the first descriptor past it, SBC-4),
/// and, with `disjoint`, no two overlapping (INVALID FIELD IN PARAMETER LIST: a destination block
/// written twice). `first_offset` is the parameter list offset of the first descriptor (field
/// pointers). Returns the total number of blocks.
scsi::SenseOr<std::uint64_t> check_ranges(const std::vector<RangeDescriptor>& ranges, std::uint64_t block_count,
                                          std::uint64_t max_blocks, bool disjoint, std::uint16_t first_offset) noexcept;

/// Fills `out` with cryptographically random bytes (OpenSSL RAND_bytes; getrandom(2) behind it).
/// Returns false when the generator failed (no token is made then).
bool random_bytes(ByteSpan out) noexcept;

/// One ROD token of the table.
struct RodToken {
  std::array<std::byte, rod_token_bytes> bytes{};
  std::string tenant;                     ///< the tenant of the device server that made it
  const void* server = nullptr;           ///< that server (ScsiDispatcher::State), for drop_server()
  std::uint64_t nexus = 0;                ///< the I_T nexus whose POPULATE TOKEN made it
  std::weak_ptr<const LogicalUnit> unit;  ///< the source logical unit
  std::uint32_t block_size_bytes = 0;
  std::vector<RangeDescriptor> ranges;    ///< the source ranges (zero-length ones dropped), in ROD order
  std::uint64_t blocks = 0;               ///< blocks the ROD represents
  std::chrono::seconds inactivity{token_default_inactivity_seconds};
  /// Set by the first write to one of the ranges (WriteWatches); never cleared.
  std::shared_ptr<std::atomic<bool>> cancelled = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<WriteWatches> watches;  ///< where `cancelled` is registered
  std::uint64_t watch_id = 0;
  // Under TokenStore's mutex:
  std::chrono::steady_clock::time_point last_used;
  int in_use = 0;                         ///< WRITE USING TOKEN commands reading it now
  bool deleted = false;                   ///< DEL_TKN ran: TOKEN DELETED until it expires

  ~RodToken();
};

/// The ROD tokens of a process: bounded, with inactivity timeouts measured on an injectable
/// clock. Thread-safe.
class TokenStore {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  explicit TokenStore(Clock clock = [] { return std::chrono::steady_clock::now(); });

  /// The table of this process (every device server shares it).
  static std::shared_ptr<TokenStore> process();

  /// Adds `token` (bytes already filled) unless the table holds token_max_total live tokens or its
  /// nexus token_max_per_nexus (expired ones are dropped first). Returns false when full.
  bool add(std::shared_ptr<RodToken> token);

  /// The outcome of a lookup.
  struct Found {
    std::shared_ptr<RodToken> token;   ///< set on success (in_use counted: call release())
    std::optional<scsi::AscPair> error;  ///< else TOKEN UNKNOWN / EXPIRED / DELETED / CANCELLED
  };
  /// Finds the token with these bytes for a device server of `tenant` (constant-time compare).
  /// A token of another tenant is TOKEN UNKNOWN; one past its inactivity timeout is TOKEN EXPIRED
  /// (and dropped); a deleted one TOKEN DELETED; a cancelled one TOKEN CANCELLED.
  Found use(ConstByteSpan bytes, std::string_view tenant);
  /// Ends a use(): the inactivity timeout starts again; `delete_token` marks it deleted.
  void release(const std::shared_ptr<RodToken>& token, bool delete_token);
  /// Drops every token made by `server` (a device server going away).
  void drop_server(const void* server);
  /// Live tokens (tests).
  std::size_t size() const;

 private:
  void drop_expired_locked(std::chrono::steady_clock::time_point now);
  Clock clock_;
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<RodToken>> tokens_;
};

/// The state of one POPULATE TOKEN / WRITE USING TOKEN for RECEIVE ROD TOKEN INFORMATION
/// (SPC-4, the RECEIVE COPY STATUS (LID4) fields).
struct RodStatus {
  enum class State : std::uint8_t {
    completed = 0x01,              ///< COPY OPERATION STATUS 01h: completed without errors
    completed_with_errors = 0x02,  ///< 02h
    in_progress = 0x10,            ///< 10h: in progress, foreground
    in_progress_background = 0x11, ///< 11h: in progress, background (IMMED = 1)
  };
  std::uint8_t service_action = 0;         ///< RESPONSE TO SERVICE ACTION
  State state = State::in_progress;
  std::uint64_t transfer_count_blocks = 0;  ///< TRANSFER COUNT (units: logical blocks, F1h)
  std::uint16_t segments_processed = 0;     ///< ranges finished
  std::optional<scsi::SenseData> sense;     ///< how it ended, with errors
  std::optional<std::array<std::byte, rod_token_bytes>> token;  ///< the token POPULATE TOKEN made
};

/// Encodes the RECEIVE ROD TOKEN INFORMATION parameter data (SPC-4).
std::vector<std::byte> encode_rod_token_information(const RodStatus& status);

/// The RECEIVE ROD TOKEN INFORMATION statuses of one device server, by I_T nexus and LIST
/// IDENTIFIER (at most rod_max_held_statuses). Thread-safe.
class RodStatuses {
 public:
  /// Registers a command of `nexus` with `list_id` in progress; false when one with that list id
  /// is still in progress for the nexus.
  bool begin(std::uint64_t nexus, std::uint32_t list_id, std::uint8_t service_action) {
    RodStatus s;
    s.service_action = service_action;
    return held_.begin(nexus, list_id, std::move(s));
  }
  /// Replaces the held status.
  void update(std::uint64_t nexus, std::uint32_t list_id, const RodStatus& status) { held_.update(nexus, list_id, status); }
  /// The held status; a finished one is handed out once, then dropped.
  std::optional<RodStatus> take(std::uint64_t nexus, std::uint32_t list_id) { return held_.take(nexus, list_id); }
  /// Drops the statuses of a nexus that ended.
  void forget(std::uint64_t nexus) { held_.forget(nexus); }

 private:
  static bool running(const RodStatus& s) noexcept {
    return s.state == RodStatus::State::in_progress || s.state == RodStatus::State::in_progress_background;
  }
  HeldStatuses<RodStatus, std::uint32_t, rod_max_held_statuses, &RodStatuses::running> held_;
};

/// Appends one third-party copy descriptor (SPC-4 §7.8.17.1) of the Third-party Copy VPD page:
/// TYPE, LENGTH, then `body` padded with zeroes to a multiple of 4 bytes (token_copy.cpp and
/// extended_copy.cpp write their descriptors through it).
void append_tpc_descriptor(std::vector<std::byte>& out, std::uint16_t type, std::vector<std::byte> body);
/// Appends the Block Device ROD Limits descriptor (0000h, SBC-4) of the Third-party Copy
/// VPD page for a logical unit of `block_size_bytes` (MAXIMUM TOKEN TRANSFER SIZE in its blocks).
void append_block_rod_limits(std::vector<std::byte>& out, std::uint32_t block_size_bytes);
/// Appends the ROD Token Features (0106h, SPC-4 §7.8.17.7, with the block device type specific
/// features) and Supported ROD Types (0108h, §7.8.17.8) descriptors of the Third-party Copy VPD page.
void append_rod_token_descriptors(std::vector<std::byte>& out);

/// Phase 1 of POPULATE TOKEN / WRITE USING TOKEN (83h/10h, 11h): PARAMETER LIST LENGTH 0 is
/// nothing to do; one too short for the header and one descriptor or above
/// max_token_parameter_list_bytes is PARAMETER LIST LENGTH ERROR before the Data-Out.
void plan_token_command(CommandPlan& plan, ConstByteSpan cdb) noexcept;
/// Phase 1 of RECEIVE ROD TOKEN INFORMATION (84h/07h): data-in of the ALLOCATION LENGTH.
void plan_receive_rod_token_information(CommandPlan& plan, ConstByteSpan cdb) noexcept;

/// Phase 2 of POPULATE TOKEN from `nexus`: checks the ranges, that the nexus may read the unit
/// (reservations were checked by plan()), makes a token of them and holds it for RECEIVE ROD
/// TOKEN INFORMATION under the CDB's LIST IDENTIFIER. Returns GOOD (also with IMMED: the token
/// exists when the status goes out), or the sense of the parsers and check_ranges(), OPERATION IN
/// PROGRESS, COPY ABORTED / INSUFFICIENT RESOURCES TO CREATE ROD TOKEN, BUSY when writes to the
/// ranges in flight do not finish within a second.
Awaitable<ScsiOutcome> execute_populate_token(const ScsiDispatcher::State& state, NexusId nexus,
                                              const CommandPlan& plan, ConstByteSpan cdb, ConstByteSpan list);
/// Phase 2 of WRITE USING TOKEN: checks the destination ranges and the token (or the block device
/// zero ROD token), then writes the destination ranges in order from block OFFSET INTO ROD of the
/// ROD with the chunk mover — inside the command, or with IMMED = 1 in the background after GOOD
/// (stopped by a logical unit reset; RECEIVE ROD TOKEN INFORMATION reports it). Returns GOOD, or:
/// the parsers' sense; DATA PROTECT / WRITE PROTECTED;
/// ILLEGAL REQUEST with INVALID TOKEN OPERATION — INVALID TOKEN LENGTH, UNSUPPORTED TOKEN TYPE,
/// TOKEN UNKNOWN/EXPIRED/DELETED/CANCELLED; INVALID FIELD IN PARAMETER LIST (8) when the ROD has
/// fewer blocks past OFFSET INTO ROD than the ranges need or the block sizes differ; COPY ABORTED /
/// TOKEN CANCELLED when a write to the source cancelled the token during the copy; OPERATION IN
/// PROGRESS; BUSY past xcopy_max_concurrent_copies; a backend error's sense.
Awaitable<ScsiOutcome> execute_write_using_token(const ScsiDispatcher::State& state, NexusId nexus,
                                                 const CommandPlan& plan, ConstByteSpan cdb, ConstByteSpan list);
/// Phase 2 of RECEIVE ROD TOKEN INFORMATION: the held status of (nexus, LIST IDENTIFIER) or
/// INVALID FIELD IN CDB (2) when none is held.
ScsiOutcome execute_receive_rod_token_information(const ScsiDispatcher::State& state, NexusId nexus,
                                                  ConstByteSpan cdb, ByteSpan out);

}  // namespace iserkit::target::detail
