// LunExport (nbd_bridge/lun_export) over a FakeLunChannel: NBD_FLAG_SEND_FUA follows the unit's
// DPOFUA bit (MODE SENSE device-specific parameter, SBC-4 §6.5.1), and WRITE carries FUA only then.
#include "nbd_bridge/lun_export.hpp"

#include <gtest/gtest.h>

#include "fake_lun_channel.hpp"

namespace iserkit::nbd {
namespace {

// Runs `aw` to completion on `io`.
template <class T>
T run_sync(asio::io_context& io, Awaitable<T> aw) {
  std::optional<T> out;
  asio::co_spawn(io, [&]() -> Awaitable<void> { out.emplace(co_await std::move(aw)); }, asio::detached);
  io.run();
  io.restart();
  return std::move(*out);
}

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

}  // namespace
}  // namespace iserkit::nbd
