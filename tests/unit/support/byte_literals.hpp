// bytes({0x12, 0x34, ...}): a byte vector from a literal list, for the codec tests that compare
// encodings with fixed bytes laid out as a spec's table gives them. Header-only; the tests include
// it by its relative path (their binaries do not all link iserkit::test_support).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <vector>

namespace iserkit::test {

inline std::vector<std::byte> bytes(std::initializer_list<int> values) {
  std::vector<std::byte> out;
  out.reserve(values.size());
  for (int v : values) out.push_back(static_cast<std::byte>(v));
  return out;
}

}  // namespace iserkit::test
