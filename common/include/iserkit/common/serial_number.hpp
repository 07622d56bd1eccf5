// RFC 1982 serial number arithmetic, SERIAL_BITS = 32, used for CmdSN, ExpCmdSN, MaxCmdSN, StatSN and
// ExpStatSN (RFC 7143 §4.2.2.1). Never compare such numbers with the built-in '<'.
#pragma once

#include <compare>
#include <cstdint>

namespace iserkit {

/// A 32-bit sequence number compared per RFC 1982 §3.2. Two numbers exactly 2^31 apart are
/// undefined per the RFC: here neither is less than the other (both '<' and '>' are false).
class SerialNumber {
 public:
  constexpr SerialNumber() noexcept = default;
  constexpr explicit SerialNumber(std::uint32_t v) noexcept : value_(v) {}

  /// The raw value as carried on the wire.
  [[nodiscard]] constexpr std::uint32_t value() const noexcept { return value_; }

  /// RFC 1982 §3.1 addition: n may be at most 2^31 - 1.
  constexpr SerialNumber operator+(std::uint32_t n) const noexcept { return SerialNumber(value_ + n); }
  constexpr SerialNumber& operator+=(std::uint32_t n) noexcept { value_ += n; return *this; }
  constexpr SerialNumber& operator++() noexcept { ++value_; return *this; }

  /// Distance from `other` forward to this number, modulo 2^32 (how many increments it takes).
  [[nodiscard]] constexpr std::uint32_t distance_from(SerialNumber other) const noexcept {
    return value_ - other.value_;
  }

  friend constexpr bool operator==(SerialNumber a, SerialNumber b) noexcept = default;
  friend constexpr bool operator<(SerialNumber a, SerialNumber b) noexcept {
    // RFC 1982 §3.2: i1 < i2 iff (i1 < i2 and i2 - i1 < 2^31) or (i1 > i2 and i1 - i2 > 2^31).
    return (a.value_ < b.value_ && b.value_ - a.value_ < 0x80000000u) ||
           (a.value_ > b.value_ && a.value_ - b.value_ > 0x80000000u);
  }
  friend constexpr bool operator>(SerialNumber a, SerialNumber b) noexcept { return b < a; }
  friend constexpr bool operator<=(SerialNumber a, SerialNumber b) noexcept { return a == b || a < b; }
  friend constexpr bool operator>=(SerialNumber a, SerialNumber b) noexcept { return a == b || b < a; }

 private:
  std::uint32_t value_ = 0;
};

}  // namespace iserkit
