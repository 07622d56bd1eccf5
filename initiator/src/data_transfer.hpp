// Data movement rules of one SCSI task, sans-I/O (RFC 7143 §4.2.5, §11.7, §11.8):
//  - Data-In validation: each Data-In must fall inside the task's read buffer, DataSN in order.
//  - Write data sequencing: immediate data (ImmediateData=Yes), unsolicited Data-Out up to
//    FirstBurstLength (InitialR2T=No), and solicited Data-Out sequences answering R2Ts, each split
//    into PDUs of at most the target's MaxRecvDataSegmentLength.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "iserkit/common/result.hpp"
#include "iserkit/iscsi/data_segmenter.hpp"
#include "iserkit/iscsi/pdu.hpp"

namespace iserkit::initiator {

/// Tracks the Data-In PDUs of one read command.
class DataInTracker {
 public:
  explicit DataInTracker(std::size_t buffer_size_bytes = 0) noexcept : buffer_size_(buffer_size_bytes) {}

  /// Checks where a Data-In's `length` bytes at BufferOffset `buffer_offset` go.
  /// Returns errc::protocol_error when they fall outside the buffer (the bytes must then not be
  /// placed) or DataSN is not the next one.
  Result<void> accept(std::uint32_t data_sn, std::uint32_t buffer_offset, std::uint32_t length) noexcept {
    // RFC 7143 §11.7.4: DataSN counts the task's Data-In PDUs from 0; at ErrorRecoveryLevel 0
    // a gap cannot be recovered.
    if (data_sn != next_data_sn_) return fail(errc::protocol_error);
    // RFC 7143 §11.7.6: BufferOffset + length must lie within the expected transfer.
    if (!fits(buffer_offset, length)) return fail(errc::protocol_error);
    ++next_data_sn_;
    bytes_ += length;
    return {};
  }
  /// True when [buffer_offset, buffer_offset + length) lies inside the buffer (overflow-safe).
  [[nodiscard]] bool fits(std::uint32_t buffer_offset, std::uint32_t length) const noexcept {
    return buffer_offset <= buffer_size_ && length <= buffer_size_ - buffer_offset;
  }
  [[nodiscard]] std::uint64_t bytes_received() const noexcept { return bytes_; }
  [[nodiscard]] std::uint32_t next_data_sn() const noexcept { return next_data_sn_; }

 private:
  std::size_t buffer_size_;
  std::uint32_t next_data_sn_ = 0;
  std::uint64_t bytes_ = 0;
};

/// The negotiated values that shape write data.
struct WriteLimits {
  bool immediate_data = true;
  bool initial_r2t = true;
  std::uint32_t first_burst_length = 65536;        ///< bytes
  std::uint32_t max_burst_length = 262144;         ///< bytes
  std::uint32_t max_send_segment_length = 8192;    ///< the target's MaxRecvDataSegmentLength, bytes
};

/// Bytes sent as immediate data in the SCSI Command PDU.
/// RFC 7143 §4.2.5.2: only with ImmediateData=Yes, at most FirstBurstLength and at most the
/// target's MaxRecvDataSegmentLength (it is the command PDU's data segment).
inline std::uint32_t immediate_data_length(const WriteLimits& l, std::uint32_t total_bytes) noexcept {
  if (!l.immediate_data) return 0;
  return std::min({total_bytes, l.first_burst_length, l.max_send_segment_length});
}

/// Bytes sent as unsolicited Data-Out PDUs after the command.
/// RFC 7143 §4.2.5.2: only with InitialR2T=No; immediate + unsolicited ≤ FirstBurstLength.
inline std::uint32_t unsolicited_data_out_length(const WriteLimits& l, std::uint32_t total_bytes,
                                                 std::uint32_t immediate_bytes) noexcept {
  if (l.initial_r2t) return 0;
  const std::uint32_t first_burst = std::min(total_bytes, l.first_burst_length);
  return first_burst > immediate_bytes ? first_burst - immediate_bytes : 0;
}

/// Checks an R2T against the task: RFC 7143 §11.8.4/§11.8.5: the requested range must lie within
/// ExpectedDataTransferLength, be non-empty and at most MaxBurstLength.
inline Result<void> validate_r2t(const iscsi::R2t& r2t, std::uint32_t total_bytes, const WriteLimits& l) noexcept {
  if (r2t.desired_data_transfer_length == 0 || r2t.buffer_offset > total_bytes ||
      r2t.desired_data_transfer_length > total_bytes - r2t.buffer_offset ||
      r2t.desired_data_transfer_length > l.max_burst_length)
    return fail(errc::protocol_error);
  return {};
}

}  // namespace iserkit::initiator
