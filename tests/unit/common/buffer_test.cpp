// HeapBufferPool: alignment, reuse, sizes, and leases from several threads at once (the pool is
// documented thread-safe; the TSan stage of scripts/test.sh runs this test).
#include "iserkit/common/buffer.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
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

TEST(HeapBufferPool, ConcurrentLeasesNeverShareAChunk) {
  HeapBufferPool pool;
  constexpr int threads = 4, rounds = 2000;
  std::atomic<int> overlaps{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      const auto mark = static_cast<std::byte>(0x10 + t);
      for (int i = 0; i < rounds; ++i) {
        // Two size classes, so chunks move between free lists and threads.
        auto b = pool.allocate(i % 2 == 0 ? 4096 : 3 * 4096);
        for (auto& x : b.bytes()) x = mark;
        std::this_thread::yield();
        for (auto x : b.bytes())
          if (x != mark) {
            overlaps.fetch_add(1);  // another thread wrote into our lease
            break;
          }
      }
    });
  }
  for (auto& w : workers) w.join();
  EXPECT_EQ(overlaps.load(), 0);
}

}  // namespace
}  // namespace iserkit
