// Shared helpers of the libFuzzer targets (tests/fuzz, docs/fuzzing.md): a reader that splits the
// fuzzer's bytes into fields and records, and FUZZ_CHECK, an invariant check that aborts (libFuzzer
// and the GCC replay driver both report an abort as a crash with the input that caused it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string_view>

/// Aborts with the failed condition when an invariant of a decoder does not hold.
#define FUZZ_CHECK(cond)                                                                  \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)

namespace iserkit::fuzz {

/// Consumes the fuzzer's input front to back. Reads past the end yield zeros / empty spans, so a
/// target never needs to check sizes before asking.
class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t size) noexcept
      : bytes_(reinterpret_cast<const std::byte*>(data), size) {}

  [[nodiscard]] bool empty() const noexcept { return bytes_.empty(); }
  [[nodiscard]] std::size_t remaining() const noexcept { return bytes_.size(); }

  /// One byte (0 at the end).
  std::uint8_t u8() noexcept {
    if (bytes_.empty()) return 0;
    auto v = static_cast<std::uint8_t>(bytes_[0]);
    bytes_ = bytes_.subspan(1);
    return v;
  }
  /// Two bytes, big-endian.
  std::uint16_t u16() noexcept { return static_cast<std::uint16_t>(u8() << 8 | u8()); }

  /// Up to `n` bytes (fewer at the end).
  std::span<const std::byte> bytes(std::size_t n) noexcept {
    n = n < bytes_.size() ? n : bytes_.size();
    auto out = bytes_.first(n);
    bytes_ = bytes_.subspan(n);
    return out;
  }
  /// A record: a 16-bit big-endian length, then that many bytes (fewer at the end).
  std::span<const std::byte> record() noexcept { return bytes(u16()); }
  /// Everything left.
  std::span<const std::byte> rest() noexcept { return bytes(bytes_.size()); }

 private:
  std::span<const std::byte> bytes_;
};

/// The bytes of `s` as text.
inline std::string_view as_text(std::span<const std::byte> s) noexcept {
  return {reinterpret_cast<const char*>(s.data()), s.size()};
}

}  // namespace iserkit::fuzz
