// Residuals for the target (RFC 7143 §11.4.5); Data-In segmentation is iscsi::DataSegmenter
// (iserkit/iscsi/data_segmenter.hpp). Sans-I/O helpers used when the target answers a command.
#pragma once

#include <cstdint>

namespace iserkit::target {

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
