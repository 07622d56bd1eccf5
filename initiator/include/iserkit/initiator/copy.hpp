// Copy offload on the initiator side: whether EXTENDED COPY (LID1, SPC-4 §6.4) can carry a copy
// between two logical units, the shape of each command within the copy manager's limits (VPD
// 0x8f, SPC-4 §7.8.17), and one command of such a copy. The copy manager is the source's device
// server: the command goes to the source LU and names both LUs by their NAA designators (VPD 0x83,
// SPC-5 §7.7.6), so whether it reaches the destination is the target's decision (iserkit-target:
// the same process, and the same initiator logged in to both targets). Front ends (`iserkit
// copy`, the FUSE view's copy_file_range) run the loop and fall back to READ + WRITE.
// Layer 6 (public API) over scsi/third_party_copy.hpp.
//
// THREADING: as LunHandle: call on the handles' executor (both handles on the same one).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

#include <tl/expected.hpp>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/result.hpp"
#include "iserkit/initiator/lun.hpp"
#include "iserkit/scsi/third_party_copy.hpp"

namespace iserkit::initiator {

/// How EXTENDED COPY commands from one LU to another are built.
struct ExtendedCopyPlan {
  std::vector<std::byte> source_naa;       ///< the source LU's NAA designator (VPD 0x83)
  std::vector<std::byte> destination_naa;  ///< the destination LU's
  std::uint32_t block_size_bytes = 0;      ///< both LUs' logical block size
  scsi::ThirdPartyCopyLimits limits;       ///< the source's VPD 0x8f
  scsi::CopyCommandLimits command;         ///< the shape of one command (segments, blocks per segment)
};

/// A plan, or in words why EXTENDED COPY cannot be used ("the source does not report 3PC", …).
using ExtendedCopyProbe = tl::expected<ExtendedCopyPlan, std::string>;

/// Bytes one EXTENDED COPY moves at most unless the caller says otherwise: within every limit
/// iserkit-target states, and small enough that progress and the offset reached after a failure
/// are reported in steps of this size.
inline constexpr std::uint64_t extended_copy_default_command_bytes = 64u << 20;

/// Asks whether EXTENDED COPY (LID1) can copy from `source` to `destination`: the source's
/// standard INQUIRY 3PC bit (SPC-5 §6.6.2), its VPD 0x8f listing EXTENDED COPY service action 00h,
/// segment descriptor 02h and CSCD descriptor E4h with limits that fit at least one block, an NAA
/// designator (association logical unit) on both, and equal block sizes. `cap_bytes` (0 = none)
/// lowers the bytes per command. Returns the plan, or the reason; a transport error also comes
/// back as a reason (the caller's next command will see it again).
Awaitable<ExtendedCopyProbe> probe_extended_copy(LunHandle& source, LunHandle& destination,
                                                 std::uint64_t cap_bytes = extended_copy_default_command_bytes);

/// One EXTENDED COPY of `blocks` (1..plan.command.max_command_blocks()) logical blocks from
/// `source_lba` of the source to `destination_lba` of the destination, sent to `source`, split
/// into 02h segments of at most plan.command.max_segment_blocks; LIST ID USAGE 11b (no status
/// held). `timeout` per command (0 = the session's). Errors: errc::invalid_argument for a block
/// count outside that range; otherwise as LunHandle::extended_copy().
Awaitable<Result<void>> extended_copy_blocks(LunHandle& source, const ExtendedCopyPlan& plan, std::uint64_t source_lba,
                                             std::uint64_t destination_lba, std::uint64_t blocks,
                                             std::chrono::milliseconds timeout = std::chrono::milliseconds{0});

/// True when `ec` is the copy manager declining this copy rather than a failure while copying:
/// ILLEGAL REQUEST (the command, a descriptor or a field not supported) or COPY ABORTED with
/// UNREACHABLE COPY TARGET (08/04) or COPY TARGET DEVICE NOT REACHABLE (0D/02). Callers then move
/// the data themselves; anything else (a transport error, a medium error) is a failure.
bool extended_copy_refused(std::error_code ec) noexcept;

}  // namespace iserkit::initiator
