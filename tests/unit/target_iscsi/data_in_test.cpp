// Data-In segmentation and residuals (RFC 7143 §11.7, §11.4.5, §13.12, §13.13).
#include "data_in.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace iserkit::target {
namespace {

TEST(DataIn, DataInSplitByMaxRecvDataSegmentLength) {
  DataInSegmenter s(20000, 8192, 1u << 20);
  std::vector<DataInSegment> v;
  while (auto x = s.next()) v.push_back(*x);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].buffer_offset, 0u);
  EXPECT_EQ(v[0].length, 8192u);
  EXPECT_FALSE(v[0].final);
  EXPECT_EQ(v[1].buffer_offset, 8192u);
  EXPECT_EQ(v[2].buffer_offset, 16384u);
  EXPECT_EQ(v[2].length, 20000u - 16384u);
  EXPECT_TRUE(v[2].final);
  EXPECT_TRUE(v[2].last);
}

TEST(DataIn, FinalBitAtEachMaxBurstLength) {
  DataInSegmenter s(40000, 8192, 12000);
  std::vector<DataInSegment> v;
  while (auto x = s.next()) v.push_back(*x);
  // Sequences of 12000 bytes: 8192 + 3808 (F), 8192 + 3808 (F), 8192 + 3808 (F), 4000 (F, last).
  ASSERT_EQ(v.size(), 7u);
  EXPECT_EQ(v[1].length, 3808u);
  EXPECT_TRUE(v[1].final);
  EXPECT_FALSE(v[1].last);
  EXPECT_FALSE(v[2].final);
  EXPECT_EQ(v[6].length, 4000u);
  EXPECT_TRUE(v[6].last);
  std::uint32_t total = 0;
  for (auto& x : v) total += x.length;
  EXPECT_EQ(total, 40000u);
}

TEST(DataIn, NothingToSendGivesNoSegments) {
  DataInSegmenter s(0, 8192, 8192);
  EXPECT_FALSE(s.next());
}

TEST(Residual, ResidualUnderflowOnShortRead) {
  // INQUIRY with allocation length 255 produced 96 bytes; EDTL 255.
  const auto r = residual_for(255, 96);
  EXPECT_TRUE(r.underflow);
  EXPECT_FALSE(r.overflow);
  EXPECT_EQ(r.count, 159u);
}

TEST(Residual, ResidualOverflowWhenCommandWantsMore) {
  const auto r = residual_for(512, 4096);
  EXPECT_TRUE(r.overflow);
  EXPECT_FALSE(r.underflow);
  EXPECT_EQ(r.count, 3584u);
}

TEST(Residual, NoResidualWhenExact) {
  const auto r = residual_for(4096, 4096);
  EXPECT_FALSE(r.overflow || r.underflow);
  EXPECT_EQ(r.count, 0u);
}

}  // namespace
}  // namespace iserkit::target
