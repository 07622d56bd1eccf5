// LoginThrottle: failed authentications counted per source address, so a peer guessing CHAP
// secrets is slowed down (RFC 7143 §12.1.3 leaves brute force to the implementation; §9.2 lists
// it among the threats). Policy (LoginThrottleOptions): the first `free_failures` failures from an
// address cost nothing; each later one blocks the address for base_delay, then 2×, 4×, … up to
// max_delay (base_delay 0 or max_addresses 0 turns throttling off); while blocked, a new login from it is refused
// at once (status 0x0301, service unavailable: try later) without looking at its credentials. An
// address whose last failure is older than `forget_after` starts afresh. A successful login does
// not clear the count (a known credential must not buy fresh guesses at another). The table holds
// at most `max_addresses` entries: the least recently failed one is dropped to make room, so many
// source addresses cannot grow it without bound. Pure: time comes in as an argument; a mutex
// makes one instance shareable by the I/O threads.
#pragma once

#include <chrono>
#include <cstddef>
#include <list>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "iserkit/target/config.hpp"

namespace iserkit::target {

/// Failed-login throttling per source address (see the file comment). Thread-safe.
class LoginThrottle {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  explicit LoginThrottle(LoginThrottleOptions options = {}) : options_(options) {}

  /// Replaces the policy (at setup, before any login). Entries already counted are kept.
  void set_options(LoginThrottleOptions options);

  /// How long logins from `address` stay refused from `now`; zero = a login may proceed.
  [[nodiscard]] std::chrono::milliseconds blocked_for(std::string_view address, TimePoint now);

  /// Counts one failed authentication from `address` at `now`. Returns the block now in force for
  /// that address (zero while it still has free failures).
  std::chrono::milliseconds record_failure(std::string_view address, TimePoint now);

  /// Addresses currently tracked (at most options.max_addresses).
  [[nodiscard]] std::size_t size() const;

 private:
  struct Entry {
    unsigned failures = 0;
    TimePoint last_failure{};
    TimePoint blocked_until{};
    std::list<std::string>::iterator order;  // position in order_ (least recently failed first)
  };
  void forget_if_stale(std::unordered_map<std::string, Entry>::iterator it, TimePoint now);

  mutable std::mutex mutex_;
  LoginThrottleOptions options_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> order_;
};

/// The address part of a datamover peer string: "192.0.2.1:3260" → "192.0.2.1",
/// "[2001:db8::1]:3260" → "2001:db8::1"; anything else is returned as it is.
std::string address_of_peer(std::string_view peer);

}  // namespace iserkit::target
