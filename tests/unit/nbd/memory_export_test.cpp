// MemoryExport (nbd_bridge/memory_export): sparse storage, zeroing, trimming, bounds (sizes: common cli_values_test).
#include "nbd_bridge/memory_export.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace iserkit::nbd {
namespace {

constexpr std::uint64_t chunk = MemoryExport::chunk_bytes;

std::vector<std::byte> pattern(std::size_t n, int seed) {
  std::vector<std::byte> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>((i * 31 + seed) & 0xff);
  return out;
}

TEST(MemoryExport, UnwrittenReadsZeroAndTakesNoMemory) {
  MemoryExport memory({.size_bytes = 1ull << 40});  // 1 TiB, sparse
  std::vector<std::byte> buffer(8192, std::byte{0xff});
  EXPECT_FALSE(memory.read_now((1ull << 40) - 8192, buffer));
  for (auto b : buffer) ASSERT_EQ(b, std::byte{0});
  EXPECT_EQ(memory.allocated_bytes(), 0u);
}

TEST(MemoryExport, WriteReadAcrossChunkBoundary) {
  MemoryExport memory({.size_bytes = 4 * chunk});
  const auto data = pattern(chunk + 100, 7);
  EXPECT_FALSE(memory.write_now(chunk - 50, data));
  std::vector<std::byte> back(data.size());
  EXPECT_FALSE(memory.read_now(chunk - 50, back));
  EXPECT_EQ(back, data);
  EXPECT_EQ(memory.allocated_bytes(), 3 * chunk);
}

TEST(MemoryExport, ZeroWithAndWithoutHoles) {
  MemoryExport memory({.size_bytes = 4 * chunk});
  const auto data = pattern(4 * chunk, 1);
  ASSERT_FALSE(memory.write_now(0, data));
  EXPECT_FALSE(memory.zero_now(10, 2 * chunk, /*may_trim=*/true));  // frees chunk 1 only
  EXPECT_EQ(memory.allocated_bytes(), 3 * chunk);
  std::vector<std::byte> back(4 * chunk);
  ASSERT_FALSE(memory.read_now(0, back));
  for (std::uint64_t i = 0; i < back.size(); ++i) {
    const bool zeroed = i >= 10 && i < 10 + 2 * chunk;
    ASSERT_EQ(back[i], zeroed ? std::byte{0} : data[i]) << i;
  }
  MemoryExport empty({.size_bytes = 4 * chunk});
  EXPECT_FALSE(empty.zero_now(0, 2 * chunk, /*may_trim=*/false));  // NO_HOLE allocates
  EXPECT_EQ(empty.allocated_bytes(), 2 * chunk);
}

TEST(MemoryExport, BoundsAndReadOnly) {
  MemoryExport memory({.size_bytes = 1000});
  std::vector<std::byte> buffer(10);
  EXPECT_EQ(memory.read_now(995, buffer), std::errc::invalid_argument);
  EXPECT_EQ(memory.write_now(995, buffer), std::errc::no_space_on_device);
  EXPECT_EQ(memory.write_now(UINT64_MAX - 2, buffer), std::errc::no_space_on_device);
  MemoryExport read_only({.size_bytes = 1000, .read_only = true});
  EXPECT_EQ(read_only.write_now(0, buffer), std::errc::operation_not_permitted);
  EXPECT_TRUE(read_only.info().read_only);
}

TEST(MemoryExport, InjectedFailure) {
  MemoryExport memory({.size_bytes = 1 << 20});
  memory.inject_failure(4096, 512, std::make_error_code(std::errc::io_error));
  std::vector<std::byte> buffer(512);
  EXPECT_FALSE(memory.read_now(0, buffer));
  EXPECT_EQ(memory.read_now(4000, buffer), std::errc::io_error);
  memory.inject_failure(0, 0, {});
  EXPECT_FALSE(memory.read_now(4000, buffer));
}

}  // namespace
}  // namespace iserkit::nbd
