// SEEK_DATA / SEEK_HOLE and the st_blocks count of the FUSE view (lun_io: seek_with,
// count_mapped_blocks) over a FakeLunChannel playing a unit with a provisioning map: answers from
// GET LBA STATUS, the cache sparing commands, the bounds (16 commands per seek, 32 per count) and
// what is answered past them, and the "fully allocated" answers of a unit that is not thin, refuses
// the command, or has LBPRZ = 0.
#include "fuse_fs/lun_io.hpp"

#include <gtest/gtest.h>

#include <cerrno>

#include "fake_lun_channel.hpp"

namespace iserkit::fuse_fs {
namespace {

constexpr std::uint64_t blocks = 2048;  // 512-byte blocks: a 1 MiB unit
constexpr std::uint64_t size = blocks * 512;

using test::run_sync;

struct Rig {
  explicit Rig(test::FakeLunOptions options) {
    options.blocks = blocks;
    channel = std::make_shared<test::FakeLunChannel>(io.get_executor(), options);
    // Blocks 8..15 and 100 hold data; everything else is deallocated.
    std::fill(channel->mapped().begin(), channel->mapped().end(), false);
    std::fill_n(channel->mapped().begin() + 8, 8, true);
    channel->mapped()[100] = true;
    auto h = run_sync(io, initiator::LunHandle::open(channel, scsi::Lun{}));
    EXPECT_TRUE(h) << h.error().message();
    handle.emplace(*h);
    target.iqn = "iqn.2026-11.org.x:t";
    target.dir = 7;
    lun->target = &target;
  }
  // The answer of lseek: the offset, or -errno.
  std::int64_t seek(std::uint64_t offset, SeekWhence whence) {
    auto r = run_sync(io, seek_with(cache, *lun, *handle, offset, whence));
    if (!r) return -(r.error() == std::make_error_code(std::errc::no_such_device_or_address) ? ENXIO : EIO);
    return static_cast<std::int64_t>(*r);
  }
  std::optional<std::uint64_t> count() {
    lun->counting = true;
    run_sync(io, [this]() -> Awaitable<bool> {
      co_await count_mapped_blocks(cache, lun, *handle);
      co_return true;
    }());
    EXPECT_FALSE(lun->counting);
    return cache.mapped_blocks(lun->allocation_key(), Clock::now());
  }

  asio::io_context io;
  std::shared_ptr<test::FakeLunChannel> channel;
  std::optional<initiator::LunHandle> handle;
  TargetState target;
  std::shared_ptr<LunState> lun = std::make_shared<LunState>();
  ExtentCache cache;
};

TEST(LunAllocation, SeeksAnswerFromGetLbaStatusAndTheCacheSparesCommands) {
  Rig rig({.thin = true, .unmapped_reads_zero = true});
  EXPECT_EQ(rig.seek(0, SeekWhence::data), 8 * 512);
  EXPECT_EQ(rig.seek(0, SeekWhence::hole), 0);
  EXPECT_EQ(rig.seek(8 * 512 + 3, SeekWhence::hole), 16 * 512);
  EXPECT_EQ(rig.seek(16 * 512, SeekWhence::data), 100 * 512);
  EXPECT_EQ(rig.seek(100 * 512, SeekWhence::hole), 101 * 512);
  EXPECT_EQ(rig.seek(101 * 512, SeekWhence::data), -ENXIO);  // only holes to the end
  EXPECT_EQ(rig.seek(size - 1, SeekWhence::hole), static_cast<std::int64_t>(size - 1));
  EXPECT_EQ(rig.seek(size, SeekWhence::data), -ENXIO);  // at the end
  EXPECT_EQ(rig.seek(size, SeekWhence::hole), -ENXIO);
  // One answer (64 descriptors) covered the whole unit: the rest came from the cache.
  EXPECT_EQ(rig.channel->lba_status_commands(), 1u);
}

TEST(LunAllocation, CountIsTheMappedBlocksAndIsCached) {
  Rig rig({.thin = true, .unmapped_reads_zero = true});
  EXPECT_EQ(rig.count(), 9u);
  EXPECT_EQ(rig.lun->last_mapped_blocks, 9u);
  EXPECT_EQ(rig.channel->lba_status_commands(), 1u);
  // A write of ours forgets the count; the next one sees the new block.
  rig.channel->mapped()[500] = true;
  rig.cache.invalidate(rig.lun->allocation_key(), 500, 1);
  EXPECT_EQ(rig.cache.mapped_blocks(rig.lun->allocation_key(), Clock::now()), std::nullopt);
  EXPECT_EQ(rig.count(), 10u);
}

// 4-block descriptors, one per answer: crossing the unit would take 512 commands.
TEST(LunAllocation, PastTheSeekBoundTheUnknownCountsAsData) {
  Rig rig({.thin = true, .unmapped_reads_zero = true, .lba_status_max_descriptors = 1, .lba_status_max_run_blocks = 4});
  std::fill(rig.channel->mapped().begin(), rig.channel->mapped().end(), false);
  EXPECT_EQ(rig.seek(0, SeekWhence::data), 16 * 4 * 512);  // where the known holes end
  EXPECT_EQ(rig.channel->lba_status_commands(), static_cast<std::size_t>(seek_max_commands));
  // SEEK_HOLE in a long data run past the bound: the size (the implicit hole at the end).
  std::fill(rig.channel->mapped().begin(), rig.channel->mapped().end(), true);
  rig.cache.forget(rig.lun->allocation_key());
  EXPECT_EQ(rig.seek(0, SeekWhence::hole), static_cast<std::int64_t>(size));
}

TEST(LunAllocation, PastTheCountBoundTheRestCountsAsMapped) {
  Rig rig({.thin = true, .unmapped_reads_zero = true, .lba_status_max_descriptors = 1, .lba_status_max_run_blocks = 4});
  std::fill(rig.channel->mapped().begin(), rig.channel->mapped().end(), false);
  // 32 answers of 4 hole blocks each are known; the other 1920 blocks count as mapped.
  EXPECT_EQ(rig.count(), blocks - 32 * 4);
  EXPECT_EQ(rig.channel->lba_status_commands(), static_cast<std::size_t>(count_max_commands));
}

TEST(LunAllocation, AUnitWithoutProvisioningManagementIsFullyAllocatedWithoutACommand) {
  Rig rig({.thin = false});
  EXPECT_EQ(rig.seek(4096, SeekWhence::data), 4096);
  EXPECT_EQ(rig.seek(4096, SeekWhence::hole), static_cast<std::int64_t>(size));
  EXPECT_EQ(rig.seek(size, SeekWhence::data), -ENXIO);
  EXPECT_EQ(rig.count(), blocks);
  EXPECT_EQ(rig.channel->lba_status_commands(), 0u);
}

TEST(LunAllocation, ARefusedCommandIsRememberedAndTheFileIsFullyAllocated) {
  Rig rig({.thin = true, .unmapped_reads_zero = true, .reject_get_lba_status = true});
  EXPECT_EQ(rig.seek(0, SeekWhence::data), 0);  // not an error: lseek(2) allows ENXIO only
  EXPECT_EQ(rig.seek(0, SeekWhence::hole), static_cast<std::int64_t>(size));
  EXPECT_TRUE(rig.lun->lba_status_unsupported);
  EXPECT_EQ(rig.channel->lba_status_commands(), 1u);  // asked once, then remembered
  EXPECT_EQ(rig.seek(12345, SeekWhence::data), 12345);
  EXPECT_EQ(rig.channel->lba_status_commands(), 1u);
}

TEST(LunAllocation, CountOfARefusingUnitIsTheCapacity) {
  Rig rig({.thin = true, .unmapped_reads_zero = true, .reject_get_lba_status = true});
  EXPECT_EQ(rig.count(), blocks);
  EXPECT_TRUE(rig.lun->lba_status_unsupported);
}

// LBPRZ = 0: a deallocated block may read as anything, so no holes are reported to lseek; st_blocks
// still counts the mapped blocks.
TEST(LunAllocation, WithoutLbprzSeeksSeeNoHolesButTheCountIsExact) {
  Rig rig({.thin = true, .unmapped_reads_zero = false});
  EXPECT_EQ(rig.seek(0, SeekWhence::data), 0);
  EXPECT_EQ(rig.seek(0, SeekWhence::hole), static_cast<std::int64_t>(size));
  EXPECT_EQ(rig.channel->lba_status_commands(), 0u);
  EXPECT_EQ(rig.count(), 9u);
}

}  // namespace
}  // namespace iserkit::fuse_fs
