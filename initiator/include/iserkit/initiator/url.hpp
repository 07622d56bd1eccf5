// iSCSI URLs in libiscsi's form: iscsi://[user[%password]@]host[:port]/target-iqn/lun, and
// iser://… for RDMA (RFC 7145). IPv6 literals go in brackets ("[::1]"). Port defaults to 3260
// (the IANA "iscsi-target" port). Layer 6 (public API).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "iserkit/common/result.hpp"
#include "iserkit/datamover/datamover.hpp"

namespace iserkit::initiator {

/// The default iSCSI TCP port (IANA "iscsi-target").
inline constexpr std::uint16_t default_port = 3260;

/// A parsed iSCSI URL.
struct Url {
  datamover::Transport transport = datamover::Transport::tcp;  ///< iscsi:// → tcp, iser:// → iser
  std::string user;      ///< CHAP user name; empty = no authentication
  std::string password;  ///< CHAP secret; never logged (format_url() hides it)
  std::string host;      ///< host name or IP literal, without brackets
  std::uint16_t port = default_port;
  std::string target;             ///< target IQN/EUI name; empty for a discovery URL
  std::optional<std::uint16_t> lun;  ///< LUN index 0..16383; nullopt when absent (discovery URL)
  friend bool operator==(const Url&, const Url&) = default;
};

/// Parses an iSCSI URL.
/// Accepted: `iscsi://host`, `iscsi://host:port/`, `iscsi://user%secret@[::1]:3261/iqn.x:y/3`.
/// A target without a LUN is accepted (lun = nullopt); a LUN without a target is not.
/// Returns: the URL, or errc::invalid_argument for an unknown scheme, an empty host or one holding
/// brackets, '@', '/', blanks or control characters, a port that is
/// not 1..65535, an unterminated '[', a LUN that is not a number 0..16383, or extra path parts.
/// Percent-escapes are not decoded ('%' separates user and password as in libiscsi).
Result<Url> parse_url(std::string_view text);

/// Why parse_url() refuses `text`, in words ("the LUN is not a number 0..16383", "it does not start
/// with iscsi:// or iser://", …); empty when it parses.
std::string url_problem(std::string_view text);

/// Formats a URL back to text. The password is replaced by "***" unless `include_password`.
std::string format_url(const Url& url, bool include_password = false);

}  // namespace iserkit::initiator
