// Memory for the state of one asynchronous operation at a time, inside the object that keeps
// starting it (the fast path's allocations, issue 23 item 4).
//
// Asio allocates each operation's state (a socket receive's reactor op, a posted function) through
// the completion handler's associated allocator, by default a per-thread cache of one freed block
// per kind (Boost 1.74's thread_info_base). A loop that keeps two or more operations of a kind in
// flight at once (a socket receive and the io_uring eventfd wait; posts of different sizes) misses
// that cache and allocates on every turn. A HandlerMemory gives one such site its own block:
// Asio's documented custom allocation (its "allocation" example), applied where a request's
// operations are started. A request for more bytes than the block holds, or one made while the
// block is in use, goes to operator new, so a mistake costs an allocation, never memory safety.
//
// Not thread-safe: an operation is started and its state freed on the thread that runs the
// object's io_context (each site here is such a loop's own object).
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

#include "iserkit/common/asio.hpp"

namespace iserkit {

/// One in-place block for one operation's state at a time (see the file comment).
/// Not copyable or movable (operations point into it).
class HandlerMemory {
 public:
  /// Bytes of the block: a reactor receive op with an await_op handler is about 150 bytes, an
  /// io_context executor_op around a small function object under 100.
  static constexpr std::size_t block_bytes = 256;

  HandlerMemory() = default;
  HandlerMemory(const HandlerMemory&) = delete;
  HandlerMemory& operator=(const HandlerMemory&) = delete;

  /// `bytes` of storage: the block when it is free and large enough, else operator new (throws
  /// std::bad_alloc as it does).
  void* allocate(std::size_t bytes) {
    if (!in_use_ && bytes <= block_bytes) {
      in_use_ = true;
      return block_;
    }
    ++heap_allocations_;
    return ::operator new(bytes);
  }
  /// Gives back what allocate() returned.
  void deallocate(void* p) noexcept {
    if (p == static_cast<void*>(block_)) {
      in_use_ = false;
    } else {
      ::operator delete(p);
    }
  }
  /// Allocations that missed the block (too large, or the block busy): a test's measure.
  [[nodiscard]] std::size_t heap_allocations() const noexcept { return heap_allocations_; }
  /// True while an operation's state occupies the block.
  [[nodiscard]] bool in_use() const noexcept { return in_use_; }

 private:
  alignas(std::max_align_t) std::byte block_[block_bytes];
  bool in_use_ = false;
  std::size_t heap_allocations_ = 0;
};

/// A standard allocator over one HandlerMemory (Asio rebinds it to each operation's type).
template <class T>
class HandlerAllocator {
 public:
  using value_type = T;
  explicit HandlerAllocator(HandlerMemory& memory) noexcept : memory_(&memory) {}
  template <class U>
  HandlerAllocator(const HandlerAllocator<U>& other) noexcept : memory_(other.memory_) {}  // NOLINT: rebinding

  T* allocate(std::size_t n) { return static_cast<T*>(memory_->allocate(sizeof(T) * n)); }
  void deallocate(T* p, std::size_t /*n*/) noexcept { memory_->deallocate(p); }

  template <class U>
  bool operator==(const HandlerAllocator<U>& other) const noexcept {
    return memory_ == other.memory_;
  }
  template <class U>
  bool operator!=(const HandlerAllocator<U>& other) const noexcept {
    return memory_ != other.memory_;
  }

 private:
  template <class>
  friend class HandlerAllocator;
  HandlerMemory* memory_;
};

/// `handler` with `memory` as its associated allocator: the operation it completes keeps its
/// state there. Its associated executor is the handler's own (Asio's default for a plain function
/// object: the I/O object's, or the executor it is posted to).
template <class Handler>
class MemoryHandler {
 public:
  using allocator_type = HandlerAllocator<void>;
  MemoryHandler(HandlerMemory& memory, Handler handler) : memory_(&memory), handler_(std::move(handler)) {}
  [[nodiscard]] allocator_type get_allocator() const noexcept { return allocator_type(*memory_); }
  template <class... Args>
  void operator()(Args&&... args) {
    handler_(std::forward<Args>(args)...);
  }

 private:
  HandlerMemory* memory_;
  Handler handler_;
};

/// Wraps `handler` so its operation's state lives in `memory` (see MemoryHandler).
template <class Handler>
MemoryHandler<std::decay_t<Handler>> with_memory(HandlerMemory& memory, Handler&& handler) {
  return MemoryHandler<std::decay_t<Handler>>(memory, std::forward<Handler>(handler));
}

namespace detail {
/// Freed operation blocks of one thread, kept for its next operations (BlockCacheAllocator).
struct BlockCache {
  /// Blocks kept at most; beyond, a freed block goes back to operator delete.
  static constexpr std::size_t kept = 64;
  BlockCache() = default;
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;
  ~BlockCache() {
    closed = true;  // a block freed after this (another thread-local's destructor) is deleted
    while (count > 0) ::operator delete(blocks[--count]);
  }
  void* blocks[kept] = {};
  std::size_t count = 0;
  bool closed = false;
};
inline thread_local BlockCache block_cache;
}  // namespace detail

/// A standard allocator for operation states of up to HandlerMemory::block_bytes, recycled through
/// a per-thread list of freed blocks (up to BlockCache::kept): Boost 1.74's own per-thread cache
/// keeps one block per kind of operation, so a loop with several posts of a kind in flight
/// allocates for each of them. Unlike a HandlerMemory, no object has to outlive the operation (a
/// block freed on another thread joins that thread's list). Larger requests use operator new.
template <class T>
class BlockCacheAllocator {
 public:
  using value_type = T;
  BlockCacheAllocator() noexcept = default;
  template <class U>
  BlockCacheAllocator(const BlockCacheAllocator<U>& /*other*/) noexcept {}  // NOLINT: rebinding
  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "over-aligned operation state");
    if (sizeof(T) * n <= HandlerMemory::block_bytes) {
      auto& cache = detail::block_cache;
      if (cache.count > 0) return static_cast<T*>(cache.blocks[--cache.count]);
      return static_cast<T*>(::operator new(HandlerMemory::block_bytes));
    }
    return static_cast<T*>(::operator new(sizeof(T) * n));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    auto& cache = detail::block_cache;
    if (sizeof(T) * n <= HandlerMemory::block_bytes && !cache.closed && cache.count < detail::BlockCache::kept) {
      cache.blocks[cache.count++] = p;
      return;
    }
    ::operator delete(p);
  }
  template <class U>
  bool operator==(const BlockCacheAllocator<U>& /*other*/) const noexcept {
    return true;
  }
  template <class U>
  bool operator!=(const BlockCacheAllocator<U>& /*other*/) const noexcept {
    return false;
  }
};

/// `handler` with BlockCacheAllocator as its associated allocator (its executor: the handler's own).
template <class Handler>
class BlockCacheHandler {
 public:
  using allocator_type = BlockCacheAllocator<void>;
  explicit BlockCacheHandler(Handler handler) : handler_(std::move(handler)) {}
  [[nodiscard]] allocator_type get_allocator() const noexcept { return {}; }
  template <class... Args>
  void operator()(Args&&... args) {
    handler_(std::forward<Args>(args)...);
  }

 private:
  Handler handler_;
};

/// Wraps `handler` so its operation's state comes from this thread's block cache.
template <class Handler>
BlockCacheHandler<std::decay_t<Handler>> with_block_cache(Handler&& handler) {
  return BlockCacheHandler<std::decay_t<Handler>>(std::forward<Handler>(handler));
}

/// asio::post(executor, f) with the posted function's state in `memory` when `executor` is an
/// io_context's: its post honours the handler's allocator, while any_io_executor's allocates a
/// type-erased function object every time. Another executor: a plain post.
template <class F>
void post_with_memory(const asio::any_io_executor& executor, HandlerMemory& memory, F&& f) {
  if (const auto* io = executor.target<asio::io_context::executor_type>()) {
    asio::post(*io, with_memory(memory, std::forward<F>(f)));
  } else {
    asio::post(executor, std::forward<F>(f));
  }
}

}  // namespace iserkit
