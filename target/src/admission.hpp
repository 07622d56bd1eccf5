// ConnectionAdmission: which new TCP/iSER connections the portals take, so that neither silent
// connections stuck in the login phase nor a descriptor shortage can lock a legitimate initiator
// out (target/README.md "Limits"). Pure bookkeeping (no sockets, no Asio): the portal asks it on
// every accept and tells it when a connection finished its login or closed; it answers admit,
// admit-after-evicting-one, or refuse. Thread-safe (connections live on several I/O threads).
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_set>

namespace iserkit::target {

/// The portal's decision for one new connection.
struct AdmissionDecision {
  bool admit = false;  ///< false: close the new connection at once
  /// When admitting needed room: the connection (id from on_accept) to close first, the oldest
  /// one still logging in.
  std::optional<std::uint64_t> evict;
};

/// Caps on open connections (a file descriptor reserve) and on connections still logging in.
class ConnectionAdmission {
 public:
  /// `max_open`: connections open at once (RLIMIT_NOFILE minus the reserve; >= 1).
  /// `max_logging_in`: of those, connections in the login phase (>= 1).
  ConnectionAdmission(std::uint64_t max_open, std::uint64_t max_logging_in) noexcept
      : max_open_(max_open < 1 ? 1 : max_open), max_logging_in_(max_logging_in < 1 ? 1 : max_logging_in) {}

  /// A connection `id` (unique, caller's choice) was accepted. At either cap the oldest
  /// connection still logging in is evicted to make room (its id is returned; it counts as closed
  /// from now on, so a later on_closed() for it is ignored); with none logging in, at the open
  /// cap the new connection is refused. Admitted connections count as logging in.
  AdmissionDecision on_accept(std::uint64_t id) {
    std::lock_guard lock(mutex_);
    AdmissionDecision d;
    if (open_ >= max_open_ || logging_in_.size() >= max_logging_in_) {
      if (logging_in_.empty()) return d;  // every open connection is a session: refuse
      d.evict = logging_in_.front();
      logging_in_.pop_front();
      counted_.erase(*d.evict);
      --open_;
    }
    d.admit = true;
    ++open_;
    logging_in_.push_back(id);
    counted_.insert(id);
    return d;
  }

  /// Connection `id` completed its login: it no longer counts as logging in (nor can be evicted).
  void on_logged_in(std::uint64_t id) {
    std::lock_guard lock(mutex_);
    std::erase(logging_in_, id);
  }

  /// Connection `id` closed. Ignored for ids evicted or never admitted.
  void on_closed(std::uint64_t id) {
    std::lock_guard lock(mutex_);
    if (counted_.erase(id) == 0) return;  // evicted earlier, or never admitted
    std::erase(logging_in_, id);
    --open_;
  }

  /// Open connections counted now.
  [[nodiscard]] std::uint64_t open() const {
    std::lock_guard lock(mutex_);
    return open_;
  }
  /// Connections counted as logging in now.
  [[nodiscard]] std::uint64_t logging_in() const {
    std::lock_guard lock(mutex_);
    return logging_in_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::uint64_t max_open_;
  std::uint64_t max_logging_in_;
  std::uint64_t open_ = 0;
  std::deque<std::uint64_t> logging_in_;  // oldest first
  std::unordered_set<std::uint64_t> counted_;  // ids counted in open_
};

}  // namespace iserkit::target
