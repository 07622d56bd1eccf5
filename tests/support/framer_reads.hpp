// How the TcpFramer tests and its fuzz harness play a socket read (no gtest here: the fuzz build
// has none): the next bytes of a stream copied into the spans the framer wants, in order, as a
// scatter read (readv) would, then consumed().
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <span>

#include "iserkit/datamover/tcp_framer.hpp"

namespace iserkit::test {

/// Copies up to `budget` bytes of `stream`, from offset `at` on, into framer.want()'s spans;
/// advances `at` past them, tells the framer (consumed) and returns how many bytes it read.
inline std::size_t read_into_framer(datamover::TcpFramer& framer, std::span<const std::byte> stream, std::size_t& at,
                                    std::size_t budget) {
  budget = std::min(budget, stream.size() - at);
  std::size_t n = 0;
  for (const auto& span : framer.want()) {
    const std::size_t k = std::min(budget, span.size());
    std::memcpy(span.data(), stream.data() + at, k);
    at += k;
    n += k;
    budget -= k;
    if (budget == 0) break;
  }
  framer.consumed(n);
  return n;
}

}  // namespace iserkit::test
