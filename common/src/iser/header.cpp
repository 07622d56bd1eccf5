// iSER header, Hello/HelloReply and CM private data codecs (RFC 7145 §9; Linux include/scsi/iser.h).
#include "iserkit/iser/header.hpp"

#include <algorithm>

#include "iserkit/common/errors.hpp"

namespace iserkit::iser {
namespace {

constexpr std::uint8_t opcode_byte(Opcode op) noexcept { return static_cast<std::uint8_t>(static_cast<std::uint8_t>(op) << 4); }
constexpr std::uint8_t cm_flag_zbva = 0x80;
constexpr std::uint8_t cm_flag_send_with_invalidate = 0x40;

// The CM private data of a request or a reply (RFC 7145 §9.5, §9.6: the same two flag bits, "not
// supported" in the request and "not used" in the reply).
std::array<std::byte, cm_private_data_size> encode_cm_flags(bool zbva, bool send_with_invalidate) noexcept {
  std::array<std::byte, cm_private_data_size> out{};
  std::uint8_t flags = 0;
  if (zbva) flags |= cm_flag_zbva;
  if (send_with_invalidate) flags |= cm_flag_send_with_invalidate;
  store_u8(out.data(), flags);
  return out;
}

}  // namespace

void encode_header(const Header& h, std::span<std::byte, header_size> out) noexcept {
  std::fill(out.begin(), out.end(), std::byte{0});
  std::uint8_t flags = opcode_byte(Opcode::iscsi_control);
  if (h.write_valid) flags |= flag_wsv;
  if (h.read_valid) flags |= flag_rsv;
  store_u8(out.data(), flags);
  // RFC 7145 §9.2: the STag and Base Offset fields are valid only with their WSV/RSV bit.
  if (h.write_valid) {
    store_be32(out.data() + 4, h.write_stag);
    store_be64(out.data() + 8, h.write_base_offset);
  }
  if (h.read_valid) {
    store_be32(out.data() + 16, h.read_stag);
    store_be64(out.data() + 20, h.read_base_offset);
  }
}

Result<Opcode> peek_opcode(ConstByteSpan in) noexcept {
  if (in.empty()) return fail(errc::malformed_pdu);
  const std::uint8_t op = load_u8(in.data()) >> 4;
  if (op < 1 || op > 3) return fail(errc::malformed_pdu);
  return static_cast<Opcode>(op);
}

Result<Header> decode_header(ConstByteSpan in) noexcept {
  if (in.size() < header_size) return fail(errc::malformed_pdu);
  const std::uint8_t flags = load_u8(in.data());
  if ((flags >> 4) != static_cast<std::uint8_t>(Opcode::iscsi_control)) return fail(errc::malformed_pdu);
  Header h;
  h.write_valid = (flags & flag_wsv) != 0;
  h.read_valid = (flags & flag_rsv) != 0;
  if (h.write_valid) {
    h.write_stag = load_be32(in.data() + 4);
    h.write_base_offset = load_be64(in.data() + 8);
  }
  if (h.read_valid) {
    h.read_stag = load_be32(in.data() + 16);
    h.read_base_offset = load_be64(in.data() + 20);
  }
  return h;
}

void encode_hello(const Hello& h, std::span<std::byte, header_size> out) noexcept {
  std::fill(out.begin(), out.end(), std::byte{0});
  store_u8(out.data(), opcode_byte(Opcode::hello));
  store_u8(out.data() + 1, static_cast<std::uint8_t>(((h.max_version & 0x0f) << 4) | (h.min_version & 0x0f)));
  store_be16(out.data() + 2, h.ird);
}

void encode_hello_reply(const HelloReply& h, std::span<std::byte, header_size> out) noexcept {
  std::fill(out.begin(), out.end(), std::byte{0});
  store_u8(out.data(), static_cast<std::uint8_t>(opcode_byte(Opcode::hello_reply) | (h.reject ? flag_rej : 0)));
  store_u8(out.data() + 1, static_cast<std::uint8_t>(((h.max_version & 0x0f) << 4) | (h.current_version & 0x0f)));
  store_be16(out.data() + 2, h.ord);
}

Result<Hello> decode_hello(ConstByteSpan in) noexcept {
  if (in.size() < 4 || (load_u8(in.data()) >> 4) != static_cast<std::uint8_t>(Opcode::hello))
    return fail(errc::malformed_pdu);
  Hello h;
  h.max_version = load_u8(in.data() + 1) >> 4;
  h.min_version = load_u8(in.data() + 1) & 0x0f;
  h.ird = load_be16(in.data() + 2);
  if (h.max_version < h.min_version) return fail(errc::malformed_pdu);
  return h;
}

Result<HelloReply> decode_hello_reply(ConstByteSpan in) noexcept {
  if (in.size() < 4 || (load_u8(in.data()) >> 4) != static_cast<std::uint8_t>(Opcode::hello_reply))
    return fail(errc::malformed_pdu);
  HelloReply h;
  h.reject = (load_u8(in.data()) & flag_rej) != 0;
  h.max_version = load_u8(in.data() + 1) >> 4;
  h.current_version = load_u8(in.data() + 1) & 0x0f;
  h.ord = load_be16(in.data() + 2);
  return h;
}

std::array<std::byte, cm_private_data_size> encode_cm_request(const CmRequest& r) noexcept {
  return encode_cm_flags(r.zbva_not_supported, r.send_with_invalidate_not_supported);
}

std::array<std::byte, cm_private_data_size> encode_cm_reply(const CmReply& r) noexcept {
  return encode_cm_flags(r.zbva_not_used, r.send_with_invalidate_not_used);
}

std::optional<CmRequest> decode_cm_request(ConstByteSpan in) noexcept {
  if (in.size() < cm_private_data_size) return std::nullopt;
  const std::uint8_t flags = load_u8(in.data());
  return CmRequest{.zbva_not_supported = (flags & cm_flag_zbva) != 0,
                   .send_with_invalidate_not_supported = (flags & cm_flag_send_with_invalidate) != 0};
}

std::optional<CmReply> decode_cm_reply(ConstByteSpan in) noexcept {
  if (in.size() < cm_private_data_size) return std::nullopt;
  const std::uint8_t flags = load_u8(in.data());
  return CmReply{.zbva_not_used = (flags & cm_flag_zbva) != 0,
                 .send_with_invalidate_not_used = (flags & cm_flag_send_with_invalidate) != 0};
}

}  // namespace iserkit::iser
