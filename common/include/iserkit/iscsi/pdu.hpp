// iSCSI PDU codec (layer 1): the 48-byte Basic Header Segment of every opcode both ends use, the
// Additional Header Segments, and the framing lengths. Pure functions over bytes; no I/O.
// RFC 7143 §11 (PDU formats), §11.2 (BHS layout), §11.2.1.5 (AHS).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <variant>
#include <vector>

#include "iserkit/common/bytes.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/common/result.hpp"
#include "iserkit/common/serial_number.hpp"
#include "iserkit/scsi/lun.hpp"

namespace iserkit::iscsi {

/// Size of the Basic Header Segment in bytes (RFC 7143 §11.2).
inline constexpr std::size_t bhs_size = 48;
/// The 48 raw bytes of a BHS.
using Bhs = std::array<std::byte, bhs_size>;

/// Opcodes (RFC 7143 §11.2.1.2). Initiator opcodes are 0x00-0x1f, target opcodes 0x20-0x3f.
enum class Opcode : std::uint8_t {
  nop_out = 0x00,
  scsi_command = 0x01,
  task_management_request = 0x02,
  login_request = 0x03,
  text_request = 0x04,
  data_out = 0x05,
  logout_request = 0x06,
  snack_request = 0x10,
  nop_in = 0x20,
  scsi_response = 0x21,
  task_management_response = 0x22,
  login_response = 0x23,
  text_response = 0x24,
  data_in = 0x25,
  logout_response = 0x26,
  r2t = 0x31,
  async_message = 0x32,
  reject = 0x3f,
};

/// A short lowercase name for logs ("scsi_command", "data_in", …); "unknown" for anything else.
std::string_view opcode_name(std::uint8_t opcode) noexcept;

/// Initiator Task Tag (RFC 7143 §11.2.1.8). 0xffffffff is reserved (unsolicited NOP-In, Async, Reject).
enum class Itt : std::uint32_t {};
/// Target Transfer Tag (RFC 7143 §11.7.4). 0xffffffff means "none".
enum class Ttt : std::uint32_t {};
inline constexpr Itt reserved_itt{0xffffffffu};
inline constexpr Ttt reserved_ttt{0xffffffffu};
inline constexpr std::uint32_t to_u32(Itt t) noexcept { return static_cast<std::uint32_t>(t); }
inline constexpr std::uint32_t to_u32(Ttt t) noexcept { return static_cast<std::uint32_t>(t); }

// ---- Fields every BHS carries (RFC 7143 §11.2.1) ----

/// The opcode byte's low six bits.
inline std::uint8_t raw_opcode(const Bhs& b) noexcept { return static_cast<std::uint8_t>(b[0]) & 0x3f; }
/// The I (immediate delivery) bit, meaningful on initiator PDUs.
inline bool immediate_bit(const Bhs& b) noexcept { return (static_cast<std::uint8_t>(b[0]) & 0x40) != 0; }
/// TotalAHSLength in 4-byte words (byte 4).
inline std::uint8_t total_ahs_length_words(const Bhs& b) noexcept { return static_cast<std::uint8_t>(b[4]); }
/// DataSegmentLength in bytes, excluding padding (bytes 5-7).
inline std::uint32_t data_segment_length_bytes(const Bhs& b) noexcept { return load_be24(&b[5]); }
/// The Initiator Task Tag (bytes 16-19).
inline Itt itt_of(const Bhs& b) noexcept { return Itt{load_be32(&b[16])}; }
/// Sets TotalAHSLength and DataSegmentLength; the encoders leave them zero.
inline void set_lengths(Bhs& b, std::uint8_t total_ahs_length_words, std::uint32_t data_segment_length_bytes) noexcept {
  b[4] = static_cast<std::byte>(total_ahs_length_words);
  store_be24(&b[5], data_segment_length_bytes);
}
/// Bytes of padding after a data segment of `n` bytes (RFC 7143 §11.1: segments end on 4-byte boundaries).
inline constexpr std::uint32_t padding_for(std::uint32_t n) noexcept { return (4 - (n & 3)) & 3; }

// ---- Initiator PDUs ----

/// NOP-Out (RFC 7143 §11.18). A ping (ITT ≠ reserved) or the answer to a NOP-In (TTT ≠ reserved).
struct NopOut {
  bool immediate = true;
  scsi::Lun lun;
  Itt itt = reserved_itt;
  Ttt ttt = reserved_ttt;
  SerialNumber cmd_sn;
  SerialNumber exp_stat_sn;
};

/// Task attribute of a SCSI Command (RFC 7143 §11.3.1.2, SAM-5).
enum class TaskAttribute : std::uint8_t { untagged = 0, simple = 1, ordered = 2, head_of_queue = 3, aca = 4 };

/// SCSI Command (RFC 7143 §11.3). CDBs longer than 16 bytes continue in an Extended CDB AHS.
struct ScsiCommand {
  bool immediate = false;
  bool final = true;   ///< F: no unsolicited Data-Out follows
  bool read = false;   ///< R: data moves target → initiator
  bool write = false;  ///< W: data moves initiator → target
  TaskAttribute attribute = TaskAttribute::simple;
  scsi::Lun lun;
  Itt itt{0};
  std::uint32_t expected_data_transfer_length = 0;  ///< bytes
  SerialNumber cmd_sn;
  SerialNumber exp_stat_sn;
  std::array<std::byte, 16> cdb{};  ///< first 16 CDB bytes, zero-padded
};

/// Task management functions (RFC 7143 §11.5.1).
enum class TaskManagementFunction : std::uint8_t {
  abort_task = 1, abort_task_set = 2, clear_aca = 3, clear_task_set = 4, logical_unit_reset = 5,
  target_warm_reset = 6, target_cold_reset = 7, task_reassign = 8,
};

/// Task Management Function Request (RFC 7143 §11.5).
struct TaskManagementRequest {
  bool immediate = true;
  TaskManagementFunction function = TaskManagementFunction::abort_task;
  scsi::Lun lun;
  Itt itt{0};
  Itt referenced_task_tag = reserved_itt;
  SerialNumber cmd_sn;
  SerialNumber exp_stat_sn;
  SerialNumber ref_cmd_sn;
  std::uint32_t exp_data_sn = 0;
};

/// Login stages (RFC 7143 §11.12.3): CSG and NSG values.
enum class LoginStage : std::uint8_t { security_negotiation = 0, operational_negotiation = 1, full_feature_phase = 3 };

/// Login Request (RFC 7143 §11.12). Always sent with the I bit set.
struct LoginRequest {
  bool transit = false;   ///< T
  bool continue_ = false; ///< C: text continues in the next PDU
  LoginStage csg = LoginStage::security_negotiation;
  LoginStage nsg = LoginStage::security_negotiation;
  std::uint8_t version_max = 0;
  std::uint8_t version_min = 0;
  std::array<std::byte, 6> isid{};
  std::uint16_t tsih = 0;
  Itt itt{0};
  std::uint16_t cid = 0;
  SerialNumber cmd_sn;
  SerialNumber exp_stat_sn;
};

/// Text Request (RFC 7143 §11.10).
struct TextRequest {
  bool immediate = false;
  bool final = true;
  bool continue_ = false;
  scsi::Lun lun;
  Itt itt{0};
  Ttt ttt = reserved_ttt;
  SerialNumber cmd_sn;
  SerialNumber exp_stat_sn;
};

/// SCSI Data-Out (RFC 7143 §11.7).
struct DataOut {
  bool final = false;
  scsi::Lun lun;
  Itt itt{0};
  Ttt ttt = reserved_ttt;
  SerialNumber exp_stat_sn;
  std::uint32_t data_sn = 0;
  std::uint32_t buffer_offset = 0;  ///< bytes
};

/// Logout reason codes (RFC 7143 §11.14.1).
enum class LogoutReason : std::uint8_t { close_session = 0, close_connection = 1, remove_connection_for_recovery = 2 };

/// Logout Request (RFC 7143 §11.14).
struct LogoutRequest {
  bool immediate = false;
  LogoutReason reason = LogoutReason::close_session;
  Itt itt{0};
  std::uint16_t cid = 0;
  SerialNumber cmd_sn;
  SerialNumber exp_stat_sn;
};

/// SNACK Request (RFC 7143 §11.16). Parsed so a target can answer it; not sent at ErrorRecoveryLevel 0.
struct SnackRequest {
  std::uint8_t type = 0;
  scsi::Lun lun;
  Itt itt = reserved_itt;
  Ttt ttt = reserved_ttt;
  SerialNumber exp_stat_sn;
  std::uint32_t beg_run = 0;
  std::uint32_t run_length = 0;
};

// ---- Target PDUs ----

/// NOP-In (RFC 7143 §11.19): the answer to a NOP-Out ping, or a target ping (TTT ≠ reserved).
struct NopIn {
  scsi::Lun lun;
  Itt itt = reserved_itt;
  Ttt ttt = reserved_ttt;
  SerialNumber stat_sn;
  SerialNumber exp_cmd_sn;
  SerialNumber max_cmd_sn;
};

/// SCSI Response (RFC 7143 §11.4). The data segment holds SenseLength (2 bytes) + sense data.
struct ScsiResponse {
  bool bidi_read_residual_overflow = false;   ///< o
  bool bidi_read_residual_underflow = false;  ///< u
  bool residual_overflow = false;             ///< O
  bool residual_underflow = false;            ///< U
  std::uint8_t response = 0;  ///< 0x00 command completed at target, 0x01 target failure
  std::uint8_t status = 0;    ///< SCSI status (SAM-5), valid when response = 0
  Itt itt{0};
  std::uint32_t snack_tag = 0;
  SerialNumber stat_sn;
  SerialNumber exp_cmd_sn;
  SerialNumber max_cmd_sn;
  std::uint32_t exp_data_sn = 0;
  std::uint32_t bidi_read_residual_count = 0;
  std::uint32_t residual_count = 0;  ///< bytes
};

/// Task Management Function Response (RFC 7143 §11.6).
struct TaskManagementResponse {
  std::uint8_t response = 0;  ///< 0 function complete, 1 task does not exist, … 255 rejected
  Itt itt{0};
  SerialNumber stat_sn;
  SerialNumber exp_cmd_sn;
  SerialNumber max_cmd_sn;
};

/// Login Response (RFC 7143 §11.13).
struct LoginResponse {
  bool transit = false;
  bool continue_ = false;
  LoginStage csg = LoginStage::security_negotiation;
  LoginStage nsg = LoginStage::security_negotiation;
  std::uint8_t version_max = 0;
  std::uint8_t version_active = 0;
  std::array<std::byte, 6> isid{};
  std::uint16_t tsih = 0;
  Itt itt{0};
  SerialNumber stat_sn;
  SerialNumber exp_cmd_sn;
  SerialNumber max_cmd_sn;
  std::uint8_t status_class = 0;   ///< RFC 7143 §11.13.5: 0 success, 1 redirect, 2 initiator error, 3 target error
  std::uint8_t status_detail = 0;
};

/// Text Response (RFC 7143 §11.11).
struct TextResponse {
  bool final = true;
  bool continue_ = false;
  scsi::Lun lun;
  Itt itt{0};
  Ttt ttt = reserved_ttt;
  SerialNumber stat_sn;
  SerialNumber exp_cmd_sn;
  SerialNumber max_cmd_sn;
};

/// SCSI Data-In (RFC 7143 §11.7). With the S bit it also carries the status (no SCSI Response follows).
struct DataIn {
  bool final = false;         ///< F
  bool acknowledge = false;   ///< A (ErrorRecoveryLevel > 0 only)
  bool residual_overflow = false;   ///< O, valid with S
  bool residual_underflow = false;  ///< U, valid with S
  bool status_present = false;      ///< S
  std::uint8_t status = 0;          ///< valid with S
  scsi::Lun lun;
  Itt itt{0};
  Ttt ttt = reserved_ttt;
  SerialNumber stat_sn;       ///< valid with S (RFC 7143 §11.7.5)
  SerialNumber exp_cmd_sn;
  SerialNumber max_cmd_sn;
  std::uint32_t data_sn = 0;
  std::uint32_t buffer_offset = 0;  ///< bytes
  std::uint32_t residual_count = 0; ///< bytes, valid with S
};

/// Logout Response (RFC 7143 §11.15).
struct LogoutResponse {
  std::uint8_t response = 0;  ///< 0 closed successfully, 1 CID not found, 2 recovery not supported, 3 cleanup failed
  Itt itt{0};
  SerialNumber stat_sn;
  SerialNumber exp_cmd_sn;
  SerialNumber max_cmd_sn;
  std::uint16_t time2wait = 0;    ///< seconds
  std::uint16_t time2retain = 0;  ///< seconds
};

/// Ready To Transfer (RFC 7143 §11.8).
struct R2t {
  scsi::Lun lun;
  Itt itt{0};
  Ttt ttt{0};
  SerialNumber stat_sn;
  SerialNumber exp_cmd_sn;
  SerialNumber max_cmd_sn;
  std::uint32_t r2t_sn = 0;
  std::uint32_t buffer_offset = 0;                  ///< bytes
  std::uint32_t desired_data_transfer_length = 0;   ///< bytes
};

/// Asynchronous Message events (RFC 7143 §11.9.1).
enum class AsyncEvent : std::uint8_t {
  scsi_async_event = 0, logout_request = 1, drop_connection = 2, drop_all_connections = 3,
  request_text_negotiation = 4, vendor_specific = 255,
};

/// Asynchronous Message (RFC 7143 §11.9). The data segment carries sense data for event 0.
struct AsyncMessage {
  scsi::Lun lun;
  SerialNumber stat_sn;
  SerialNumber exp_cmd_sn;
  SerialNumber max_cmd_sn;
  AsyncEvent event = AsyncEvent::scsi_async_event;
  std::uint8_t vcode = 0;
  std::uint16_t parameter1 = 0;
  std::uint16_t parameter2 = 0;
  std::uint16_t parameter3 = 0;
};

/// Reject reasons (RFC 7143 §11.17.1).
enum class RejectReason : std::uint8_t {
  data_digest_error = 0x02, snack_reject = 0x03, protocol_error = 0x04, command_not_supported = 0x05,
  immediate_command_reject = 0x06, task_in_progress = 0x07, invalid_data_ack = 0x08,
  invalid_pdu_field = 0x09, long_operation_reject = 0x0a, deprecated = 0x0b, waiting_for_logout = 0x0c,
};

/// Reject (RFC 7143 §11.17). The data segment is the rejected PDU's BHS.
struct Reject {
  RejectReason reason = RejectReason::protocol_error;
  SerialNumber stat_sn;
  SerialNumber exp_cmd_sn;
  SerialNumber max_cmd_sn;
  std::uint32_t data_sn_or_r2t_sn = 0;
};

/// Any decoded BHS.
using PduHeader = std::variant<NopOut, ScsiCommand, TaskManagementRequest, LoginRequest, TextRequest, DataOut,
                               LogoutRequest, SnackRequest, NopIn, ScsiResponse, TaskManagementResponse,
                               LoginResponse, TextResponse, DataIn, LogoutResponse, R2t, AsyncMessage, Reject>;

/// Encodes a header into a BHS with TotalAHSLength = DataSegmentLength = 0 (see set_lengths).
/// Reserved fields are zero, as RFC 7143 §11.2 requires of senders.
Bhs encode_bhs(const PduHeader& header) noexcept;

/// Decodes a BHS into its typed header. Returns errc::malformed_pdu for an opcode this codec does
/// not know (the caller answers with Reject "command not supported", RFC 7143 §11.17.1).
/// Reserved fields are ignored, as RFC 7143 §11.2 asks of receivers.
Result<PduHeader> decode_bhs(const Bhs& bhs) noexcept;

/// Decodes a BHS known to carry `T`; errc::malformed_pdu when the opcode differs.
template <class T>
Result<T> decode_bhs_as(const Bhs& bhs) noexcept {
  auto h = decode_bhs(bhs);
  if (!h) return tl::unexpected<std::error_code>(h.error());
  if (auto* p = std::get_if<T>(&*h)) return *p;
  return tl::unexpected<std::error_code>(make_error_code(errc::malformed_pdu));
}

// ---- Additional Header Segments (RFC 7143 §11.2.1.5) ----

/// AHS types (RFC 7143 §11.2.2.1).
enum class AhsType : std::uint8_t { extended_cdb = 1, bidirectional_read_length = 2 };

/// One AHS: its type and specific bytes (without the 3-byte AHS header, without padding).
struct Ahs {
  AhsType type = AhsType::extended_cdb;
  std::vector<std::byte> specific;  ///< type-specific bytes after the reserved byte
};

/// Encodes AHS segments back to back, each padded to 4 bytes (RFC 7143 §11.2.2). The result's size
/// divided by 4 is TotalAHSLength.
std::vector<std::byte> encode_ahs(std::span<const Ahs> segments);

/// Parses the AHS area (TotalAHSLength × 4 bytes). errc::malformed_pdu when a segment overruns it.
Result<std::vector<Ahs>> decode_ahs(ConstByteSpan area);

/// The AHS carrying CDB bytes 16… of a CDB longer than 16 bytes (RFC 7143 §11.2.2.3).
Ahs extended_cdb_ahs(ConstByteSpan cdb_tail);

}  // namespace iserkit::iscsi
