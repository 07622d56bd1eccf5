// ArenaPool: a BufferPool whose "registered" memory is one 1 MiB arena, every span in it carrying
// lkey 11 / rkey 22 — what RegisteredBufferPool (iSER) looks like to its callers, without an RDMA
// device. Leases are 4 KiB-aligned bump allocations, never reused (tests only). Another key pair
// plays another protection domain (a second device); leased() counts leases not yet returned.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "iserkit/common/buffer.hpp"

namespace iserkit::test {

class ArenaPool final : public BufferPool {
 public:
  static constexpr std::uint32_t lkey = 11;
  static constexpr std::uint32_t rkey = 22;

  explicit ArenaPool(std::uint32_t local_key = lkey, std::uint32_t remote_key = rkey)
      : arena_(1 << 20), lkey_(local_key), rkey_(remote_key) {}
  PooledBuffer allocate(std::size_t bytes) override {
    std::byte* p = arena_.data() + used_;
    used_ += (bytes + 4095) & ~std::size_t{4095};
    ++leased_;
    return PooledBuffer(this, Buffer{.bytes = {p, bytes}, .lkey = lkey_, .rkey = rkey_}, bytes);
  }
  /// The registered view of `b` when it lies inside the arena, else nullopt.
  std::optional<Buffer> registration(std::span<const std::byte> b) const noexcept override {
    if (b.data() < arena_.data() || b.data() + b.size() > arena_.data() + arena_.size()) return std::nullopt;
    return Buffer{.bytes = {const_cast<std::byte*>(b.data()), b.size()}, .lkey = lkey_, .rkey = rkey_};
  }
  /// Leases handed out and not returned yet.
  [[nodiscard]] std::size_t leased() const noexcept { return leased_; }

 private:
  void release(const Buffer&, std::size_t) noexcept override { --leased_; }
  std::vector<std::byte> arena_;
  std::size_t used_ = 0;
  std::uint32_t lkey_;
  std::uint32_t rkey_;
  std::size_t leased_ = 0;
};

}  // namespace iserkit::test
