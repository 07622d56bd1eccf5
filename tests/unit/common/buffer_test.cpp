// HeapBufferPool: alignment, reuse, sizes.
#include "iserkit/common/buffer.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace iserkit {
namespace {

TEST(HeapBufferPool, AlignedExactSizeAndReused) {
  HeapBufferPool pool;
  std::byte* first = nullptr;
  {
    auto b = pool.allocate(5000);
    ASSERT_TRUE(b);
    EXPECT_EQ(b.size(), 5000u);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % 4096, 0u);
    first = b.data();
    b.bytes()[4999] = std::byte{1};  // the whole span is writable
  }
  auto again = pool.allocate(8192);  // same size class (8 KiB) → the same chunk back
  EXPECT_EQ(again.data(), first);
}

TEST(HeapBufferPool, MoveTransfersOwnership) {
  HeapBufferPool pool;
  auto a = pool.allocate(4096);
  auto* p = a.data();
  PooledBuffer b = std::move(a);
  EXPECT_FALSE(a);
  EXPECT_EQ(b.data(), p);
  b.reset();
  EXPECT_FALSE(b);
}

TEST(HeapBufferPool, HugeRequestsBypassTheFreeLists) {
  HeapBufferPool pool;
  auto b = pool.allocate((32u << 20) + 1);
  EXPECT_EQ(b.size(), (32u << 20) + 1);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % 4096, 0u);
}

TEST(HeapBufferPool, IdleMemoryShrinksBackToTheCap) {
  HeapBufferPool pool;
  pool.set_idle_cap(std::size_t{8} << 20);
  {
    std::vector<PooledBuffer> held;
    for (int i = 0; i < 8; ++i) held.push_back(pool.allocate(std::size_t{4} << 20));  // 32 MiB in use
  }
  // Returned: only what fits under the cap stays idle.
  EXPECT_EQ(pool.idle_bytes(), std::size_t{8} << 20);
  pool.set_idle_cap(std::size_t{4} << 20);  // lowering the cap frees the excess at once
  EXPECT_EQ(pool.idle_bytes(), std::size_t{4} << 20);
  pool.set_idle_cap(0);
  EXPECT_EQ(pool.idle_bytes(), 0u);
  auto b = pool.allocate(std::size_t{1} << 20);  // still works with nothing kept
  EXPECT_EQ(b.size(), std::size_t{1} << 20);
}

}  // namespace
}  // namespace iserkit
