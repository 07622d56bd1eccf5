// Planning of block I/O on the initiator, sans-I/O (SBC-4 §5.16/§5.18 READ (10)/(16), §5.41/§5.43
// WRITE (10)/(16), §6.6.4 block limits): which CDB size to use, how far one command may go, and
// how an unaligned byte range splits into edge blocks and an aligned middle.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

#include "iserkit/common/result.hpp"
#include "iserkit/scsi/cdb.hpp"
#include "iserkit/scsi/inquiry.hpp"

namespace iserkit::initiator {

/// Default cap on one command's transfer when the unit reports no MAXIMUM TRANSFER LENGTH.
inline constexpr std::uint32_t default_max_transfer_bytes = 8u << 20;

/// Largest number of blocks one READ/WRITE carries: MAXIMUM TRANSFER LENGTH when reported, capped
/// at default_max_transfer_bytes, and at least 1.
inline std::uint32_t max_transfer_blocks(const std::optional<scsi::BlockLimits>& limits,
                                         std::uint32_t block_size_bytes) noexcept {
  std::uint32_t cap = std::max<std::uint32_t>(1, default_max_transfer_bytes / std::max<std::uint32_t>(block_size_bytes, 1));
  if (limits && limits->maximum_transfer_length != 0) cap = std::min(cap, limits->maximum_transfer_length);
  return cap;
}

/// What bounds one READ/WRITE's transfer on a LUN (SBC-4 §6.6.4; RFC 7145 leaves the size of an
/// iSER transfer to the two ends' buffers).
struct TransferLimitInputs {
  std::optional<scsi::BlockLimits> block_limits;  ///< VPD 0xb0 when the unit has it
  std::uint32_t block_size_bytes = 512;           ///< logical block length
  /// The transport's hard cap, bytes (CommandChannel::max_transfer_bytes(); iSER:
  /// SessionOptions::iser_max_transfer_bytes); 0 = none.
  std::uint32_t transport_max_bytes = 0;
  /// The cap when the unit states no MAXIMUM TRANSFER LENGTH, bytes
  /// (CommandChannel::unstated_max_transfer_bytes(); iSER: 512 KiB); 0 = none.
  std::uint32_t unstated_max_bytes = 0;
};

/// Largest number of blocks one READ/WRITE carries, as Linux sizes an iSER host: the smallest of
/// the transport's cap (ib_iser's max_sectors), the unit's MAXIMUM TRANSFER LENGTH when it states
/// one — else the transport's cap for units that state none (ib_iser's default 512 KiB: tgt's
/// fixed RDMA buffers refuse more and say nothing) — and default_max_transfer_bytes; at least 1.
inline std::uint32_t max_transfer_blocks(const TransferLimitInputs& in) noexcept {
  const std::uint32_t bs = std::max<std::uint32_t>(in.block_size_bytes, 1);
  std::uint32_t cap = max_transfer_blocks(in.block_limits, bs);
  const bool stated = in.block_limits && in.block_limits->maximum_transfer_length != 0;
  if (!stated && in.unstated_max_bytes != 0) cap = std::min(cap, std::max<std::uint32_t>(1, in.unstated_max_bytes / bs));
  if (in.transport_max_bytes != 0) cap = std::min(cap, std::max<std::uint32_t>(1, in.transport_max_bytes / bs));
  return cap;
}

/// READ/WRITE CDB for one chunk: the 10-byte form when the unit has fewer than 2^32 blocks and the
/// chunk is ≤ 65535 blocks, else the 16-byte form.
inline scsi::Cdb read_write_cdb(bool write, std::uint64_t lba, std::uint32_t blocks, bool fua,
                                std::uint64_t capacity_blocks) noexcept {
  const scsi::ReadWriteOptions o{.lba = lba, .blocks = blocks, .fua = fua};
  if (capacity_blocks <= 0xffffffffull && blocks <= 0xffff && lba + blocks <= 0x100000000ull) {
    auto cdb = write ? scsi::write10(o) : scsi::read10(o);
    if (cdb) return *cdb;
  }
  return write ? scsi::write16(o) : scsi::read16(o);
}

/// An unaligned byte range cut at block boundaries.
struct BytePlan {
  std::uint64_t first_lba = 0;         ///< block holding the first byte
  std::uint32_t head_offset = 0;       ///< offset of the first byte inside first_lba's block
  std::uint32_t head_bytes = 0;        ///< bytes in a partial head block (0 when aligned)
  std::uint64_t middle_lba = 0;        ///< first whole block
  std::uint64_t middle_blocks = 0;     ///< whole blocks
  std::uint64_t tail_lba = 0;          ///< the partial tail block
  std::uint32_t tail_bytes = 0;        ///< bytes in a partial tail block (0 when aligned)
};

/// Splits [offset_bytes, offset_bytes + length_bytes) for block size `bs`. When the range lies in
/// one block and is partial, it is the head (tail_bytes = 0, middle_blocks = 0).
inline BytePlan plan_bytes(std::uint64_t offset_bytes, std::uint64_t length_bytes, std::uint32_t bs) noexcept {
  BytePlan p;
  p.first_lba = offset_bytes / bs;
  p.head_offset = static_cast<std::uint32_t>(offset_bytes % bs);
  std::uint64_t pos = offset_bytes;
  std::uint64_t left = length_bytes;
  if (p.head_offset != 0 || left < bs) {
    p.head_bytes = static_cast<std::uint32_t>(std::min<std::uint64_t>(left, bs - p.head_offset));
    if (p.head_bytes == bs) p.head_bytes = 0;  // a whole aligned block after all
    pos += p.head_bytes;
    left -= p.head_bytes;
  }
  p.middle_lba = pos / bs;
  p.middle_blocks = left / bs;
  pos += p.middle_blocks * bs;
  left -= p.middle_blocks * bs;
  p.tail_lba = pos / bs;
  p.tail_bytes = static_cast<std::uint32_t>(left);
  return p;
}

}  // namespace iserkit::initiator
