// The login exchange over a datamover (RFC 7143 §6.3, §11.12, §11.13) and identity helpers
// (InitiatorName RFC 7143 §4.2.7.2, ISID §11.12.5).
#include "login_io.hpp"

#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <memory>
#include <random>

#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/initiator/chap_credentials.hpp"
#include "iserkit/initiator/errors.hpp"
#include "iserkit/initiator/options.hpp"

namespace iserkit::initiator {

namespace {

// Login text for trace logs: CHAP_R values are left out (they allow offline dictionary attacks on
// the secret), secrets never reach this text at all.
std::string describe_text(const iscsi::TextPairs& pairs) {
  std::string s;
  for (const auto& [k, v] : pairs)
    s += (s.empty() ? "" : " ") + log::escape(k, 64) + "=" + (k == "CHAP_R" ? std::string("<hidden>") : log::escape(v));
  return s;
}

}  // namespace

std::array<std::byte, 6> random_isid() {
  std::random_device rd;
  std::array<std::byte, 6> isid{};
  isid[0] = std::byte{0x80};  // T = 10b: random; A reserved
  const std::uint32_t bc = rd();
  isid[1] = static_cast<std::byte>(bc >> 16);
  isid[2] = static_cast<std::byte>(bc >> 8);
  isid[3] = static_cast<std::byte>(bc);
  const std::uint32_t d = rd();
  isid[4] = static_cast<std::byte>(d >> 8);
  isid[5] = static_cast<std::byte>(d | 1);  // never an all-zero qualifier
  return isid;
}

std::string default_initiator_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::snprintf(host, sizeof host, "localhost");
  std::string name = "iqn.2026-11.org.iserkit:initiator-";
  for (const char* p = host; *p != '\0'; ++p) {
    const auto c = static_cast<unsigned char>(std::tolower(static_cast<unsigned char>(*p)));
    name += (std::isalnum(c) || c == '.' || c == '-') ? static_cast<char>(c) : '-';
  }
  return name;
}

Awaitable<Result<LoginOutcome>> perform_login(datamover::Datamover& dm, LoginConfig config,
                                              std::chrono::milliseconds timeout) {
  auto ex = co_await asio::this_coro::executor;
  struct TimerState {
    bool timed_out = false;
    bool finished = false;
  };
  auto state = std::make_shared<TimerState>();
  asio::steady_timer timer(ex);
  timer.expires_after(timeout);
  timer.async_wait([state, &dm](const boost::system::error_code& e) {
    if (e || state->finished) return;  // the handler may run after the login ended
    state->timed_out = true;
    dm.close();
  });
  struct CancelTimer {
    asio::steady_timer& t;
    TimerState& s;
    ~CancelTimer() {
      s.finished = true;
      t.cancel();
    }
  } cancel{timer, *state};
  const bool& timed_out_flag = state->timed_out;
  const bool* timed_out = &timed_out_flag;

  LoginMachine machine(std::move(config));
  LoginSend next = machine.start();
  while (true) {
    log::trace("login: send: csg={} transit={} {}", static_cast<int>(next.request.csg), next.request.transit,
               describe_text(next.text));
    if (auto ec = co_await dm.send(datamover::make_pdu_owned(next.request, iscsi::encode_text(next.text)))) {
      co_return fail(*timed_out ? make_error_code(errc::timeout) : ec);
    }
    auto in = co_await dm.receive(nullptr);
    if (!in) co_return fail(*timed_out ? make_error_code(errc::timeout) : in.error());
    if (in->pdu_error) co_return fail(errc::protocol_error);
    // RFC 7143 §6.3: only Login Responses may arrive during the login phase.
    auto rsp = iscsi::decode_bhs_as<iscsi::LoginResponse>(in->bhs);
    if (!rsp) co_return fail(errc::protocol_error);
    auto text = iscsi::decode_text(in->data);
    if (!text) co_return fail(errc::protocol_error);
    log::trace("login: received: status=0x{:02x}{:02x} transit={} {}", rsp->status_class, rsp->status_detail,
               rsp->transit, describe_text(*text));
    auto step = machine.on_response(*rsp, *text);
    if (!step) co_return fail(step.error());
    if (auto* done = std::get_if<LoginDone>(&*step)) {
      // RFC 7143 §13.1/§13.12: digests and the new MaxRecvDataSegmentLength apply from the first
      // full-feature-phase PDU on.
      dm.set_digests(done->parameters.header_digest_crc32c, done->parameters.data_digest_crc32c);
      dm.set_max_recv_data_segment_length(done->parameters.initiator_max_recv_data_segment_length);
      co_return LoginOutcome{std::move(*done)};
    }
    if (auto* redirect = std::get_if<LoginRedirect>(&*step)) co_return LoginOutcome{std::move(*redirect)};
    next = std::move(std::get<LoginSend>(*step));
  }
}

Awaitable<Result<LoggedIn>> connect_and_login(std::string host, std::uint16_t port, LoginConfig config,
                                              std::chrono::milliseconds timeout, unsigned max_redirects,
                                              Connector connect) {
  for (unsigned redirects = 0;; ++redirects) {
    auto dm = co_await connect(host, port);
    if (!dm) co_return fail(dm.error());
    auto outcome = co_await perform_login(**dm, config, timeout);
    if (!outcome) {
      (*dm)->close();
      // No retry with a shorter CHAP_A list: a failed login is never answered by offering less than
      // the configured algorithms (an attacker in the path could otherwise force MD5 by faking a
      // 0x0200). A target that picks an algorithm it cannot check (tgtd 1.0.85 with SHA-256) needs
      // ChapOptions::algorithms = {MD5} (`iserkit --chap-algorithms MD5`).
      co_return fail(outcome.error());
    }
    if (auto* done = std::get_if<LoginDone>(&*outcome))
      co_return LoggedIn{std::move(*dm), std::move(*done), std::move(host), port};
    const auto& redirect = std::get<LoginRedirect>(*outcome);
    // RFC 7143 §11.13.5: after a redirect the target closes the connection; the initiator logs in
    // again at TargetAddress.
    (*dm)->close();
    if (redirects >= max_redirects) co_return fail(make_login_error(1, redirect.permanent ? 0x02 : 0x01));
    log::info("login: redirected {}: from={}:{} to={}:{}", redirect.permanent ? "permanently" : "temporarily", host,
              port, log::escaped(redirect.host), redirect.port);
    host = redirect.host;
    port = redirect.port;
  }
}

Result<SessionOptions> resolve_credentials(const Url& url, SessionOptions options) {
  auto& chap = options.chap;
  if (chap.user.empty()) chap.user = url.user;
  if (chap.secret.empty() && chap.user == url.user) chap.secret = url.password;
  if (chap.enabled() && chap.secret.empty()) {
    log::error("login: CHAP user {} has no secret: set SessionOptions::chap.secret (the front ends: a --chap-file "
               "or LIBISCSI_CHAP_PASSWORD)", log::escaped(chap.user));
    return fail(errc::invalid_argument);
  }
  if (!chap.enabled() && chap.mutual()) return fail(errc::invalid_argument);
  if (chap.secret.size() > iscsi::chap_max_secret_bytes || chap.target_secret.size() > iscsi::chap_max_secret_bytes)
    return fail(errc::invalid_argument);
  // RFC 7143 §12.1.3: a secret MUST NOT serve to authenticate both the initiator and the target.
  if (chap.mutual() && chap.secret == chap.target_secret) return fail(errc::invalid_argument);
  if (chap.enabled() && chap.secret.size() < iscsi::chap_recommended_secret_bytes)
    log::warn("login: CHAP secret of user {} is shorter than 12 bytes (RFC 7143 §12.1.3)", log::escaped(chap.user));
  if (chap.enabled() && !options.security_stage) return fail(errc::invalid_argument);
  return options;
}

Result<LoginConfig> leading_login_config(const Url& url, SessionOptions options, bool discovery) {
  if (options.initiator_name.empty()) options.initiator_name = default_initiator_name();
  auto resolved = resolve_credentials(url, std::move(options));
  if (!resolved) return fail(resolved.error());
  LoginConfig config;
  config.initiator_name = resolved->initiator_name;
  config.initiator_alias = resolved->initiator_alias;
  if (!discovery) config.target_name = url.target;
  config.discovery = discovery;
  config.isid = resolved->isid.value_or(random_isid());
  config.itt = iscsi::Itt{0};
  config.cmd_sn = SerialNumber(1);
  config.options = std::move(*resolved);
  return config;
}

SessionOptions secret_from_environment(SessionOptions options) {
  const auto env = chap_from_environment();
  if (options.chap.secret.empty() && env.secret) options.chap.secret = *env.secret;
  if (options.chap.target_secret.empty() && env.target_secret) options.chap.target_secret = *env.target_secret;
  return options;
}

}  // namespace iserkit::initiator
