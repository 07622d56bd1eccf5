// PingMonitor: when to send a NOP-Out ping and when an unanswered one declares the connection
// dead (RFC 7143 §11.18 NOP-Out with a valid ITT asks for a NOP-In echoing it, §11.19; §7.1.2
// connection failure detection). Sans-I/O: the session feeds it the clock and what it received;
// it answers with the action. No timers of its own.
#pragma once

#include <chrono>
#include <optional>

namespace iserkit::initiator {

class PingMonitor {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Action { none, send_ping, connection_dead };

  /// `interval`: silence from the target (no PDU at all) before a ping; 0 = never ping.
  /// `timeout`: how long a ping may stay unanswered.
  PingMonitor(std::chrono::milliseconds interval, std::chrono::milliseconds timeout, Clock::time_point now) noexcept
      : interval_(interval), timeout_(timeout), last_receive_(now) {}

  [[nodiscard]] bool enabled() const noexcept { return interval_.count() > 0; }

  /// Any PDU arrived from the target.
  void on_receive(Clock::time_point now) noexcept { last_receive_ = now; }
  /// A ping went out.
  void on_ping_sent(Clock::time_point now) noexcept { ping_sent_ = now; }
  /// The NOP-In answering our ping arrived.
  void on_pong() noexcept { ping_sent_.reset(); }
  [[nodiscard]] bool ping_outstanding() const noexcept { return ping_sent_.has_value(); }

  /// What to do at `now`: declare the connection dead when the ping is older than the timeout,
  /// ping when the target was silent for the interval and no ping is out, else nothing.
  [[nodiscard]] Action on_tick(Clock::time_point now) const noexcept {
    if (!enabled()) return Action::none;
    if (ping_sent_) return now - *ping_sent_ >= timeout_ ? Action::connection_dead : Action::none;
    return now - last_receive_ >= interval_ ? Action::send_ping : Action::none;
  }

  /// When on_tick() may next return something other than none.
  [[nodiscard]] Clock::time_point next_check() const noexcept {
    if (ping_sent_) return *ping_sent_ + timeout_;
    return last_receive_ + interval_;
  }

 private:
  std::chrono::milliseconds interval_;
  std::chrono::milliseconds timeout_;
  Clock::time_point last_receive_;
  std::optional<Clock::time_point> ping_sent_;
};

}  // namespace iserkit::initiator
