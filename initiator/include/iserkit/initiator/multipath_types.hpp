// The values of a Multipath device that carry no I/O: its policy, the events and status of its
// paths and its counters (Multipath, multipath.hpp, reports them; MultipathEngine and
// PathSelector, the sans-I/O layer 2 under it, use them). No Asio in this header's include graph,
// so the multipath engine builds in the Asio-free engine library (initiator/CMakeLists.txt).
// Layer 6 (public API).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "iserkit/scsi/alua.hpp"

namespace iserkit::initiator {

/// How commands are spread over the usable paths.
enum class MultipathPolicy {
  failover,     ///< one path at a time; the next one when it fails (or a better ALUA group appears)
  round_robin,  ///< each command to the next usable path of the best ALUA group
};
/// Parses "failover" or "round-robin"; nullopt for anything else.
std::optional<MultipathPolicy> parse_multipath_policy(std::string_view text) noexcept;
/// "failover" or "round-robin".
const char* to_string(MultipathPolicy policy) noexcept;

/// Something that happened to the paths (MultipathOptions::on_event).
struct PathEvent {
  enum class Kind {
    path_down,       ///< a path stopped taking commands (its connection failed or its session ended)
    path_up,         ///< a path logs in again (recovered or reinstated) and takes commands
    all_paths_lost,  ///< no path is usable: commands wait up to replacement_timeout
    gave_up,         ///< no usable path for replacement_timeout: waiting commands fail (session_lost)
  };
  Kind kind = Kind::path_down;
  std::size_t path = 0;    ///< path_down / path_up: which (index into the URLs)
  std::error_code error;   ///< path_down: why
};
/// "path down", "path up", "all paths lost", "gave up".
const char* to_string(PathEvent::Kind kind) noexcept;

/// Where one path stands (Multipath::paths()).
struct PathStatus {
  enum class State {
    up,          ///< logged in, takes commands (if its ALUA state allows)
    recovering,  ///< its session lost the connection and logs in again by itself
    down,        ///< no session: being reinstated in the background
    refused,     ///< leads to another logical unit: never used
  };
  State state = State::down;
  std::string url;           ///< the path's URL (password hidden)
  std::string peer;          ///< "ip:port" while a session exists
  /// ALUA state of the path's target port group (active/optimized when the unit has no TPGS).
  scsi::AccessState access_state = scsi::AccessState::active_optimized;
  std::optional<std::uint16_t> target_port_group;  ///< from VPD 0x83, when the unit reports one
  std::uint64_t commands = 0;        ///< commands sent on this path
  std::uint64_t failures = 0;        ///< commands that failed on it with a path error
  std::uint64_t downs = 0;           ///< times it went down
  std::uint64_t reinstatements = 0;  ///< times it came back (recovered or reinstated)
  /// While down: logins tried to reinstate it since it went down (failed ones included); 0 once up.
  std::uint64_t reinstate_attempts = 0;
  /// While down: when the next reinstating login starts (steady clock); nullopt while one runs,
  /// and while the path is up, recovering (its session logs in again itself) or refused.
  std::optional<std::chrono::steady_clock::time_point> next_attempt;
  /// Bytes of the commands completed on this path (their read / write buffers; a command sent
  /// again on another path counts only there).
  std::uint64_t data_in_bytes = 0;
  std::uint64_t data_out_bytes = 0;
};
/// "up", "recovering", "down", "refused".
const char* to_string(PathStatus::State state) noexcept;

/// Counters of the whole device.
struct MultipathStats {
  std::uint64_t commands = 0;               ///< execute() calls
  std::uint64_t path_retries = 0;           ///< commands sent again on another path after a path error
  std::uint64_t alua_retries = 0;           ///< commands sent again after an ALUA sense
  std::uint64_t alua_refreshes = 0;         ///< REPORT TARGET PORT GROUPS read
  std::uint64_t flushes_held = 0;           ///< SYNCHRONIZE CACHE that waited for earlier writes
  std::uint64_t path_downs = 0;             ///< path_down events
  std::uint64_t path_ups = 0;               ///< path_up events (after a down)
  std::uint64_t gave_up = 0;                ///< times the replacement timeout passed without a path
};

}  // namespace iserkit::initiator
