// One parser for "HOST[:PORT]" in every program and config file (issue 27 item 4): listen
// addresses, portals, metrics endpoints, peer addresses as the datamovers print them. Layer 0.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "iserkit/common/result.hpp"

namespace iserkit {

/// A host and an optional TCP port, as parse_host_port() splits them.
struct HostPort {
  std::string host;                  ///< name or address; IPv6 without its brackets; may be empty (":PORT")
  std::optional<std::uint16_t> port;  ///< absent when the text had no ":PORT"
};

/// Splits "HOST", "HOST:PORT", "[IPV6]", "[IPV6]:PORT" or ":PORT". Errors (errc::invalid_argument):
/// an IPv6 address without brackets (two or more colons), an unclosed '[', text after ']' other
/// than ":PORT", a port that is empty or not a number in 0..65535.
Result<HostPort> parse_host_port(std::string_view text);

/// "HOST:PORT", with brackets around an IPv6 host ("[::1]:3260").
std::string format_host_port(std::string_view host, std::uint16_t port);

}  // namespace iserkit
