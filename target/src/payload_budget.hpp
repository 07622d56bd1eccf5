// PayloadBudget: bytes of payload (task buffers for reads and writes) the target may hold for
// commands, handed out first come, first served (target/README.md "Limits"). Sans-I/O: requests,
// releases and cancellations go in, the ids granted come out; the caller wakes its waiters. One
// budget per connection (used on the connection's thread) and one for the whole target
// (SharedPayloadBudget: the same engine behind a mutex, waking waiters through callbacks).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace iserkit::target {

/// A FIFO byte budget. A request is granted when every earlier request was granted and its bytes
/// fit under the limit; a request larger than the whole limit is granted once nothing else is held
/// (it runs alone), so no request waits forever. Not thread-safe.
class PayloadBudget {
 public:
  /// `limit_bytes`: bytes that may be held at once (0 is treated as 1).
  explicit PayloadBudget(std::uint64_t limit_bytes) noexcept : limit_(limit_bytes == 0 ? 1 : limit_bytes) {}

  /// Asks for `bytes` for request `id` (unique among outstanding requests). Returns true when
  /// granted now (the bytes are held until release()); false when queued behind earlier requests
  /// or for lack of room — it is then granted by a later release(), or withdrawn with cancel().
  bool request(std::uint64_t id, std::uint64_t bytes) {
    if (queue_.empty() && fits(bytes)) {
      used_ += bytes;
      return true;
    }
    queue_.push_back({id, bytes});
    return false;
  }

  /// Gives back `bytes` of a granted request. Returns the ids of queued requests granted now, in
  /// request order (their bytes are held from now on).
  std::vector<std::uint64_t> release(std::uint64_t bytes) {
    used_ = bytes > used_ ? 0 : used_ - bytes;
    return grant();
  }

  /// Withdraws queued request `id`. Returns false when it is not queued (already granted, or
  /// unknown). Requests behind it may be granted now: their ids are appended to `granted`.
  bool cancel(std::uint64_t id, std::vector<std::uint64_t>& granted) {
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (it->id != id) continue;
      queue_.erase(it);
      auto more = grant();
      granted.insert(granted.end(), more.begin(), more.end());
      return true;
    }
    return false;
  }

  [[nodiscard]] std::uint64_t used() const noexcept { return used_; }
  [[nodiscard]] std::uint64_t limit() const noexcept { return limit_; }
  [[nodiscard]] std::size_t queued() const noexcept { return queue_.size(); }

 private:
  struct Waiting {
    std::uint64_t id;
    std::uint64_t bytes;
  };
  [[nodiscard]] bool fits(std::uint64_t bytes) const noexcept {
    // A request above the limit runs alone. Written without `used_ + bytes`, which could wrap.
    return used_ == 0 || (used_ <= limit_ && bytes <= limit_ - used_);
  }
  std::vector<std::uint64_t> grant() {
    std::vector<std::uint64_t> out;
    while (!queue_.empty() && fits(queue_.front().bytes)) {
      used_ += queue_.front().bytes;
      out.push_back(queue_.front().id);
      queue_.pop_front();
    }
    return out;
  }

  std::uint64_t limit_;
  std::uint64_t used_ = 0;
  std::deque<Waiting> queue_;
};

/// A PayloadBudget shared by every connection of the target (all I/O threads). A queued request
/// names a callback; it is called (outside the lock, on the releasing thread) when the request is
/// granted, and must hand the grant over to its own thread (e.g. asio::post). Thread-safe.
class SharedPayloadBudget {
 public:
  /// `limit_bytes`: as PayloadBudget; `name`: what logs call it ("target-wide", "tenant blue").
  explicit SharedPayloadBudget(std::uint64_t limit_bytes, std::string name = "target-wide")
      : budget_(limit_bytes), name_(std::move(name)) {}

  /// Returns a fresh request id.
  std::uint64_t next_id() {
    std::lock_guard lock(mutex_);
    return next_id_++;
  }

  /// As PayloadBudget::request(); when queued, `on_grant` (any void() callable) runs once the bytes
  /// are granted. It becomes a std::function only when queued: a request granted at once allocates
  /// nothing.
  template <class OnGrant>
  bool request(std::uint64_t id, std::uint64_t bytes, OnGrant&& on_grant) {
    std::unique_lock lock(mutex_);
    if (budget_.request(id, bytes)) return true;
    callbacks_.emplace(id, std::function<void()>(std::forward<OnGrant>(on_grant)));
    if (budget_.queued() == 1) {
      ++full_episodes_;
      full_noticed_ = false;
    }
    return false;
  }

  /// Once per episode of the budget being full (a request queued while none was): the bytes held
  /// then, for one log line; std::nullopt when this episode was reported already or none began.
  std::optional<std::uint64_t> take_full_notice() {
    std::lock_guard lock(mutex_);
    if (full_noticed_ || full_episodes_ == 0) return std::nullopt;
    full_noticed_ = true;
    return budget_.used();
  }

  /// Gives back `bytes` of a granted request and runs the callbacks of the requests granted now.
  void release(std::uint64_t bytes) {
    std::unique_lock lock(mutex_);
    notify(lock, budget_.release(bytes));
  }

  /// Withdraws queued request `id`: true when it was still queued (its callback will never run);
  /// false when it was granted already (its callback ran or is running: the bytes are held and the
  /// caller must release() them).
  bool cancel(std::uint64_t id) {
    std::unique_lock lock(mutex_);
    std::vector<std::uint64_t> granted;
    const bool was_queued = budget_.cancel(id, granted);
    if (was_queued) callbacks_.erase(id);
    notify(lock, std::move(granted));
    return was_queued;
  }

  [[nodiscard]] std::uint64_t used() const {
    std::lock_guard lock(mutex_);
    return budget_.used();
  }
  /// Requests waiting now.
  [[nodiscard]] std::size_t queued() const {
    std::lock_guard lock(mutex_);
    return budget_.queued();
  }
  /// Times the budget became full: a request had to queue while none was queued (a counter for
  /// logs and tests).
  [[nodiscard]] std::uint64_t full_episodes() const {
    std::lock_guard lock(mutex_);
    return full_episodes_;
  }
  /// The limit in bytes (fixed at construction).
  [[nodiscard]] std::uint64_t limit() const noexcept { return budget_.limit(); }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  void notify(std::unique_lock<std::mutex>& lock, std::vector<std::uint64_t> granted) {
    std::vector<std::function<void()>> run;
    for (auto id : granted) {
      if (auto it = callbacks_.find(id); it != callbacks_.end()) {
        run.push_back(std::move(it->second));
        callbacks_.erase(it);
      }
    }
    lock.unlock();
    for (auto& f : run) f();
  }

  mutable std::mutex mutex_;
  PayloadBudget budget_;
  std::unordered_map<std::uint64_t, std::function<void()>> callbacks_;
  std::uint64_t next_id_ = 1;
  std::string name_;
  std::uint64_t full_episodes_ = 0;
  bool full_noticed_ = true;
};

}  // namespace iserkit::target
