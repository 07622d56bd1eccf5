// HeapBufferPool: 4 KiB-aligned chunks in power-of-two size classes kept on free lists.
#include "iserkit/common/buffer.hpp"

#include <bit>
#include <cstdlib>
#include <new>

namespace iserkit {

void PooledBuffer::reset() noexcept {
  if (pool_ != nullptr) {
    pool_->release(buffer_, capacity_);
    pool_ = nullptr;
    buffer_ = {};
  }
}

HeapBufferPool::~HeapBufferPool() {
  for (auto& list : free_)
    for (auto* p : list) std::free(p);
}

PooledBuffer HeapBufferPool::allocate(std::size_t bytes) {
  const std::size_t want = bytes == 0 ? 1 : bytes;
  std::size_t capacity = std::bit_ceil(want);
  if (capacity < (std::size_t{1} << min_shift)) capacity = std::size_t{1} << min_shift;
  std::byte* p = nullptr;
  if (capacity <= (std::size_t{1} << max_shift)) {
    const auto cls = static_cast<std::size_t>(std::countr_zero(capacity) - min_shift);
    std::lock_guard lock(mutex_);
    if (!free_[cls].empty()) {
      p = free_[cls].back();
      free_[cls].pop_back();
    }
  } else {
    capacity = (want + 4095) & ~std::size_t{4095};
  }
  if (p == nullptr) {
    p = static_cast<std::byte*>(std::aligned_alloc(4096, capacity));
    if (p == nullptr) throw std::bad_alloc();
  }
  return PooledBuffer(this, Buffer{.bytes = {p, bytes}}, capacity);
}

void HeapBufferPool::release(const Buffer& buffer, std::size_t capacity) noexcept {
  auto* p = buffer.bytes.data();
  if (capacity <= (std::size_t{1} << max_shift) && std::has_single_bit(capacity)) {
    const auto cls = static_cast<std::size_t>(std::countr_zero(capacity) - min_shift);
    std::lock_guard lock(mutex_);
    // Keep at most 64 MiB (and at least 4 chunks) per size class.
    if (free_[cls].size() < 4 || (free_[cls].size() + 1) * capacity <= (std::size_t{64} << 20)) {
      free_[cls].push_back(p);
      return;
    }
  }
  std::free(p);
}

HeapBufferPool& HeapBufferPool::shared() {
  static HeapBufferPool pool;
  return pool;
}

}  // namespace iserkit
