// Starting a Session's driver over a datamover that is already in full feature phase: used by
// Session::connect after login, and by tests that drive a Session over a fake Datamover.
#pragma once

#include <memory>
#include <string>

#include "iserkit/initiator/session.hpp"
#include "session_engine.hpp"

namespace iserkit::initiator {

/// Builds the engine from the negotiated `params` and `options` (lengths in bytes), starts the
/// receive loop, the timer and the sender on `ex` and returns the session. `start` is the
/// numbering at the end of login (RFC 7143 §11.12.8).
std::shared_ptr<Session> start_session(asio::any_io_executor ex, std::unique_ptr<datamover::Datamover> dm,
                                       SessionOptions options, const iscsi::OperationalParameters& params,
                                       std::string target_name, EngineStart start);

}  // namespace iserkit::initiator
