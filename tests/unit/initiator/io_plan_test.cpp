// I/O planning: CDB size choice (SBC-4 READ/WRITE 10 vs 16), transfer caps, unaligned byte ranges.
#include "scsi/io_plan.hpp"

#include <gtest/gtest.h>

using namespace iserkit;
using namespace iserkit::initiator;

TEST(IoPlan, TenByteCdbForSmallUnitsAndShortTransfers) {
  EXPECT_EQ(read_write_cdb(false, 0, 65535, false, 1000000).opcode(), scsi::Opcode::read10);
  EXPECT_EQ(read_write_cdb(false, 0, 65536, false, 1000000).opcode(), scsi::Opcode::read16);
  EXPECT_EQ(read_write_cdb(true, 5, 8, true, 0xffffffffull).opcode(), scsi::Opcode::write10);
  EXPECT_EQ(read_write_cdb(true, 5, 8, false, 0x100000000ull + 1).opcode(), scsi::Opcode::write16);
  auto fua = read_write_cdb(true, 5, 8, true, 1000);
  EXPECT_NE(static_cast<unsigned>(fua.bytes[1]) & 0x08, 0u);  // FUA bit (SBC-4 table 5.41)
}

TEST(IoPlan, MaxTransferBlocksRespectsBlockLimits) {
  EXPECT_EQ(max_transfer_blocks(std::nullopt, 512), (8u << 20) / 512);
  scsi::BlockLimits bl;
  bl.maximum_transfer_length = 128;
  EXPECT_EQ(max_transfer_blocks(bl, 4096), 128u);
  bl.maximum_transfer_length = 0;
  EXPECT_EQ(max_transfer_blocks(bl, 4096), 2048u);
}

// The iSER per-command limit, derived as Linux sizes an ib_iser host (max_sectors) against what
// each kind of target reports in VPD 0xb0.
TEST(IoPlan, IserTransferLimitFollowsWhatTheTargetStates) {
  constexpr std::uint32_t kib = 1024, mib = 1024 * kib;
  const TransferLimitInputs iser{.block_size_bytes = 512, .transport_max_bytes = 8 * mib,
                                 .unstated_max_bytes = 512 * kib};
  // tgtd: no MAXIMUM TRANSFER LENGTH (no page, or 0 in it) → ib_iser's default 512 KiB.
  EXPECT_EQ(max_transfer_blocks(iser), 512 * kib / 512);
  auto zero = iser;
  zero.block_limits = scsi::BlockLimits{};
  EXPECT_EQ(max_transfer_blocks(zero), 512 * kib / 512);
  // iserkit-target: 65536 blocks (32 MiB) stated → the transport's 8 MiB.
  auto ours = iser;
  ours.block_limits = scsi::BlockLimits{.maximum_transfer_length = 65536};
  EXPECT_EQ(max_transfer_blocks(ours), 8 * mib / 512);
  // A unit stating 2 MiB (above the unstated default, below the transport's cap) gets 2 MiB.
  auto two = iser;
  two.block_limits = scsi::BlockLimits{.maximum_transfer_length = 4096};
  EXPECT_EQ(max_transfer_blocks(two), 4096u);
  // A smaller transport cap (SessionOptions::iser_max_transfer_bytes) wins over the unit.
  two.transport_max_bytes = 1 * mib;
  EXPECT_EQ(max_transfer_blocks(two), 2048u);
  // 4096-byte blocks: the caps are in bytes, the result in blocks.
  auto big_blocks = iser;
  big_blocks.block_size_bytes = 4096;
  EXPECT_EQ(max_transfer_blocks(big_blocks), 128u);
  // TCP: no transport caps → the unit's limit, else 8 MiB.
  EXPECT_EQ(max_transfer_blocks(TransferLimitInputs{.block_size_bytes = 512}), 8 * mib / 512);
  // A cap below one block still allows one block per command.
  EXPECT_EQ(max_transfer_blocks(TransferLimitInputs{.block_size_bytes = 4096, .transport_max_bytes = 100}), 1u);
}

TEST(IoPlan, UnalignedRangeSplitsIntoHeadMiddleTail) {
  auto p = plan_bytes(1000001, 3000000, 512);
  EXPECT_EQ(p.first_lba, 1953u);
  EXPECT_EQ(p.head_offset, 1000001u - 1953 * 512);
  EXPECT_EQ(p.head_bytes, 512 - p.head_offset);
  EXPECT_EQ(p.middle_lba, 1954u);
  const std::uint64_t end = 1000001 + 3000000;
  EXPECT_EQ(p.middle_blocks, end / 512 - 1954);
  EXPECT_EQ(p.tail_lba, end / 512);
  EXPECT_EQ(p.tail_bytes, end % 512);
  EXPECT_EQ(p.head_bytes + p.middle_blocks * 512 + p.tail_bytes, 3000000u);
}

TEST(IoPlan, AlignedAndInsideOneBlock) {
  auto a = plan_bytes(4096, 8192, 512);
  EXPECT_EQ(a.head_bytes, 0u);
  EXPECT_EQ(a.middle_blocks, 16u);
  EXPECT_EQ(a.tail_bytes, 0u);
  auto b = plan_bytes(10, 20, 512);  // one partial block
  EXPECT_EQ(b.head_offset, 10u);
  EXPECT_EQ(b.head_bytes, 20u);
  EXPECT_EQ(b.middle_blocks, 0u);
  EXPECT_EQ(b.tail_bytes, 0u);
  auto c = plan_bytes(512, 100, 512);  // aligned start, shorter than a block
  EXPECT_EQ(c.head_bytes, 100u);
  EXPECT_EQ(c.middle_blocks, 0u);
  EXPECT_EQ(c.tail_bytes, 0u);
}
