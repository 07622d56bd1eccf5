// What the initiator does with an Asynchronous Message (RFC 7143 §11.9.1 AsyncEvent codes):
// 1 logout request → log out within Parameter3 seconds (DefaultTime2Retain bounds are the
// target's business); 2/3 the target will drop the connection(s) → fail the session now, cleanly;
// 0 SCSI asynchronous event and 4 renegotiation request → log only; anything else → log.
// Sans-I/O: a pure decision the session acts on.
#pragma once

#include <chrono>

#include "iserkit/iscsi/pdu.hpp"

namespace iserkit::initiator {

struct AsyncDecision {
  enum class Kind { ignore, logout, fail_session } kind = Kind::ignore;
  /// For logout: the time the target allows (Parameter3 seconds; at least 1 s so the logout has a
  /// chance, and 0 from the target means "as soon as possible").
  std::chrono::seconds within{0};
};

inline AsyncDecision decide_async(const iscsi::AsyncMessage& a) noexcept {
  switch (a.event) {
    case iscsi::AsyncEvent::logout_request:
      // RFC 7143 §11.9.1: Parameter3 is the time to wait before the target drops the connection.
      return {AsyncDecision::Kind::logout, std::chrono::seconds(a.parameter3 == 0 ? 1 : a.parameter3)};
    case iscsi::AsyncEvent::drop_connection:
    case iscsi::AsyncEvent::drop_all_connections:
      // RFC 7143 §11.9.1: the target drops the connection(s); at ErrorRecoveryLevel 0 the session
      // ends with it.
      return {AsyncDecision::Kind::fail_session, {}};
    default: return {};
  }
}

}  // namespace iserkit::initiator
