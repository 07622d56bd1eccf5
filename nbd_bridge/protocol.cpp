// NBD wire codec (layer 1): implementation of protocol.hpp. Every field is read and written with the
// explicit big-endian helpers from iserkit/common/bytes.hpp; there are no packed structs.
// Spec: NBD proto.md "Newstyle negotiation", "Fixed newstyle negotiation", "Option types",
// "Option reply types", "Request message", "Simple reply message", "Structured reply types".
#include "nbd_bridge/protocol.hpp"

#include <algorithm>
#include <cstring>

#include "iserkit/common/errors.hpp"

namespace iserkit::nbd {
namespace {

std::byte* put_bytes(std::byte* p, ConstByteSpan bytes) noexcept {
  if (!bytes.empty()) std::memcpy(p, bytes.data(), bytes.size());
  return p + bytes.size();
}

}  // namespace

std::string_view name_of(Option option) noexcept {
  switch (option) {
    case Option::export_name: return "NBD_OPT_EXPORT_NAME";
    case Option::abort: return "NBD_OPT_ABORT";
    case Option::list: return "NBD_OPT_LIST";
    case Option::peek_export: return "NBD_OPT_PEEK_EXPORT";
    case Option::starttls: return "NBD_OPT_STARTTLS";
    case Option::info: return "NBD_OPT_INFO";
    case Option::go: return "NBD_OPT_GO";
    case Option::structured_reply: return "NBD_OPT_STRUCTURED_REPLY";
    case Option::list_meta_context: return "NBD_OPT_LIST_META_CONTEXT";
    case Option::set_meta_context: return "NBD_OPT_SET_META_CONTEXT";
    case Option::extended_headers: return "NBD_OPT_EXTENDED_HEADERS";
  }
  return "unknown";
}

std::string_view name_of(Command command) noexcept {
  switch (command) {
    case Command::read: return "NBD_CMD_READ";
    case Command::write: return "NBD_CMD_WRITE";
    case Command::disc: return "NBD_CMD_DISC";
    case Command::flush: return "NBD_CMD_FLUSH";
    case Command::trim: return "NBD_CMD_TRIM";
    case Command::cache: return "NBD_CMD_CACHE";
    case Command::write_zeroes: return "NBD_CMD_WRITE_ZEROES";
    case Command::block_status: return "NBD_CMD_BLOCK_STATUS";
  }
  return "unknown";
}

std::string_view name_of(OptionReply reply) noexcept {
  switch (reply) {
    case OptionReply::ack: return "NBD_REP_ACK";
    case OptionReply::server: return "NBD_REP_SERVER";
    case OptionReply::info: return "NBD_REP_INFO";
    case OptionReply::meta_context: return "NBD_REP_META_CONTEXT";
    case OptionReply::err_unsup: return "NBD_REP_ERR_UNSUP";
    case OptionReply::err_policy: return "NBD_REP_ERR_POLICY";
    case OptionReply::err_invalid: return "NBD_REP_ERR_INVALID";
    case OptionReply::err_platform: return "NBD_REP_ERR_PLATFORM";
    case OptionReply::err_tls_reqd: return "NBD_REP_ERR_TLS_REQD";
    case OptionReply::err_unknown: return "NBD_REP_ERR_UNKNOWN";
    case OptionReply::err_shutdown: return "NBD_REP_ERR_SHUTDOWN";
    case OptionReply::err_block_size_reqd: return "NBD_REP_ERR_BLOCK_SIZE_REQD";
    case OptionReply::err_too_big: return "NBD_REP_ERR_TOO_BIG";
  }
  return "unknown";
}

// ---- Handshake ----

void encode_greeting(std::span<std::byte, greeting_size> out, std::uint16_t handshake_flags) noexcept {
  store_be64(out.data(), nbd_magic);
  store_be64(out.data() + 8, ihaveopt_magic);
  store_be16(out.data() + 16, handshake_flags);
}

Result<std::uint16_t> decode_greeting(ConstByteSpan in) noexcept {
  if (in.size() < greeting_size) return fail(errc::nbd_protocol_error);
  if (load_be64(in.data()) != nbd_magic) return fail(errc::nbd_protocol_error);
  // proto.md "Oldstyle negotiation": cliserv_magic here means an oldstyle server, which we refuse.
  if (load_be64(in.data() + 8) != ihaveopt_magic) return fail(errc::nbd_protocol_error);
  return load_be16(in.data() + 16);
}

void encode_client_flags(std::span<std::byte, client_flags_size> out, std::uint32_t flags) noexcept {
  store_be32(out.data(), flags);
}

std::uint32_t decode_client_flags(std::span<const std::byte, client_flags_size> in) noexcept {
  return load_be32(in.data());
}

void encode_option_header(std::span<std::byte, option_header_size> out, const OptionHeader& header) noexcept {
  store_be64(out.data(), ihaveopt_magic);
  store_be32(out.data() + 8, header.option);
  store_be32(out.data() + 12, header.length_bytes);
}

Result<OptionHeader> decode_option_header(std::span<const std::byte, option_header_size> in) noexcept {
  if (load_be64(in.data()) != ihaveopt_magic) return fail(errc::nbd_protocol_error);
  return OptionHeader{.option = load_be32(in.data() + 8), .length_bytes = load_be32(in.data() + 12)};
}

void encode_option_reply_header(std::span<std::byte, option_reply_header_size> out,
                                const OptionReplyHeader& header) noexcept {
  store_be64(out.data(), option_reply_magic);
  store_be32(out.data() + 8, header.option);
  store_be32(out.data() + 12, static_cast<std::uint32_t>(header.reply_type));
  store_be32(out.data() + 16, header.length_bytes);
}

Result<OptionReplyHeader> decode_option_reply_header(
    std::span<const std::byte, option_reply_header_size> in) noexcept {
  if (load_be64(in.data()) != option_reply_magic) return fail(errc::nbd_protocol_error);
  return OptionReplyHeader{.option = load_be32(in.data() + 8),
                           .reply_type = static_cast<OptionReply>(load_be32(in.data() + 12)),
                           .length_bytes = load_be32(in.data() + 16)};
}

std::vector<std::byte> encode_info_request(std::string_view name, std::span<const std::uint16_t> info_requests) {
  std::vector<std::byte> out(4 + name.size() + 2 + 2 * info_requests.size());
  std::byte* p = out.data();
  store_be32(p, static_cast<std::uint32_t>(name.size()));
  p = put_bytes(p + 4, as_bytes(name));
  store_be16(p, static_cast<std::uint16_t>(info_requests.size()));
  p += 2;
  for (std::uint16_t request : info_requests) {
    store_be16(p, request);
    p += 2;
  }
  return out;
}

Result<InfoRequest> decode_info_request(ConstByteSpan in) {
  // proto.md NBD_OPT_INFO: "32 bits, length of name; MUST be no larger than the option data length - 6".
  if (in.size() < 6) return fail(errc::nbd_protocol_error);
  const std::uint32_t name_bytes = load_be32(in.data());
  if (name_bytes > in.size() - 6) return fail(errc::nbd_protocol_error);
  InfoRequest request;
  request.name = std::string_view(reinterpret_cast<const char*>(in.data() + 4), name_bytes);
  const std::byte* p = in.data() + 4 + name_bytes;
  const std::uint16_t count = load_be16(p);
  p += 2;
  // The request list must fill the rest of the option data exactly.
  if (static_cast<std::size_t>(in.data() + in.size() - p) != std::size_t{count} * 2) {
    return fail(errc::nbd_protocol_error);
  }
  request.info_requests.reserve(count);
  for (std::uint16_t i = 0; i < count; ++i, p += 2) request.info_requests.push_back(load_be16(p));
  return request;
}

std::size_t encode_export_name_reply(ByteSpan out, std::uint64_t size_bytes, std::uint16_t transmission_flags,
                                     bool no_zeroes) noexcept {
  const std::size_t total = export_name_reply_size + (no_zeroes ? 0 : export_name_zeroes_size);
  if (out.size() < total) return 0;
  store_be64(out.data(), size_bytes);
  store_be16(out.data() + 8, transmission_flags);
  std::fill(out.begin() + export_name_reply_size, out.begin() + static_cast<std::ptrdiff_t>(total), std::byte{0});
  return total;
}

std::array<std::byte, 12> encode_info_export(std::uint64_t size_bytes, std::uint16_t transmission_flags) noexcept {
  std::array<std::byte, 12> out{};
  store_be16(out.data(), static_cast<std::uint16_t>(Info::export_info));
  store_be64(out.data() + 2, size_bytes);
  store_be16(out.data() + 10, transmission_flags);
  return out;
}

std::vector<std::byte> encode_info_string(Info type, std::string_view text) {
  std::vector<std::byte> out(2 + text.size());
  store_be16(out.data(), static_cast<std::uint16_t>(type));
  put_bytes(out.data() + 2, as_bytes(text));
  return out;
}

std::array<std::byte, 14> encode_info_block_size(const BlockSize& sizes) noexcept {
  std::array<std::byte, 14> out{};
  store_be16(out.data(), static_cast<std::uint16_t>(Info::block_size));
  store_be32(out.data() + 2, sizes.minimum_bytes);
  store_be32(out.data() + 6, sizes.preferred_bytes);
  store_be32(out.data() + 10, sizes.maximum_payload_bytes);
  return out;
}

Result<InfoReply> decode_info_reply(ConstByteSpan in) {
  if (in.size() < 2) return fail(errc::nbd_protocol_error);
  InfoReply reply;
  reply.type = static_cast<Info>(load_be16(in.data()));
  switch (reply.type) {
    case Info::export_info:
      if (in.size() != 12) return fail(errc::nbd_protocol_error);
      reply.size_bytes = load_be64(in.data() + 2);
      reply.transmission_flags = load_be16(in.data() + 10);
      break;
    case Info::block_size:
      if (in.size() != 14) return fail(errc::nbd_protocol_error);
      reply.block_size = {.minimum_bytes = load_be32(in.data() + 2),
                          .preferred_bytes = load_be32(in.data() + 6),
                          .maximum_payload_bytes = load_be32(in.data() + 10)};
      break;
    case Info::name:
    case Info::description:
    default:
      reply.text.assign(reinterpret_cast<const char*>(in.data() + 2), in.size() - 2);
      break;
  }
  return reply;
}

std::vector<std::byte> encode_rep_server(std::string_view name, std::string_view description) {
  std::vector<std::byte> out(4 + name.size() + description.size());
  store_be32(out.data(), static_cast<std::uint32_t>(name.size()));
  std::byte* p = put_bytes(out.data() + 4, as_bytes(name));
  put_bytes(p, as_bytes(description));
  return out;
}

// ---- Transmission ----

void encode_request_header(std::span<std::byte, request_header_size> out, const RequestHeader& header) noexcept {
  store_be32(out.data(), request_magic);
  store_be16(out.data() + 4, header.flags);
  store_be16(out.data() + 6, header.type);
  store_be64(out.data() + 8, header.cookie);
  store_be64(out.data() + 16, header.offset_bytes);
  store_be32(out.data() + 24, header.length_bytes);
}

Result<RequestHeader> decode_request_header(std::span<const std::byte, request_header_size> in) noexcept {
  if (load_be32(in.data()) != request_magic) return fail(errc::nbd_protocol_error);
  return RequestHeader{.flags = load_be16(in.data() + 4),
                       .type = load_be16(in.data() + 6),
                       .cookie = load_be64(in.data() + 8),
                       .offset_bytes = load_be64(in.data() + 16),
                       .length_bytes = load_be32(in.data() + 24)};
}

void encode_simple_reply(std::span<std::byte, simple_reply_size> out, const SimpleReply& reply) noexcept {
  store_be32(out.data(), simple_reply_magic);
  store_be32(out.data() + 4, static_cast<std::uint32_t>(reply.error));
  store_be64(out.data() + 8, reply.cookie);
}

Result<SimpleReply> decode_simple_reply(std::span<const std::byte, simple_reply_size> in) noexcept {
  if (load_be32(in.data()) != simple_reply_magic) return fail(errc::nbd_protocol_error);
  return SimpleReply{.error = static_cast<NbdError>(load_be32(in.data() + 4)), .cookie = load_be64(in.data() + 8)};
}

void encode_chunk_header(std::span<std::byte, chunk_header_size> out, const ChunkHeader& header) noexcept {
  store_be32(out.data(), structured_reply_magic);
  store_be16(out.data() + 4, header.flags);
  store_be16(out.data() + 6, static_cast<std::uint16_t>(header.type));
  store_be64(out.data() + 8, header.cookie);
  store_be32(out.data() + 16, header.length_bytes);
}

Result<ChunkHeader> decode_chunk_header(std::span<const std::byte, chunk_header_size> in) noexcept {
  if (load_be32(in.data()) != structured_reply_magic) return fail(errc::nbd_protocol_error);
  return ChunkHeader{.flags = load_be16(in.data() + 4),
                     .type = static_cast<ChunkType>(load_be16(in.data() + 6)),
                     .cookie = load_be64(in.data() + 8),
                     .length_bytes = load_be32(in.data() + 16)};
}

void encode_offset_data_header(std::span<std::byte, offset_data_header_size> out, std::uint64_t cookie,
                               std::uint16_t flags, std::uint64_t offset_bytes, std::uint32_t data_bytes) noexcept {
  encode_chunk_header(out.first<chunk_header_size>(), {.flags = flags,
                                                       .type = ChunkType::offset_data,
                                                       .cookie = cookie,
                                                       .length_bytes = data_bytes + 8});
  store_be64(out.data() + chunk_header_size, offset_bytes);
}

void encode_error_chunk_header(std::span<std::byte, error_chunk_fixed_size> out, std::uint64_t cookie,
                               std::uint16_t flags, NbdError error, std::uint16_t message_bytes) noexcept {
  encode_chunk_header(out.first<chunk_header_size>(), {.flags = flags,
                                                       .type = ChunkType::error,
                                                       .cookie = cookie,
                                                       .length_bytes = 6u + message_bytes});
  store_be32(out.data() + chunk_header_size, static_cast<std::uint32_t>(error));
  store_be16(out.data() + chunk_header_size + 4, message_bytes);
}

std::vector<std::byte> encode_error_offset_chunk(std::uint64_t cookie, std::uint16_t flags, NbdError error,
                                                 std::string_view message, std::uint64_t offset_bytes) {
  message = message.substr(0, max_string_bytes);
  std::vector<std::byte> out(chunk_header_size + 6 + message.size() + 8);
  encode_chunk_header(std::span<std::byte, chunk_header_size>(out.data(), chunk_header_size),
                      {.flags = flags,
                       .type = ChunkType::error_offset,
                       .cookie = cookie,
                       .length_bytes = static_cast<std::uint32_t>(6 + message.size() + 8)});
  std::byte* p = out.data() + chunk_header_size;
  store_be32(p, static_cast<std::uint32_t>(error));
  store_be16(p + 4, static_cast<std::uint16_t>(message.size()));
  p = put_bytes(p + 6, as_bytes(message));
  store_be64(p, offset_bytes);
  return out;
}

Result<ErrorChunk> decode_error_chunk(ChunkType type, ConstByteSpan payload) {
  const std::size_t trailer = type == ChunkType::error_offset ? 8 : 0;
  if (!is_error(type) || payload.size() < 6 + trailer) return fail(errc::nbd_protocol_error);
  ErrorChunk chunk;
  chunk.error = static_cast<NbdError>(load_be32(payload.data()));
  // proto.md NBD_REPLY_TYPE_ERROR: "error (MUST be nonzero)"; message length ≤ header length - 6.
  if (chunk.error == NbdError::ok) return fail(errc::nbd_protocol_error);
  const std::uint16_t message_bytes = load_be16(payload.data() + 4);
  if (message_bytes > payload.size() - 6 - trailer) return fail(errc::nbd_protocol_error);
  chunk.message.assign(reinterpret_cast<const char*>(payload.data() + 6), message_bytes);
  if (type == ChunkType::error_offset) chunk.offset_bytes = load_be64(payload.data() + 6 + message_bytes);
  return chunk;
}

}  // namespace iserkit::nbd
