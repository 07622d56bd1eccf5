// Cutting a task's data into Data-In or Data-Out PDUs (RFC 7143 §11.7, §13.12, §13.13): one
// segmenter for both ends (the target's Data-In, the initiator's Data-Out). Sans-I/O, header-only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>

namespace iserkit::iscsi {

/// One data PDU's slice of a task's buffer.
struct DataSegment {
  std::uint32_t buffer_offset = 0;  ///< bytes from the start of the task's data: the PDU's Buffer Offset
  std::uint32_t length = 0;         ///< bytes in this PDU's data segment (> 0)
  std::uint32_t index = 0;          ///< 0, 1, 2… in this segmenter: a Data-Out sequence's DataSN (RFC 7143 §11.7.5)
  bool final = false;               ///< F: last PDU of its sequence (of a burst, or of the range)
  bool last = false;                ///< last PDU of the range (a Data-In's S may go on it)
};

/// Splits `length_bytes` of a task's data, starting at `buffer_offset` bytes, into PDUs of at most
/// `max_segment_bytes` (the receiver's MaxRecvDataSegmentLength, RFC 7143 §13.12), grouped into
/// sequences of at most `max_burst_bytes` (Data-In: MaxBurstLength, §13.13; F marks each
/// sequence's end, §11.7.1). A Data-Out sequence (unsolicited data, or one R2T's burst, which is
/// never longer than MaxBurstLength) is one sequence: leave `max_burst_bytes` at its default.
/// A limit of 0 counts as 1 byte. Nothing to send (`length_bytes` 0): no segment.
class DataSegmenter {
 public:
  DataSegmenter(std::uint32_t buffer_offset, std::uint32_t length_bytes, std::uint32_t max_segment_bytes,
                std::uint32_t max_burst_bytes = std::numeric_limits<std::uint32_t>::max()) noexcept
      : offset_(buffer_offset),
        end_(std::uint64_t{buffer_offset} + length_bytes),
        max_segment_(std::max<std::uint32_t>(max_segment_bytes, 1)),
        max_burst_(std::max<std::uint32_t>(max_burst_bytes, 1)) {}

  /// The next segment, or nullopt when every byte of the range is covered.
  std::optional<DataSegment> next() noexcept {
    if (offset_ >= end_) return std::nullopt;
    const std::uint64_t length = std::min<std::uint64_t>({max_segment_, end_ - offset_, max_burst_ - in_burst_});
    DataSegment s{.buffer_offset = static_cast<std::uint32_t>(offset_),
                  .length = static_cast<std::uint32_t>(length),
                  .index = index_++};
    offset_ += length;
    in_burst_ += static_cast<std::uint32_t>(length);
    s.last = offset_ == end_;
    s.final = s.last || in_burst_ == max_burst_;
    if (s.final) in_burst_ = 0;
    return s;
  }

 private:
  std::uint64_t offset_;
  std::uint64_t end_;
  std::uint32_t max_segment_;
  std::uint32_t max_burst_;
  std::uint32_t in_burst_ = 0;
  std::uint32_t index_ = 0;
};

}  // namespace iserkit::iscsi
