// Data-In placement validation, write data sequencing (immediate, unsolicited, R2T) and the ITT
// table. RFC 7143 §4.2.5, §11.7, §11.8.
#include "data_transfer.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "iserkit/common/errors.hpp"
#include "itt_table.hpp"

using namespace iserkit;
using namespace iserkit::initiator;

TEST(DataIn, InOrderPduInsideTheBufferIsAccepted) {
  DataInTracker t(16384);
  EXPECT_TRUE(t.accept(0, 0, 8192));
  EXPECT_TRUE(t.accept(1, 8192, 8192));
  EXPECT_EQ(t.bytes_received(), 16384u);
}

TEST(DataIn, OffsetOrLengthOutsideTheBufferIsProtocolError) {
  DataInTracker t(4096);
  EXPECT_FALSE(t.fits(4096, 1));
  EXPECT_FALSE(t.fits(0, 4097));
  EXPECT_FALSE(t.fits(0xffffff00u, 0x200));  // would wrap in 32 bits
  EXPECT_TRUE(t.fits(4096, 0));
  EXPECT_EQ(t.accept(0, 2048, 4096).error(), make_error_code(errc::protocol_error));
}

TEST(DataIn, DataSnGapIsProtocolError) {
  DataInTracker t(8192);
  EXPECT_TRUE(t.accept(0, 0, 4096));
  EXPECT_EQ(t.accept(2, 4096, 4096).error(), make_error_code(errc::protocol_error));
}

std::vector<iscsi::DataSegment> drain(iscsi::DataSegmenter s) {
  std::vector<iscsi::DataSegment> v;
  while (auto x = s.next()) v.push_back(*x);
  return v;
}

TEST(WriteSequencing, ImmediateDataThenDataOutSequence) {
  // ImmediateData=Yes, InitialR2T=No, FirstBurstLength 64 KiB, target MRDSL 8 KiB, write of 100 KiB.
  const WriteLimits l{.immediate_data = true, .initial_r2t = false, .first_burst_length = 65536,
                      .max_burst_length = 262144, .max_send_segment_length = 8192};
  const std::uint32_t total = 102400;
  const auto immediate = immediate_data_length(l, total);
  EXPECT_EQ(immediate, 8192u);  // capped by the target's MaxRecvDataSegmentLength
  const auto unsolicited = unsolicited_data_out_length(l, total, immediate);
  EXPECT_EQ(unsolicited, 65536u - 8192u);  // up to FirstBurstLength in total
  auto segs = drain(iscsi::DataSegmenter(immediate, unsolicited, l.max_send_segment_length));
  ASSERT_EQ(segs.size(), 7u);
  for (std::size_t i = 0; i < segs.size(); ++i) {
    EXPECT_EQ(segs[i].index, i);  // DataSN
    EXPECT_EQ(segs[i].buffer_offset, 8192u * (i + 1));
    EXPECT_EQ(segs[i].length, 8192u);
    EXPECT_EQ(segs[i].final, i + 1 == segs.size());
  }
  // The rest (36 KiB) is solicited: an R2T for it is valid, one beyond the transfer is not.
  iscsi::R2t r2t;
  r2t.buffer_offset = 65536;
  r2t.desired_data_transfer_length = total - 65536;
  EXPECT_TRUE(validate_r2t(r2t, total, l));
  auto solicited = drain(iscsi::DataSegmenter(r2t.buffer_offset, r2t.desired_data_transfer_length, 8192));
  ASSERT_EQ(solicited.size(), 5u);
  EXPECT_EQ(solicited.back().length, 36864u - 4 * 8192u);
  EXPECT_TRUE(solicited.back().final);
  EXPECT_EQ(solicited.front().index, 0u);  // DataSN restarts per R2T sequence
}

TEST(WriteSequencing, InitialR2TYesMeansNoUnsolicitedDataOut) {
  const WriteLimits l{.immediate_data = true, .initial_r2t = true, .first_burst_length = 65536,
                      .max_burst_length = 262144, .max_send_segment_length = 262144};
  EXPECT_EQ(immediate_data_length(l, 4096), 4096u);
  EXPECT_EQ(unsolicited_data_out_length(l, 1 << 20, 65536), 0u);
  const WriteLimits none{.immediate_data = false, .initial_r2t = true};
  EXPECT_EQ(immediate_data_length(none, 4096), 0u);
}

TEST(WriteSequencing, SmallWriteFitsInImmediateData) {
  const WriteLimits l{.immediate_data = true, .initial_r2t = false, .first_burst_length = 65536,
                      .max_burst_length = 262144, .max_send_segment_length = 262144};
  EXPECT_EQ(immediate_data_length(l, 4096), 4096u);
  EXPECT_EQ(unsolicited_data_out_length(l, 4096, 4096), 0u);
}

TEST(WriteSequencing, R2tOutsideTransferOrAboveMaxBurstIsRejected) {
  const WriteLimits l{.max_burst_length = 65536};
  iscsi::R2t r;
  r.buffer_offset = 0;
  r.desired_data_transfer_length = 0;
  EXPECT_FALSE(validate_r2t(r, 4096, l));
  r.desired_data_transfer_length = 8192;
  EXPECT_FALSE(validate_r2t(r, 4096, l));
  r.buffer_offset = 0xfffff000u;
  r.desired_data_transfer_length = 0x2000;
  EXPECT_FALSE(validate_r2t(r, 0xffffffffu, l));
  r.buffer_offset = 0;
  r.desired_data_transfer_length = 131072;
  EXPECT_FALSE(validate_r2t(r, 1 << 20, l));
}

TEST(IttTable, RetiredIttNeverFindsANewTask) {
  IttTable<int> t(2);
  int a = 1, b = 2, c = 3;
  const auto ia = t.insert(&a);
  const auto ib = t.insert(&b);
  EXPECT_EQ(t.insert(&c), iscsi::reserved_itt);  // full
  EXPECT_EQ(t.find(ia), &a);
  t.erase(ia);
  EXPECT_EQ(t.find(ia), nullptr);
  const auto ic = t.insert(&c);
  EXPECT_NE(ic, ia);  // same slot, new generation
  EXPECT_EQ(t.find(ic), &c);
  EXPECT_EQ(t.find(ia), nullptr);
  EXPECT_EQ(t.find(ib), &b);
  EXPECT_EQ(t.find(iscsi::reserved_itt), nullptr);
  EXPECT_EQ(t.size(), 2u);
}
