// errno → NBD error mapping: the one table that turns an export's std::error_code (generic/errno
// category) into the NBD_E* value sent to the client. The SCSI sense → errno half of the chain lives
// in common/scsi (errno_map); this file only maps errno → NBD.
// Spec: NBD proto.md "Error values" (NBD_ENOSPC for EDQUOT/EFBIG; NBD_ENOTSUP only for FAST_ZERO;
// NBD_EOVERFLOW only for DF reads or oversize payload-less commands; unknown → NBD_EINVAL).
// Transport errnos (ENOTCONN, ECONNRESET, ETIMEDOUT, EPIPE, …) are I/O errors: NBD_EIO.
#pragma once

#include <cstdint>
#include <system_error>

#include "nbd_bridge/protocol.hpp"

namespace iserkit::nbd {

/// Maps an error from an Export (or from request validation) to the NBD error value to send.
///
/// Parameters:
/// - `ec`: an error in the generic or system category (errno values). Errors of other categories are
///   mapped through `ec.default_error_condition()` when that lands in the generic category, and to
///   NBD_EIO otherwise. A zero `ec` maps to NbdError::ok.
/// - `command_flags`: the request's command_flag bits. ENOTSUP/EOPNOTSUPP become NBD_ENOTSUP only
///   with NBD_CMD_FLAG_FAST_ZERO and EOVERFLOW becomes NBD_EOVERFLOW only with NBD_CMD_FLAG_DF;
///   otherwise both become NBD_EINVAL, as proto.md "Error values" asks.
/// Returns: the NBD_E* value; never NbdError::ok for a nonzero `ec`.
/// Spec: NBD proto.md "Error values".
NbdError to_nbd_error(std::error_code ec, std::uint16_t command_flags = 0) noexcept;

/// The errno value an NBD error stands for (the inverse mapping, for clients and tests):
/// NBD_EPERM → EPERM, …; unknown values → EINVAL (proto.md: "treat an unexpected error value as if
/// it had been NBD_EINVAL").
std::errc to_errc(NbdError error) noexcept;

}  // namespace iserkit::nbd
