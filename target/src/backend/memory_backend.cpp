// MemoryBackend: a sparse in-memory block backend (layer 5). Storage is a table of 1 MiB chunks
// allocated on first write; unallocated chunks read as zeroes; discard and write_zeroes free the
// chunks they cover entirely and zero the partial ones. Every operation completes synchronously.
#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "iserkit/target/backends.hpp"

namespace iserkit::target {
namespace {

constexpr std::uint64_t chunk_size = 1u << 20;

std::error_code errno_code(int e) { return {e, std::generic_category()}; }

class MemoryBackend final : public BlockBackend {
 public:
  explicit MemoryBackend(const MemoryBackendOptions& o) {
    caps_.block_size_bytes = o.block_size_bytes;
    caps_.size_bytes = o.size_bytes / o.block_size_bytes * o.block_size_bytes;
    caps_.read_only = o.read_only;
    caps_.can_discard = true;
    caps_.discard_zeroes = true;
    caps_.can_write_zeroes = true;
    caps_.thin = true;
    caps_.volatile_cache = false;  // memory is as durable as it gets; flush is a no-op
    chunks_.resize((caps_.size_bytes + chunk_size - 1) / chunk_size);
  }

  const BackendCapabilities& capabilities() const noexcept override { return caps_; }

  Awaitable<Result<void>> read(std::uint64_t offset, ByteSpan out) override {
    check_range(offset, out.size());
    std::lock_guard lock(mutex_);
    for_each_piece(offset, out.size(), [&](std::uint64_t index, std::uint64_t in_chunk, std::size_t n, std::size_t done) {
      const auto& c = chunks_[index];
      if (c) {
        std::memcpy(out.data() + done, c.get() + in_chunk, n);
      } else {
        std::memset(out.data() + done, 0, n);
      }
    });
    co_return Result<void>{};
  }

  Awaitable<Result<void>> write(std::uint64_t offset, ConstByteSpan data, Fua) override {
    check_range(offset, data.size());
    if (caps_.read_only) co_return fail(errno_code(EROFS));
    std::lock_guard lock(mutex_);
    for_each_piece(offset, data.size(), [&](std::uint64_t index, std::uint64_t in_chunk, std::size_t n, std::size_t done) {
      std::memcpy(chunk(index) + in_chunk, data.data() + done, n);
    });
    co_return Result<void>{};
  }

  Awaitable<Result<void>> flush() override { co_return Result<void>{}; }

  Awaitable<Result<void>> discard(std::uint64_t offset, std::uint64_t length) override {
    co_return zero(offset, length);
  }

  Awaitable<Result<void>> write_zeroes(std::uint64_t offset, std::uint64_t length, Fua) override {
    co_return zero(offset, length);
  }

  // SBC-4 §4.7.2: a chunk never written (or freed by discard) is unmapped; runs of chunks in the
  // same state form one extent.
  Awaitable<Result<AllocationExtent>> allocation(std::uint64_t offset, std::uint64_t max_length) override {
    std::lock_guard g(mutex_);
    std::uint64_t index = offset / chunk_size;
    const bool allocated = index < chunks_.size() && chunks_[index] != nullptr;
    std::uint64_t end = (index + 1) * chunk_size;
    while (end - offset < max_length && ++index < chunks_.size() && (chunks_[index] != nullptr) == allocated) end += chunk_size;
    co_return AllocationExtent{.allocated = allocated, .length_bytes = std::min(end - offset, max_length)};
  }

 private:
  void check_range(std::uint64_t offset, std::uint64_t length) const noexcept {
    // The SCSI layer checked the range (block_backend.hpp preconditions).
    assert(offset <= caps_.size_bytes && length <= caps_.size_bytes - offset);
    assert(offset % caps_.block_size_bytes == 0 && length % caps_.block_size_bytes == 0);
    (void)offset;
    (void)length;
  }

  template <class F>
  void for_each_piece(std::uint64_t offset, std::uint64_t length, F&& f) {
    std::size_t done = 0;
    while (done < length) {
      const std::uint64_t pos = offset + done;
      const std::uint64_t index = pos / chunk_size;
      const std::uint64_t in_chunk = pos % chunk_size;
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk_size - in_chunk, length - done));
      f(index, in_chunk, n, done);
      done += n;
    }
  }

  std::byte* chunk(std::uint64_t index) {
    auto& c = chunks_[index];
    if (!c) c = std::make_unique<std::byte[]>(chunk_size);  // value-initialised: zeroes
    return c.get();
  }

  Result<void> zero(std::uint64_t offset, std::uint64_t length) {
    check_range(offset, length);
    if (caps_.read_only) return fail(errno_code(EROFS));
    std::lock_guard lock(mutex_);
    for_each_piece(offset, length, [&](std::uint64_t index, std::uint64_t in_chunk, std::size_t n, std::size_t) {
      auto& c = chunks_[index];
      if (!c) return;
      if (n == chunk_size) {
        c.reset();  // a whole chunk: give the memory back
      } else {
        std::memset(c.get() + in_chunk, 0, n);
      }
    });
    return {};
  }

  BackendCapabilities caps_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<std::byte[]>> chunks_;
};

}  // namespace

std::shared_ptr<BlockBackend> make_memory_backend(const MemoryBackendOptions& options) {
  assert(options.block_size_bytes == 512 || options.block_size_bytes == 4096);
  return std::make_shared<MemoryBackend>(options);
}

}  // namespace iserkit::target
