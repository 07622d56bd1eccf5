// Big-endian loads and stores over byte spans: the only way wire fields are read or written.
// iSCSI (RFC 7143 §11), SCSI CDBs (SPC-5 §4.3) and NBD (proto.md) are all big-endian on the wire.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace iserkit {

using ByteSpan = std::span<std::byte>;
using ConstByteSpan = std::span<const std::byte>;

inline constexpr std::uint8_t load_u8(const std::byte* p) noexcept { return static_cast<std::uint8_t>(p[0]); }
inline constexpr std::uint16_t load_be16(const std::byte* p) noexcept {
  return static_cast<std::uint16_t>((load_u8(p) << 8) | load_u8(p + 1));
}
inline constexpr std::uint32_t load_be24(const std::byte* p) noexcept {
  return (std::uint32_t{load_u8(p)} << 16) | (std::uint32_t{load_u8(p + 1)} << 8) | load_u8(p + 2);
}
inline constexpr std::uint32_t load_be32(const std::byte* p) noexcept {
  return (std::uint32_t{load_u8(p)} << 24) | load_be24(p + 1);
}
inline constexpr std::uint64_t load_be64(const std::byte* p) noexcept {
  return (std::uint64_t{load_be32(p)} << 32) | load_be32(p + 4);
}
inline constexpr void store_u8(std::byte* p, std::uint8_t v) noexcept { p[0] = static_cast<std::byte>(v); }
inline constexpr void store_be16(std::byte* p, std::uint16_t v) noexcept {
  store_u8(p, static_cast<std::uint8_t>(v >> 8));
  store_u8(p + 1, static_cast<std::uint8_t>(v));
}
inline constexpr void store_be24(std::byte* p, std::uint32_t v) noexcept {
  store_u8(p, static_cast<std::uint8_t>(v >> 16));
  store_be16(p + 1, static_cast<std::uint16_t>(v));
}
inline constexpr void store_be32(std::byte* p, std::uint32_t v) noexcept {
  store_be16(p, static_cast<std::uint16_t>(v >> 16));
  store_be16(p + 2, static_cast<std::uint16_t>(v));
}
inline constexpr void store_be64(std::byte* p, std::uint64_t v) noexcept {
  store_be32(p, static_cast<std::uint32_t>(v >> 32));
  store_be32(p + 4, static_cast<std::uint32_t>(v));
}

/// Views a string's characters as bytes (no copy).
inline ConstByteSpan as_bytes(std::string_view s) noexcept {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

}  // namespace iserkit
