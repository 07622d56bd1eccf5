// Typed response codes of the iSCSI PDUs the session engines answer with or act on (RFC 7143 §11).
// The PDU structs (pdu.hpp) keep the wire byte (std::uint8_t) so that a peer's unknown or
// vendor-specific value survives decoding; the engines read and write these fields through the
// enums below (to_wire() / the *_of() readers), so the protocol rules name the codes instead of
// numbers. Each enumerator's value is the wire byte, so the encoding is unchanged.
//
// SCSI status is scsi::Status (SAM-5 §5.3.1, iserkit/scsi/opcodes.hpp); TMF functions are
// iscsi::TaskManagementFunction (§11.5.1) and Logout reasons iscsi::LogoutReason (§11.14.1), both
// in pdu.hpp.
#pragma once

#include <cstdint>

#include "iserkit/iscsi/pdu.hpp"
#include "iserkit/scsi/opcodes.hpp"

namespace iserkit::iscsi {

/// SCSI Response "Response" field (RFC 7143 §11.4.3). The Status field is valid only with
/// command_completed; 0x80-0xff are vendor specific (kept as their byte).
enum class ScsiResponseCode : std::uint8_t {
  command_completed = 0x00,  ///< Command Completed at Target (the Status field says how)
  target_failure = 0x01,     ///< Target Failure: the status is not valid
};

/// Task Management Function Response "Response" field (RFC 7143 §11.6.1).
enum class TaskManagementResponseCode : std::uint8_t {
  function_complete = 0,                 ///< the function was carried out
  task_does_not_exist = 1,               ///< ABORT TASK: no such task (and none moves data for it)
  lun_does_not_exist = 2,                ///< no logical unit at the LUN
  task_still_allegiant = 3,              ///< TASK REASSIGN while the task's connection is alive
  task_reassignment_not_supported = 4,   ///< task allegiance reassignment not supported (ERL < 2)
  function_not_supported = 5,            ///< Task management function not supported
  function_authorization_failed = 6,     ///< Function authorization failed
  function_rejected = 255,               ///< Function rejected
};

/// Logout Response "Response" field (RFC 7143 §11.15.1).
enum class LogoutResponseCode : std::uint8_t {
  closed_successfully = 0,                 ///< connection or session closed successfully
  cid_not_found = 1,                       ///< the CID named in the request is not a connection of the session
  connection_recovery_not_supported = 2,   ///< reason "remove the connection for recovery" at ERL < 2
  cleanup_failed = 3,                      ///< cleanup failed for various reasons
};

/// The wire byte of a response code or SCSI status (the enumerator's value).
constexpr std::uint8_t to_wire(ScsiResponseCode c) noexcept { return static_cast<std::uint8_t>(c); }
constexpr std::uint8_t to_wire(TaskManagementResponseCode c) noexcept { return static_cast<std::uint8_t>(c); }
constexpr std::uint8_t to_wire(LogoutResponseCode c) noexcept { return static_cast<std::uint8_t>(c); }
constexpr std::uint8_t to_wire(scsi::Status s) noexcept { return static_cast<std::uint8_t>(s); }

/// The Response field of a decoded SCSI Response (any byte; unnamed values stay as they are).
constexpr ScsiResponseCode response_of(const ScsiResponse& r) noexcept { return static_cast<ScsiResponseCode>(r.response); }
/// The Status field of a decoded SCSI Response (SAM-5 §5.3.1; valid only with command_completed).
constexpr scsi::Status status_of(const ScsiResponse& r) noexcept { return static_cast<scsi::Status>(r.status); }
/// The Status field of a decoded Data-In (valid only with the S bit, RFC 7143 §11.7.4).
constexpr scsi::Status status_of(const DataIn& d) noexcept { return static_cast<scsi::Status>(d.status); }
/// The Response field of a decoded Task Management Function Response.
constexpr TaskManagementResponseCode response_of(const TaskManagementResponse& r) noexcept {
  return static_cast<TaskManagementResponseCode>(r.response);
}
/// The Response field of a decoded Logout Response.
constexpr LogoutResponseCode response_of(const LogoutResponse& r) noexcept {
  return static_cast<LogoutResponseCode>(r.response);
}

/// RFC 7143 §11.6.1: after "function complete" or "task does not exist" the target moves no more
/// data for the task an ABORT TASK named (its ITT may be reused, its buffers handed back).
constexpr bool abort_task_ended(TaskManagementResponseCode c) noexcept {
  return c == TaskManagementResponseCode::function_complete || c == TaskManagementResponseCode::task_does_not_exist;
}

}  // namespace iserkit::iscsi
