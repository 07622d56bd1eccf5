// Fifo: order, wrap-around, growth to the high water mark and no growth after it.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "iserkit/common/fifo.hpp"

using iserkit::Fifo;

TEST(Fifo, KeepsOrderAcrossWrapAroundAndGrowth) {
  Fifo<std::unique_ptr<int>> q;  // move-only elements
  int next_in = 0;
  int next_out = 0;
  // Push 5, pop 3, repeatedly: the ring wraps, and grows while the length climbs.
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 5; ++i) q.push_back(std::make_unique<int>(next_in++));
    for (int i = 0; i < 3; ++i) {
      ASSERT_FALSE(q.empty());
      EXPECT_EQ(*q.front(), next_out++);
      q.pop_front();
    }
  }
  EXPECT_EQ(q.size(), 40u);
  EXPECT_EQ(*q.back(), next_in - 1);
  for (std::size_t i = 0; i < q.size(); ++i) EXPECT_EQ(*q[i], next_out + static_cast<int>(i));
  int expected = next_out;
  for (const auto& p : q) EXPECT_EQ(*p, expected++);
  q.clear();
  EXPECT_TRUE(q.empty());
}

TEST(Fifo, StopsGrowingAtItsHighWaterMark) {
  Fifo<std::string> q;
  EXPECT_EQ(q.capacity(), 0u);  // nothing allocated until the first push
  for (int i = 0; i < 20; ++i) q.push_back(std::to_string(i));
  const std::size_t high = q.capacity();
  EXPECT_GE(high, 20u);
  EXPECT_LT(high, 40u);  // doubling from initial_capacity: 32
  // A queue that goes up and down below its high water mark keeps its ring.
  for (int round = 0; round < 1000; ++round) {
    while (!q.empty()) q.pop_front();
    for (int i = 0; i < 20; ++i) q.push_back(std::to_string(i));
    ASSERT_EQ(q.capacity(), high);
  }
  EXPECT_EQ(q.front(), "0");
  EXPECT_EQ(q.back(), "19");
}
