// ConnectionAdmission: which new TCP/iSER connections the portals take, so that neither silent
// connections stuck in the login phase nor a descriptor shortage can lock a legitimate initiator
// out (target/README.md "Limits"), and one tenant's connections cannot lock out another tenant's
// (target/README.md "Tenants"). Pure bookkeeping (no sockets, no Asio): the portal asks it on every
// accept and tells it when a connection finished its login or closed; it answers admit,
// admit-after-evicting-one, or refuse. Connections belong to groups (0: the portals of no tenant,
// 1 + i: tenant i), each with optional caps of its own under the target-wide ones. Thread-safe
// (connections live on several I/O threads).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace iserkit::target {

/// The portal's decision for one new connection.
struct AdmissionDecision {
  bool admit = false;  ///< false: close the new connection at once
  /// When admitting needed room: the connection (id from on_accept) to close first, a connection
  /// still logging in (see on_accept for which).
  std::optional<std::uint64_t> evict;
};

/// One group's own caps (a tenant's `limits`), under the target-wide ones. 0 = no cap of its own.
struct AdmissionGroupLimits {
  std::uint64_t max_open = 0;        ///< connections of the group open at once (count)
  std::uint64_t max_logging_in = 0;  ///< of those, connections in the login phase (count)
};

/// Caps on open connections (a file descriptor reserve) and on connections still logging in,
/// target-wide and per group.
class ConnectionAdmission {
 public:
  /// `max_open`: connections open at once (RLIMIT_NOFILE minus the reserve; >= 1).
  /// `max_logging_in`: of those, connections in the login phase (>= 1).
  /// `groups[g]`: group g's own caps (groups beyond the vector have none).
  ConnectionAdmission(std::uint64_t max_open, std::uint64_t max_logging_in,
                      std::vector<AdmissionGroupLimits> groups = {}) noexcept
      : max_open_(max_open < 1 ? 1 : max_open),
        max_logging_in_(max_logging_in < 1 ? 1 : max_logging_in),
        limits_(std::move(groups)) {}

  /// A connection `id` (unique, caller's choice) of group `group` was accepted. Admitted
  /// connections count as logging in. When a cap is reached, one connection still logging in is
  /// evicted to make room (its id is returned; it counts as closed from now on, so a later
  /// on_closed() for it is ignored):
  ///  - at a cap of the group's own: the group's oldest one; with none logging in (every open
  ///    connection of the group is a session) the new connection is refused;
  ///  - at a target-wide cap: the oldest one of the group with the most connections logging in,
  ///    so a group flooding the portals evicts its own connections, not another group's; with none
  ///    logging in anywhere, the new connection is refused.
  AdmissionDecision on_accept(std::uint64_t id, std::size_t group = 0) {
    std::lock_guard lock(mutex_);
    AdmissionDecision d;
    Group& g = groups_[group];
    const AdmissionGroupLimits own = group < limits_.size() ? limits_[group] : AdmissionGroupLimits{};
    const bool group_full = (own.max_open != 0 && g.open >= own.max_open) ||
                            (own.max_logging_in != 0 && g.logging_in.size() >= own.max_logging_in);
    const bool target_full = open_ >= max_open_ || logging_in_ >= max_logging_in_;
    if (group_full) {
      if (g.logging_in.empty()) return d;  // every open connection of the group is a session
      d.evict = evict_oldest(g);
    } else if (target_full) {
      Group* most = nullptr;
      for (auto& [n, other] : groups_)
        if (!other.logging_in.empty() && (most == nullptr || other.logging_in.size() > most->logging_in.size()))
          most = &other;
      if (most == nullptr) return d;  // every open connection is a session: refuse
      d.evict = evict_oldest(*most);
    }
    d.admit = true;
    ++open_;
    ++logging_in_;
    ++g.open;
    g.logging_in.push_back(id);
    group_of_.emplace(id, group);
    return d;
  }

  /// Connection `id` completed its login: it no longer counts as logging in (nor can be evicted).
  void on_logged_in(std::uint64_t id) {
    std::lock_guard lock(mutex_);
    auto it = group_of_.find(id);
    if (it == group_of_.end()) return;
    auto& queue = groups_[it->second].logging_in;
    if (auto pos = std::find(queue.begin(), queue.end(), id); pos != queue.end()) {
      queue.erase(pos);
      --logging_in_;
    }
  }

  /// Connection `id` closed. Ignored for ids evicted or never admitted.
  void on_closed(std::uint64_t id) {
    std::lock_guard lock(mutex_);
    auto it = group_of_.find(id);
    if (it == group_of_.end()) return;  // evicted earlier, or never admitted
    Group& g = groups_[it->second];
    group_of_.erase(it);
    if (auto pos = std::find(g.logging_in.begin(), g.logging_in.end(), id); pos != g.logging_in.end()) {
      g.logging_in.erase(pos);
      --logging_in_;
    }
    --g.open;
    --open_;
  }

  /// Open connections counted now (all groups).
  [[nodiscard]] std::uint64_t open() const {
    std::lock_guard lock(mutex_);
    return open_;
  }
  /// Connections counted as logging in now (all groups).
  [[nodiscard]] std::uint64_t logging_in() const {
    std::lock_guard lock(mutex_);
    return logging_in_;
  }
  /// Open connections of group `group`.
  [[nodiscard]] std::uint64_t open(std::size_t group) const {
    std::lock_guard lock(mutex_);
    auto it = groups_.find(group);
    return it == groups_.end() ? 0 : it->second.open;
  }
  /// Connections of group `group` logging in.
  [[nodiscard]] std::uint64_t logging_in(std::size_t group) const {
    std::lock_guard lock(mutex_);
    auto it = groups_.find(group);
    return it == groups_.end() ? 0 : it->second.logging_in.size();
  }

 private:
  struct Group {
    std::uint64_t open = 0;
    std::deque<std::uint64_t> logging_in;  // oldest first
  };
  // Evicts the oldest connection of `g` logging in (there is one): it counts as closed now.
  std::uint64_t evict_oldest(Group& g) {
    const std::uint64_t id = g.logging_in.front();
    g.logging_in.pop_front();
    group_of_.erase(id);
    --g.open;
    --open_;
    --logging_in_;
    return id;
  }

  mutable std::mutex mutex_;
  std::uint64_t max_open_;
  std::uint64_t max_logging_in_;
  std::vector<AdmissionGroupLimits> limits_;
  std::uint64_t open_ = 0;
  std::uint64_t logging_in_ = 0;
  std::unordered_map<std::size_t, Group> groups_;
  std::unordered_map<std::uint64_t, std::size_t> group_of_;  // admitted and not closed or evicted
};

}  // namespace iserkit::target
