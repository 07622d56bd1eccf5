// MemoryExport: implementation of the sparse chunked in-memory export (see memory_export.hpp).
// Spec: NBD proto.md "Request types" (TRIM, WRITE_ZEROES, NO_HOLE).
#include "nbd_bridge/memory_export.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace iserkit::nbd {
namespace {

// One piece of a range that lies in one chunk: bytes [in_chunk, in_chunk + n) of chunk `index`,
// `done` bytes after the range's start.
struct Piece {
  std::uint64_t index;
  std::uint64_t in_chunk;
  std::uint64_t done;
  std::uint64_t n;
};

// Calls fn(Piece) for [offset, offset + length) chunk by chunk, in order: the walk read, write,
// zero and the allocation map share.
template <class Fn>
void for_each_piece(std::uint64_t offset_bytes, std::uint64_t length_bytes, Fn&& fn) {
  constexpr std::uint64_t chunk_bytes = MemoryExport::chunk_bytes;
  for (std::uint64_t done = 0; done < length_bytes;) {
    const std::uint64_t position = offset_bytes + done;
    const std::uint64_t in_chunk = position % chunk_bytes;
    const std::uint64_t n = std::min<std::uint64_t>(chunk_bytes - in_chunk, length_bytes - done);
    fn(Piece{.index = position / chunk_bytes, .in_chunk = in_chunk, .done = done, .n = n});
    done += n;
  }
}

}  // namespace

MemoryExport::MemoryExport(MemoryExportOptions options) : options_(std::move(options)) {}

ExportInfo MemoryExport::info() const {
  return ExportInfo{.name = options_.name,
                    .description = options_.description,
                    .size_bytes = options_.size_bytes,
                    .min_block_size_bytes = options_.min_block_size_bytes,
                    .preferred_block_size_bytes = options_.preferred_block_size_bytes,
                    .max_block_size_bytes = options_.max_block_size_bytes,
                    .read_only = options_.read_only,
                    .can_flush = true,
                    .can_fua = true,
                    .can_trim = true,
                    .can_write_zeroes = true,
                    .can_multi_conn = true};
}

std::error_code MemoryExport::check(std::uint64_t offset_bytes, std::uint64_t length_bytes,
                                    std::errc past_end) const {
  // Defence in depth: the server validated the range already, but never touch memory outside it.
  if (offset_bytes > options_.size_bytes || length_bytes > options_.size_bytes - offset_bytes) {
    return std::make_error_code(past_end);
  }
  if (failure_length_ != 0 && offset_bytes < failure_offset_ + failure_length_ &&
      failure_offset_ < offset_bytes + length_bytes) {
    return failure_error_;
  }
  return {};
}

std::error_code MemoryExport::read_now(std::uint64_t offset_bytes, ByteSpan dest) {
  std::lock_guard lock(mutex_);
  if (auto ec = check(offset_bytes, dest.size(), std::errc::invalid_argument)) return ec;
  for_each_piece(offset_bytes, dest.size(), [&](const Piece& p) {
    auto it = chunks_.find(p.index);
    if (it == chunks_.end()) {
      std::memset(dest.data() + p.done, 0, p.n);
    } else {
      std::memcpy(dest.data() + p.done, it->second.get() + p.in_chunk, p.n);
    }
  });
  return {};
}

std::error_code MemoryExport::write_now(std::uint64_t offset_bytes, ConstByteSpan src) {
  std::lock_guard lock(mutex_);
  if (options_.read_only) return std::make_error_code(std::errc::operation_not_permitted);
  if (auto ec = check(offset_bytes, src.size(), std::errc::no_space_on_device)) return ec;
  for_each_piece(offset_bytes, src.size(), [&](const Piece& p) {
    auto& chunk = chunks_[p.index];
    if (!chunk) chunk.reset(new std::byte[chunk_bytes]());  // value-initialised: zeroes
    std::memcpy(chunk.get() + p.in_chunk, src.data() + p.done, p.n);
  });
  return {};
}

std::error_code MemoryExport::zero_now(std::uint64_t offset_bytes, std::uint64_t length_bytes, bool may_trim) {
  std::lock_guard lock(mutex_);
  if (options_.read_only) return std::make_error_code(std::errc::operation_not_permitted);
  if (auto ec = check(offset_bytes, length_bytes, std::errc::no_space_on_device)) return ec;
  for_each_piece(offset_bytes, length_bytes, [&](const Piece& p) {
    auto it = chunks_.find(p.index);
    if (it != chunks_.end()) {
      if (may_trim && p.n == chunk_bytes) {
        chunks_.erase(it);  // a whole chunk: punch a hole
      } else {
        std::memset(it->second.get() + p.in_chunk, 0, p.n);
      }
    } else if (!may_trim) {
      // NBD_CMD_FLAG_NO_HOLE: the range must end up allocated (proto.md NBD_CMD_WRITE_ZEROES).
      chunks_[p.index].reset(new std::byte[chunk_bytes]());
    }
  });
  return {};
}

Awaitable<std::error_code> MemoryExport::read(std::uint64_t offset_bytes, ByteSpan dest) {
  co_return read_now(offset_bytes, dest);
}

Awaitable<std::error_code> MemoryExport::write(std::uint64_t offset_bytes, ConstByteSpan src, bool /*fua*/) {
  co_return write_now(offset_bytes, src);  // memory is as persistent as this export gets
}

Awaitable<std::error_code> MemoryExport::flush() { co_return std::error_code{}; }

Awaitable<std::error_code> MemoryExport::trim(std::uint64_t offset_bytes, std::uint64_t length_bytes, bool /*fua*/) {
  // Trim only frees whole chunks; partial chunks keep their data (trim is a hint).
  std::lock_guard lock(mutex_);
  if (options_.read_only) co_return std::make_error_code(std::errc::operation_not_permitted);
  if (auto ec = check(offset_bytes, length_bytes, std::errc::invalid_argument)) co_return ec;
  const std::uint64_t first = (offset_bytes + chunk_bytes - 1) / chunk_bytes;
  const std::uint64_t end = (offset_bytes + length_bytes) / chunk_bytes;
  for (std::uint64_t index = first; index < end; ++index) chunks_.erase(index);
  co_return std::error_code{};
}

Awaitable<std::error_code> MemoryExport::write_zeroes(std::uint64_t offset_bytes, std::uint64_t length_bytes,
                                                      bool may_trim, bool /*fua*/) {
  co_return zero_now(offset_bytes, length_bytes, may_trim);
}

std::error_code MemoryExport::block_status_now(std::uint64_t offset_bytes, std::uint32_t length_bytes,
                                               std::vector<BlockExtent>& extents) {
  std::lock_guard lock(mutex_);
  extents.clear();
  if (auto ec = check(offset_bytes, length_bytes, std::errc::invalid_argument)) return ec;
  for_each_piece(offset_bytes, length_bytes, [&](const Piece& p) {
    const std::uint32_t flags = chunks_.contains(p.index) ? 0u : allocation_state::hole | allocation_state::zero;
    if (!extents.empty() && extents.back().flags == flags) {
      extents.back().length_bytes += p.n;
    } else {
      extents.push_back({.length_bytes = p.n, .flags = flags});
    }
  });
  return {};
}

Awaitable<std::error_code> MemoryExport::block_status(std::uint64_t offset_bytes, std::uint32_t length_bytes,
                                                      bool /*one*/, std::vector<BlockExtent>& extents) {
  co_return block_status_now(offset_bytes, length_bytes, extents);
}

void MemoryExport::inject_failure(std::uint64_t offset_bytes, std::uint64_t length_bytes, std::error_code error) {
  std::lock_guard lock(mutex_);
  failure_offset_ = offset_bytes;
  failure_length_ = length_bytes;
  failure_error_ = error;
}

std::uint64_t MemoryExport::allocated_bytes() const {
  std::lock_guard lock(mutex_);
  return chunks_.size() * chunk_bytes;
}

}  // namespace iserkit::nbd
