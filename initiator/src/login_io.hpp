// Drives LoginMachine over a Datamover (RFC 7143 §6), shared by normal and discovery sessions,
// plus the ISID and default-name helpers.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <variant>

#include "iserkit/common/asio.hpp"
#include "iserkit/datamover/datamover.hpp"
#include "iserkit/initiator/url.hpp"
#include "login.hpp"

namespace iserkit::initiator {

/// What one login attempt ended with: the full feature phase, or a redirect to follow.
using LoginOutcome = std::variant<LoginDone, LoginRedirect>;

/// Runs the login phase on `dm`: sends Login Requests and feeds responses to a LoginMachine until
/// it is done, redirected, fails, or `timeout` elapses (errc::timeout; the connection is closed then).
/// On success the datamover's digests and receive limit are switched to the negotiated values.
Awaitable<Result<LoginOutcome>> perform_login(datamover::Datamover& dm, LoginConfig config,
                                              std::chrono::milliseconds timeout);

/// Opens a connection to host:port (the transport is the caller's choice).
using Connector = std::function<Awaitable<Result<std::unique_ptr<datamover::Datamover>>>(const std::string& host,
                                                                                        std::uint16_t port)>;

/// Opens a datamover for `transport` to url.host:url.port with the session's sizing
/// (TcpDatamover, or IserDatamover with receive/send depths from max_commands_in_flight).
/// Errors: connect errors, errc::timeout, errc::not_supported (iSER not built),
/// std::errc::no_such_device (no RDMA device). Defined in transport_select.cpp.
Awaitable<Result<std::unique_ptr<datamover::Datamover>>> connect_datamover(asio::any_io_executor ex,
                                                                           datamover::Transport transport,
                                                                           const Url& url,
                                                                           const SessionOptions& options);

/// A logged-in connection.
struct LoggedIn {
  std::unique_ptr<datamover::Datamover> datamover;
  LoginDone done;
  std::string host;  ///< where the login finally succeeded (after redirects)
  std::uint16_t port = 0;
};

/// Connects with `connect` and logs in, following up to `max_redirects` redirects
/// (RFC 7143 §11.13.5 0x0101/0x0102: close, connect to TargetAddress, log in again with the same
/// ISID; the CmdSN starts over since no session was made). Errors: as perform_login(); a redirect
/// beyond the limit is the login_status_category() code of the redirecting response.
Awaitable<Result<LoggedIn>> connect_and_login(std::string host, std::uint16_t port, LoginConfig config,
                                              std::chrono::milliseconds timeout, unsigned max_redirects,
                                              Connector connect);

/// Fills options.chap from the URL's user and password where empty, and checks the credentials.
/// Errors: errc::invalid_argument for a user without a secret, a secret above 255 bytes, a target
/// secret without a user, or the same secret for both directions (RFC 7143 §12.1.3 forbids it).
Result<SessionOptions> resolve_credentials(const Url& url, SessionOptions options);

/// The LoginConfig of a session's leading login (ITT 0, CmdSN 1), shared by Session::connect()
/// and discover(): the default initiator name where none is set, the credentials resolved
/// (resolve_credentials(), whose errors it returns), the ISID given or random_isid(), TargetName
/// from the URL unless `discovery` (SessionType=Discovery). config.options holds the resolved options.
Result<LoginConfig> leading_login_config(const Url& url, SessionOptions options, bool discovery);

/// A random ISID of type 2 (RFC 7143 §11.12.5: T=10b "random", A=0, B and C random, D qualifier).
std::array<std::byte, 6> random_isid();

}  // namespace iserkit::initiator
