// The Asio shim: include this instead of <boost/asio.hpp>. Boost 1.74's awaitable.hpp needs
// <utility> first under GCC 12 (std::exchange), and this header gives the project short names.
#pragma once

#include <utility>  // must precede Boost.Asio's coroutine headers (Boost 1.74 + GCC 12)

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
}  // namespace iserkit
