// The export an NBD server serves: the layer boundary between the NBD front end (layer 6) and
// whatever stores the blocks (a remote SCSI LUN through the initiator, or MemoryExport in tests).
// The server has already validated every request (range, alignment, flags, read-only) before it
// calls an Export, as nbdkit does for its plugins.
// Spec: NBD proto.md "Size constraints", "Transmission flags", "Request types".
#pragma once

#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/buffer.hpp"
#include "iserkit/common/bytes.hpp"
#include "nbd_bridge/block_status.hpp"

namespace iserkit::nbd {

/// What an export is and can do; the server derives the NBD transmission flags and
/// NBD_INFO_BLOCK_SIZE from it (proto.md "Transmission flags", "Size constraints").
struct ExportInfo {
  std::string name;                           ///< canonical export name (NBD_INFO_NAME, NBD_REP_SERVER)
  std::string description;                    ///< human-readable text (NBD_INFO_DESCRIPTION); may be empty
  std::uint64_t size_bytes = 0;               ///< export size in bytes
  std::uint32_t min_block_size_bytes = 1;     ///< power of 2, 1..65536; requests must be aligned to it
  std::uint32_t preferred_block_size_bytes = 4096;  ///< power of 2, ≥ max(min, 512)
  std::uint32_t max_block_size_bytes = 32u << 20;   ///< largest READ/WRITE payload; ≥ preferred
  bool read_only = false;                     ///< NBD_FLAG_READ_ONLY; writes then fail with EPERM
  bool can_flush = false;                     ///< NBD_FLAG_SEND_FLUSH: flush() does something useful
  bool can_fua = false;                       ///< NBD_FLAG_SEND_FUA: write/trim/zero honour `fua`
  bool can_trim = false;                      ///< NBD_FLAG_SEND_TRIM
  bool can_write_zeroes = false;              ///< NBD_FLAG_SEND_WRITE_ZEROES (NO_HOLE then must work)
  bool can_multi_conn = false;                ///< NBD_FLAG_CAN_MULTI_CONN: flush/FUA visible to all connections
};

/// A block device the NBD server exposes. Every operation either transfers the whole range or fails.
///
/// Errors: a std::error_code in the generic (errno) category, e.g. std::errc::io_error,
/// std::errc::no_space_on_device, std::errc::operation_not_permitted; the server maps it to NBD_E*
/// with to_nbd_error() (error_map.hpp). A zero error_code means success.
///
/// Preconditions the server guarantees: offset + length ≤ info().size_bytes; offset and length are
/// multiples of min_block_size_bytes; read/write lengths ≤ max_block_size_bytes; write, trim and
/// write_zeroes are not called on a read-only export; flush/trim/write_zeroes only when the matching
/// capability is set. `dest`/`src` stay valid until the returned awaitable completes.
///
/// Executor and thread: called from the connection's executor (a strand per connection). Several
/// operations from one or more connections may be in flight at once; an implementation must
/// tolerate that (and may complete them in any order). An implementation that runs on another
/// thread (the initiator's loop) must hop back to the caller's executor before completing.
/// The end of a READ or WRITE started with Export::start_read()/start_write().
class ExportIo {
 public:
  /// Called once with what read()/write() would have returned, on the export's (= the loop's)
  /// thread from its event processing, never from inside the start call.
  virtual void io_done(std::error_code ec) noexcept = 0;

 protected:
  ~ExportIo() = default;
};

class Export {
 public:
  virtual ~Export() = default;

  /// read()/write() without a coroutine frame or posted completion (the data path's fast path),
  /// for a connection that runs on the export's own loop thread: false when the export has no such
  /// path for this request (nothing done: co_await read()/write()). Same preconditions.
  virtual bool start_read(std::uint64_t offset_bytes, ByteSpan dest, ExportIo& io) {
    (void)offset_bytes, (void)dest, (void)io;
    return false;
  }
  virtual bool start_write(std::uint64_t offset_bytes, ConstByteSpan src, bool fua, ExportIo& io) {
    (void)offset_bytes, (void)src, (void)fua, (void)io;
    return false;
  }

  /// The export's size, block sizes, capabilities, name and description. Must not change while
  /// connections are open.
  [[nodiscard]] virtual ExportInfo info() const = 0;

  /// Where the server should lease READ/WRITE payload buffers so the export can use them without
  /// a copy (e.g. the iSCSI session's registered memory on iSER). nullptr = HeapBufferPool::shared().
  /// The pool must outlive every connection of the server.
  [[nodiscard]] virtual BufferPool* buffer_pool() const noexcept { return nullptr; }

  /// Reads `dest.size()` bytes at `offset_bytes` into `dest`. Short reads are errors.
  virtual Awaitable<std::error_code> read(std::uint64_t offset_bytes, ByteSpan dest) = 0;

  /// Writes `src` at `offset_bytes`. With `fua`, completes only once the data is persistent
  /// (proto.md NBD_CMD_FLAG_FUA).
  virtual Awaitable<std::error_code> write(std::uint64_t offset_bytes, ConstByteSpan src, bool fua) = 0;

  /// Makes every write that has completed so far persistent (proto.md NBD_CMD_FLUSH).
  virtual Awaitable<std::error_code> flush() = 0;

  /// Discards `length_bytes` at `offset_bytes` (a hint; afterwards the contents are unspecified).
  virtual Awaitable<std::error_code> trim(std::uint64_t offset_bytes, std::uint64_t length_bytes, bool fua) = 0;

  /// Zeroes `length_bytes` at `offset_bytes`; the range must read back as zeroes. With `may_trim`
  /// false (NBD_CMD_FLAG_NO_HOLE) the range must stay allocated.
  virtual Awaitable<std::error_code> write_zeroes(std::uint64_t offset_bytes, std::uint64_t length_bytes,
                                                  bool may_trim, bool fua) = 0;

  /// The allocation map (`base:allocation`, proto.md NBD_CMD_BLOCK_STATUS) of the range
  /// [offset_bytes, offset_bytes + length_bytes): runs in order from `offset_bytes`, each with
  /// allocation_state flags (HOLE: unallocated, ZERO: reads as zeroes). The runs may cover less
  /// than the range (at least one byte) or more (the server cuts them); with `one` the caller needs
  /// only the first run. Lengths are multiples of min_block_size_bytes except at the export's end.
  /// Errors as read(). Default: the whole range is allocated data (flags 0), which is always true.
  virtual Awaitable<std::error_code> block_status(std::uint64_t offset_bytes, std::uint32_t length_bytes, bool one,
                                                  std::vector<BlockExtent>& extents) {
    (void)offset_bytes;
    (void)one;
    extents.assign(1, BlockExtent{.length_bytes = length_bytes, .flags = 0});
    co_return std::error_code{};
  }
};

}  // namespace iserkit::nbd
