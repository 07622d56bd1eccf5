// MemoryExport: a sparse, chunked in-memory Export for tests and `--memory SIZE` self-tests.
// Unwritten chunks read as zeroes and take no memory; trim and write_zeroes (may_trim) free whole
// chunks. Thread-safe (one mutex held only while copying), so several connections on several
// threads may share one export, which makes NBD_FLAG_CAN_MULTI_CONN truthful.
// Spec: NBD proto.md "Request types" (TRIM, WRITE_ZEROES and NO_HOLE semantics).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "iserkit/common/result.hpp"
#include "nbd_bridge/export.hpp"

namespace iserkit::nbd {

/// Options for MemoryExport; sizes in bytes.
struct MemoryExportOptions {
  std::uint64_t size_bytes = 0;
  std::string name;
  std::string description = "iserkit memory export";
  std::uint32_t min_block_size_bytes = 1;
  std::uint32_t preferred_block_size_bytes = 4096;
  std::uint32_t max_block_size_bytes = 32u << 20;
  bool read_only = false;
};

/// A sparse in-memory export. All capabilities (flush, FUA, trim, write zeroes, multi-conn) are on.
class MemoryExport final : public Export {
 public:
  /// Chunk granularity of the sparse store, in bytes.
  static constexpr std::uint64_t chunk_bytes = 64 * 1024;

  explicit MemoryExport(MemoryExportOptions options);

  [[nodiscard]] ExportInfo info() const override;
  Awaitable<std::error_code> read(std::uint64_t offset_bytes, ByteSpan dest) override;
  Awaitable<std::error_code> write(std::uint64_t offset_bytes, ConstByteSpan src, bool fua) override;
  Awaitable<std::error_code> flush() override;
  Awaitable<std::error_code> trim(std::uint64_t offset_bytes, std::uint64_t length_bytes, bool fua) override;
  Awaitable<std::error_code> write_zeroes(std::uint64_t offset_bytes, std::uint64_t length_bytes, bool may_trim,
                                          bool fua) override;
  /// Chunks never written (or trimmed) are HOLE|ZERO, written chunks data (flags 0).
  Awaitable<std::error_code> block_status(std::uint64_t offset_bytes, std::uint32_t length_bytes, bool one,
                                          std::vector<BlockExtent>& extents) override;

  /// Synchronous forms of the operations above (used by the awaitables and by tests).
  /// Return std::errc::invalid_argument (read) / no_space_on_device (write) past the end, and the
  /// injected error when the range overlaps the failure range.
  std::error_code read_now(std::uint64_t offset_bytes, ByteSpan dest);
  std::error_code write_now(std::uint64_t offset_bytes, ConstByteSpan src);
  std::error_code zero_now(std::uint64_t offset_bytes, std::uint64_t length_bytes, bool may_trim);
  /// The allocation map of [offset, offset + length) at chunk granularity; errors as read_now().
  std::error_code block_status_now(std::uint64_t offset_bytes, std::uint32_t length_bytes,
                                   std::vector<BlockExtent>& extents);

  /// Makes every operation touching [offset, offset + length) fail with `error` (test hook for
  /// error paths). Pass length 0 to clear.
  void inject_failure(std::uint64_t offset_bytes, std::uint64_t length_bytes, std::error_code error);

  /// Bytes of memory currently allocated for data (a multiple of chunk_bytes).
  [[nodiscard]] std::uint64_t allocated_bytes() const;

 private:
  std::error_code check(std::uint64_t offset_bytes, std::uint64_t length_bytes, std::errc past_end) const;

  MemoryExportOptions options_;
  mutable std::mutex mutex_;
  std::unordered_map<std::uint64_t, std::unique_ptr<std::byte[]>> chunks_;  // chunk index → chunk_bytes bytes
  std::uint64_t failure_offset_ = 0;
  std::uint64_t failure_length_ = 0;
  std::error_code failure_error_;
};

}  // namespace iserkit::nbd
