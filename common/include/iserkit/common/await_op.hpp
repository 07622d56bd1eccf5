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
#include "iserkit/common/handler_memory.hpp"

#if BOOST_VERSION != 107400 && BOOST_VERSION != 108100
#error "await_op.hpp relies on the Asio coroutine internals of Boost 1.74 or 1.81; check awaitable_thread, attach_thread and pump in this Boost, then widen this test"
#endif

namespace iserkit {
namespace detail {

/// ResumeHandler's associated allocator: Asio's default (none declared) ...
template <bool WithMemory>
struct ResumeMemory {
  explicit ResumeMemory(HandlerMemory* /*unused*/) noexcept {}
};
/// ... or a HandlerMemory of the waiting object (await_op with memory).
template <>
struct ResumeMemory<true> {
  explicit ResumeMemory(HandlerMemory* m) noexcept : memory(m) {}
  using allocator_type = HandlerAllocator<void>;
  [[nodiscard]] allocator_type get_allocator() const noexcept { return allocator_type(*memory); }
  HandlerMemory* memory;
};

/// The completion handler await_op makes: it owns the suspended coroutine's thread of execution
/// (as Asio's awaitable_handler does), stores the completion's arguments in `*out` and resumes the
/// coroutine. Destroyed uncalled, it unwinds the coroutine as Asio does for an abandoned operation
/// (awaitable_thread's destructor).
template <class Executor, class Out, bool WithMemory = false>
class ResumeHandler : public asio::detail::awaitable_thread<Executor>, public ResumeMemory<WithMemory> {
 public:
  ResumeHandler(asio::detail::awaitable_thread<Executor>* thread, Out* out, HandlerMemory* memory = nullptr)
      : asio::detail::awaitable_thread<Executor>(std::move(*thread)), ResumeMemory<WithMemory>(memory), out_(out) {}
  ResumeHandler(ResumeHandler&&) noexcept = default;

  template <class... Args>
  void operator()(Args&&... args) {
    if constexpr (sizeof...(Args) > 0) *out_ = Out(std::forward<Args>(args)...);
    // An I/O object's completion runs this directly (see the associated_executor specialization
    // below) on the thread of the object's io_context. The coroutine resumes here only when that
    // thread runs the coroutine's own io_context; otherwise it is posted to its executor.
    auto ex = this->get_executor();
    if constexpr (std::is_same_v<Executor, asio::any_io_executor>) {
      if (const auto* io = ex.template target<asio::io_context::executor_type>();
          io == nullptr || !io->running_in_this_thread()) {
        asio::post(ex, Posted{std::move(*this)});
        return;
      }
    }
    resume();
  }

  /// Resumes the coroutine on this thread (the caller runs its executor).
  void resume() {
#if BOOST_VERSION == 107400
    this->top_of_stack_->attach_thread(this);
    this->pump();
#else
    this->launch();  // 1.81: attach_thread to the top frame, then pump (top_of_stack_ is private)
#endif
  }

 private:
  /// The handler moved into a posted function: resumes the coroutine from the executor's queue.
  struct Posted {
    ResumeHandler handler;
    void operator()() { handler.resume(); }
  };
  Out* out_;
};

/// Marks ResumeHandler<any_io_executor, Out> as a handler without an executor of its own for an
/// I/O object of executor type any_io_executor (the socket or timer it waits on): Asio 1.74's
/// handler_work then invokes the completion directly, on the io_context thread that ran it,
/// instead of dispatching it through the coroutine's type-erased executor, which allocates a
/// function object for every completion even when both executors are the same io_context's
/// (handler_work_base's any_executor specialization is not chosen when a candidate executor is
/// given). ResumeHandler::operator() keeps the executor's guarantee itself: it resumes inline only
/// on a thread that runs the coroutine's io_context, and posts to the coroutine's executor otherwise.
template <class Handler>
struct DirectCompletion {
  using type = asio::any_io_executor;
  using asio_associated_executor_is_unspecialised = void;
  static type get(const Handler& /*h*/, const asio::any_io_executor& io_executor) noexcept { return io_executor; }
};

/// The executor type of an Asio coroutine frame.
template <class Executor>
Executor frame_executor(asio::detail::awaitable_frame_base<Executor>*);

/// Both await_op forms: the awaitable function Asio's await_transform runs once the coroutine is
/// suspended (`memory` null: Asio's default allocation).
template <bool WithMemory, class Out, class Initiate>
auto await_op_with(Out& out, HandlerMemory* memory, Initiate initiate) {
  return [out = &out, memory, initiate = std::move(initiate)](auto* frame) mutable {
    using Executor = decltype(frame_executor(frame));
    using Handler = ResumeHandler<Executor, Out, WithMemory>;
    // The thread is detached only when a handler is made; otherwise the coroutine stays on top of
    // its thread's stack and Asio's pump resumes it as soon as this returns.
    initiate([frame, out, memory]() { return Handler(frame->detach_thread(), out, memory); });
    return static_cast<asio::detail::awaitable_thread<Executor>*>(nullptr);
  };
}

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
  return detail::await_op_with<false>(out, nullptr, std::move(initiate));
}

/// await_op whose operation keeps its state in `memory` (the handler's associated allocator;
/// handler_memory.hpp): for an operation a loop starts on every request, so that it does not
/// allocate. `memory` must outlive the operation and hold no other operation meanwhile.
template <class Out, class Initiate>
auto await_op(Out& out, HandlerMemory& memory, Initiate initiate) {
  return detail::await_op_with<true>(out, &memory, std::move(initiate));
}

}  // namespace iserkit

namespace boost::asio {
template <class Out, bool WithMemory>
struct associated_executor<iserkit::detail::ResumeHandler<any_io_executor, Out, WithMemory>, any_io_executor>
    : iserkit::detail::DirectCompletion<iserkit::detail::ResumeHandler<any_io_executor, Out, WithMemory>> {};
}  // namespace boost::asio
