// CRC32C through ISA-L's crc32_iscsi (hardware-accelerated where the CPU allows).
#include "iserkit/common/crc32c.hpp"

#include <isa-l/crc.h>

#include <climits>

namespace iserkit {

std::uint32_t crc32c_update(std::uint32_t state, ConstByteSpan data) noexcept {
  auto* p = reinterpret_cast<unsigned char*>(const_cast<std::byte*>(data.data()));
  std::size_t left = data.size();
  while (left > 0) {  // crc32_iscsi takes an int length
    const int n = left > static_cast<std::size_t>(INT_MAX / 2) ? INT_MAX / 2 : static_cast<int>(left);
    state = crc32_iscsi(p, n, state);
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return state;
}

}  // namespace iserkit
