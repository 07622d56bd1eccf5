// CRC32C (Castagnoli) for iSCSI header and data digests, computed with ISA-L (RFC 7143 §11.1,
// RFC 3720 App. B.4 for the test vectors).
#pragma once

#include <cstdint>

#include "iserkit/common/bytes.hpp"

namespace iserkit {

/// Continues a CRC32C over `data`. Start with `crc32c_init`, finish with `crc32c_final`.
std::uint32_t crc32c_update(std::uint32_t state, ConstByteSpan data) noexcept;
inline constexpr std::uint32_t crc32c_init = 0xffffffffu;
inline constexpr std::uint32_t crc32c_final(std::uint32_t state) noexcept { return state ^ 0xffffffffu; }

/// The CRC32C of `data` in one call (e.g. 32 zero bytes → 0x8A9136AA).
inline std::uint32_t crc32c(ConstByteSpan data) noexcept { return crc32c_final(crc32c_update(crc32c_init, data)); }

/// Stores a digest as iSCSI sends it: least significant byte first (RFC 3720 App. B.4:
/// CRC 0x8A9136AA is sent as aa 36 91 8a).
inline void store_digest(std::byte* p, std::uint32_t crc) noexcept {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>(crc >> (8 * i));
}
/// Loads a digest stored by store_digest.
inline std::uint32_t load_digest(const std::byte* p) noexcept {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::uint32_t{static_cast<std::uint8_t>(p[i])} << (8 * i);
  return v;
}

}  // namespace iserkit
