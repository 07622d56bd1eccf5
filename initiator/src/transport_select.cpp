// Transport selection for normal and discovery sessions (see transport_select.hpp).
#include "transport_select.hpp"

#include <cstdlib>

#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/datamover/iser_datamover.hpp"
#include "iserkit/datamover/tcp_datamover.hpp"

namespace iserkit::initiator {

std::optional<TransportPolicy> parse_transport_policy(std::string_view text) noexcept {
  if (text == "url") return TransportPolicy::from_url;
  if (text == "tcp") return TransportPolicy::tcp;
  if (text == "iser") return TransportPolicy::iser;
  if (text == "auto") return TransportPolicy::automatic;
  return std::nullopt;
}

std::vector<datamover::Transport> select_transports(const Url& url, TransportPolicy policy) {
  using datamover::Transport;
  switch (policy) {
    case TransportPolicy::tcp: return {Transport::tcp};
    case TransportPolicy::iser: return {Transport::iser};
    case TransportPolicy::automatic:
      if (datamover::iser_built()) return {Transport::iser, Transport::tcp};
      return {Transport::tcp};
    case TransportPolicy::from_url: break;
  }
  return {url.transport};
}

Awaitable<Result<std::unique_ptr<datamover::Datamover>>> connect_datamover(asio::any_io_executor ex,
                                                                           datamover::Transport transport,
                                                                           const Url& url,
                                                                           const SessionOptions& options) {
  if (transport == datamover::Transport::iser) {
    // ISERKIT_ISER_STAGS (per-command | automatic | whole-slab) overrides options.iser_stags: how
    // the lab turns the per-command mode on for programs that have no flag for it.
    auto stags = options.iser_stags;
    if (const char* env = std::getenv("ISERKIT_ISER_STAGS"); env != nullptr && *env != '\0') {
      if (auto parsed = datamover::parse_iser_stags(env)) {
        stags = *parsed;
      } else {
        log::warn("ISERKIT_ISER_STAGS={} is none of per-command, automatic, whole-slab: ignored", env);
      }
    }
    // Receive buffers: a response per command in flight, plus 4 unexpected PDUs (NOP-In, Async;
    // Linux reserves as many) and 4 answers to immediate PDUs (NOP-Out, Logout).
    const datamover::IserOptions iser{.recv_data_segment_length = options.iser_recv_data_segment_length,
                                      .receive_depth = options.max_commands_in_flight + 8,
                                      .send_depth = options.max_commands_in_flight + 8,
                                      .timeout = options.connect_timeout,
                                      .max_transfer_bytes = options.iser_max_transfer_bytes,
                                      .unstated_max_transfer_bytes = options.iser_unstated_max_transfer_bytes,
                                      .netns = options.netns,
                                      .stags = stags,
                                      .send_with_invalidate = options.iser_send_with_invalidate};
    co_return co_await datamover::iser_connect(ex, url.host, url.port, iser);
  }
  auto dm = co_await datamover::TcpDatamover::connect(ex, url.host, url.port, options.connect_timeout, options.netns);
  if (!dm) co_return fail(dm.error());
  co_return std::unique_ptr<datamover::Datamover>(std::move(*dm));
}

TransportPolicy same_transport(const datamover::Datamover& dm) noexcept {
  return dm.transport() == datamover::Transport::iser ? TransportPolicy::iser : TransportPolicy::tcp;
}

Awaitable<Result<LoggedIn>> login_over_transports(asio::any_io_executor ex, const Url& url,
                                                  const SessionOptions& options, LoginConfig config,
                                                  std::string_view what) {
  const auto transports = select_transports(url, options.transport);
  Result<LoggedIn> logged_in = fail(errc::not_supported);
  for (std::size_t i = 0; i < transports.size(); ++i) {
    const auto transport = transports[i];
    config.rdma = transport == datamover::Transport::iser;
    // The connector captures by reference only: `url` and `options` outlive the awaited login, and
    // GCC 12 mishandles non-trivial by-value captures of coroutine lambdas (double destruction).
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
      log::info("{}: iSER to {}:{} failed ({}): trying TCP", what, url.host, url.port, logged_in.error().message());
  }
  co_return logged_in;
}

Awaitable<Result<LeadingLogin>> log_in_leading(asio::any_io_executor ex, const Url& url, SessionOptions options,
                                               bool discovery) {
  auto config = leading_login_config(url, std::move(options), discovery);
  if (!config) co_return fail(config.error());
  auto logged_in = co_await login_over_transports(ex, url, config->options, *config, discovery ? "discovery" : "session");
  if (!logged_in) co_return fail(logged_in.error());
  co_return LeadingLogin{.config = std::move(*config), .logged_in = std::move(*logged_in)};
}

}  // namespace iserkit::initiator
