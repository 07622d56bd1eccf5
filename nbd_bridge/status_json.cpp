// The bridge's status as JSON (status_json.hpp).
#include "nbd_bridge/status_json.hpp"

#include <algorithm>
#include <chrono>

#include <nlohmann/json.hpp>

namespace iserkit::nbd {
namespace {

/// Milliseconds from now until `at` (0 once passed), or null when there is none.
nlohmann::ordered_json next_attempt_in_ms(const std::optional<std::chrono::steady_clock::time_point>& at) {
  if (!at) return nullptr;
  const auto in = std::chrono::duration_cast<std::chrono::milliseconds>(*at - std::chrono::steady_clock::now()).count();
  return static_cast<std::uint64_t>(std::max<std::int64_t>(0, in));
}

}  // namespace

std::string bridge_status_json(const char* state, const std::string& since_utc, const initiator::SessionStats* session,
                               const initiator::Multipath* multipath, std::uint64_t copied_payload_bytes,
                               std::uint64_t buffered_bytes, std::uint64_t buffer_limit_bytes,
                               std::span<const LoopStatus> loops, const ReconnectView* reconnect) {
  using Json = nlohmann::ordered_json;
  Json doc = {{"program", "iserkit-nbd"}, {"state", state}, {"since", since_utc}};
  if (session) {
    const auto& st = *session;
    doc["session"] = {{"commands_sent", st.commands_sent},
                      {"data_in_bytes", st.data_in_bytes_placed},
                      {"data_out_bytes", st.data_out_bytes_sent},
                      {"connections_lost", st.connections_lost},
                      {"reconnect_attempts", st.reconnect_attempts},
                      {"recoveries", st.recoveries},
                      {"commands_reissued", st.commands_reissued},
                      {"gave_up", st.gave_up},
                      {"pings_sent", st.pings_sent},
                      {"pings_answered", st.pings_answered}};
  } else {
    doc["session"] = nullptr;
  }
  if (reconnect) {
    doc["reconnect"] = {{"attempts", reconnect->attempts},
                        {"next_attempt_in_ms", reconnect->next_attempt_in_ms ? Json(*reconnect->next_attempt_in_ms)
                                                                             : Json(nullptr)},
                        {"last_error", reconnect->last_error}};
  } else {
    doc["reconnect"] = nullptr;
  }
  if (multipath) {
    const auto& st = multipath->stats();
    Json paths = Json::array();
    for (const auto& p : multipath->paths()) {
      paths.push_back({{"url", p.url},
                       {"peer", p.peer},
                       {"state", initiator::to_string(p.state)},
                       {"alua", scsi::to_string(p.access_state)},
                       {"commands", p.commands},
                       {"failures", p.failures},
                       {"downs", p.downs},
                       {"reinstatements", p.reinstatements},
                       {"reinstate_attempts", p.reinstate_attempts},
                       {"next_attempt_in_ms", next_attempt_in_ms(p.next_attempt)},
                       {"data_in_bytes", p.data_in_bytes},
                       {"data_out_bytes", p.data_out_bytes}});
    }
    doc["multipath"] = {{"policy", initiator::to_string(multipath->policy())},
                        {"commands", st.commands},
                        {"path_downs", st.path_downs},
                        {"path_ups", st.path_ups},
                        {"path_retries", st.path_retries},
                        {"alua_retries", st.alua_retries},
                        {"flushes_held", st.flushes_held},
                        {"gave_up", st.gave_up},
                        {"paths", std::move(paths)}};
  } else {
    doc["multipath"] = nullptr;
  }
  doc["copied_payload_bytes"] = copied_payload_bytes;
  doc["buffer_budget"] = {{"used_bytes", buffered_bytes}, {"limit_bytes_per_connection", buffer_limit_bytes}};
  doc["threads"] = loops.empty() ? std::size_t{1} : loops.size();
  if (loops.empty()) {
    doc["loops"] = nullptr;
  } else {
    Json array = Json::array();
    for (std::size_t i = 0; i < loops.size(); ++i) {
      const auto& l = loops[i];
      array.push_back({{"index", i},
                       {"state", l.state},
                       {"open_connections", l.open_connections},
                       {"connections", l.connections},
                       {"requests", l.requests},
                       {"commands_sent", l.session.commands_sent},
                       {"data_in_bytes", l.session.data_in_bytes_placed},
                       {"data_out_bytes", l.session.data_out_bytes_sent},
                       {"connections_lost", l.session.connections_lost},
                       {"recoveries", l.session.recoveries}});
    }
    doc["loops"] = std::move(array);
  }
  return doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace iserkit::nbd
