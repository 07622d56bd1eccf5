// What an initiator needs to drive a copy manager (SPC-4 §5.17, LID1 form): the Third-party Copy
// VPD page (0x8f, SPC-4 §7.8.17) parsed into the limits that bound one EXTENDED COPY, the EXTENDED
// COPY (LID1) parameter list (SPC-4 §6.4.3) with identification CSCD descriptors (E4h, §6.4.5.1,
// a logical unit named by its NAA designator) and block device to block device segment
// descriptors (02h, §6.4.6.5), its CDB, and the split of a block range into commands and segments
// within the limits. Pure functions; the initiator decodes peer bytes here (fuzzed in
// tests/fuzz/fuzz_scsi_data.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "iserkit/common/bytes.hpp"
#include "iserkit/common/result.hpp"
#include "iserkit/scsi/cdb.hpp"

namespace iserkit::scsi {

namespace vpd {
inline constexpr std::uint8_t third_party_copy = 0x8f;  ///< SPC-4 §7.8.17
}  // namespace vpd

/// What the Third-party Copy VPD page says about EXTENDED COPY (LID1). Counts and lengths are 0
/// when the page lacks the descriptor that carries them.
struct ThirdPartyCopyLimits {
  bool extended_copy_lid1 = false;  ///< Supported Commands (0001h) lists 83h with service action 00h
  bool block_to_block = false;      ///< Supported Descriptors (0008h) lists segment descriptor 02h
  bool identification_cscd = false; ///< Supported Descriptors lists CSCD descriptor E4h
  std::uint16_t max_cscd_descriptors = 0;     ///< Parameter Data (0004h) MAXIMUM CSCD DESCRIPTOR COUNT
  std::uint16_t max_segment_descriptors = 0;  ///< MAXIMUM SEGMENT DESCRIPTOR COUNT
  std::uint32_t max_descriptor_list_bytes = 0;  ///< MAXIMUM DESCRIPTOR LIST LENGTH (CSCD + segment lists), bytes
  std::uint32_t max_segment_bytes = 0;  ///< General Copy Operations (8001h) MAXIMUM SEGMENT LENGTH, bytes
  std::uint8_t data_segment_granularity_log2 = 0;  ///< DATA SEGMENT GRANULARITY (log2 of bytes)
  friend bool operator==(const ThirdPartyCopyLimits&, const ThirdPartyCopyLimits&) = default;
};

/// Parses VPD 0x8f (header included). Descriptors of other types are skipped; a descriptor shorter
/// than its fixed fields leaves those fields 0.
/// Returns: the limits, or errc::malformed_pdu when the header is not page 0x8f or a descriptor
/// runs past the page. Spec: SPC-4 §7.8.17.
Result<ThirdPartyCopyLimits> parse_third_party_copy_vpd(ConstByteSpan page);

/// Encodes a VPD 0x8f page (header included) with the 0001h, 0004h, 0008h and 8001h descriptors
/// stating `limits` (for tests and the fuzz round trip). Spec: SPC-4 §7.8.17.
std::vector<std::byte> encode_third_party_copy_vpd(const ThirdPartyCopyLimits& limits);

/// One 02h segment: `blocks` logical blocks (1..65535) from `source_lba` to `destination_lba`.
struct CopySegment {
  std::uint64_t source_lba = 0;
  std::uint64_t destination_lba = 0;
  std::uint16_t blocks = 0;
  friend bool operator==(const CopySegment&, const CopySegment&) = default;
};

/// One EXTENDED COPY (LID1) between two logical units of `block_size_bytes` each.
struct ExtendedCopyList {
  std::uint8_t list_id = 0;  ///< LIST IDENTIFIER
  /// LIST ID USAGE 11b (hold no status; the LIST IDENTIFIER is not checked) when true, else 00b.
  bool discard_status = true;
  std::vector<std::byte> source_naa;       ///< NAA designator (8 or 16 bytes) of the source LU
  std::vector<std::byte> destination_naa;  ///< NAA designator of the destination LU
  std::uint32_t block_size_bytes = 512;    ///< DISK BLOCK LENGTH of both CSCD descriptors
  std::vector<CopySegment> segments;
};

/// Bytes of the parameter list header, of one E4h CSCD descriptor, of one 02h segment descriptor.
inline constexpr std::size_t xcopy_header_bytes = 16;
inline constexpr std::size_t xcopy_cscd_bytes = 32;
inline constexpr std::size_t xcopy_block_segment_bytes = 28;

/// Encodes the parameter list: header, CSCD descriptor 0 (source), 1 (destination), the segments.
/// Preconditions: NAA designators of at most 20 bytes. Spec: SPC-4 §6.4.3, §6.4.5.1, §6.4.6.5.
std::vector<std::byte> encode_extended_copy_list(const ExtendedCopyList& list);

/// EXTENDED COPY (LID1) CDB (83h, service action 00h) for a parameter list of `list_bytes`.
Cdb extended_copy_cdb(std::uint32_t list_bytes) noexcept;

/// How one EXTENDED COPY may be shaped, derived from ThirdPartyCopyLimits and the block size.
struct CopyCommandLimits {
  std::uint32_t max_segment_blocks = 0;  ///< blocks per segment (≤ 65535, the 02h field)
  std::uint16_t max_segments = 0;        ///< segments per command
  /// Blocks per command: max_segment_blocks × max_segments, lowered by `cap_bytes`.
  [[nodiscard]] std::uint64_t max_command_blocks() const noexcept {
    return std::uint64_t{max_segment_blocks} * max_segments;
  }
};

/// The per-command shape for LUNs of `block_size_bytes` (> 0): MAXIMUM SEGMENT LENGTH (or 65535
/// blocks when 0), the segment count the descriptor list length leaves room for beside two CSCD
/// descriptors, MAXIMUM SEGMENT DESCRIPTOR COUNT, and `cap_bytes` (0 = none) for the whole command.
/// A result with max_segments or max_segment_blocks 0 means no copy fits.
CopyCommandLimits copy_command_limits(const ThirdPartyCopyLimits& limits, std::uint32_t block_size_bytes,
                                      std::uint64_t cap_bytes) noexcept;

/// The segments of one command copying `blocks` (≤ limits.max_command_blocks()) from
/// `source_lba` to `destination_lba`, each at most limits.max_segment_blocks.
std::vector<CopySegment> split_copy_segments(std::uint64_t source_lba, std::uint64_t destination_lba,
                                             std::uint64_t blocks, const CopyCommandLimits& limits);

}  // namespace iserkit::scsi
