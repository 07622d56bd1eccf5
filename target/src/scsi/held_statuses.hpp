// HeldStatuses: the statuses of copy commands an I_T nexus started, held per LIST IDENTIFIER until
// they are reported — EXTENDED COPY's for RECEIVE COPY RESULTS (SPC-4 §6.18.3: held until sent)
// and the token commands' for RECEIVE ROD TOKEN INFORMATION (SBC-4). A list identifier still in
// use by a running command of the nexus is refused (OPERATION IN PROGRESS); at most `max_held`
// are kept: a new one first drops the oldest finished status. Thread-safe. Layer 5 (target).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace iserkit::target {

/// See the file comment. `running(status)` says whether the command behind a status still runs.
template <typename Status, typename ListId, std::size_t max_held, bool (*running)(const Status&) noexcept>
class HeldStatuses {
 public:
  /// Registers a command of `nexus` with `list_id` and its first status; false when a running
  /// command of the nexus holds that list identifier.
  bool begin(std::uint64_t nexus, ListId list_id, Status initial) {
    std::lock_guard g(mutex_);
    auto it = find(nexus, list_id);
    if (it != held_.end()) {
      if (running(it->status)) return false;
      held_.erase(it);
    }
    if (held_.size() >= max_held) {
      auto done = std::find_if(held_.begin(), held_.end(), [](const Held& h) { return !running(h.status); });
      if (done != held_.end()) held_.erase(done);
      // Otherwise only running commands are held: their number has its own bound.
    }
    held_.push_back({nexus, list_id, std::move(initial)});
    return true;
  }
  /// Replaces the held status of (`nexus`, `list_id`).
  void update(std::uint64_t nexus, ListId list_id, const Status& status) {
    std::lock_guard g(mutex_);
    if (auto it = find(nexus, list_id); it != held_.end()) it->status = status;
  }
  /// The held status, or nullopt; a finished one is handed out once and then dropped.
  std::optional<Status> take(std::uint64_t nexus, ListId list_id) {
    std::lock_guard g(mutex_);
    auto it = find(nexus, list_id);
    if (it == held_.end()) return std::nullopt;
    Status s = it->status;
    if (!running(s)) held_.erase(it);
    return s;
  }
  /// Drops the statuses of a nexus that ended.
  void forget(std::uint64_t nexus) {
    std::lock_guard g(mutex_);
    std::erase_if(held_, [&](const Held& h) { return h.nexus == nexus; });
  }

 private:
  struct Held {
    std::uint64_t nexus;
    ListId list_id;
    Status status;
  };
  auto find(std::uint64_t nexus, ListId list_id) {
    return std::find_if(held_.begin(), held_.end(), [&](const Held& h) { return h.nexus == nexus && h.list_id == list_id; });
  }

  std::mutex mutex_;
  std::vector<Held> held_;  // oldest first
};

}  // namespace iserkit::target
