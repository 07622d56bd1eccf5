// The "iserkit" error category and is_fatal().
#include "iserkit/common/errors.hpp"

#include <string_view>

namespace iserkit {
namespace {

class Category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "iserkit"; }
  std::string message(int v) const override {
    switch (static_cast<errc>(v)) {
      case errc::ok: return "success";
      case errc::malformed_pdu: return "malformed PDU";
      case errc::opcode_not_allowed: return "opcode not allowed in this phase";
      case errc::pdu_too_large: return "data segment longer than negotiated";
      case errc::header_digest_error: return "header digest mismatch";
      case errc::data_digest_error: return "data digest mismatch";
      case errc::cmd_sn_out_of_window: return "CmdSN outside the command window";
      case errc::protocol_error: return "iSCSI protocol error";
      case errc::negotiation_failed: return "text negotiation failed";
      case errc::login_failed: return "login failed";
      case errc::connection_closed: return "connection closed";
      case errc::timeout: return "timed out";
      case errc::not_supported: return "not supported";
      case errc::invalid_argument: return "invalid argument";
      case errc::session_closed: return "session closed";
      case errc::scsi_error: return "SCSI command failed";
      case errc::task_aborted: return "task aborted";
      case errc::nbd_protocol_error: return "NBD protocol error";
      case errc::authentication_failed: return "authentication failed";
      case errc::session_lost: return "session lost: no new connection within the replacement timeout";
    }
    return "unknown iserkit error";
  }
};

}  // namespace

const std::error_category& iserkit_category() noexcept {
  static const Category category;
  return category;
}

bool is_fatal(std::error_code ec) noexcept {
  if (!ec) return false;
  if (ec.category() != iserkit_category()) {
    // Socket and system-call failures (std's or Boost's "system" category, Asio's own categories)
    // mean the connection is gone. Anything else (errno values from SCSI sense, a SCSI status
    // category) describes one command, not the connection.
    const std::string_view name = ec.category().name();
    return ec.category() == std::system_category() || name == "system" || name.starts_with("asio.");
  }
  switch (static_cast<errc>(ec.value())) {
    case errc::header_digest_error:
    case errc::connection_closed:
    case errc::timeout:
    case errc::protocol_error:
    case errc::session_closed:
    case errc::login_failed:
    case errc::negotiation_failed:
    case errc::authentication_failed:
    case errc::session_lost:
      return true;
    default:
      return false;
  }
}

}  // namespace iserkit
