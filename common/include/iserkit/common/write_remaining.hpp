// write_remaining(): the rest of a gather write after a non-blocking write that the socket took
// only part of, without an allocation per step (the fast path's allocations, issue 23 item 4).
#pragma once

#include <span>
#include <tuple>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/await_op.hpp"
#include "iserkit/common/handler_memory.hpp"

namespace iserkit {

/// Writes `rest` whole on `socket` (the buffers a non-blocking write left, rest_of()), one
/// async_write_some at a time, each waited for with await_op and its operation state in `memory`:
/// async_write with use_awaitable allocates its composed operation and a frame for every step.
/// `rest` is advanced in place (consume()) and cleared at the end. Returns the socket's error
/// (empty when all was written). One call at a time per `rest` / `memory` (the caller's writer).
template <class Socket>
Awaitable<boost::system::error_code> write_remaining(Socket& socket, std::vector<asio::const_buffer>& rest,
                                                     HandlerMemory& memory) {
  boost::system::error_code ec;
  std::size_t first = 0;  // rest[first..] is what is left, the first one advanced in place
  while (first < rest.size()) {
    std::tuple<boost::system::error_code, std::size_t> wrote{};
    co_await await_op(wrote, memory, [&](auto make_handler) {
      socket.async_write_some(std::span<const asio::const_buffer>(rest).subspan(first), make_handler());
    });
    std::size_t n = 0;
    std::tie(ec, n) = wrote;
    if (ec) break;
    consume(rest, first, n);
  }
  rest.clear();
  co_return ec;
}

}  // namespace iserkit
