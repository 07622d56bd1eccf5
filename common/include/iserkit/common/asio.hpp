// The Asio shim: include this instead of <boost/asio.hpp>. Boost 1.74's awaitable.hpp needs
// <utility> first under GCC 12 (std::exchange), and this header gives the project short names.
#pragma once

#include <utility>  // must precede Boost.Asio's coroutine headers (Boost 1.74 + GCC 12)

#include <algorithm>
#include <span>
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace iserkit {
namespace asio = boost::asio;
template <class T>
using Awaitable = boost::asio::awaitable<T>;

/// The completion token that reports errors through `ec` instead of throwing (Boost 1.74 has no as_tuple).
inline auto use_awaitable_ec(boost::system::error_code& ec) {
  return boost::asio::redirect_error(boost::asio::use_awaitable, ec);
}

/// A completion condition for asio::async_read / async_write: done once `minimum` bytes moved (or
/// on error). Unlike asio::transfer_all / transfer_at_least, it does not cap each read_some /
/// write_some at Asio's default_max_transfer_size (64 KiB), so a 1 MiB gather write or read is one
/// sendmsg / recvmsg when the socket buffer allows, not sixteen.
struct TransferAtLeast {
  std::size_t minimum;
  static constexpr std::size_t max_per_call = std::size_t{1} << 30;
  std::size_t operator()(const boost::system::error_code& ec, std::size_t transferred) const noexcept {
    return (ec || transferred >= minimum) ? 0 : max_per_call;
  }
};
/// transfer_all without the 64 KiB per-call cap (see TransferAtLeast): stops when the buffers are full.
inline TransferAtLeast transfer_all_uncapped() noexcept { return {static_cast<std::size_t>(-1)}; }
/// transfer_at_least(n) without the 64 KiB per-call cap (see TransferAtLeast).
inline TransferAtLeast transfer_at_least_uncapped(std::size_t n) noexcept { return {n}; }

/// One non-blocking gather write of `buffers` on the calling thread, before any async_write: the
/// bytes the socket took (0 when it would block). `ec` is set only for a real error (would_block
/// is not one). Sends go out this way with no suspension and no posted completion whenever the
/// socket buffer has room, which is nearly always; the caller writes what is left with
/// async_write (rest_of()). Puts the socket in non-blocking mode (Asio's async operations do not
/// mind; a blocking synchronous call on it would then fail with would_block).
template <class Socket>
std::size_t write_now(Socket& socket, std::span<const boost::asio::const_buffer> buffers,
                      boost::system::error_code& ec) {
  ec.clear();
  if (!socket.non_blocking()) {
    socket.non_blocking(true, ec);
    if (ec) return 0;
  }
  const std::size_t n = socket.write_some(buffers, ec);
  if (ec == boost::asio::error::would_block || ec == boost::asio::error::try_again) {
    ec.clear();
    return 0;
  }
  return ec ? 0 : n;
}

/// The part of `buffers` after its first `skip` bytes, into `out` (cleared first).
inline void rest_of(std::span<const boost::asio::const_buffer> buffers, std::size_t skip,
                    std::vector<boost::asio::const_buffer>& out) {
  out.clear();
  for (const auto& b : buffers) {
    if (skip >= b.size()) {
      skip -= b.size();
      continue;
    }
    out.push_back(b + skip);
    skip = 0;
  }
}
/// Drops the first `n` bytes of `buffers[first..]`, moving `first` past the buffers it empties:
/// the bookkeeping of a gather write that goes on, one write_some at a time, after a partial one
/// (Asio's own consuming_buffers is internal). `n` must not exceed the bytes left.
inline void consume(std::vector<boost::asio::const_buffer>& buffers, std::size_t& first, std::size_t n) {
  while (n > 0 && first < buffers.size()) {
    const std::size_t take = std::min(n, buffers[first].size());
    buffers[first] += take;
    n -= take;
    if (buffers[first].size() == 0) ++first;
  }
  while (first < buffers.size() && buffers[first].size() == 0) ++first;
}
}  // namespace iserkit
