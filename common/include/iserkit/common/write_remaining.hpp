// write_remaining(): the rest of a gather write after a non-blocking write that the socket took
// only part of, without an allocation per step (the fast path's allocations, issue 23 item 4).
#pragma once

#include <span>
#include <utility>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/await_op.hpp"
#include "iserkit/common/handler_memory.hpp"

namespace iserkit {
namespace detail {

/// write_remaining_op()'s loop: one async_write_some per step, its operation state in `memory`,
/// `rest[first..]` advanced in place; at the end (all written, or an error) `rest` is cleared and
/// `done(ec)` called. A plain handler object, not a coroutine: no frame per write.
template <class Socket, class Done>
struct WriteRemainingStep {
  Socket* socket;
  std::vector<asio::const_buffer>* rest;
  HandlerMemory* memory;
  std::size_t first;
  Done done;

  using allocator_type = HandlerAllocator<void>;
  [[nodiscard]] allocator_type get_allocator() const noexcept { return allocator_type(*memory); }

  void start() {
    auto* s = socket;
    auto left = std::span<const asio::const_buffer>(*rest).subspan(first);
    s->async_write_some(left, std::move(*this));
  }
  void operator()(boost::system::error_code ec, std::size_t n) {
    if (!ec) {
      consume(*rest, first, n);
      if (first < rest->size()) {
        start();
        return;
      }
    }
    rest->clear();
    std::move(done)(ec);
  }
};

}  // namespace detail

/// `co_await write_remaining_op(socket, rest, memory, ec)` inside an Awaitable coroutine: writes
/// `rest` whole on `socket` (the buffers a non-blocking write left, rest_of()), one
/// async_write_some at a time, each step's operation state in `memory`; sets `ec` to the socket's
/// error (empty when all was written) and clears `rest`. Makes neither a coroutine frame nor an
/// allocation (await_op.hpp). `rest`, `memory` and `ec` must outlive the wait; one call at a time
/// per `rest` / `memory` (the caller's writer).
template <class Socket>
auto write_remaining_op(Socket& socket, std::vector<asio::const_buffer>& rest, HandlerMemory& memory,
                        boost::system::error_code& ec) {
  ec.clear();
  return await_op(ec, [s = &socket, r = &rest, m = &memory](auto make_handler) {
    if (r->empty()) return;  // nothing left: the coroutine goes on at once
    using Done = decltype(make_handler());
    detail::WriteRemainingStep<Socket, Done>{s, r, m, 0, make_handler()}.start();
  });
}

/// write_remaining_op() as a coroutine of its own (one frame per call): returns the socket's error.
template <class Socket>
Awaitable<boost::system::error_code> write_remaining(Socket& socket, std::vector<asio::const_buffer>& rest,
                                                     HandlerMemory& memory) {
  boost::system::error_code ec;
  co_await write_remaining_op(socket, rest, memory, ec);
  co_return ec;
}

}  // namespace iserkit

namespace boost::asio {
/// The step completes directly on the socket's io_context thread, like await_op's own handler
/// (await_op.hpp, DirectCompletion): no function object through the type-erased executor.
template <class Socket, class Done>
struct associated_executor<iserkit::detail::WriteRemainingStep<Socket, Done>, any_io_executor>
    : iserkit::detail::DirectCompletion<iserkit::detail::WriteRemainingStep<Socket, Done>> {};
}  // namespace boost::asio
