// Data-In segmentation and residuals (RFC 7143 §11.7, §11.4.5, §13.12, §13.13).
#include "data_in.hpp"
#include "iserkit/iscsi/data_segmenter.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace iserkit::target {
namespace {

using iscsi::DataSegment;
using iscsi::DataSegmenter;

/// Every segment `s` gives, in order.
std::vector<DataSegment> segments(DataSegmenter s) {
  std::vector<DataSegment> v;
  while (auto x = s.next()) v.push_back(*x);
  return v;
}

TEST(DataIn, DataInSplitByMaxRecvDataSegmentLength) {
  const auto v = segments(DataSegmenter(0, 20000, 8192, 1u << 20));
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
  const auto v = segments(DataSegmenter(0, 40000, 8192, 12000));
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
  DataSegmenter s(0, 0, 8192, 8192);
  EXPECT_FALSE(s.next());
}

// A range that starts inside the buffer (an R2T's burst) keeps its offsets; a burst limit and a
// segment limit that do not divide each other cut at whichever comes first; index counts PDUs.
TEST(DataIn, OffsetRangeWithBurstsCountsEveryPdu) {
  const auto v = segments(DataSegmenter(4096, 10000, 3000, 7000));
  // 3000, 3000, 1000 (F: the 7000-byte burst), 3000 (F, last).
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0].buffer_offset, 4096u);
  EXPECT_EQ(v[2].length, 1000u);
  EXPECT_TRUE(v[2].final);
  EXPECT_FALSE(v[2].last);
  EXPECT_EQ(v[3].buffer_offset, 4096u + 7000u);
  EXPECT_TRUE(v[3].final && v[3].last);
  for (std::uint32_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i].index, i);
}

// A limit of 0 (never agreed: a broken caller) moves one byte per PDU instead of looping forever;
// a range ending at 2^32 (past any uint32_t offset) does not wrap to an empty one.
TEST(DataIn, ZeroLimitsAndTheTopOfTheOffsetRangeTerminate) {
  const auto tiny = segments(DataSegmenter(0, 3, 0, 0));
  ASSERT_EQ(tiny.size(), 3u);
  for (const auto& x : tiny) {
    EXPECT_EQ(x.length, 1u);
    EXPECT_TRUE(x.final);
  }
  DataSegmenter top(0xFFFFF000u, 0x1000u, 8192);
  auto x = top.next();
  ASSERT_TRUE(x);
  EXPECT_EQ(x->length, 0x1000u);
  EXPECT_TRUE(x->last);
  EXPECT_FALSE(top.next());
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
