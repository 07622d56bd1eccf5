// Buffers for the data path. A Buffer is a span plus its RDMA registration (lkey; rkey = STag,
// RFC 7145 §3.2) when the transport needs one. Pools hand out chunks of pre-allocated (and, for
// iSER, pre-registered) memory so the I/O path never allocates or registers per command.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace iserkit {

/// A contiguous region of memory and its registration. Does not own the memory.
struct Buffer {
  std::span<std::byte> bytes;  ///< the region
  std::uint32_t lkey = 0;      ///< local key for RDMA work requests; 0 = not registered
  std::uint32_t rkey = 0;      ///< remote key (STag) the peer may RDMA-read/write; 0 = not exposed
};

/// A scatter-gather list: the pieces of one logical buffer, in order.
using SgList = std::vector<Buffer>;

class BufferPool;

/// A buffer leased from a pool; returns to the pool when destroyed. Move-only.
class PooledBuffer {
 public:
  PooledBuffer() = default;
  PooledBuffer(BufferPool* pool, Buffer buffer, std::size_t capacity) noexcept
      : pool_(pool), buffer_(buffer), capacity_(capacity) {}
  PooledBuffer(PooledBuffer&& o) noexcept
      : pool_(std::exchange(o.pool_, nullptr)), buffer_(std::exchange(o.buffer_, {})), capacity_(o.capacity_) {}
  PooledBuffer& operator=(PooledBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      pool_ = std::exchange(o.pool_, nullptr);
      buffer_ = std::exchange(o.buffer_, {});
      capacity_ = o.capacity_;
    }
    return *this;
  }
  PooledBuffer(const PooledBuffer&) = delete;
  PooledBuffer& operator=(const PooledBuffer&) = delete;
  ~PooledBuffer() { reset(); }

  /// The leased region: exactly the size asked for.
  [[nodiscard]] const Buffer& buffer() const noexcept { return buffer_; }
  [[nodiscard]] std::span<std::byte> bytes() const noexcept { return buffer_.bytes; }
  [[nodiscard]] std::size_t size() const noexcept { return buffer_.bytes.size(); }
  [[nodiscard]] std::byte* data() const noexcept { return buffer_.bytes.data(); }
  explicit operator bool() const noexcept { return pool_ != nullptr; }
  /// Returns the buffer to its pool now.
  void reset() noexcept;

 private:
  BufferPool* pool_ = nullptr;
  Buffer buffer_;
  std::size_t capacity_ = 0;  // size of the underlying chunk (≥ buffer_.bytes.size())
};

/// A source of data-path buffers. Implementations: HeapBufferPool (TCP), and the iSER pool that
/// registers slabs once per protection domain (issue 3). Thread-safe.
class BufferPool {
 public:
  virtual ~BufferPool() = default;
  /// Leases `bytes` bytes, aligned to 4096 bytes (suitable for O_DIRECT). Throws std::bad_alloc.
  virtual PooledBuffer allocate(std::size_t bytes) = 0;

  /// When `bytes` lies wholly inside memory this pool registered, the Buffer for it (its lkey and
  /// rkey); nullopt otherwise (always, for unregistered pools). Lets a caller holding a plain span
  /// that came from this pool (e.g. the NBD bridge's request buffer) advertise it without copying.
  [[nodiscard]] virtual std::optional<Buffer> registration(std::span<const std::byte> bytes) const noexcept {
    (void)bytes;
    return std::nullopt;
  }

 protected:
  friend class PooledBuffer;
  /// Takes back a chunk of `capacity` bytes starting at `buffer.bytes.data()`.
  virtual void release(const Buffer& buffer, std::size_t capacity) noexcept = 0;
};

/// Unregistered memory in power-of-two size classes from 4 KiB to 16 MiB, kept on free lists so
/// steady-state I/O does not call the allocator. Larger requests are allocated and freed directly.
/// Returned chunks are kept only while the idle memory (all classes) stays under the idle cap;
/// beyond it they are freed (chunks of 256 KiB and more are mmap()ed, so freeing them returns the
/// memory to the system at once).
class HeapBufferPool final : public BufferPool {
 public:
  HeapBufferPool() = default;
  HeapBufferPool(const HeapBufferPool&) = delete;
  HeapBufferPool& operator=(const HeapBufferPool&) = delete;
  ~HeapBufferPool() override;

  PooledBuffer allocate(std::size_t bytes) override;

  /// The process-wide default pool for unregistered (TCP) buffers.
  static HeapBufferPool& shared();

  /// Sets the idle cap (bytes kept on the free lists for reuse; default 256 MiB) and frees idle
  /// chunks above it, largest first.
  void set_idle_cap(std::size_t bytes);
  /// Bytes on the free lists now.
  [[nodiscard]] std::size_t idle_bytes() const;

 private:
  void release(const Buffer& buffer, std::size_t capacity) noexcept override;

  static constexpr int min_shift = 12;  // 4 KiB
  static constexpr int max_shift = 24;  // 16 MiB
  mutable std::mutex mutex_;
  std::vector<std::byte*> free_[max_shift - min_shift + 1];
  std::size_t idle_bytes_ = 0;
  std::size_t idle_cap_ = std::size_t{256} << 20;
};

}  // namespace iserkit
