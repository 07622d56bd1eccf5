// The client's bytes of an NBD conversation, written by hand (proto.md) for tests that drive the
// server over a real socket: big-endian fields, the fixed-newstyle handshake asking for the default
// export, request headers. Shared by pool_source_test.cpp and server_loops_test.cpp (two binaries).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "nbd_bridge/protocol.hpp"

namespace iserkit::nbd::test {

inline void put_be(std::vector<std::byte>& out, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
}

inline std::uint64_t get_be(const std::vector<std::byte>& in, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | std::to_integer<std::uint64_t>(in.at(at + static_cast<std::size_t>(i)));
  return v;
}

// The client's side of a fixed-newstyle handshake asking for the default export with
// NBD_OPT_EXPORT_NAME (proto.md "Option haggling"), with NO_ZEROES.
inline void put_export_name_handshake(std::vector<std::byte>& in) {
  put_be(in, 3, 4);                    // client flags: FIXED_NEWSTYLE | NO_ZEROES
  put_be(in, 0x49484156454F5054, 8);   // IHAVEOPT
  put_be(in, 1, 4);                    // NBD_OPT_EXPORT_NAME
  put_be(in, 0, 4);                    // empty name: the default export
}

// One request header (proto.md "Request message"): NBD_CMD_READ 0, WRITE 1, DISC 2.
inline void put_request(std::vector<std::byte>& in, std::uint16_t type, std::uint64_t cookie,
                        std::uint64_t offset_bytes, std::uint32_t length_bytes) {
  put_be(in, request_magic, 4);
  put_be(in, 0, 2);                    // flags
  put_be(in, type, 2);
  put_be(in, cookie, 8);
  put_be(in, offset_bytes, 8);
  put_be(in, length_bytes, 4);
}

}  // namespace iserkit::nbd::test
