// Result<T>: the project's error-returning type (tl::expected; std::expected is C++23 and GCC 12
// ships it only for -std=c++2b). Moving to C++23 means changing the alias below.
#pragma once

#include <system_error>
#include <tl/expected.hpp>

namespace iserkit {

/// A value or the std::error_code that explains why there is none.
template <class T>
using Result = tl::expected<T, std::error_code>;

/// Shorthand for returning an error from a function that returns Result<T>.
inline tl::unexpected<std::error_code> fail(std::error_code ec) { return tl::unexpected<std::error_code>(ec); }

/// Shorthand for returning an error built from any error-code enum (iscsi::errc, std::errc, …).
template <class E>
  requires std::is_error_code_enum_v<E> || std::is_error_condition_enum_v<E>
inline tl::unexpected<std::error_code> fail(E e) {
  return tl::unexpected<std::error_code>(make_error_code(e));
}

}  // namespace iserkit
