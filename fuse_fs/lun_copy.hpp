// copy_file_range(2) between two LUN files of the FUSE view, offloaded to the target with
// EXTENDED COPY (LID1, SPC-4 §6.4; initiator/copy.hpp): the copy manager of the source's target
// moves the blocks, so the data does not cross the network. Whole blocks go by EXTENDED COPY; a
// partial first or last block (offsets inside a block) is moved here with READ + WRITE, so one
// request is answered in full and the next one (coreutils cp asks again at the returned offset)
// starts aligned.
//
// What makes the kernel copy through read/write instead: lun_copy() fails with
// errc::not_supported, which the operation answers EOPNOTSUPP. Linux's FUSE client then copies that
// request itself with splice through our read and write (fs/fuse/file.c: EOPNOTSUPP and EXDEV fall
// back; ENOSYS would switch copy_file_range off for the whole mount, so it is never used), and
// coreutils 9.1 cp falls back to read/write on EOPNOTSUPP/EXDEV/EINVAL in any case. That happens when
// the files' block sizes differ, their offsets sit at different places within a block, the request
// covers no whole block, EXTENDED COPY cannot be used (no 3PC, no VPD 0x8f, no NAA designator) or
// the target declines the first command (UNREACHABLE COPY TARGET: another target process; ILLEGAL
// REQUEST) before anything was copied.
// THREADING: a coroutine on the PortalView's loop, like lun_io.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "fuse_fs/portal_view.hpp"

namespace iserkit::fuse_fs {

/// Bytes one copy_file_range moves at most (a FUSE reply carries a 32-bit count; a smaller step
/// keeps each request short): callers such as cp ask again for the rest.
inline constexpr std::uint64_t copy_max_request_bytes = 256u << 20;

/// Copies up to `length` bytes from `offset_in` of `in` to `offset_out` of `out`, clamped to the
/// end of the source (0 at or past it), the end of the destination and copy_max_request_bytes.
/// Writes to the destination blocks wait for and hold its write range lock (lun_io.hpp); the
/// destination's GET LBA STATUS cache is invalidated; with `fua` (an O_DSYNC destination) a
/// SYNCHRONIZE CACHE follows. Returns the bytes copied: all of the clamped length, or fewer when a
/// command failed after some were copied (a short copy). Errors: errc::not_supported (see above);
/// std::errc::no_space_on_device when `offset_out` is at or past the destination's end; SCSI and
/// transport errors when nothing was copied.
Awaitable<Result<std::size_t>> lun_copy(PortalView& view, std::shared_ptr<LunState> in, std::uint64_t offset_in,
                                        std::shared_ptr<LunState> out, std::uint64_t offset_out, std::uint64_t length,
                                        bool fua);

}  // namespace iserkit::fuse_fs
