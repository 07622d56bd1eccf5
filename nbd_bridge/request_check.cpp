// Transmission-phase request validation (see request_check.hpp).
// Spec: NBD proto.md "Request types", "Command flags", "Size constraints", "Error values".
#include "nbd_bridge/request_check.hpp"

namespace iserkit::nbd {
namespace {

constexpr std::uint16_t known_command_flags = command_flag::fua | command_flag::no_hole | command_flag::df |
                                              command_flag::req_one | command_flag::fast_zero;

bool has(std::uint16_t flags, std::uint16_t bit) noexcept { return (flags & bit) != 0; }

}  // namespace

RequestVerdict check_request(const RequestHeader& request, const TransmissionParams& params) noexcept {
  const auto command = static_cast<Command>(request.type);
  const std::uint16_t tflags = params.transmission_flags;
  const bool is_write = command == Command::write || command == Command::write_zeroes || command == Command::trim;

  // proto.md "Error values": NBD_EPERM for a write or trim request on a read-only export.
  if (is_write && has(tflags, transmission_flag::read_only)) {
    return {NbdError::perm, "write request on a read-only export"};
  }

  switch (command) {
    case Command::read:
    case Command::write:
    case Command::trim:
    case Command::write_zeroes:
    case Command::cache:
    case Command::block_status: {
      // proto.md "Size constraints": offset + length MUST NOT exceed the export size; the server
      // SHOULD answer NBD_ENOSPC for writes (and write zeroes) and NBD_EINVAL otherwise.
      const bool past_end = request.offset_bytes > params.size_bytes ||
                            request.length_bytes > params.size_bytes - request.offset_bytes;
      if (past_end) {
        const bool writes = command == Command::write || command == Command::write_zeroes;
        return {writes ? NbdError::nospc : NbdError::inval, "offset and length out of range"};
      }
      break;
    }
    case Command::flush:
      // proto.md NBD_CMD_FLUSH: length and offset are reserved and MUST be zero.
      if (request.offset_bytes != 0 || request.length_bytes != 0) {
        return {NbdError::inval, "flush with nonzero offset or length"};
      }
      break;
    case Command::disc:
    default:
      // proto.md "Error values": NBD_EINVAL for an unknown command.
      return {NbdError::inval, "unknown command"};
  }

  if (command == Command::block_status) {
    // proto.md NBD_CMD_BLOCK_STATUS: the client MUST NOT send it unless it selected a context with
    // NBD_OPT_SET_META_CONTEXT (which needs structured replies); a zero length is invalid.
    if (!params.base_allocation || !params.structured_replies) {
      return {NbdError::inval, "block status without a negotiated metadata context"};
    }
    if (request.length_bytes == 0) return {NbdError::inval, "block status with length 0"};
  }

  // proto.md "Command flags" / "Error values": unknown flags and flags not documented for the
  // command get NBD_EINVAL.
  const std::uint16_t flags = request.flags;
  if (flags & ~known_command_flags) return {NbdError::inval, "unknown command flag"};
  if (has(flags, command_flag::no_hole) && command != Command::write_zeroes) {
    return {NbdError::inval, "NO_HOLE flag on a command other than WRITE_ZEROES"};
  }
  // proto.md: without NBD_FLAG_SEND_FAST_ZERO the server SHOULD fail FAST_ZERO with NBD_EINVAL.
  if (has(flags, command_flag::fast_zero) &&
      (command != Command::write_zeroes || !has(tflags, transmission_flag::send_fast_zero))) {
    return {NbdError::inval, "FAST_ZERO flag not negotiated"};
  }
  if (has(flags, command_flag::df) &&
      (command != Command::read || !params.structured_replies || !has(tflags, transmission_flag::send_df))) {
    return {NbdError::inval, "DF flag without structured replies or on a command other than READ"};
  }
  if (has(flags, command_flag::req_one) && command != Command::block_status) {
    return {NbdError::inval, "REQ_ONE flag on a command other than BLOCK_STATUS"};
  }
  // proto.md: FUA is valid on every command once NBD_FLAG_SEND_FUA was advertised (and then ignored
  // where nothing is written); without it, the flag is invalid.
  if (has(flags, command_flag::fua) && !has(tflags, transmission_flag::send_fua)) {
    return {NbdError::inval, "FUA flag not negotiated"};
  }

  // proto.md "Size constraints": offset and length MUST be multiples of the minimum block size;
  // the server SHOULD report NBD_EINVAL otherwise.
  if (command != Command::flush && params.min_block_size_bytes > 1) {
    const std::uint64_t mask = params.min_block_size_bytes - 1;
    if ((request.offset_bytes & mask) != 0 || (request.length_bytes & mask) != 0) {
      return {NbdError::inval, "request not aligned to the minimum block size"};
    }
  }

  // proto.md "Size constraints": a READ or WRITE longer than the maximum payload fails.
  if ((command == Command::read || command == Command::write) && request.length_bytes > params.max_payload_bytes) {
    return {NbdError::inval, "data request larger than the maximum payload"};
  }

  if (command == Command::flush && !has(tflags, transmission_flag::send_flush)) {
    return {NbdError::inval, "flush not advertised"};
  }
  if (command == Command::trim && !has(tflags, transmission_flag::send_trim)) {
    return {NbdError::inval, "trim not advertised"};
  }
  if (command == Command::write_zeroes && !has(tflags, transmission_flag::send_write_zeroes)) {
    return {NbdError::inval, "write zeroes not advertised"};
  }
  return {};
}

}  // namespace iserkit::nbd
