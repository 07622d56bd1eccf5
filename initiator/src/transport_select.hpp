// Transport selection, in one place for normal and discovery sessions: which wires to try
// (select_transports(), declared in session.hpp: from_url / tcp / iser / automatic = iSER then
// TCP), how to open each (connect_datamover(), login_io.hpp), and logging in over them in order
// with redirects followed on the same wire (login_over_transports()). Layer 3/6 glue.
#pragma once

#include <string_view>

#include "iserkit/initiator/session.hpp"
#include "login_io.hpp"

namespace iserkit::initiator {

/// Connects and logs in to url.host:url.port over each transport select_transports(url,
/// options.transport) names, in order, until one succeeds (config.rdma is set per transport;
/// redirects, RFC 7143 §11.13.5, are followed on the same transport, up to options.max_redirects).
/// `what` names the session kind in logs ("session", "discovery").
/// Returns the logged-in connection, or the last transport's error (see Session::connect).
Awaitable<Result<LoggedIn>> login_over_transports(asio::any_io_executor ex, const Url& url,
                                                  const SessionOptions& options, LoginConfig config,
                                                  std::string_view what);

/// A session's leading login: its LoginConfig (leading_login_config(); config.options are the
/// resolved options) and the connection that logged in with it.
struct LeadingLogin {
  LoginConfig config;
  LoggedIn logged_in;
};
/// leading_login_config() then login_over_transports() ("discovery" or "session" in its log
/// lines): how Session::connect() and discover() log in. Errors: those of both.
Awaitable<Result<LeadingLogin>> log_in_leading(asio::any_io_executor ex, const Url& url, SessionOptions options,
                                               bool discovery);

/// The policy that logs in again over the wire `dm` runs on, for a session's reconnects: an
/// `automatic` session that fell back to TCP stays on TCP. Transport selection's own answer, so
/// the session has no branch on the transport.
TransportPolicy same_transport(const datamover::Datamover& dm) noexcept;

}  // namespace iserkit::initiator
