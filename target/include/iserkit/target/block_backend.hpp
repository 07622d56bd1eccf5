// BlockBackend: layer 5 of the target, the storage under a logical unit. A backend moves bytes at
// byte offsets; it never sees a CDB. The SCSI layer (layer 4) has already checked every range
// against capabilities().size_bytes, so a backend may assert on out-of-range requests. Every call
// transfers the full length or fails (short transfers are retried inside the backend), like
// nbdkit's .pread/.pwrite contract. Implementations: MemoryBackend (memory_backend.hpp) and
// UringBackend (uring_backend.hpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <system_error>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/bytes.hpp"
#include "iserkit/common/result.hpp"

namespace iserkit::target {

/// Force Unit Access as a strong bool: data must be durable (on stable media) before the call
/// completes successfully (SBC-4 §4.15 "FUA"; here: RWF_DSYNC / fdatasync).
enum class Fua : bool { no = false, yes = true };

/// What a backend can do and how big it is. Constant for the backend's lifetime (size_bytes is the
/// size at open; a backend whose medium can be resized reports the current one in
/// BlockBackend::size_bytes()).
struct BackendCapabilities {
  std::uint64_t size_bytes = 0;              ///< capacity in bytes (a multiple of block_size_bytes)
  std::uint32_t block_size_bytes = 512;      ///< logical block size: 512 or 4096
  bool read_only = false;                    ///< writes, discards and write_zeroes are refused
  bool can_discard = false;                  ///< discard() deallocates (UNMAP supported)
  bool discard_zeroes = false;               ///< blocks read back as zero after discard() (LBPRZ)
  bool can_write_zeroes = false;             ///< write_zeroes() is efficient (not a plain write loop)
  bool thin = false;                         ///< thin provisioned (LBPME): unwritten space costs nothing
  bool volatile_cache = true;                ///< a write cache exists, so flush() matters (WCE)
  std::uint32_t optimal_io_bytes = 0;        ///< preferred I/O size in bytes; 0 = not known
  std::uint32_t max_io_bytes = 0;            ///< largest single request in bytes; 0 = no limit
  bool can_start_transfer = false;           ///< start_transfer() is offered (the fast path)
  /// copy_from() may move data in the kernel (from a backend of the same kind); false: it answers
  /// EOPNOTSUPP for every source, so callers need not try.
  bool can_copy_in_kernel = false;
  /// Names the storage itself, the same in every process that opens it (RBD: "rbd:" + cluster
  /// fsid + pool id + image id). When set, the target derives the logical unit's serial number
  /// and NAA designator (VPD 0x80, 0x83) from it instead of from the target name and LUN number,
  /// so two gateways serving one image report one logical unit. Empty: no such name.
  std::string storage_id;
};

/// One run of a backend's allocation map (thin provisioning: SBC-4 §4.7.2, GET LBA STATUS §5.8).
struct AllocationExtent {
  bool allocated = true;          ///< false: a hole (unmapped; reads as zeroes)
  std::uint64_t length_bytes = 0; ///< bytes from the queried offset that share this state (> 0)
};

/// What an atomic compare-and-write found (BlockBackend::compare_and_write).
struct CompareAndWriteResult {
  /// nullopt: the medium matched and the new data was written. Otherwise the offset in bytes,
  /// counted from the start of the compared range, of the first byte that differed; nothing was
  /// written.
  std::optional<std::uint64_t> mismatch_offset_bytes;
};

/// A read or write started with BlockBackend::start_transfer(), without a coroutine (the data
/// path's fast path: no frame, no posted completion per command). The caller fills the request
/// fields and keeps the object alive until transferred() ran (or start_transfer() said it was done
/// or unsupported).
class BackendTransfer {
 public:
  bool writing = false;             ///< write `data` (else read into it)
  std::uint64_t offset_bytes = 0;   ///< on the medium; preconditions as for read()/write()
  std::byte* data = nullptr;        ///< `length_bytes` bytes, valid until the transfer ended
  std::size_t length_bytes = 0;
  Fua fua = Fua::no;                ///< writes: durable before completion (as write())
  /// Reads only: the write end of an empty pipe that the backend may fill with the `length_bytes`
  /// bytes by splice(2) instead of writing `data` (page-cache pages go into the pipe by reference:
  /// no copy in user space). -1: none. The caller makes sure the pipe has room for every page the
  /// range touches. Backends that cannot (or will not, e.g. an O_DIRECT file) ignore it.
  int splice_pipe = -1;
  /// Out, reads with `splice_pipe`: true when the data went into the pipe (then `data` was not
  /// written); false when it is in `data` (the pipe may then hold bytes of a failed attempt).
  bool spliced = false;
  /// The io_context (one thread) that started it: the backend completes it there.
  asio::any_io_executor executor;
  /// With TransferStart::done: the result (errors as for read()/write()).
  Result<void> result;
  /// Storage the backend uses while the transfer runs (its operation state), so starting one
  /// allocates nothing.
  alignas(std::max_align_t) std::array<std::byte, 256> backend_state{};

  /// Called exactly once after TransferStart::started, on `executor`'s thread from its event loop
  /// (never from inside start_transfer()), when every byte moved or the transfer failed.
  virtual void transferred(Result<void> result) noexcept = 0;

 protected:
  ~BackendTransfer() = default;
};

/// What BlockBackend::start_transfer() did.
enum class TransferStart {
  unsupported,  ///< nothing: this backend (or this request) has no such path; use read()/write()
  started,      ///< under way: transferred() follows
  done,         ///< finished at once (a RAM file system): BackendTransfer::result holds the result
};

/// A copy inside the kernel, for BlockBackend::copy_from().
struct KernelCopy {
  std::uint64_t source_offset_bytes = 0;  ///< on the source's medium
  std::uint64_t offset_bytes = 0;         ///< on this (the destination) backend's medium
  std::uint64_t length_bytes = 0;         ///< > 0, a multiple of both backends' block size
  /// When set: the copy goes in parts (at most the kernel buffer's size, 1 MiB when the system
  /// allows), and proceed() is called after each part was read from the source into kernel memory
  /// that later writes to the source do not change, before any byte of that part is written;
  /// false ends the copy with ECANCELED (the parts before it are written, this one is not): the
  /// point in time ROD token is checked there. Empty: a part may be read and written in one step.
  std::function<bool()> proceed;
  /// Out: when copy_from() failed, true if the error came from reading the source (for the sense:
  /// UNRECOVERED READ ERROR rather than WRITE ERROR).
  bool read_failed = false;
};

/// Asynchronous block storage addressed in bytes.
///
/// Errors: every operation returns a std::error_code in std::generic_category() (an errno), e.g.
/// EIO for a media failure, ENOSPC when a thin backend has no space left, EROFS when read-only.
/// Preconditions (all operations): `offset_bytes` and the length are multiples of
/// capabilities().block_size_bytes and offset + length <= size_bytes() (checked by the SCSI layer;
/// implementations assert; a resizable backend whose medium shrank after the check answers EINVAL
/// instead). Buffers must stay valid until the awaitable completes.
/// Executor and thread: call from a coroutine running on an io_context that one thread runs (the
/// target's one-io_context-per-thread model). The same backend object may be used from several
/// io_contexts (threads) at once; implementations are thread-safe.
class BlockBackend {
 public:
  virtual ~BlockBackend() = default;

  /// The backend's size and feature set.
  [[nodiscard]] virtual const BackendCapabilities& capabilities() const noexcept = 0;

  /// Reads exactly `out.size()` bytes at `offset_bytes` into `out`. Unwritten or discarded space
  /// reads as zeroes on thin backends.
  virtual Awaitable<Result<void>> read(std::uint64_t offset_bytes, ByteSpan out) = 0;

  /// Writes all of `data` at `offset_bytes`; with Fua::yes the data is durable before completion.
  virtual Awaitable<Result<void>> write(std::uint64_t offset_bytes, ConstByteSpan data, Fua fua) = 0;

  /// Makes every completed write durable (SYNCHRONIZE CACHE; fdatasync).
  virtual Awaitable<Result<void>> flush() = 0;

  /// Deallocates `length_bytes` at `offset_bytes` (UNMAP). Only when capabilities().can_discard;
  /// otherwise EOPNOTSUPP. After success the range reads as zero iff discard_zeroes.
  virtual Awaitable<Result<void>> discard(std::uint64_t offset_bytes, std::uint64_t length_bytes) = 0;

  /// Makes `length_bytes` at `offset_bytes` read as zeroes (WRITE SAME with a zero block), by the
  /// cheapest means (zero range, hole punch, or writing zeroes). Fua as for write().
  virtual Awaitable<Result<void>> write_zeroes(std::uint64_t offset_bytes, std::uint64_t length_bytes, Fua fua) = 0;

  /// The allocation state at `offset_bytes` and how far it extends, at most `max_length_bytes`
  /// (> 0): holes of a sparse file (SEEK_DATA/SEEK_HOLE), unallocated chunks of a memory LUN. The
  /// length may end anywhere (file system blocks); callers round. Default: all allocated.
  /// Errors: the errno of the query.
  virtual Awaitable<Result<AllocationExtent>> allocation(std::uint64_t offset_bytes, std::uint64_t max_length_bytes) {
    (void)offset_bytes;
    co_return AllocationExtent{.allocated = true, .length_bytes = max_length_bytes};
  }

  // --- Optional operations. The defaults answer std::errc::operation_not_supported (EOPNOTSUPP),
  // and the SCSI layer then does the work itself with read()/write(). ---

  /// Atomically compares `compare` with the medium at `offset_bytes` and, only if every byte is
  /// equal, writes `data` there (COMPARE AND WRITE, SBC-4 §5.3). A backend offers it when it can
  /// make the pair atomic against every other writer of the medium, also other processes (RBD:
  /// rbd_aio_compare_and_write, atomic in the cluster); the SCSI layer's own read-compare-write is
  /// atomic only against writes through this process.
  /// Preconditions: `compare.size() == data.size()`, both a multiple of the block size, in range.
  /// Returns: the mismatch (if any); errors as for write(); EOPNOTSUPP when not offered, also for
  /// a particular range only (then the SCSI layer falls back for that command).
  virtual Awaitable<Result<CompareAndWriteResult>> compare_and_write(std::uint64_t offset_bytes, ConstByteSpan compare,
                                                                     ConstByteSpan data, Fua fua) {
    (void)offset_bytes, (void)compare, (void)data, (void)fua;
    co_return fail(std::make_error_code(std::errc::operation_not_supported));
  }

  /// Writes `pattern` (one logical block, not all zeroes: zeroes go to write_zeroes()) over and over
  /// across `length_bytes` at `offset_bytes` (WRITE SAME with a non-zero block, SBC-4 §5.49/§5.50)
  /// without the caller building the whole range in memory. `length_bytes` is a multiple of
  /// `pattern.size()`. Fua as for write().
  /// Returns: errors as for write(); EOPNOTSUPP when not offered, or not for these sizes (then the
  /// SCSI layer writes the replicated block itself).
  virtual Awaitable<Result<void>> write_same(std::uint64_t offset_bytes, std::uint64_t length_bytes, ConstByteSpan pattern,
                                             Fua fua) {
    (void)offset_bytes, (void)length_bytes, (void)pattern, (void)fua;
    co_return fail(std::make_error_code(std::errc::operation_not_supported));
  }

  /// Copies `copy.length_bytes` from `source` to this backend inside the kernel, without the data
  /// passing through a user-space buffer (the copy manager: EXTENDED COPY, WRITE USING TOKEN;
  /// UringBackend: io_uring splice file → pipe → file). `source` may be this backend; the ranges
  /// must not overlap then. Preconditions as for read() on `source` and write() here.
  /// `copy` must stay valid until the awaitable completes.
  /// Returns: success once every byte was written (not durable: as write() with Fua::no);
  /// ECANCELED when `copy.proceed` returned false; EOPNOTSUPP, EXDEV or EINVAL
  /// when this pair or this request cannot be copied in the kernel (another kind of backend, a
  /// kernel that refuses splice on these files, overlapping ranges of one file, no stable snapshot
  /// for `proceed`): then the destination range may hold part of the copy, and the caller copies
  /// the range itself with read() and write(); other errors as for read()/write(). Default:
  /// EOPNOTSUPP.
  virtual Awaitable<Result<void>> copy_from(BlockBackend& source, KernelCopy& copy) {
    (void)source, (void)copy;
    co_return fail(std::make_error_code(std::errc::operation_not_supported));
  }

  /// Starts `transfer` (a read or write as read()/write() do) without a coroutine frame. Default:
  /// TransferStart::unsupported. Call on `transfer.executor`'s thread.
  virtual TransferStart start_transfer(BackendTransfer& transfer) {
    (void)transfer;
    return TransferStart::unsupported;
  }

  /// The medium's current size in bytes (a multiple of the block size). Backends whose medium can
  /// be resized while served (an RBD image: `rbd resize`) report the new size here once they
  /// noticed it; the SCSI layer then raises CAPACITY DATA HAS CHANGED (SBC-4 §4.6) and ranges are
  /// checked against it. Default: capabilities().size_bytes. Thread-safe, non-blocking.
  [[nodiscard]] virtual std::uint64_t size_bytes() const noexcept { return capabilities().size_bytes; }
};

}  // namespace iserkit::target
