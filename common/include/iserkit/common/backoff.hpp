// Backoff: the waits of a loop that tries again after failures — a delay that starts at `initial`,
// is multiplied by `factor` after each failure and stays bounded by a cap, optionally jittered.
// Used by every such loop: the initiator session's reconnect (reconnect_delay_min 0.1 s doubling
// to reconnect_delay_max 5 s, jittered), the multipath device's path reinstatement
// (reinstate_delay_min 1 s doubling to reinstate_delay_max 5 s, jittered) and the LU handle's
// BUSY / TASK SET FULL retries (10 ms doubling to 1 s, no jitter). Layer 0: pure (no clock, no
// timer, no global random source; the jitter draws from a source the caller injects).
#pragma once

#include <chrono>
#include <limits>

namespace iserkit {

/// A bounded exponential back-off, in milliseconds. delay() starts at `initial`; failed()
/// multiplies it by `factor`, bounded by max(cap, initial) (a cap below `initial` does not shorten
/// the first wait), saturating instead of overflowing; reset() starts again from `initial`.
/// Negative durations count as 0. Not thread-safe (one per loop).
class Backoff {
 public:
  using Duration = std::chrono::milliseconds;

  /// `initial`: the first delay; `cap`: the largest delay; `factor`: growth per failure (0 is
  /// treated as 1: a constant delay).
  constexpr Backoff(Duration initial, Duration cap, unsigned factor = 2) noexcept
      : initial_(initial.count() < 0 ? Duration(0) : initial),
        bound_(cap > initial_ ? cap : initial_),
        factor_(factor == 0 ? 1 : factor),
        delay_(initial_) {}

  /// The current delay (before jitter).
  [[nodiscard]] constexpr Duration delay() const noexcept { return delay_; }
  /// The largest delay failed() reaches: max(cap, initial).
  [[nodiscard]] constexpr Duration bound() const noexcept { return bound_; }

  /// An attempt failed: the next delay is delay() × factor, at most bound().
  constexpr void failed() noexcept {
    const auto d = delay_.count();
    const auto limit = bound_.count();
    // d × factor <= limit exactly when d <= limit / factor (integer division): no overflow.
    delay_ = d > limit / static_cast<Duration::rep>(factor_) ? bound_ : Duration(d * static_cast<Duration::rep>(factor_));
  }

  /// Starts again from `initial` (an attempt succeeded, or the wait was cut short on purpose).
  constexpr void reset() noexcept { delay_ = initial_; }

  /// The current delay with jitter: half of delay() (rounded down) plus `random() % (half + 1)`,
  /// so between delay() / 2 and delay(), and loops that failed together do not retry together.
  /// `random`: any callable returning an unsigned integer, e.g. a std::minstd_rand.
  template <class Random>
  [[nodiscard]] Duration jittered(Random& random) const {
    const auto half = delay_.count() / 2;
    return Duration(half + static_cast<Duration::rep>(random() % static_cast<unsigned long>(half + 1)));
  }

 private:
  Duration initial_;
  Duration bound_;
  unsigned factor_;
  Duration delay_;
};

}  // namespace iserkit
