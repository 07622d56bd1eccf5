// Transmission-phase request validation (layer 1, pure): decides, from the request header and what
// the handshake negotiated, whether a request may reach the Export, and if not which NBD error the
// client gets. The rules follow proto.md; the order follows nbdkit's validate_request.
// Spec: NBD proto.md "Request types", "Command flags", "Size constraints", "Error values".
#pragma once

#include <cstdint>
#include <string_view>

#include "nbd_bridge/protocol.hpp"

namespace iserkit::nbd {

/// What a connection negotiated that request validation depends on.
struct TransmissionParams {
  std::uint64_t size_bytes = 0;               ///< export size
  std::uint16_t transmission_flags = transmission_flag::has_flags;  ///< as sent to the client
  bool structured_replies = false;            ///< NBD_OPT_STRUCTURED_REPLY was acknowledged
  bool base_allocation = false;               ///< NBD_OPT_SET_META_CONTEXT selected `base:allocation`
  std::uint32_t min_block_size_bytes = 1;     ///< alignment of offset and length (power of 2)
  std::uint32_t max_payload_bytes = 32u << 20;  ///< largest READ/WRITE length accepted
};

/// The outcome of check_request(): NbdError::ok, or the error and a short reason for the log.
struct RequestVerdict {
  NbdError error = NbdError::ok;
  std::string_view reason;  ///< static text, e.g. "offset and length out of range"
  [[nodiscard]] bool ok() const noexcept { return error == NbdError::ok; }
};

/// Validates one request header (not NBD_CMD_DISC, which the caller handles first).
///
/// Returns NbdError::ok, or per proto.md: NBD_EPERM for WRITE/TRIM/WRITE_ZEROES on a read-only
/// export; NBD_ENOSPC for WRITE/WRITE_ZEROES and NBD_EINVAL for READ/TRIM/CACHE reaching past the end;
/// NBD_EINVAL for an unknown command, an unknown or misplaced flag, FLUSH with nonzero offset/length,
/// misalignment to the minimum block size, a command whose transmission flag was not advertised, a
/// READ/WRITE longer than the maximum payload, and BLOCK_STATUS without a selected metadata context,
/// with length 0, or reaching past the end (REQ_ONE is valid only on BLOCK_STATUS).
/// A WRITE that fails validation still has its payload on the wire: the caller must consume it (or
/// hard-disconnect) before reading the next request.
RequestVerdict check_request(const RequestHeader& request, const TransmissionParams& params) noexcept;

}  // namespace iserkit::nbd
