// The FUSE view's data path on one LUN file: byte-addressed reads and writes mapped to READ/WRITE
// (SBC-4 §5.16/§5.18, §5.41/§5.43), fsync to SYNCHRONIZE CACHE (§5.27), hole punching to UNMAP
// (§5.32) or WRITE SAME with UNMAP (§5.50), zero ranges to WRITE SAME. File semantics of a block
// device: reads stop at the capacity (short read, then 0 = end of file); writes stop at the
// capacity (short write) and a write starting at or past it fails with ENOSPC.
//
// UNALIGNED I/O: a read covering partial blocks reads the whole covering block range into one pooled
// buffer and the reply points into it (no copy); a write covering partial blocks is a
// read-modify-write of its edge blocks (LunHandle::write_bytes). Every write — aligned or not —
// first takes the LUN's BlockRangeLock on all the blocks it touches, so overlapping writes run one
// after another in arrival order and no RMW can lose a concurrent write; writes to disjoint blocks
// run in parallel. Reads take no lock.
// HOLES AND st_blocks: lun_seek() answers SEEK_DATA / SEEK_HOLE and lun_mapped_bytes() the bytes
// st_blocks shows, both from GET LBA STATUS (SBC-4 §5.8, LunHandle::get_lba_status) through the
// view's bounded ExtentCache; writes and clears here invalidate the blocks they touched. The
// bounds, and what is answered past them: fuse_fs/README.md "Holes and st_blocks".
// THREADING: coroutines on the PortalView's loop; `lun` is kept alive by the shared_ptr argument.
// BUFFERS: write() borrows `data` until the awaitable completes (the FUSE worker waits for it).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "fuse_fs/allocation_map.hpp"
#include "fuse_fs/portal_view.hpp"
#include "iserkit/common/buffer.hpp"

namespace iserkit::fuse_fs {

/// Data read from a LUN: `length` bytes starting `skip` bytes into `buffer`.
struct ReadData {
  PooledBuffer buffer;
  std::size_t skip = 0;
  std::size_t length = 0;  ///< 0 at or past the end of the LUN
  [[nodiscard]] const std::byte* data() const noexcept { return buffer.data() + skip; }
};

/// Reads up to `size` bytes at `offset_bytes`. Errors: the LUN's handle errors (PortalView::handle),
/// SCSI/transport errors of READ.
Awaitable<Result<ReadData>> lun_read(PortalView& view, std::shared_ptr<LunState> lun, std::uint64_t offset_bytes,
                                     std::size_t size);

/// Leases `size` bytes for write payload from the pool of the LUN's session
/// (Session::buffer_pool(): registered memory on iSER), so a WRITE from it needs no bounce copy on
/// any transport. The caller fills it, then passes it to lun_write(). Errors: the LUN's handle
/// errors (PortalView::handle); std::errc::not_enough_memory.
Awaitable<Result<PooledBuffer>> lun_payload_buffer(PortalView& view, std::shared_ptr<LunState> lun, std::size_t size);

/// Writes `data` at `offset_bytes` (FUA when `fua`, for O_DSYNC opens; SBC-4 §5.43). Returns the
/// bytes written (less than data.size() when the write reaches the end of the LUN). Errors:
/// std::errc::no_space_on_device when offset_bytes ≥ capacity; SCSI/transport errors.
Awaitable<Result<std::size_t>> lun_write(PortalView& view, std::shared_ptr<LunState> lun, std::uint64_t offset_bytes,
                                         std::span<const std::byte> data, bool fua);

/// SYNCHRONIZE CACHE of the whole LUN (SBC-4 §5.27).
Awaitable<Result<void>> lun_flush(PortalView& view, std::shared_ptr<LunState> lun);

/// How lun_deallocate() clears a range.
enum class ClearMode {
  punch_hole,  ///< deallocate: UNMAP when unmapped blocks read as zeroes, else WRITE SAME + UNMAP bit
  zero_range,  ///< write zeroes, keep allocated: WRITE SAME (16) without the UNMAP bit
};
/// Makes bytes [offset_bytes, offset_bytes + length_bytes) read as zeroes (clamped to the
/// capacity); partial edge blocks are zeroed by read-modify-write under the range lock. When the
/// unit rejects WRITE SAME, zero blocks are written instead. Errors: SCSI/transport errors.
Awaitable<Result<void>> lun_clear(PortalView& view, std::shared_ptr<LunState> lun, std::uint64_t offset_bytes,
                                  std::uint64_t length_bytes, ClearMode mode);

/// GET LBA STATUS descriptors asked for per command (the iserkit target answers up to 64).
inline constexpr std::uint32_t lba_status_descriptors_per_command = 256;
/// Most GET LBA STATUS commands one lseek(SEEK_DATA/SEEK_HOLE) sends; what is still unknown then
/// counts as data.
inline constexpr int seek_max_commands = 16;
/// Most GET LBA STATUS commands one st_blocks count sends; the blocks still unknown then count as
/// mapped (so st_blocks never under-reports; at worst it is the capacity).
inline constexpr int count_max_commands = 32;

/// lseek(2) SEEK_DATA / SEEK_HOLE at `offset_bytes` on a LUN file, from GET LBA STATUS: a hole is
/// a deallocated or anchored run, and only on a unit whose unmapped blocks read as zeroes (LBPRZ;
/// elsewhere a deallocated block may read as anything, so every block counts as data). Where the
/// unit does not say (not thin, the command refused or failing, past seek_max_commands) the file
/// answers as a fully allocated one: SEEK_DATA the offset reached, SEEK_HOLE the capacity.
/// Returns the offset in bytes. Errors: std::errc::no_such_device_or_address (ENXIO) for an
/// offset at or past the capacity, or SEEK_DATA with only holes up to it; never another one.
Awaitable<Result<std::uint64_t>> lun_seek(PortalView& view, std::shared_ptr<LunState> lun, std::uint64_t offset_bytes,
                                          SeekWhence whence);

/// lun_seek() once the LUN has a handle: the same answers, with `cache` as the ExtentCache (for unit
/// tests over a fake channel). Sends GET LBA STATUS through `h`; marks lun.lba_status_unsupported
/// when the unit refuses it.
Awaitable<Result<std::uint64_t>> seek_with(ExtentCache& cache, LunState& lun, initiator::LunHandle h,
                                           std::uint64_t offset_bytes, SeekWhence whence);

/// The count lun_mapped_bytes() starts: the LUN's mapped blocks from LBA 0, at most
/// count_max_commands GET LBA STATUS commands through `h` (the blocks still unknown then count as
/// mapped; a unit that refuses the command counts as fully mapped). Records the count in `cache`
/// (unless a write of ours overtook it) and in lun->last_mapped_blocks — not when a command
/// failed otherwise — then clears lun->counting and wakes lun->count_waiters.
Awaitable<void> count_mapped_blocks(ExtentCache& cache, std::shared_ptr<LunState> lun, initiator::LunHandle h);

/// The bytes of the LUN that are mapped, for st_blocks: from the ExtentCache when it holds a fresh
/// count, else counted from GET LBA STATUS (one count per LUN at a time, at most
/// count_max_commands commands; blocks still unknown then count as mapped) and cached. Waits at
/// most `wait` for the count; past it returns the last count found, or the capacity, and the count
/// goes on for the next caller. Never logs in: a LUN whose session is down now, a unit that is not
/// thin or refuses the command, and a count that failed give the capacity.
Awaitable<std::uint64_t> lun_mapped_bytes(PortalView& view, std::shared_ptr<LunState> lun,
                                          std::chrono::milliseconds wait);

}  // namespace iserkit::fuse_fs
