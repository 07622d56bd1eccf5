// HeapBufferPool: 4 KiB-aligned chunks in power-of-two size classes kept on free lists.
#include "iserkit/common/buffer.hpp"

#include <bit>
#include <cstdlib>
#include <new>

#include <sys/mman.h>

namespace iserkit {
namespace {

// Chunks from 256 KiB up are mapped directly: returning one gives its memory back to the system
// at once (glibc's heap would keep it, and its dynamic mmap threshold makes that unpredictable).
constexpr std::size_t mmap_from_bytes = 256 * 1024;

std::byte* map_chunk(std::size_t capacity) {
  if (capacity < mmap_from_bytes) return static_cast<std::byte*>(std::aligned_alloc(4096, capacity));
  void* p = ::mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<std::byte*>(p);
}

void unmap_chunk(std::byte* p, std::size_t capacity) noexcept {
  if (capacity < mmap_from_bytes) {
    std::free(p);
  } else {
    ::munmap(p, capacity);
  }
}

}  // namespace

void PooledBuffer::reset() noexcept {
  if (pool_ != nullptr) {
    pool_->release(buffer_, capacity_);
    pool_ = nullptr;
    buffer_ = {};
  }
}

HeapBufferPool::~HeapBufferPool() {
  for (std::size_t cls = 0; cls < std::size(free_); ++cls)
    for (auto* p : free_[cls]) unmap_chunk(p, std::size_t{1} << (cls + min_shift));
}

void HeapBufferPool::set_idle_cap(std::size_t bytes) {
  std::vector<std::pair<std::byte*, std::size_t>> drop;
  {
    std::lock_guard lock(mutex_);
    idle_cap_ = bytes;
    // Largest classes first, until the idle memory fits the new cap.
    for (std::size_t cls = std::size(free_); cls-- > 0 && idle_bytes_ > idle_cap_;) {
      const std::size_t capacity = std::size_t{1} << (cls + min_shift);
      while (!free_[cls].empty() && idle_bytes_ > idle_cap_) {
        drop.emplace_back(free_[cls].back(), capacity);
        free_[cls].pop_back();
        idle_bytes_ -= capacity;
      }
    }
  }
  for (auto [p, capacity] : drop) unmap_chunk(p, capacity);
}

std::size_t HeapBufferPool::idle_bytes() const {
  std::lock_guard lock(mutex_);
  return idle_bytes_;
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
      idle_bytes_ -= capacity;
    }
  } else {
    capacity = (want + 4095) & ~std::size_t{4095};
  }
  if (p == nullptr) {
    p = map_chunk(capacity);
    if (p == nullptr) throw std::bad_alloc();
  }
  return PooledBuffer(this, Buffer{.bytes = {p, bytes}}, capacity);
}

void HeapBufferPool::release(const Buffer& buffer, std::size_t capacity) noexcept {
  auto* p = buffer.bytes.data();
  if (capacity <= (std::size_t{1} << max_shift) && std::has_single_bit(capacity)) {
    const auto cls = static_cast<std::size_t>(std::countr_zero(capacity) - min_shift);
    std::lock_guard lock(mutex_);
    // Keep idle chunks up to the idle cap (all classes together); beyond it, give memory back.
    if (idle_bytes_ + capacity <= idle_cap_) {
      free_[cls].push_back(p);
      idle_bytes_ += capacity;
      return;
    }
  }
  unmap_chunk(p, capacity);
}

HeapBufferPool& HeapBufferPool::shared() {
  static HeapBufferPool pool;
  return pool;
}

}  // namespace iserkit
