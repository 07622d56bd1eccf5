// Data-In segmentation and residuals for the target (RFC 7143 §11.7 SCSI Data-In, §11.4.5 residuals).
// Sans-I/O helpers used by the connection when it answers a READ-type command.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

namespace iserkit::target {

/// One Data-In PDU's slice of the task buffer.
struct DataInSegment {
  std::uint32_t buffer_offset = 0;  ///< bytes from the start of the task's data
  std::uint32_t length = 0;         ///< bytes in this PDU's data segment (> 0)
  bool final = false;               ///< F: last PDU of a Data-In sequence (MaxBurstLength) or of the command
  bool last = false;                ///< last PDU of the command (S may be set on it)
};

/// Splits `total_bytes` of Data-In into PDUs of at most the initiator's MaxRecvDataSegmentLength,
/// grouped into sequences of at most MaxBurstLength bytes.
/// RFC 7143 §13.12: a PDU's data segment MUST NOT exceed the receiver's MaxRecvDataSegmentLength.
/// RFC 7143 §13.13: a Data-In sequence carries at most MaxBurstLength bytes; §11.7.1: F marks its end.
class DataInSegmenter {
 public:
  /// `max_segment_bytes` and `max_burst_bytes` must be > 0.
  DataInSegmenter(std::uint32_t total_bytes, std::uint32_t max_segment_bytes, std::uint32_t max_burst_bytes) noexcept
      : total_(total_bytes), max_segment_(max_segment_bytes), max_burst_(max_burst_bytes) {}

  /// The next segment, or nullopt when all bytes are covered.
  std::optional<DataInSegment> next() noexcept {
    if (offset_ >= total_) return std::nullopt;
    const std::uint32_t burst_left = max_burst_ - in_burst_;
    const std::uint32_t length = std::min({max_segment_, total_ - offset_, burst_left});
    DataInSegment s{.buffer_offset = offset_, .length = length};
    offset_ += length;
    in_burst_ += length;
    s.last = offset_ == total_;
    s.final = s.last || in_burst_ == max_burst_;
    if (s.final) in_burst_ = 0;
    return s;
  }

 private:
  std::uint32_t total_;
  std::uint32_t max_segment_;
  std::uint32_t max_burst_;
  std::uint32_t offset_ = 0;
  std::uint32_t in_burst_ = 0;
};

/// Residual reported in a SCSI Response or the final Data-In (RFC 7143 §11.4.5).
struct Residual {
  bool underflow = false;  ///< U: fewer bytes moved than the Expected Data Transfer Length
  bool overflow = false;   ///< O: the command wanted more bytes than the EDTL
  std::uint32_t count = 0; ///< bytes
};

/// The residual for a command whose initiator expected `expected_bytes` (EDTL) and whose data
/// transfer was (or wanted to be) `actual_bytes`.
/// RFC 7143 §11.4.5.1: U with count EDTL - actual when actual < EDTL; O with count actual - EDTL
/// when the command wanted more than EDTL; neither (count 0) when equal.
inline constexpr Residual residual_for(std::uint32_t expected_bytes, std::uint32_t actual_bytes) noexcept {
  if (actual_bytes < expected_bytes) return {.underflow = true, .count = expected_bytes - actual_bytes};
  if (actual_bytes > expected_bytes) return {.overflow = true, .count = actual_bytes - expected_bytes};
  return {};
}

}  // namespace iserkit::target
