// SendTargets discovery (RFC 7143 §4.3 discovery session, §11.10/§11.11 Text Request/Response with
// continuation, Appendix C SendTargets, §13.9 TargetAddress format).
#include "iserkit/initiator/discovery.hpp"

#include <charconv>

#include "iserkit/common/errors.hpp"
#include "iserkit/common/host_port.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/initiator/session.hpp"
#include "login_io.hpp"
#include "session_start.hpp"
#include "transport_select.hpp"

namespace iserkit::initiator {

Result<Portal> parse_target_address(std::string_view value) {
  Portal p;
  // RFC 7143 §13.9: TargetAddress=domainname[:port][,portal-group-tag]; IPv6 in brackets.
  if (const auto comma = value.rfind(','); comma != std::string_view::npos) {
    const std::string_view tag = value.substr(comma + 1);
    std::uint32_t v = 0;
    auto [ptr, ec] = std::from_chars(tag.data(), tag.data() + tag.size(), v);
    if (ec != std::errc{} || ptr != tag.data() + tag.size() || v > 65535) return fail(errc::protocol_error);
    p.portal_group_tag = static_cast<std::uint16_t>(v);
    value = value.substr(0, comma);
  }
  // The host and port as everywhere else (parse_host_port()); here a malformed one is the target's
  // protocol error, and the host and a given port must not be empty or 0.
  auto host_port = parse_host_port(value);
  if (!host_port || host_port->host.empty() || host_port->port == std::uint16_t{0}) return fail(errc::protocol_error);
  p.host = std::move(host_port->host);
  if (host_port->port) p.port = *host_port->port;
  return p;
}

Result<std::vector<DiscoveredTarget>> parse_send_targets(const iscsi::TextPairs& pairs, const Portal& default_portal) {
  std::vector<DiscoveredTarget> out;
  for (const auto& [key, value] : pairs) {
    if (key == "TargetName") {
      out.push_back({value, {}});
    } else if (key == "TargetAddress") {
      // RFC 7143 Appendix C: TargetAddress keys follow the TargetName they belong to.
      if (out.empty()) return fail(errc::protocol_error);
      auto portal = parse_target_address(value);
      if (!portal) return fail(portal.error());
      out.back().portals.push_back(*portal);
    }
  }
  for (auto& t : out)
    if (t.portals.empty()) t.portals.push_back(default_portal);
  return out;
}

Awaitable<Result<std::vector<DiscoveredTarget>>> discover(asio::any_io_executor ex, const Url& url,
                                                          SessionOptions options) {
  // The transports to try, as for a normal session (iser:// discovers over iSER, the way the
  // Linux iSER initiator does; --transport auto falls back to TCP).
  auto leading = co_await log_in_leading(ex, url, std::move(options), /*discovery=*/true);
  if (!leading) co_return fail(leading.error());
  options = leading->config.options;
  // The Discovery session runs on the same engine and driver as a normal one (RFC 7143 §4.3:
  // text requests, NOP answers and Logout only).
  const LoginDone& done = leading->logged_in.done;
  auto session = start_session(ex, std::move(leading->logged_in.datamover), options, done.parameters, std::string{},
                               engine_start_after(leading->config.cmd_sn, done));

  // The whole exchange (text and logout) is bounded by the login timeout.
  auto timed_out = std::make_shared<bool>(false);
  asio::steady_timer timer(ex);
  timer.expires_after(options.login_timeout);
  timer.async_wait([timed_out, weak = std::weak_ptr<Session>(session)](const boost::system::error_code& e) {
    if (e || *timed_out) return;
    *timed_out = true;
    if (auto s = weak.lock()) s->close();
  });

  // Encoded outside the co_await: GCC 12 cannot keep an initializer list's array across one.
  auto request = iscsi::encode_text({{"SendTargets", "All"}});
  auto text = co_await SessionInternals::text_request(*session, std::move(request));
  Result<std::vector<DiscoveredTarget>> result = fail(errc::protocol_error);
  if (text) {
    if (auto pairs = iscsi::decode_text(*text)) {
      result = parse_send_targets(*pairs, Portal{.host = url.host, .port = url.port, .portal_group_tag = 1});
    }
    // Log out politely; errors here do not change the answer we already have.
    (void)co_await session->logout();
  } else {
    result = fail(*timed_out ? make_error_code(errc::timeout) : text.error());
  }
  *timed_out = true;  // disarm
  timer.cancel();
  session->close();
  co_return result;
}

}  // namespace iserkit::initiator
