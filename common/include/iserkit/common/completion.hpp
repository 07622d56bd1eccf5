// Completion: a one-shot event a coroutine can co_await, completed by another coroutine or callback
// on the same executor. Used to park a command until its response arrives (initiator) or a task
// until its Data-Out arrives (target). Not thread-safe: complete() must run on the waiter's executor.
// Event: the multi-waiter, resettable counterpart (a level-triggered flag any number of coroutines
// wait on), used instead of polling loops: "the send queue has work", "the session ended".
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/await_op.hpp"
#include "iserkit/common/handler_memory.hpp"

namespace iserkit {
namespace detail {
/// A parked coroutine's completion handler, type-erased.
struct WaiterBase {
  WaiterBase() = default;
  WaiterBase(const WaiterBase&) = delete;
  WaiterBase& operator=(const WaiterBase&) = delete;
  /// Moves the handler out, destroys this waiter (freeing it when `heap`), then resumes the
  /// handler: posted to its own executor, or with `now` dispatched (inline when this thread runs
  /// that executor). The waiter is gone before the handler can run, so the resumed coroutine may
  /// park again in the same slot.
  virtual void resume_and_destroy(bool now, bool heap) = 0;
  /// Destroys this waiter without resuming it (its coroutine frame is dropped with the handler).
  virtual void destroy(bool heap) noexcept = 0;

 protected:
  ~WaiterBase() = default;
};
template <class Handler>
struct Waiter final : WaiterBase {
  explicit Waiter(Handler h) : handler(std::move(h)) {}
  void resume_and_destroy(bool now, bool heap) override {
    Handler h = std::move(handler);
    destroy(heap);
    auto ex = asio::get_associated_executor(h);
    if constexpr (std::is_same_v<decltype(ex), asio::any_io_executor>) {
      // Without the type-erased function object (an allocation) any_io_executor's dispatch and
      // post make first: inline when this thread runs the handler's io_context and `now`, else
      // posted through the io_context's own executor with the operation's state from this
      // thread's block cache (Asio's own holds one block per kind, and a loop has several of
      // these posts in flight: every task's writer wake and send pass release).
      if (const auto* io = ex.template target<asio::io_context::executor_type>(); io != nullptr) {
        if (now && io->running_in_this_thread()) {
          std::move(h)();
        } else {
          asio::post(*io, with_block_cache(std::move(h)));
        }
        return;
      }
    }
    if (now) {
      asio::dispatch(ex, std::move(h));
    } else {
      asio::post(ex, std::move(h));
    }
  }
  void destroy(bool heap) noexcept override {
    if (heap) {
      delete this;
    } else {
      this->~Waiter();
    }
  }
  Handler handler;
};

/// Room for one parked handler, inside the object that waits on it: no allocation per wait (an
/// Asio awaitable handler fits; larger handlers go to the heap).
/// Not copyable or movable (a parked handler lives at its address).
class WaiterSlot {
 public:
  WaiterSlot() = default;
  WaiterSlot(const WaiterSlot&) = delete;
  WaiterSlot& operator=(const WaiterSlot&) = delete;
  ~WaiterSlot() { drop(); }

  /// Parks `handler` here (the slot must be empty). Throws std::bad_alloc only for a handler too
  /// large for the slot.
  template <class Handler>
  void park(Handler handler) {
    using W = Waiter<Handler>;
    if constexpr (sizeof(W) <= sizeof(storage_) && alignof(W) <= alignof(void*)) {
      waiter_ = new (storage_) W(std::move(handler));
    } else {
      waiter_ = new W(std::move(handler));
    }
  }
  [[nodiscard]] bool empty() const noexcept { return waiter_ == nullptr; }
  /// A handler is parked and it took no allocation.
  [[nodiscard]] bool parked_in_place() const noexcept { return waiter_ != nullptr && !on_heap(waiter_); }
  /// Resumes the parked handler (posted; with `now` dispatched) and empties the slot first.
  void resume(bool now) {
    WaiterBase* w = std::exchange(waiter_, nullptr);
    if (w != nullptr) w->resume_and_destroy(now, on_heap(w));
  }
  /// Destroys the parked handler without resuming it.
  void drop() noexcept {
    if (WaiterBase* w = std::exchange(waiter_, nullptr)) w->destroy(on_heap(w));
  }
  /// Bytes a parked handler may take in place (Asio 1.74's awaitable handler with its vtable: 72).
  static constexpr std::size_t inline_bytes = 80;

 private:
  [[nodiscard]] bool on_heap(const WaiterBase* w) const noexcept {
    return static_cast<const void*>(w) != static_cast<const void*>(storage_);
  }

  alignas(void*) std::byte storage_[inline_bytes];
  WaiterBase* waiter_ = nullptr;
};
}  // namespace detail

/// One-shot completion with an error code. wait() returns at once if complete() already ran.
class Completion {
 public:
  Completion() = default;
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;
  ~Completion() = default;

  /// `co_await c.wait()` suspends until complete() is called (at once if it already was); then
  /// error() is the code it was given. At most one coroutine may wait at a time. No coroutine
  /// frame and no allocation per wait (await_op.hpp; the handler parks in place).
  [[nodiscard]] auto wait() {
    return await_op(no_result_, [this](auto make_handler) {
      if (!done_) waiter_.park(make_handler());
    });
  }
  /// The error code complete() was given (meaningful once done()).
  [[nodiscard]] std::error_code error() const noexcept { return ec_; }

  /// Completes the event (once; later calls are ignored) and resumes the waiter, if any, through
  /// its executor (never inline).
  void complete(std::error_code ec = {}) {
    if (done_) return;
    done_ = true;
    ec_ = ec;
    waiter_.resume(false);
  }

  /// True once complete() has run.
  [[nodiscard]] bool done() const noexcept { return done_; }
  /// Makes the event reusable; only valid when nobody waits.
  void reset() noexcept { done_ = false; ec_ = {}; }

 private:
  bool done_ = false;
  std::error_code ec_;
  NoResult no_result_;
  detail::WaiterSlot waiter_;
};

/// Multi-waiter, resettable event: set() wakes every coroutine waiting in wait() (each through its
/// own executor, never inline); while set, wait() returns at once; reset() clears it. Not
/// thread-safe: use it from the waiters' executor. The first waiter parks inside the Event (no
/// allocation per wait in the usual one-waiter case); further ones are allocated.
class Event {
 public:
  Event() = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() = default;

  /// `co_await e.wait()` suspends until the event is set (goes on at once when it already is).
  /// No coroutine frame per wait (await_op.hpp).
  [[nodiscard]] auto wait() {
    return await_op(no_result_, [this](auto make_handler) {
      if (set_) return;
      if (first_.empty()) {
        first_.park(make_handler());
      } else {
        more_.push_back(std::make_unique<detail::WaiterSlot>());
        more_.back()->park(make_handler());
      }
    });
  }

  /// Sets the event and resumes every current waiter.
  void set() { wake(false); }
  /// set(), but each waiter whose executor this thread is running resumes inline, before
  /// set_now() returns, and runs until it suspends again. For a caller that is at the outermost
  /// level of its own work (no half-done state a waiter could see) and wants the waiter's output
  /// now rather than after the next pass of the loop (the target's writer at queue depth 1).
  void set_now() { wake(true); }
  /// Clears the event; later wait() calls suspend until the next set().
  void reset() noexcept { set_ = false; }
  [[nodiscard]] bool is_set() const noexcept { return set_; }
  /// Coroutines suspended in wait() (for tests).
  [[nodiscard]] std::size_t waiting() const noexcept { return (first_.empty() ? 0 : 1) + more_.size(); }

 private:
  void wake(bool now) {
    set_ = true;
    // Every current waiter is taken before any resumes: one resumed inline may wait again, and
    // then it waits for the next set().
    std::vector<std::unique_ptr<detail::WaiterSlot>> more;
    if (!more_.empty()) more.swap(more_);
    first_.resume(now);
    for (auto& slot : more) slot->resume(now);
  }

  bool set_ = false;
  NoResult no_result_;  // what a wait stores: nothing
  detail::WaiterSlot first_;
  std::vector<std::unique_ptr<detail::WaiterSlot>> more_;
};

}  // namespace iserkit
