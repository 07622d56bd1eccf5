// Failed-login throttling per source address (see login_throttle.hpp for the policy).
#include "login_throttle.hpp"

#include <algorithm>

#include "iserkit/common/host_port.hpp"

namespace iserkit::target {

void LoginThrottle::set_options(LoginThrottleOptions options) {
  std::lock_guard lock(mutex_);
  options_ = options;
}

void LoginThrottle::forget_if_stale(std::unordered_map<std::string, Entry>::iterator it, TimePoint now) {
  if (now - it->second.last_failure >= options_.forget_after && now >= it->second.blocked_until) {
    order_.erase(it->second.order);
    entries_.erase(it);
  }
}

std::chrono::milliseconds LoginThrottle::blocked_for(std::string_view address, TimePoint now) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(std::string(address));
  if (it == entries_.end()) return std::chrono::milliseconds{0};
  if (now < it->second.blocked_until)
    return std::chrono::ceil<std::chrono::milliseconds>(it->second.blocked_until - now);
  forget_if_stale(it, now);
  return std::chrono::milliseconds{0};
}

std::chrono::milliseconds LoginThrottle::record_failure(std::string_view address, TimePoint now) {
  std::lock_guard lock(mutex_);
  if (options_.max_addresses == 0 || options_.base_delay.count() <= 0) return std::chrono::milliseconds{0};  // off
  std::string key(address);
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    forget_if_stale(it, now);
    it = entries_.find(key);
  }
  if (it == entries_.end()) {
    // Bounded table: drop the least recently failed address to make room.
    while (entries_.size() >= options_.max_addresses) {
      entries_.erase(order_.front());
      order_.pop_front();
    }
    order_.push_back(key);
    it = entries_.emplace(std::move(key), Entry{.order = std::prev(order_.end())}).first;
  } else {
    order_.splice(order_.end(), order_, it->second.order);  // now the most recently failed
  }
  Entry& e = it->second;
  ++e.failures;
  e.last_failure = now;
  if (e.failures <= options_.free_failures) return std::chrono::milliseconds{0};
  // base × 2^(failures - free_failures - 1), capped; the shift is bounded so it cannot overflow.
  const unsigned doublings = std::min(e.failures - options_.free_failures - 1, 30u);
  auto block = std::chrono::milliseconds(options_.base_delay.count() << doublings);
  if (block > options_.max_delay || block.count() < 0) block = options_.max_delay;
  e.blocked_until = now + block;
  return block;
}

std::size_t LoginThrottle::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

std::string address_of_peer(std::string_view peer) {
  auto hp = parse_host_port(peer);
  if (!hp || hp->host.empty()) return std::string(peer);
  return std::move(hp->host);
}

}  // namespace iserkit::target
