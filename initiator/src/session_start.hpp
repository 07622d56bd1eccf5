// Starting a Session's driver over a datamover that is already in full feature phase: used by
// Session::connect after login, and by tests that drive a Session over a fake Datamover.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "iserkit/initiator/session.hpp"
#include "login.hpp"
#include "session_engine.hpp"

namespace iserkit::initiator {

/// The engine's numbering after a login whose leading Login Request carried `cmd_sn` and whose
/// final response was `done` (a new session's, or a replacement connection's).
inline EngineStart engine_start_after(SerialNumber cmd_sn, const LoginDone& done) noexcept {
  return EngineStart{.cmd_sn = cmd_sn,
                     .exp_cmd_sn = done.exp_cmd_sn,
                     .max_cmd_sn = done.max_cmd_sn,
                     .exp_stat_sn = done.exp_stat_sn};
}

/// A new connection logged in to replace a lost one (same ISID, TSIH 0: RFC 7143 §6.3.5).
struct Reconnected {
  std::unique_ptr<datamover::Datamover> datamover;
  iscsi::OperationalParameters parameters;  ///< negotiated on the new connection
  EngineStart start;                        ///< its numbering at the end of login
};
/// Opens a new connection and logs in again; called by the session while it recovers, on its
/// executor, once per attempt. Errors: whatever the connect or login failed with.
using Reconnector = std::function<Awaitable<Result<Reconnected>>()>;

/// The write limits of negotiated `params` (lengths in bytes).
WriteLimits write_limits_of(const iscsi::OperationalParameters& params);

/// Builds the engine from the negotiated `params` and `options` (lengths in bytes), starts the
/// receive loop, the timer and the sender on `ex` and returns the session. `start` is the
/// numbering at the end of login (RFC 7143 §11.12.8). With a `reconnect`, a lost connection is
/// replaced within options.replacement_timeout (see SessionOptions); without one it ends the
/// session.
std::shared_ptr<Session> start_session(asio::any_io_executor ex, std::unique_ptr<datamover::Datamover> dm,
                                       SessionOptions options, const iscsi::OperationalParameters& params,
                                       std::string target_name, EngineStart start, Reconnector reconnect = {});

/// What the library does with a Session beyond its public API.
struct SessionInternals {
  /// Sends a Text Request carrying `text` (encoded key=value pairs, RFC 7143 §11.10) and returns
  /// the whole response text, continuations gathered (§11.11.2). Errors: session_closed /
  /// connection_closed, errc::timeout (SessionOptions::login_timeout), errc::protocol_error,
  /// errc::data_digest_error, EAGAIN when no ITT is free.
  static Awaitable<Result<std::vector<std::byte>>> text_request(Session& session, std::vector<std::byte> text);
};

}  // namespace iserkit::initiator
