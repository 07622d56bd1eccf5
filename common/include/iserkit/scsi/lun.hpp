// LUN: the 8-byte SAM logical unit number (SAM-5 §4.7) as carried in iSCSI PDUs (RFC 7143 §11.2.1.4)
// and REPORT LUNS data (SPC-5 §6.29). Single-level peripheral (LUN < 256) and flat (< 16384)
// addressing are produced; any 8-byte value is carried through unchanged.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "iserkit/common/bytes.hpp"

namespace iserkit::scsi {

/// An 8-byte SAM LUN. Compare and hash by its bytes.
class Lun {
 public:
  constexpr Lun() noexcept = default;

  /// The LUN for index `n` (0..16383): peripheral device addressing below 256, flat space above
  /// (SAM-5 §4.7.7), the forms Linux, libiscsi and tgt use.
  static constexpr Lun from_index(std::uint16_t n) noexcept {
    Lun l;
    if (n < 256) {
      l.bytes_[1] = static_cast<std::byte>(n);
    } else {
      l.bytes_[0] = static_cast<std::byte>(0x40 | ((n >> 8) & 0x3f));
      l.bytes_[1] = static_cast<std::byte>(n & 0xff);
    }
    return l;
  }
  /// The LUN as it appears in eight wire bytes at `p`.
  static Lun load(const std::byte* p) noexcept {
    Lun l;
    for (std::size_t i = 0; i < 8; ++i) l.bytes_[i] = p[i];
    return l;
  }
  /// Writes the eight wire bytes to `p`.
  void store(std::byte* p) const noexcept {
    for (std::size_t i = 0; i < 8; ++i) p[i] = bytes_[i];
  }
  /// The index for single-level peripheral or flat addressing with zero trailing levels;
  /// nullopt for any other form.
  [[nodiscard]] constexpr std::optional<std::uint16_t> index() const noexcept {
    for (std::size_t i = 2; i < 8; ++i)
      if (bytes_[i] != std::byte{0}) return std::nullopt;
    const auto b0 = static_cast<std::uint8_t>(bytes_[0]);
    const auto b1 = static_cast<std::uint8_t>(bytes_[1]);
    switch (b0 >> 6) {
      case 0: return b0 == 0 ? std::optional<std::uint16_t>(b1) : std::nullopt;  // peripheral, bus 0
      case 1: return static_cast<std::uint16_t>(((b0 & 0x3f) << 8) | b1);        // flat space
      default: return std::nullopt;
    }
  }
  /// The eight bytes as one big-endian number (for logging and hashing).
  [[nodiscard]] constexpr std::uint64_t raw() const noexcept {
    std::uint64_t v = 0;
    for (auto b : bytes_) v = (v << 8) | static_cast<std::uint8_t>(b);
    return v;
  }
  [[nodiscard]] constexpr const std::array<std::byte, 8>& bytes() const noexcept { return bytes_; }
  friend constexpr bool operator==(const Lun&, const Lun&) noexcept = default;

 private:
  std::array<std::byte, 8> bytes_{};
};

}  // namespace iserkit::scsi
