// The payload copy counter (common/copy_counter.hpp): copies through copy_payload() are counted.
#include "iserkit/common/copy_counter.hpp"

#include <gtest/gtest.h>

#include <array>

namespace iserkit {
namespace {

TEST(CopyCounter, CountsEveryPayloadCopy) {
  ASSERT_TRUE(copy_counter_enabled) << "the root CMake defines ISERKIT_COPY_COUNTER";
  const auto before = copied_payload_bytes();
  std::array<std::byte, 100> a{}, b{};
  a[7] = std::byte{42};
  copy_payload(b.data(), a.data(), 64);
  EXPECT_EQ(b[7], std::byte{42});
  count_payload_copy(36);
  copy_payload(b.data(), a.data(), 0);  // nothing copied, nothing counted
  EXPECT_EQ(copied_payload_bytes() - before, 100u);
}

}  // namespace
}  // namespace iserkit
