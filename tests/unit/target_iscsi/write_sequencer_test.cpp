// WriteSequencer (RFC 7143 §3.2.4.2, §11.7, §11.8, §13.13-§13.17).
#include "write_sequencer.hpp"

#include <gtest/gtest.h>

namespace iserkit::target {
namespace {

iscsi::DataOut data_out(std::uint32_t ttt, std::uint32_t data_sn, std::uint32_t offset, bool final) {
  return iscsi::DataOut{.final = final, .itt = iscsi::Itt{1}, .ttt = iscsi::Ttt{ttt}, .data_sn = data_sn,
                        .buffer_offset = offset};
}

TEST(WriteSequencer, ImmediateDataOnlyIsComplete) {
  WriteSequencer s({.needed_bytes = 4096, .expected_data_transfer_length = 4096, .immediate_bytes = 4096,
                    .first_burst_length = 65536});
  EXPECT_TRUE(s.complete());
  EXPECT_FALSE(s.next_r2t(iscsi::Ttt{1}));
}

TEST(WriteSequencer, UnsolicitedThenR2tSequence) {
  // 1 MiB write, 8 KiB immediate, unsolicited Data-Out up to FirstBurstLength 64 KiB, then R2Ts of
  // MaxBurstLength 256 KiB, two outstanding at most.
  WriteSequencer s({.needed_bytes = 1u << 20, .expected_data_transfer_length = 1u << 20, .immediate_bytes = 8192,
                    .unsolicited_follows = true, .first_burst_length = 65536, .max_burst_length = 262144,
                    .max_outstanding_r2t = 2});
  EXPECT_FALSE(s.next_r2t(iscsi::Ttt{1}));  // unsolicited data still arriving
  std::uint32_t offset = 8192;
  for (std::uint32_t sn = 0; offset < 65536; ++sn) {
    const bool last = offset + 8192 == 65536;
    ASSERT_FALSE(s.check_and_record(data_out(0xffffffff, sn, offset, last), 8192));
    offset += 8192;
  }
  EXPECT_TRUE(s.unsolicited_done());
  auto r1 = s.next_r2t(iscsi::Ttt{10});
  auto r2 = s.next_r2t(iscsi::Ttt{11});
  ASSERT_TRUE(r1 && r2);
  EXPECT_FALSE(s.next_r2t(iscsi::Ttt{12}));  // MaxOutstandingR2T = 2
  EXPECT_EQ(r1->r2t_sn, 0u);
  EXPECT_EQ(r1->buffer_offset, 65536u);
  EXPECT_EQ(r1->desired_data_transfer_length, 262144u);
  EXPECT_EQ(r2->r2t_sn, 1u);
  EXPECT_EQ(r2->buffer_offset, 65536u + 262144u);
  // Answer the first R2T in two PDUs.
  ASSERT_FALSE(s.check_and_record(data_out(10, 0, 65536, false), 131072));
  EXPECT_FALSE(s.next_r2t(iscsi::Ttt{12}));
  ASSERT_FALSE(s.check_and_record(data_out(10, 1, 65536 + 131072, true), 131072));
  auto r3 = s.next_r2t(iscsi::Ttt{12});
  ASSERT_TRUE(r3);
  EXPECT_EQ(r3->buffer_offset, 65536u + 2 * 262144u);
  EXPECT_EQ(r3->desired_data_transfer_length, 262144u);
  auto r4 = s.next_r2t(iscsi::Ttt{13});
  EXPECT_FALSE(r4);
  ASSERT_FALSE(s.check_and_record(data_out(11, 0, r2->buffer_offset, true), 262144));
  r4 = s.next_r2t(iscsi::Ttt{13});
  ASSERT_TRUE(r4);
  EXPECT_EQ(r4->desired_data_transfer_length, (1u << 20) - 65536u - 3 * 262144u);
  ASSERT_FALSE(s.check_and_record(data_out(12, 0, r3->buffer_offset, true), 262144));
  EXPECT_FALSE(s.complete());
  ASSERT_FALSE(s.check_and_record(data_out(13, 0, r4->buffer_offset, true), r4->desired_data_transfer_length));
  EXPECT_TRUE(s.complete());
  EXPECT_EQ(s.received_needed_bytes(), 1u << 20);
  EXPECT_EQ(s.r2ts_sent(), 4u);
}

TEST(WriteSequencer, WrongDataSnRefused) {
  WriteSequencer s({.needed_bytes = 8192, .expected_data_transfer_length = 8192, .unsolicited_follows = true,
                    .first_burst_length = 65536});
  EXPECT_EQ(s.check_and_record(data_out(0xffffffff, 1, 0, false), 4096), DataOutError::wrong_data_sn);
}

TEST(WriteSequencer, WrongOffsetRefused) {
  WriteSequencer s({.needed_bytes = 8192, .expected_data_transfer_length = 8192, .unsolicited_follows = true,
                    .first_burst_length = 65536});
  EXPECT_EQ(s.check_and_record(data_out(0xffffffff, 0, 512, false), 4096), DataOutError::wrong_offset);
}

TEST(WriteSequencer, UnsolicitedBeyondFirstBurstRefused) {
  WriteSequencer s({.needed_bytes = 1u << 20, .expected_data_transfer_length = 1u << 20, .unsolicited_follows = true,
                    .first_burst_length = 65536});
  EXPECT_EQ(s.check_and_record(data_out(0xffffffff, 0, 0, false), 65536 + 512), DataOutError::too_long);
}

TEST(WriteSequencer, UnsolicitedWhenNoneMayFollowRefused) {
  WriteSequencer s({.needed_bytes = 8192, .expected_data_transfer_length = 8192, .unsolicited_follows = false,
                    .first_burst_length = 65536});
  EXPECT_EQ(s.check_and_record(data_out(0xffffffff, 0, 0, true), 4096), DataOutError::unexpected_unsolicited);
}

TEST(WriteSequencer, UnknownTttRefused) {
  WriteSequencer s({.needed_bytes = 8192, .expected_data_transfer_length = 8192, .first_burst_length = 65536,
                    .max_burst_length = 8192});
  auto r = s.next_r2t(iscsi::Ttt{5});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->buffer_offset, 0u);
  EXPECT_EQ(s.check_and_record(data_out(6, 0, 0, true), 8192), DataOutError::unknown_ttt);
  EXPECT_EQ(s.check_and_record(data_out(5, 0, 0, true), 8192 + 4), DataOutError::too_long);
  EXPECT_FALSE(s.check_and_record(data_out(5, 0, 0, true), 8192));
  EXPECT_TRUE(s.complete());
}

TEST(WriteSequencer, FailedCommandOnlyDrainsUnsolicitedData) {
  // needed_bytes 0: the command failed in plan(); nothing is solicited, unsolicited data is taken.
  WriteSequencer s({.needed_bytes = 0, .expected_data_transfer_length = 65536, .immediate_bytes = 4096,
                    .unsolicited_follows = true, .first_burst_length = 16384});
  EXPECT_FALSE(s.complete());
  EXPECT_FALSE(s.next_r2t(iscsi::Ttt{1}));
  ASSERT_FALSE(s.check_and_record(data_out(0xffffffff, 0, 4096, true), 12288));
  EXPECT_TRUE(s.complete());
  EXPECT_FALSE(s.next_r2t(iscsi::Ttt{1}));
}

}  // namespace
}  // namespace iserkit::target
