// parse_host_port() and format_host_port(): see host_port.hpp.
#include "iserkit/common/host_port.hpp"

#include "iserkit/common/errors.hpp"

namespace iserkit {

Result<HostPort> parse_host_port(std::string_view text) {
  HostPort out;
  std::string_view port;
  bool has_port = false;
  if (text.starts_with('[')) {
    const auto close = text.find(']');
    if (close == std::string_view::npos) return fail(errc::invalid_argument);
    out.host = std::string(text.substr(1, close - 1));
    const auto rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return fail(errc::invalid_argument);
      port = rest.substr(1);
      has_port = true;
    }
  } else {
    const auto colon = text.rfind(':');
    if (colon != std::string_view::npos && text.find(':') != colon) return fail(errc::invalid_argument);  // bare IPv6
    out.host = std::string(text.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = text.substr(colon + 1);
      has_port = true;
    }
  }
  if (has_port) {
    if (port.empty() || port.size() > 5) return fail(errc::invalid_argument);
    unsigned value = 0;
    for (const char c : port) {
      if (c < '0' || c > '9') return fail(errc::invalid_argument);
      value = value * 10 + static_cast<unsigned>(c - '0');
    }
    if (value > 65535) return fail(errc::invalid_argument);
    out.port = static_cast<std::uint16_t>(value);
  }
  return out;
}

std::string format_host_port(std::string_view host, std::uint16_t port) {
  const bool v6 = host.find(':') != std::string_view::npos;
  return (v6 ? "[" + std::string(host) + "]" : std::string(host)) + ":" + std::to_string(port);
}

}  // namespace iserkit
