// RegisteredBufferPool after its RDMA device went away (retire(): issue 13 item 4, device loss).
// A retired pool keeps serving its users with plain memory and claims no registration, so a
// command whose buffer came from it bounces through a live device's pool instead of sending the
// STag of a deregistered region (RFC 7145 §9.2: the STags in the iSER header must be valid).
// Needs no RDMA device: a pool without a protection domain is what retire() leaves.
#include <gtest/gtest.h>

#include <cstring>

#include "iser_verbs.hpp"

namespace iserkit::datamover::rdma {
namespace {

TEST(RetiredRegisteredBufferPool, HandsOutPlainMemoryAndClaimsNoRegistration) {
  RegisteredBufferPool pool(nullptr, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
  pool.retire();
  EXPECT_TRUE(pool.retired());
  for (const std::size_t bytes : {std::size_t{1}, std::size_t{8192}, std::size_t{3} << 20, (std::size_t{16} << 20) + 1}) {
    auto lease = pool.allocate(bytes);
    ASSERT_EQ(lease.size(), bytes);
    EXPECT_EQ(lease.buffer().lkey, 0u) << bytes;
    EXPECT_EQ(lease.buffer().rkey, 0u) << bytes;
    std::memset(lease.data(), 0x5a, bytes);  // real, writable memory (ASan checks the range)
    EXPECT_FALSE(pool.registration(lease.bytes()).has_value()) << bytes;
  }
  // Returned chunks are reused, still unregistered.
  const std::byte* first = nullptr;
  {
    auto a = pool.allocate(4096);
    first = a.data();
  }
  auto b = pool.allocate(4096);
  EXPECT_EQ(b.data(), first);
  EXPECT_FALSE(pool.registration(b.bytes()).has_value());
}

TEST(RetiredRegisteredBufferPool, LiveUntilRetired) {
  RegisteredBufferPool pool(nullptr, IBV_ACCESS_LOCAL_WRITE);
  // Without a protection domain from the start it is already what a retired pool is.
  EXPECT_TRUE(pool.retired());
  pool.retire();  // idempotent
  EXPECT_TRUE(pool.retired());
}

}  // namespace
}  // namespace iserkit::datamover::rdma
