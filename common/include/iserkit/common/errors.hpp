// The project's error codes (std::error_code category "iserkit") and is_fatal().
// SCSI status is data, not an error: see iserkit/scsi/sense.hpp for how CHECK CONDITION surfaces.
#pragma once

#include <string>
#include <system_error>

namespace iserkit {

/// Errors raised by iserkit's own protocol engines. Values are stable; add new ones at the end.
enum class errc {
  ok = 0,
  malformed_pdu = 1,           ///< a BHS/AHS/data segment that does not parse (RFC 7143 §11)
  opcode_not_allowed,          ///< an opcode not valid in the current phase (RFC 7143 §6.3)
  pdu_too_large,               ///< data segment above the negotiated MaxRecvDataSegmentLength
  header_digest_error,         ///< HeaderDigest CRC32C mismatch (RFC 7143 §7.8): connection-fatal
  data_digest_error,           ///< DataDigest CRC32C mismatch (RFC 7143 §7.8): Reject, PDU discarded
  cmd_sn_out_of_window,        ///< CmdSN outside [ExpCmdSN, MaxCmdSN] (RFC 7143 §4.2.2.1)
  protocol_error,              ///< any other violation of RFC 7143 by the peer
  negotiation_failed,          ///< text negotiation reached no agreement (RFC 7143 §6.2)
  login_failed,                ///< login response with a non-zero status class (RFC 7143 §11.13.5)
  connection_closed,           ///< the peer closed the connection or it was reset
  timeout,                     ///< an operation did not finish within its deadline
  not_supported,               ///< the request is valid but this implementation does not do it
  invalid_argument,            ///< a caller passed something out of range (e.g. a bad URL)
  session_closed,              ///< the session was logged out or failed; no new commands
  scsi_error,                  ///< a SCSI command ended with non-GOOD status (see ScsiResult)
  task_aborted,                ///< the command was aborted before it completed
  nbd_protocol_error,          ///< a malformed NBD request or option (NBD proto.md)
  authentication_failed,       ///< the peer failed CHAP authentication (RFC 7143 §12.1.3)
  session_lost,                ///< the connection failed and was not replaced within the replacement timeout
};

/// The category of iserkit::errc.
const std::error_category& iserkit_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), iserkit_category()}; }

/// True when the error means "drop the connection" (and, at ErrorRecoveryLevel 0, the session):
/// header digest errors, closed connections, timeouts and protocol errors that lose framing.
bool is_fatal(std::error_code ec) noexcept;

}  // namespace iserkit

template <>
struct std::is_error_code_enum<iserkit::errc> : std::true_type {};
