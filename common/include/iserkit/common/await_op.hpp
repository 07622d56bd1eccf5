// Waiting for one asynchronous operation inside an Asio coroutine without a coroutine frame of its
// own (the fast path's allocations, issue 23 item 4).
//
// `co_await socket.async_read_some(buf, asio::use_awaitable)` in Boost 1.74 runs the operation's
// initiation inside a coroutine of its own (use_awaitable's async_result::initiate), so every
// wait allocates that coroutine's frame. Asio caches one freed frame per thread, and a request
// that has several frames alive at once (receive, writer wake, send) misses the cache: heaptrack
// showed six frame allocations per 4 KiB request at queue depth 1 in the target.
//
// await_op(out, initiate) suspends the calling coroutine itself and lets `initiate` make a
// handler that stores the completion's arguments in `out` and resumes the coroutine: no frame,
// the same resumption path as use_awaitable (through the coroutine's executor). `initiate` may also
// make no handler at all (the event it waits for has already happened): then the coroutine goes
// on at once. Written against Asio 1.18 (Boost 1.74) internals: awaitable_thread, the frame's
// attach_thread/detach_thread and the function form of await_transform, which use_awaitable itself
// is built on. Another Boost version stops the build here until those are checked again.
#pragma once

#include <type_traits>
#include <utility>

#include <boost/version.hpp>

#include "iserkit/common/asio.hpp"

#if BOOST_VERSION != 107400
#error "await_op.hpp relies on Boost 1.74's Asio coroutine internals; check awaitable_thread, attach_thread and pump in this Boost, then widen this test"
#endif

namespace iserkit {
namespace detail {

/// The completion handler await_op makes: it owns the suspended coroutine's thread of execution
/// (as Asio's awaitable_handler does; its associated executor is the coroutine's), stores the
/// completion's arguments in `*out` and resumes the coroutine. Destroyed uncalled, it unwinds the
/// coroutine as Asio does for an abandoned operation (awaitable_thread's destructor).
template <class Executor, class Out>
class ResumeHandler : public asio::detail::awaitable_thread<Executor> {
 public:
  ResumeHandler(asio::detail::awaitable_thread<Executor>* thread, Out* out)
      : asio::detail::awaitable_thread<Executor>(std::move(*thread)), out_(out) {}
  ResumeHandler(ResumeHandler&&) noexcept = default;

  template <class... Args>
  void operator()(Args&&... args) {
    if constexpr (sizeof...(Args) > 0) *out_ = Out(std::forward<Args>(args)...);
    this->top_of_stack_->attach_thread(this);
    this->pump();
  }

 private:
  Out* out_;
};

/// The executor type of an Asio coroutine frame.
template <class Executor>
Executor frame_executor(asio::detail::awaitable_frame_base<Executor>*);

}  // namespace detail

/// No completion arguments to keep (a wait that only resumes).
struct NoResult {};

/// `co_await await_op(out, initiate)` inside an Awaitable coroutine: once the coroutine is
/// suspended, calls `initiate(make_handler)`. `make_handler()` (call it at most once) returns a
/// move-only completion handler; when invoked with the operation's completion arguments it assigns
/// `out = Out(args...)` (a std::tuple for several, the value for one; nothing for none) and resumes
/// the coroutine through its executor. If `initiate` returns without calling make_handler, the
/// coroutine resumes at once, `out` untouched. `out` must outlive the wait (a local of the
/// coroutine). What `initiate` throws after make_handler() reaches nobody: initiate must not throw.
template <class Out, class Initiate>
auto await_op(Out& out, Initiate initiate) {
  return [out = &out, initiate = std::move(initiate)](auto* frame) mutable {
    using Executor = decltype(detail::frame_executor(frame));
    using Handler = detail::ResumeHandler<Executor, Out>;
    // The thread is detached only when a handler is made; otherwise the coroutine stays on top of
    // its thread's stack and Asio's pump resumes it as soon as this returns.
    initiate([frame, out]() { return Handler(frame->detach_thread(), out); });
    return static_cast<asio::detail::awaitable_thread<Executor>*>(nullptr);
  };
}

}  // namespace iserkit
