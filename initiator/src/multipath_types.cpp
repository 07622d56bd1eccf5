// The names of the multipath values (iserkit/initiator/multipath_types.hpp); part of the Asio-free
// engine library with the multipath engine.
#include "iserkit/initiator/multipath_types.hpp"

namespace iserkit::initiator {

std::optional<MultipathPolicy> parse_multipath_policy(std::string_view text) noexcept {
  if (text == "failover") return MultipathPolicy::failover;
  if (text == "round-robin") return MultipathPolicy::round_robin;
  return std::nullopt;
}
const char* to_string(MultipathPolicy policy) noexcept {
  return policy == MultipathPolicy::round_robin ? "round-robin" : "failover";
}
const char* to_string(PathEvent::Kind kind) noexcept {
  switch (kind) {
    case PathEvent::Kind::path_down: return "path down";
    case PathEvent::Kind::path_up: return "path up";
    case PathEvent::Kind::all_paths_lost: return "all paths lost";
    case PathEvent::Kind::gave_up: return "gave up";
  }
  return "unknown";
}
const char* to_string(PathStatus::State state) noexcept {
  switch (state) {
    case PathStatus::State::up: return "up";
    case PathStatus::State::recovering: return "recovering";
    case PathStatus::State::down: return "down";
    case PathStatus::State::refused: return "refused";
  }
  return "unknown";
}

}  // namespace iserkit::initiator
