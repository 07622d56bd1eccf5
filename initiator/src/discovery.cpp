// SendTargets discovery (RFC 7143 §4.3 discovery session, §11.10/§11.11 Text Request/Response with
// continuation, Appendix C SendTargets, §13.9 TargetAddress format).
#include "iserkit/initiator/discovery.hpp"

#include <charconv>

#include "iserkit/common/errors.hpp"
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
  std::string_view port;
  if (value.starts_with('[')) {
    const auto close = value.find(']');
    if (close == std::string_view::npos) return fail(errc::protocol_error);
    p.host = std::string(value.substr(1, close - 1));
    const auto rest = value.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return fail(errc::protocol_error);
      port = rest.substr(1);
    }
  } else {
    const auto colon = value.find(':');
    p.host = std::string(value.substr(0, colon));
    if (colon != std::string_view::npos) port = value.substr(colon + 1);
  }
  if (p.host.empty()) return fail(errc::protocol_error);
  if (!port.empty()) {
    std::uint32_t v = 0;
    auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
    if (ec != std::errc{} || ptr != port.data() + port.size() || v == 0 || v > 65535) return fail(errc::protocol_error);
    p.port = static_cast<std::uint16_t>(v);
  }
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
  if (options.initiator_name.empty()) options.initiator_name = default_initiator_name();
  auto resolved = resolve_credentials(url, std::move(options));
  if (!resolved) co_return fail(resolved.error());
  options = std::move(*resolved);

  LoginConfig config;
  config.initiator_name = options.initiator_name;
  config.initiator_alias = options.initiator_alias;
  config.discovery = true;
  config.isid = options.isid.value_or(random_isid());
  config.itt = iscsi::Itt{0};
  config.cmd_sn = SerialNumber(1);
  config.options = options;
  // The transports to try, as for a normal session (iser:// discovers over iSER, the way the
  // Linux iSER initiator does; --transport auto falls back to TCP).
  auto logged_in = co_await login_over_transports(ex, url, options, config, "discovery");
  if (!logged_in) co_return fail(logged_in.error());
  // The Discovery session runs on the same engine and driver as a normal one (RFC 7143 §4.3:
  // text requests, NOP answers and Logout only).
  const LoginDone& done = logged_in->done;
  auto session = start_session(ex, std::move(logged_in->datamover), options, done.parameters, std::string{},
                               EngineStart{.cmd_sn = config.cmd_sn,
                                           .exp_cmd_sn = done.exp_cmd_sn,
                                           .max_cmd_sn = done.max_cmd_sn,
                                           .exp_stat_sn = done.exp_stat_sn});

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
