// Values of the initiator session's API that its sans-I/O engine (src/session_engine.hpp) shares:
// counters and task management requests. No Asio: session.hpp includes this header, and the
// engine includes only this one.
#pragma once

#include <chrono>
#include <cstdint>

#include "iserkit/common/serial_number.hpp"
#include "iserkit/iscsi/pdu.hpp"
#include "iserkit/scsi/lun.hpp"

namespace iserkit::initiator {

/// Counters for tests and benchmarks.
struct SessionStats {
  std::uint64_t commands_sent = 0;
  std::uint64_t commands_queued_for_window = 0;  ///< commands that waited for MaxCmdSN to open
  std::uint32_t max_in_flight_seen = 0;
  std::uint64_t data_in_bytes_placed = 0;        ///< bytes received straight into caller buffers
  std::uint64_t data_out_bytes_sent = 0;         ///< immediate + unsolicited + solicited bytes
  std::uint64_t r2ts_received = 0;
  std::uint64_t nop_in_answered = 0;
  std::uint64_t pings_sent = 0;        ///< our NOP-Out keepalive pings
  std::uint64_t pings_answered = 0;    ///< NOP-In answers to them
  // Recovery (SessionOptions::replacement_timeout):
  std::uint64_t connections_lost = 0;     ///< connections that failed while the session was open
  std::uint64_t reconnect_attempts = 0;   ///< logins tried to replace them (failed ones included)
  std::uint64_t recoveries = 0;           ///< connections replaced (session reinstated)
  std::uint64_t commands_reissued = 0;    ///< commands sent again on a new connection
  std::uint64_t unit_attentions_absorbed = 0;  ///< UNIT ATTENTION 29h after a reinstatement, retried
  /// CHECK CONDITION with UNIT ATTENTION received (SAM-5 §5.14), whether absorbed here, retried by
  /// LunHandle or handed to the caller: the target's news, not an error by itself.
  std::uint64_t unit_attentions = 0;
  /// Times the replacement timeout passed without a new connection (the session then failed its
  /// commands; with SessionOptions::reconnect_after_give_up it may recover and give up again).
  std::uint64_t gave_up = 0;
};

/// A task management request (RFC 7143 §11.5).
struct TaskManagementOptions {
  iscsi::TaskManagementFunction function = iscsi::TaskManagementFunction::logical_unit_reset;
  scsi::Lun lun;                                    ///< the logical unit it applies to
  iscsi::Itt referenced_task_tag = iscsi::reserved_itt;  ///< ABORT TASK: the task's ITT
  SerialNumber ref_cmd_sn;                          ///< ABORT TASK: the task's CmdSN
  std::chrono::milliseconds timeout{0};             ///< 0 = SessionOptions::login_timeout
};

/// The target's answer to a task management request (RFC 7143 §11.6.1 Response field).
struct TaskManagementResult {
  /// 0 function complete, 1 task does not exist, 2 LUN does not exist, 3 task still allegiant,
  /// 4 task allegiance reassignment not supported, 5 function not supported, 6 authorization
  /// failed, 255 function rejected.
  std::uint8_t response = 0;
  [[nodiscard]] bool complete() const noexcept { return response == 0; }
};

}  // namespace iserkit::initiator
