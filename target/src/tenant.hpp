// Tenant bookkeeping of the portals (target/README.md "Tenants"): the count of sessions open on one
// tenant's portals against the tenant's cap. Pure (no sockets, no Asio); thread-safe, since a
// tenant's connections run on every I/O thread.
#pragma once

#include <cstdint>
#include <mutex>

namespace iserkit::target {

/// Sessions open on one tenant's portals, capped (TenantLimits::max_sessions).
class TenantSessions {
 public:
  /// `max_sessions`: sessions open at once; 0 = no cap.
  explicit TenantSessions(std::uint32_t max_sessions) noexcept : max_(max_sessions) {}

  /// A login on the tenant's portals is about to complete: true (and counted until close())
  /// when the tenant is below its cap; false at the cap (the login is refused, nothing counted).
  [[nodiscard]] bool try_open() noexcept {
    std::lock_guard lock(mutex_);
    if (max_ != 0 && open_ >= max_) return false;
    ++open_;
    return true;
  }

  /// A reinstating login (RFC 7143 §6.3.5: same InitiatorName + ISID as a live session of the
  /// same target, hence of the same tenant) is about to complete: counted even at the cap, since
  /// the session it replaces holds a slot and ends (giving it back with close()) before this
  /// login's final Login Response. So a tenant at its cap can always reinstate; the count exceeds
  /// the cap only for that moment.
  void open_replacing() noexcept {
    std::lock_guard lock(mutex_);
    ++open_;
  }

  /// A session try_open() or open_replacing() counted has ended.
  void close() noexcept {
    std::lock_guard lock(mutex_);
    if (open_ > 0) --open_;
  }

  /// Sessions counted now.
  [[nodiscard]] std::uint32_t open() const noexcept {
    std::lock_guard lock(mutex_);
    return open_;
  }
  /// The cap (0 = none).
  [[nodiscard]] std::uint32_t max() const noexcept { return max_; }

 private:
  mutable std::mutex mutex_;
  std::uint32_t max_;
  std::uint32_t open_ = 0;
};

}  // namespace iserkit::target
