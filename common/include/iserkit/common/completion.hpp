// Completion: a one-shot event a coroutine can co_await, completed by another coroutine or callback
// on the same executor. Used to park a command until its response arrives (initiator) or a task
// until its Data-Out arrives (target). Not thread-safe: complete() must run on the waiter's executor.
// Event: the multi-waiter, resettable counterpart (a level-triggered flag any number of coroutines
// wait on), used instead of polling loops: "the send queue has work", "the session ended".
#pragma once

#include <memory>
#include <system_error>
#include <vector>

#include "iserkit/common/asio.hpp"

namespace iserkit {
namespace detail {
/// A parked coroutine's completion handler; resume() posts it to its own executor (never inline).
struct WaiterBase {
  virtual ~WaiterBase() = default;
  virtual void resume() = 0;
  /// Resumes on this thread when it runs the waiter's executor (asio::dispatch), else posts.
  virtual void resume_now() = 0;
};
template <class Handler>
struct Waiter final : WaiterBase {
  explicit Waiter(Handler h) : handler(std::move(h)) {}
  void resume() override {
    auto ex = asio::get_associated_executor(handler);
    asio::post(ex, std::move(handler));
  }
  void resume_now() override {
    auto ex = asio::get_associated_executor(handler);
    asio::dispatch(ex, std::move(handler));
  }
  Handler handler;
};
}  // namespace detail

/// One-shot completion with an error code. wait() returns at once if complete() already ran.
class Completion {
 public:
  Completion() = default;
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;
  ~Completion() = default;

  /// Suspends until complete() is called; returns the error code it was given.
  /// At most one coroutine may wait at a time.
  Awaitable<std::error_code> wait() {
    if (!done_) {
      co_await asio::async_initiate<const asio::use_awaitable_t<>&, void()>(
          [this](auto handler) { waiter_ = std::make_unique<detail::Waiter<decltype(handler)>>(std::move(handler)); },
          asio::use_awaitable);
    }
    co_return ec_;
  }

  /// Completes the event (once; later calls are ignored) and resumes the waiter, if any, through
  /// its executor (never inline).
  void complete(std::error_code ec = {}) {
    if (done_) return;
    done_ = true;
    ec_ = ec;
    if (waiter_) {
      auto w = std::move(waiter_);
      w->resume();
    }
  }

  /// True once complete() has run.
  [[nodiscard]] bool done() const noexcept { return done_; }
  /// Makes the event reusable; only valid when nobody waits.
  void reset() noexcept { done_ = false; ec_ = {}; }

 private:
  bool done_ = false;
  std::error_code ec_;
  std::unique_ptr<detail::WaiterBase> waiter_;
};

/// Multi-waiter, resettable event: set() wakes every coroutine waiting in wait() (each through its
/// own executor, never inline); while set, wait() returns at once; reset() clears it. Not
/// thread-safe: use it from the waiters' executor.
class Event {
 public:
  Event() = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() = default;

  /// Suspends until the event is set (returns at once when it already is).
  Awaitable<void> wait() {
    if (set_) co_return;
    co_await asio::async_initiate<const asio::use_awaitable_t<>&, void()>(
        [this](auto handler) { waiters_.push_back(std::make_unique<detail::Waiter<decltype(handler)>>(std::move(handler))); },
        asio::use_awaitable);
  }

  /// Sets the event and resumes every current waiter.
  void set() {
    set_ = true;
    auto waiters = std::move(waiters_);
    waiters_.clear();
    for (auto& w : waiters) w->resume();
  }
  /// set(), but each waiter whose executor this thread is running resumes inline, before
  /// set_now() returns, and runs until it suspends again. For a caller that is at the outermost
  /// level of its own work (no half-done state a waiter could see) and wants the waiter's output
  /// now rather than after the next pass of the loop (the target's writer at queue depth 1).
  void set_now() {
    set_ = true;
    auto waiters = std::move(waiters_);
    waiters_.clear();
    for (auto& w : waiters) w->resume_now();
  }
  /// Clears the event; later wait() calls suspend until the next set().
  void reset() noexcept { set_ = false; }
  [[nodiscard]] bool is_set() const noexcept { return set_; }
  /// Coroutines suspended in wait() (for tests).
  [[nodiscard]] std::size_t waiting() const noexcept { return waiters_.size(); }

 private:
  bool set_ = false;
  std::vector<std::unique_ptr<detail::WaiterBase>> waiters_;
};

}  // namespace iserkit
