// Error codes the initiator adds to iserkit::errc: SCSI status/sense as an error_code category
// (SAM-5 §5.3 status, SPC-5 §4.4 sense), mapped to errno through scsi/errno_map.hpp, and the
// login status class/detail category (RFC 7143 §11.13.5). Layer 6 (public API).
//
// Error model: transport and protocol failures are iserkit::errc (connection_closed, timeout,
// protocol_error, session_closed, not_supported, invalid_argument…); a SCSI command that ends
// with a status other than GOOD is data (scsi::ScsiResult) until someone calls check(), which gives
// an error_code in scsi_status_category() whose value encodes status, sense key, ASC and ASCQ.
#pragma once

#include <cstdint>
#include <optional>
#include <system_error>

#include "iserkit/common/result.hpp"
#include "iserkit/scsi/sense.hpp"

namespace iserkit::initiator {

/// The category of SCSI command failures ("iserkit.scsi"). Value layout:
/// status << 24 | sense key << 16 | ASC << 8 | ASCQ (sense bytes are 0 without sense data).
/// message() reads like "CHECK CONDITION: sense=5/24/00 ILLEGAL REQUEST: Invalid field in cdb" (sense
/// key and ASC/ASCQ texts from libsgutils2, scsi/sense_text.hpp).
/// default_error_condition() is the errno of scsi::errno_for() in std::generic_category(), so
/// `ec == std::errc::read_only_file_system` works for WRITE PROTECTED.
const std::error_category& scsi_status_category() noexcept;

/// The error_code for a finished command; an empty code for GOOD and CONDITION MET.
std::error_code make_scsi_error(const scsi::ScsiResult& result) noexcept;

/// Success for GOOD/CONDITION MET, else make_scsi_error(result). Use this rather than
/// ScsiResult::check() when the caller wants to keep the sense (check() returns a bare errno).
Result<void> check(const scsi::ScsiResult& result) noexcept;

/// True when `ec` came from make_scsi_error().
bool is_scsi_error(std::error_code ec) noexcept;
/// The SCSI status carried by a SCSI error code; nullopt for other categories.
std::optional<scsi::Status> status_of(std::error_code ec) noexcept;
/// Sense key/ASC/ASCQ carried by a SCSI error code (information fields are not kept); nullopt for
/// other categories or a status without sense.
std::optional<scsi::SenseData> sense_of(std::error_code ec) noexcept;

/// The errno for any initiator error: SCSI errors through scsi::errno_for(); errc::timeout →
/// ETIMEDOUT; connection_closed/session_closed → ENOTCONN; invalid_argument → EINVAL;
/// not_supported → EOPNOTSUPP; login failures → EACCES; everything else → EIO.
/// generic/system category codes keep their value.
int to_errno(std::error_code ec) noexcept;

/// The category of login failures ("iserkit.login"): value = status class << 8 | status detail
/// (RFC 7143 §11.13.5). message() reads like "status=0x0201 authorization failure (initiator error)".
const std::error_category& login_status_category() noexcept;
/// The error_code for a Login Response with a non-zero status class.
std::error_code make_login_error(std::uint8_t status_class, std::uint8_t status_detail) noexcept;

}  // namespace iserkit::initiator
