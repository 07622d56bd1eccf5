// Coordination between coroutines on one single-threaded executor (the initiator's loop), used by
// the FUSE view's data path: BlockRangeLock serializes writes whose logical-block ranges overlap
// (so a read-modify-write of a partial block never interleaves with another write of that block —
// LunHandle::write_bytes alone is not atomic against overlapping writers), and SingleFlight lets
// one coroutine run a shared step (log in, rescan) while the others wait for its outcome.
// No mutexes: both are touched only from the executor's thread; waiters are resumed through the
// executor (never inline), as iserkit::Completion does.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <utility>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/completion.hpp"

namespace iserkit::fuse_fs {

/// A lock over inclusive ranges of logical blocks. Ranges that do not overlap are held at the same
/// time; overlapping ones are granted in arrival order (FIFO, so writes to a block land in the
/// order they were issued and no writer starves). Single executor thread only.
class BlockRangeLock {
  struct Entry {
    std::uint64_t first = 0;
    std::uint64_t last = 0;
    bool granted = false;
    Completion ready;
  };

 public:
  /// Releases its range when destroyed (or on release()). Move-only.
  class Guard {
   public:
    Guard() = default;
    Guard(BlockRangeLock* lock, std::list<Entry>::iterator it) : lock_(lock), it_(it) {}
    Guard(Guard&& o) noexcept : lock_(std::exchange(o.lock_, nullptr)), it_(o.it_) {}
    Guard& operator=(Guard&& o) noexcept {
      if (this != &o) {
        release();
        lock_ = std::exchange(o.lock_, nullptr);
        it_ = o.it_;
      }
      return *this;
    }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    ~Guard() { release(); }
    /// Gives the range back now and grants waiters that no longer overlap anything before them.
    void release() {
      if (lock_ != nullptr) std::exchange(lock_, nullptr)->release(it_);
    }
    [[nodiscard]] bool owns() const noexcept { return lock_ != nullptr; }

   private:
    BlockRangeLock* lock_ = nullptr;
    std::list<Entry>::iterator it_;
  };

  BlockRangeLock() = default;
  BlockRangeLock(const BlockRangeLock&) = delete;
  BlockRangeLock& operator=(const BlockRangeLock&) = delete;

  /// Waits until blocks [first, last] (inclusive, first ≤ last) overlap no range held or requested
  /// earlier, then holds them until the Guard goes away.
  Awaitable<Guard> lock(std::uint64_t first, std::uint64_t last) {
    auto it = entries_.emplace(entries_.end());
    it->first = first;
    it->last = last;
    if (grantable(it)) {
      it->granted = true;
    } else {
      co_await it->ready.wait();
    }
    co_return Guard(this, it);
  }

  /// Ranges held plus ranges waiting (for tests and stats).
  [[nodiscard]] std::size_t size() const noexcept { return entries_.size(); }
  /// Ranges currently held.
  [[nodiscard]] std::size_t held() const noexcept {
    std::size_t n = 0;
    for (const auto& e : entries_) n += e.granted ? 1 : 0;
    return n;
  }

 private:
  static bool overlaps(const Entry& a, const Entry& b) noexcept { return a.first <= b.last && b.first <= a.last; }
  bool grantable(std::list<Entry>::iterator it) const {
    for (auto e = entries_.begin(); e != it; ++e) {
      if (overlaps(*e, *it)) return false;
    }
    return true;
  }
  void release(std::list<Entry>::iterator it) {
    entries_.erase(it);
    for (auto e = entries_.begin(); e != entries_.end(); ++e) {
      if (!e->granted && grantable(e)) {
        e->granted = true;
        e->ready.complete();
      }
    }
  }

  std::list<Entry> entries_;  // arrival order
};

/// One shared step at a time: the first caller runs it, later callers wait for it to finish and
/// then look at the state it left. Single executor thread only.
class SingleFlight {
 public:
  /// True while a step runs.
  [[nodiscard]] bool running() const noexcept { return running_; }
  /// Marks the step as running; the caller must call finish() when done (also on error).
  void start() noexcept { running_ = true; }
  /// Ends the step and wakes every waiter.
  void finish() {
    running_ = false;
    auto waiters = std::move(waiters_);
    for (auto& w : waiters) w->complete();
  }
  /// Waits until the running step finishes (returns at once when none runs).
  Awaitable<void> wait() {
    if (!running_) co_return;
    auto c = std::make_shared<Completion>();
    waiters_.push_back(c);
    co_await c->wait();
  }

 private:
  bool running_ = false;
  std::vector<std::shared_ptr<Completion>> waiters_;
};

}  // namespace iserkit::fuse_fs
