// errno → NBD error mapping (see error_map.hpp). Spec: NBD proto.md "Error values".
#include "nbd_bridge/error_map.hpp"

#include <cerrno>

namespace iserkit::nbd {
namespace {

NbdError from_errno(int value, std::uint16_t command_flags) noexcept {
  switch (value) {
    case 0: return NbdError::ok;
    case EPERM:
    case EROFS:
    case EACCES: return NbdError::perm;
    case EIO:
    // The target or the path to it failed (connection closed or reset, the session lost, a command
    // or ping timed out): the data is unreachable, not the request invalid (issue 11).
    case ENOTCONN:
    case ECONNRESET:
    case ECONNREFUSED:
    case ECONNABORTED:
    case EPIPE:
    case ETIMEDOUT:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ENETDOWN:
    case ECANCELED:
      return NbdError::io;
    case ENOMEM: return NbdError::nomem;
    // proto.md "Error values": the server SHOULD map EDQUOT and EFBIG to NBD_ENOSPC.
    case ENOSPC:
    case EDQUOT:
    case EFBIG: return NbdError::nospc;
    case ESHUTDOWN: return NbdError::shutdown;
    // proto.md: NBD_ENOTSUP only in answer to NBD_CMD_FLAG_FAST_ZERO.
    case ENOTSUP:
#if EOPNOTSUPP != ENOTSUP
    case EOPNOTSUPP:
#endif
      return (command_flags & command_flag::fast_zero) ? NbdError::notsup : NbdError::inval;
    // proto.md: NBD_EOVERFLOW only for NBD_CMD_FLAG_DF reads (and oversize payload-less commands,
    // which request validation reports directly).
    case EOVERFLOW: return (command_flags & command_flag::df) ? NbdError::overflow : NbdError::inval;
    case EINVAL:
    default: return NbdError::inval;
  }
}

}  // namespace

NbdError to_nbd_error(std::error_code ec, std::uint16_t command_flags) noexcept {
  if (!ec) return NbdError::ok;
  if (ec.category() == std::generic_category() || ec.category() == std::system_category()) {
    return from_errno(ec.value(), command_flags);
  }
  const std::error_condition condition = ec.default_error_condition();
  if (condition.category() == std::generic_category() && condition.value() != 0) {
    return from_errno(condition.value(), command_flags);
  }
  return NbdError::io;  // an error we cannot classify: report it as an I/O error, never as success
}

std::errc to_errc(NbdError error) noexcept {
  switch (error) {
    case NbdError::ok: return std::errc{};
    case NbdError::perm: return std::errc::operation_not_permitted;
    case NbdError::io: return std::errc::io_error;
    case NbdError::nomem: return std::errc::not_enough_memory;
    case NbdError::inval: return std::errc::invalid_argument;
    case NbdError::nospc: return std::errc::no_space_on_device;
    case NbdError::overflow: return std::errc::value_too_large;
    case NbdError::notsup: return std::errc::not_supported;
    case NbdError::shutdown: return static_cast<std::errc>(ESHUTDOWN);
  }
  return std::errc::invalid_argument;
}

}  // namespace iserkit::nbd
