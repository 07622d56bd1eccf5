// LunExport (nbd_bridge/lun_export) over a FakeLunChannel: NBD_FLAG_SEND_FUA follows the unit's
// DPOFUA bit (MODE SENSE device-specific parameter, SBC-4 §6.5.1), and WRITE carries FUA only then;
// NBD_CMD_FLUSH is one SYNCHRONIZE CACHE over the whole medium (what NBD_FLAG_CAN_MULTI_CONN rests on).
#include "nbd_bridge/lun_export.hpp"

#include <gtest/gtest.h>

#include "fake_lun_channel.hpp"

namespace iserkit::nbd {
namespace {

using test::run_sync;

struct Opened {
  std::shared_ptr<test::FakeLunChannel> channel;
  std::unique_ptr<LunExport> exported;
};

Opened open_export(asio::io_context& io, test::FakeLunOptions options) {
  auto channel = std::make_shared<test::FakeLunChannel>(io.get_executor(), options);
  auto lun = run_sync(io, initiator::LunHandle::open(channel, scsi::Lun{}));
  EXPECT_TRUE(lun) << lun.error().message();
  return {channel, std::make_unique<LunExport>(std::move(*lun), LunExportOptions{.name = "x"})};
}

TEST(LunExport, FuaAdvertisedAndSentWhenUnitHasDpofua) {
  asio::io_context io;
  auto [channel, exported] = open_export(io, {.dpofua = true});
  EXPECT_TRUE(exported->info().can_fua);
  std::vector<std::byte> data(4096, std::byte{0x5a});
  EXPECT_FALSE(run_sync(io, exported->write(8192, data, true)));
  ASSERT_FALSE(channel->transfers().empty());
  EXPECT_TRUE(channel->transfers().back().fua);
}

// proto.md NBD_FLAG_CAN_MULTI_CONN: a FLUSH on one connection must cover writes completed on any
// other, which with a session per event loop went out on another iSCSI session. It does because the
// flush is SYNCHRONIZE CACHE with LBA 0 and NUMBER OF LOGICAL BLOCKS 0 ("through the last LBA",
// SBC-4 SYNCHRONIZE CACHE (10)): the whole logical unit, whichever I_T nexus sends it.
TEST(LunExport, FlushIsSynchronizeCacheOfTheWholeMediumSoMultiConnHolds) {
  asio::io_context io;
  auto [channel, exported] = open_export(io, {.blocks = 1u << 24});  // 8 GiB: past what (10) could name
  EXPECT_TRUE(exported->info().can_flush);
  EXPECT_TRUE(exported->info().can_multi_conn);
  EXPECT_FALSE(run_sync(io, exported->flush()));
  ASSERT_EQ(channel->flushes().size(), 1u);
  EXPECT_EQ(channel->flushes()[0].opcode, 0x35);
  EXPECT_EQ(channel->flushes()[0].lba, 0u);
  EXPECT_EQ(channel->flushes()[0].blocks, 0u) << "a flush of a range would not cover the other sessions' writes";
}

TEST(LunExport, FuaNotAdvertisedWithoutDpofua) {
  asio::io_context io;
  auto [channel, exported] = open_export(io, {.dpofua = false});
  EXPECT_FALSE(exported->info().can_fua);
  // The fake rejects FUA like a write-through LIO LUN: a client that ignored the missing flag
  // would see EINVAL, nothing written.
  std::vector<std::byte> data(512, std::byte{0x11});
  EXPECT_EQ(run_sync(io, exported->write(0, data, true)), std::error_code(EINVAL, std::generic_category()));
  EXPECT_EQ(channel->disk()[0], std::byte{0});
  EXPECT_FALSE(run_sync(io, exported->write(0, data, false)));
  EXPECT_EQ(channel->disk()[0], std::byte{0x11});
}

TEST(LunExport, FuaNotAdvertisedWhenModeSenseFails) {
  asio::io_context io;
  auto [channel, exported] = open_export(io, {.dpofua = std::nullopt});
  EXPECT_FALSE(exported->info().can_fua);
}

TEST(LunExport, ModeSenseSixUsedWhenTenIsRejected) {
  asio::io_context io;
  auto [channel, exported] = open_export(io, {.dpofua = true, .mode_sense10_unsupported = true});
  EXPECT_TRUE(exported->info().can_fua);
}

// A 4 MiB NBD request over iSER-like caps: split at 512 KiB when the unit states no MAXIMUM
// TRANSFER LENGTH (tgtd), sent as one command when it states enough (our target, LIO).
std::vector<std::byte> pattern(std::size_t n) {
  std::vector<std::byte> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>((i * 131 + i / 4096) & 0xff);
  return out;
}

TEST(LunExport, LargeRequestSplitAtUnstatedIserLimit) {
  asio::io_context io;
  auto [channel, exported] = open_export(io, {.blocks = 16384,
                                              .transport_max_transfer_bytes = 8u << 20,
                                              .transport_unstated_max_transfer_bytes = 512u << 10});
  const auto data = pattern(4u << 20);
  ASSERT_FALSE(run_sync(io, exported->write(1u << 20, data, false)));
  std::vector<std::byte> back(data.size());
  ASSERT_FALSE(run_sync(io, exported->read(1u << 20, back)));
  EXPECT_EQ(back, data);
  const auto& t = channel->transfers();
  ASSERT_EQ(t.size(), 16u);  // 8 WRITEs + 8 READs of 1024 blocks
  std::uint64_t lba = 2048;
  for (std::size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(t[i].blocks, 1024u) << i;
    EXPECT_EQ(t[i].bytes, 512u << 10) << i;
    EXPECT_EQ(t[i].lba, lba) << i;
    lba = i == 7 ? 2048 : lba + 1024;
  }
}

TEST(LunExport, LargeRequestInOneCommandWhenTargetStatesItsLimit) {
  asio::io_context io;
  auto [channel, exported] = open_export(io, {.blocks = 32768,
                                              .maximum_transfer_length_blocks = 65536,
                                              .transport_max_transfer_bytes = 8u << 20,
                                              .transport_unstated_max_transfer_bytes = 512u << 10});
  const auto data = pattern(4u << 20);
  ASSERT_FALSE(run_sync(io, exported->write(0, data, false)));
  std::vector<std::byte> back(data.size());
  ASSERT_FALSE(run_sync(io, exported->read(0, back)));
  EXPECT_EQ(back, data);
  ASSERT_EQ(channel->transfers().size(), 2u);
  EXPECT_EQ(channel->transfers()[0].blocks, 8192u);
  EXPECT_EQ(channel->transfers()[1].blocks, 8192u);
  // 12 MiB: split at the transport's 8 MiB cap.
  const auto twelve = pattern(12u << 20);
  ASSERT_FALSE(run_sync(io, exported->write(0, twelve, false)));
  ASSERT_EQ(channel->transfers().size(), 4u);
  EXPECT_EQ(channel->transfers()[2].blocks, 16384u);
  EXPECT_EQ(channel->transfers()[3].blocks, 8192u);
  EXPECT_EQ(channel->transfers()[3].lba, 16384u);
}

}  // namespace
}  // namespace iserkit::nbd
