// The JSON status document of iserkit-nbd (--status-socket; `iserkit status PATH` reads it).
// Field names are stable (add, never rename): nbd_bridge/README.md "Status".
#pragma once

#include <cstdint>
#include <string>

#include "iserkit/initiator/multipath.hpp"
#include "iserkit/initiator/session.hpp"

namespace iserkit::nbd {

/// {"program": "iserkit-nbd", "state", "since" (UTC, ISO 8601), "session": {counters} or null,
/// "multipath": {"policy", counters, "paths": [...]} or null, "copied_payload_bytes"}.
/// `session` / `multipath` may be null (not connected yet, or the other mode). Call on the
/// bridge's io_context thread (the session and multipath are single-threaded).
/// `buffered_bytes`: NBD payload bytes held now by every client connection ("buffer_budget":
/// {"used_bytes", "limit_bytes_per_connection"}).
std::string bridge_status_json(const char* state, const std::string& since_utc, const initiator::Session* session,
                               const initiator::Multipath* multipath, std::uint64_t copied_payload_bytes,
                               std::uint64_t buffered_bytes = 0, std::uint64_t buffer_limit_bytes = 0);

}  // namespace iserkit::nbd
