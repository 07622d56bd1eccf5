// PathSelector: which path of a Multipath the next command takes. Sans-I/O and pure: the driver
// (multipath.cpp) tells it which paths are up and their ALUA access state, and asks pick().
//  - ALUA (SPC-5 §5.16.2.4): active/optimized paths first, active/non-optimized (and logical block
//    dependent) next; standby, unavailable, offline and transitioning paths are never picked.
//    A unit without TPGS reports no states: its paths count as active/optimized.
//  - failover: one path at a time; it stays in use while it is up and in the best usable ALUA
//    group (a path of the same group coming back does not take over; a better group does); when
//    it fails, the lowest-numbered usable path of the best group takes over.
//  - round-robin: each pick takes the next usable path of the best group in turn.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "iserkit/initiator/multipath_types.hpp"
#include "iserkit/scsi/alua.hpp"

namespace iserkit::initiator {

class PathSelector {
 public:
  explicit PathSelector(std::size_t paths, MultipathPolicy policy = MultipathPolicy::failover)
      : paths_(paths), policy_(policy) {}

  /// Path `i` can carry commands (logged in, not recovering) or not.
  void set_up(std::size_t i, bool up) noexcept { paths_.at(i).up = up; }
  /// The ALUA access state of path `i`'s target port group.
  void set_state(std::size_t i, scsi::AccessState s) noexcept { paths_.at(i).state = s; }
  [[nodiscard]] bool up(std::size_t i) const noexcept { return paths_.at(i).up; }
  [[nodiscard]] scsi::AccessState state(std::size_t i) const noexcept { return paths_.at(i).state; }
  [[nodiscard]] std::size_t size() const noexcept { return paths_.size(); }

  /// True when path `i` may carry commands: up, and its ALUA state processes I/O.
  [[nodiscard]] bool usable(std::size_t i) const noexcept { return rank(i).has_value(); }
  /// True when any path is usable.
  [[nodiscard]] bool any_usable() const noexcept {
    for (std::size_t i = 0; i < paths_.size(); ++i)
      if (usable(i)) return true;
    return false;
  }

  /// The path for the next command, or nullopt when none is usable.
  std::optional<std::size_t> pick() noexcept {
    std::optional<int> best;
    for (std::size_t i = 0; i < paths_.size(); ++i)
      if (auto r = rank(i); r && (!best || *r < *best)) best = r;
    if (!best) return std::nullopt;
    const std::size_t n = paths_.size();
    if (policy_ == MultipathPolicy::failover) {
      if (current_ < n && rank(current_) == best) return current_;
      for (std::size_t i = 0; i < n; ++i)
        if (rank(i) == best) return current_ = i;
      return std::nullopt;
    }
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t i = (next_ + k) % n;
      if (rank(i) == best) {
        next_ = (i + 1) % n;
        return i;
      }
    }
    return std::nullopt;
  }

 private:
  struct PathInfo {
    bool up = false;
    scsi::AccessState state = scsi::AccessState::active_optimized;
  };
  // Lower is better; nullopt = not usable.
  [[nodiscard]] std::optional<int> rank(std::size_t i) const noexcept {
    const PathInfo& p = paths_[i];
    if (!p.up) return std::nullopt;
    switch (p.state) {
      case scsi::AccessState::active_optimized: return 0;
      case scsi::AccessState::active_non_optimized:
      case scsi::AccessState::logical_block_dependent: return 1;
      default: return std::nullopt;
    }
  }

  std::vector<PathInfo> paths_;
  MultipathPolicy policy_;
  std::size_t current_ = static_cast<std::size_t>(-1);  // failover: the path in use
  std::size_t next_ = 0;                                  // round-robin: where the next turn starts
};

/// Keeps SYNCHRONIZE CACHE behind the writes submitted before it (multipath: they may be on other
/// paths). Writes are numbered in submission order; a flush takes barrier() when submitted and may
/// be sent once covered(barrier) — every write numbered below it has completed (failed or not).
class WriteOrder {
 public:
  /// A write is submitted: its number.
  std::uint64_t begin() {
    done_.push_back(false);
    return base_ + done_.size() - 1;
  }
  /// Write `n` completed. Returns true when that moved the covered point (flushes may go).
  bool end(std::uint64_t n) {
    if (n < base_ || n - base_ >= done_.size()) return false;
    done_[n - base_] = true;
    bool moved = false;
    while (!done_.empty() && done_.front()) {
      done_.pop_front();
      ++base_;
      moved = true;
    }
    return moved;
  }
  /// The barrier of a flush submitted now: the number the next write will get.
  [[nodiscard]] std::uint64_t barrier() const noexcept { return base_ + done_.size(); }
  /// True when every write numbered below `barrier` has completed.
  [[nodiscard]] bool covered(std::uint64_t barrier) const noexcept { return base_ >= barrier; }
  /// Writes not completed yet.
  [[nodiscard]] std::size_t in_flight() const noexcept {
    std::size_t n = 0;
    for (bool d : done_) n += d ? 0 : 1;
    return n;
  }

 private:
  std::uint64_t base_ = 0;  // number of done_.front()
  std::deque<bool> done_;
};

}  // namespace iserkit::initiator
