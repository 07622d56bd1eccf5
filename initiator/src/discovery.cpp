// SendTargets discovery (RFC 7143 §4.3 discovery session, §11.10/§11.11 Text Request/Response with
// continuation, Appendix C SendTargets, §13.9 TargetAddress format).
#include "iserkit/initiator/discovery.hpp"

#include <charconv>

#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/datamover/tcp_datamover.hpp"
#include "iserkit/initiator/session.hpp"
#include "login_io.hpp"

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
  Result<LoggedIn> logged_in = fail(errc::not_supported);
  const auto transports = select_transports(url, options.transport);
  for (std::size_t i = 0; i < transports.size(); ++i) {
    const auto transport = transports[i];
    config.rdma = transport == datamover::Transport::iser;
    // Captures by reference: `url` and `options` outlive the awaited login (see session.cpp).
    logged_in = co_await connect_and_login(
        url.host, url.port, config, options.login_timeout, options.max_redirects,
        [ex, transport, &url, &options](const std::string& host, std::uint16_t port)
            -> Awaitable<Result<std::unique_ptr<datamover::Datamover>>> {
          Url to = url;
          to.host = host;
          to.port = port;
          co_return co_await connect_datamover(ex, transport, to, options);
        });
    if (logged_in) break;
    if (i + 1 < transports.size())
      log::info("discovery: iSER to {}:{} failed ({}): trying TCP", url.host, url.port, logged_in.error().message());
  }
  if (!logged_in) co_return fail(logged_in.error());
  datamover::Datamover& mover = *logged_in->datamover;
  const LoginDone* done = &logged_in->done;
  SerialNumber cmd_sn = config.cmd_sn;
  SerialNumber exp_stat_sn = done->exp_stat_sn;

  // The whole exchange (text and logout) is bounded by the login timeout.
  auto timed_out = std::make_shared<bool>(false);
  asio::steady_timer timer(ex);
  timer.expires_after(options.login_timeout);
  timer.async_wait([timed_out, &mover](const boost::system::error_code& e) {
    if (e || *timed_out) return;
    *timed_out = true;
    mover.close();
  });

  iscsi::TextPairs text;
  iscsi::TextRequest req;
  req.immediate = true;
  req.final = true;
  req.itt = iscsi::Itt{1};
  req.ttt = iscsi::reserved_ttt;
  req.cmd_sn = cmd_sn;
  req.exp_stat_sn = exp_stat_sn;
  std::error_code error;
  auto pdu = datamover::make_pdu_owned(req, iscsi::encode_text({{"SendTargets", "All"}}));
  if (auto ec = co_await mover.send(std::move(pdu))) error = ec;
  std::vector<std::byte> accumulated;
  while (!error) {
    auto in = co_await mover.receive(nullptr);
    if (!in) {
      error = in.error();
      break;
    }
    auto header = iscsi::decode_bhs(in->bhs);
    if (!header) {
      error = make_error_code(errc::protocol_error);
      break;
    }
    if (auto* nop = std::get_if<iscsi::NopIn>(&*header)) {
      if (nop->ttt != iscsi::reserved_ttt) {  // RFC 7143 §11.19.2: answer pings
        iscsi::NopOut out{.immediate = true, .lun = nop->lun, .itt = iscsi::reserved_itt, .ttt = nop->ttt,
                          .cmd_sn = cmd_sn, .exp_stat_sn = exp_stat_sn};
        if (auto ec = co_await mover.send(datamover::make_pdu_owned(
                out, std::vector<std::byte>(in->data.begin(), in->data.end()))))
          error = ec;
      }
      continue;
    }
    auto* rsp = std::get_if<iscsi::TextResponse>(&*header);
    if (rsp == nullptr || rsp->itt != req.itt || in->pdu_error) {
      error = make_error_code(errc::protocol_error);
      break;
    }
    exp_stat_sn = rsp->stat_sn + 1;
    accumulated.insert(accumulated.end(), in->data.begin(), in->data.end());
    if (rsp->final) break;
    // RFC 7143 §11.11.2: C=1 (F=0) — ask for the rest with an empty Text Request echoing the TTT.
    iscsi::TextRequest more = req;
    more.ttt = rsp->ttt;
    more.exp_stat_sn = exp_stat_sn;
    if (auto ec = co_await mover.send(datamover::make_pdu_owned(more, {}))) error = ec;
  }
  Result<std::vector<DiscoveredTarget>> result = fail(errc::protocol_error);
  if (!error) {
    auto pairs = iscsi::decode_text(accumulated);
    if (pairs) {
      result = parse_send_targets(*pairs, Portal{.host = url.host, .port = url.port, .portal_group_tag = 1});
    }
    // Log out politely; errors here do not change the answer we already have.
    iscsi::LogoutRequest logout{.immediate = true, .reason = iscsi::LogoutReason::close_session,
                                .itt = iscsi::Itt{2}, .cmd_sn = cmd_sn, .exp_stat_sn = exp_stat_sn};
    if (!co_await mover.send(datamover::make_pdu(logout))) {
      while (true) {
        auto in = co_await mover.receive(nullptr);
        if (!in) break;
        if (iscsi::raw_opcode(in->bhs) == static_cast<std::uint8_t>(iscsi::Opcode::logout_response)) break;
      }
    }
  } else {
    result = fail(*timed_out ? make_error_code(errc::timeout) : error);
  }
  *timed_out = true;  // disarm
  timer.cancel();
  mover.close();
  co_return result;
}

}  // namespace iserkit::initiator
