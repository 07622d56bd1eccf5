// SendTargets discovery (RFC 7143 §4.3, Appendix C): a Discovery session, Text Request
// SendTargets=All, the TargetName/TargetAddress list, Logout. Layer 6 (public API).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/result.hpp"
#include "iserkit/initiator/options.hpp"
#include "iserkit/initiator/url.hpp"
#include "iserkit/iscsi/text.hpp"

namespace iserkit::initiator {

/// One portal of a discovered target (TargetAddress=host:port,tpgt, RFC 7143 §13.9).
struct Portal {
  std::string host;            ///< name or IP literal, without brackets
  std::uint16_t port = default_port;
  std::uint16_t portal_group_tag = 1;  ///< TPGT
  friend bool operator==(const Portal&, const Portal&) = default;
};

/// A target and the portals it can be reached at. A target listed without TargetAddress is
/// reachable at the portal that answered discovery (RFC 7143 Appendix C); that portal is filled in.
struct DiscoveredTarget {
  std::string name;
  std::vector<Portal> portals;
  friend bool operator==(const DiscoveredTarget&, const DiscoveredTarget&) = default;
};

/// Runs SendTargets=All against url.host:url.port (url.target and url.lun are ignored), over the
/// transport Session::connect() would pick (iser:// discovers over iSER, RFC 7145 §5).
/// Returns: the targets in the order the target listed them, or the errors of Session::connect()
/// (connect, login status, negotiation), errc::protocol_error for a malformed Text Response.
/// Executor: runs on `ex` (single-threaded); nothing is shared with other sessions.
Awaitable<Result<std::vector<DiscoveredTarget>>> discover(asio::any_io_executor ex, const Url& url,
                                                          SessionOptions options = {});

/// Parses the SendTargets response text (RFC 7143 Appendix C). `default_portal` fills targets that
/// carry no TargetAddress. Errors: errc::protocol_error for a TargetAddress before any TargetName
/// or an address that does not parse.
Result<std::vector<DiscoveredTarget>> parse_send_targets(const iscsi::TextPairs& pairs, const Portal& default_portal);

/// Parses one TargetAddress value: "host:port,tpgt", "[v6]:port,tpgt", port and tpgt optional.
Result<Portal> parse_target_address(std::string_view value);

}  // namespace iserkit::initiator
