// The JSON status document of iserkit-nbd (--status-socket; `iserkit status PATH` reads it).
// Field names are stable (add, never rename): nbd_bridge/README.md "Status".
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "iserkit/initiator/multipath.hpp"
#include "iserkit/initiator/session.hpp"

namespace iserkit::nbd {

/// One event loop of the bridge (iserkit-nbd --threads N, N > 1), for the "loops" array.
struct LoopStatus {
  const char* state = "connecting";  ///< the loop's session: connecting, connected, recovering, gave_up, stopped
  initiator::SessionStats session;   ///< its counters (as last sampled)
  std::uint64_t open_connections = 0;  ///< NBD connections on the loop now
  std::uint64_t connections = 0;       ///< NBD connections handed to the loop so far
  std::uint64_t requests = 0;          ///< NBD requests read on them so far
};

/// A session logging in again in the background (bridge state recovering or gave_up), for the
/// "reconnect" object: from initiator::Session::reconnect_status().
struct ReconnectView {
  std::uint64_t attempts = 0;  ///< logins tried since the connection was lost
  /// Milliseconds until the next login starts; nullopt while one is under way.
  std::optional<std::uint64_t> next_attempt_in_ms;
  std::string last_error;      ///< why the last login failed; empty if none failed yet
};

/// {"program": "iserkit-nbd", "state", "since" (UTC, ISO 8601), "session": {counters} or null,
/// "reconnect": {"attempts", "next_attempt_in_ms" (null while a login runs), "last_error"} or null,
/// "multipath": {"policy", counters, "paths": [...]} or null, "copied_payload_bytes",
/// "buffer_budget", "threads", "loops": [...] or null}.
/// `session`: the session counters (summed over the loops with several) or null (not connected
/// yet, or multipath); `multipath` null in the other mode. Call on the bridge's main loop thread
/// (the multipath object is single-threaded).
/// `buffered_bytes`: NBD payload bytes held now by every client connection ("buffer_budget":
/// {"used_bytes", "limit_bytes_per_connection"}). `loops`: one entry per event loop with
/// --threads N > 1 ("loops": [{"index", "state", "open_connections", "connections", "requests",
/// "commands_sent", "data_in_bytes", "data_out_bytes", "connections_lost", "recoveries"}]);
/// empty = one loop ("loops": null). `reconnect`: null while no session logs in again (connected,
/// or multipath, whose paths say where they stand).
std::string bridge_status_json(const char* state, const std::string& since_utc, const initiator::SessionStats* session,
                               const initiator::Multipath* multipath, std::uint64_t copied_payload_bytes,
                               std::uint64_t buffered_bytes = 0, std::uint64_t buffer_limit_bytes = 0,
                               std::span<const LoopStatus> loops = {}, const ReconnectView* reconnect = nullptr);

}  // namespace iserkit::nbd
