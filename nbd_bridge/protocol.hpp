// NBD wire codec (layer 1): magic numbers, flag and type constants, and pure encode/decode functions
// for the fixed-newstyle handshake, option requests and replies, the transmission request header,
// simple replies and structured reply chunks. No I/O; every function works on caller-owned bytes.
//
// Spec: NBD proto.md (github.com/NetworkBlockDevice/nbd doc/proto.md), sections "Newstyle
// negotiation", "Fixed newstyle negotiation", "Request message", "Simple reply message",
// "Structured reply chunk message", "Values" (handshake, client and transmission flags, option types,
// option reply types, command flags, structured reply types, error values).
// All integers on the wire are big-endian (proto.md "Conventions").
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "iserkit/common/bytes.hpp"
#include "iserkit/common/result.hpp"

namespace iserkit::nbd {

// ---- Magic numbers (proto.md "Newstyle negotiation", "Request message", "Simple reply message") ----

inline constexpr std::uint64_t nbd_magic = 0x4e42444d41474943;           ///< "NBDMAGIC" (INIT_PASSWD)
inline constexpr std::uint64_t ihaveopt_magic = 0x49484156454F5054;      ///< "IHAVEOPT": newstyle, and each option
inline constexpr std::uint64_t oldstyle_magic = 0x00420281861253;        ///< cliserv_magic (oldstyle; never sent)
inline constexpr std::uint64_t option_reply_magic = 0x3e889045565a9;     ///< fixed-newstyle option replies
inline constexpr std::uint32_t request_magic = 0x25609513;               ///< NBD_REQUEST_MAGIC
inline constexpr std::uint32_t simple_reply_magic = 0x67446698;          ///< NBD_SIMPLE_REPLY_MAGIC
inline constexpr std::uint32_t structured_reply_magic = 0x668e33ef;      ///< NBD_STRUCTURED_REPLY_MAGIC

// ---- Sizes of fixed-length messages, in bytes ----

inline constexpr std::size_t greeting_size = 18;             ///< NBDMAGIC + IHAVEOPT + 16-bit handshake flags
inline constexpr std::size_t client_flags_size = 4;          ///< 32-bit client flags
inline constexpr std::size_t option_header_size = 16;        ///< IHAVEOPT + option + length
inline constexpr std::size_t option_reply_header_size = 20;  ///< magic + option + reply type + length
inline constexpr std::size_t export_name_reply_size = 10;    ///< size + transmission flags (without zeroes)
inline constexpr std::size_t export_name_zeroes_size = 124;  ///< reserved zeroes unless NO_ZEROES
inline constexpr std::size_t request_header_size = 28;       ///< the transmission request header
inline constexpr std::size_t simple_reply_size = 16;         ///< magic + error + cookie
inline constexpr std::size_t chunk_header_size = 20;         ///< structured reply chunk header
inline constexpr std::size_t offset_data_header_size = chunk_header_size + 8;  ///< chunk header + offset
inline constexpr std::size_t error_chunk_fixed_size = chunk_header_size + 6;   ///< chunk header + error + msg length
inline constexpr std::size_t max_string_bytes = 4096;        ///< proto.md "Conventions": strings ≤ 4096 bytes

// ---- Handshake flags (server, 16 bits) and client flags (32 bits): proto.md "Handshake flags" ----

namespace handshake_flag {
inline constexpr std::uint16_t fixed_newstyle = 1u << 0;  ///< NBD_FLAG_FIXED_NEWSTYLE
inline constexpr std::uint16_t no_zeroes = 1u << 1;       ///< NBD_FLAG_NO_ZEROES
}  // namespace handshake_flag

namespace client_flag {
inline constexpr std::uint32_t fixed_newstyle = 1u << 0;  ///< NBD_FLAG_C_FIXED_NEWSTYLE
inline constexpr std::uint32_t no_zeroes = 1u << 1;       ///< NBD_FLAG_C_NO_ZEROES
inline constexpr std::uint32_t known = fixed_newstyle | no_zeroes;
}  // namespace client_flag

// ---- Transmission flags (16 bits): proto.md "Transmission flags" ----

namespace transmission_flag {
inline constexpr std::uint16_t has_flags = 1u << 0;          ///< NBD_FLAG_HAS_FLAGS: MUST always be 1
inline constexpr std::uint16_t read_only = 1u << 1;          ///< NBD_FLAG_READ_ONLY
inline constexpr std::uint16_t send_flush = 1u << 2;         ///< NBD_FLAG_SEND_FLUSH
inline constexpr std::uint16_t send_fua = 1u << 3;           ///< NBD_FLAG_SEND_FUA
inline constexpr std::uint16_t rotational = 1u << 4;         ///< NBD_FLAG_ROTATIONAL
inline constexpr std::uint16_t send_trim = 1u << 5;          ///< NBD_FLAG_SEND_TRIM
inline constexpr std::uint16_t send_write_zeroes = 1u << 6;  ///< NBD_FLAG_SEND_WRITE_ZEROES
inline constexpr std::uint16_t send_df = 1u << 7;            ///< NBD_FLAG_SEND_DF
inline constexpr std::uint16_t can_multi_conn = 1u << 8;     ///< NBD_FLAG_CAN_MULTI_CONN
inline constexpr std::uint16_t send_resize = 1u << 9;        ///< NBD_FLAG_SEND_RESIZE
inline constexpr std::uint16_t send_cache = 1u << 10;        ///< NBD_FLAG_SEND_CACHE
inline constexpr std::uint16_t send_fast_zero = 1u << 11;    ///< NBD_FLAG_SEND_FAST_ZERO
}  // namespace transmission_flag

// ---- Option types: proto.md "Option types" ----

/// NBD_OPT_* values sent by the client during option haggling.
enum class Option : std::uint32_t {
  export_name = 1,
  abort = 2,
  list = 3,
  peek_export = 4,
  starttls = 5,
  info = 6,
  go = 7,
  structured_reply = 8,
  list_meta_context = 9,
  set_meta_context = 10,
  extended_headers = 11,
};

/// NBD_REP_* values in option replies. Errors have bit 31 set (proto.md "Option reply types").
enum class OptionReply : std::uint32_t {
  ack = 1,
  server = 2,
  info = 3,
  meta_context = 4,
  err_unsup = 0x80000001,
  err_policy = 0x80000002,
  err_invalid = 0x80000003,
  err_platform = 0x80000004,
  err_tls_reqd = 0x80000005,
  err_unknown = 0x80000006,
  err_shutdown = 0x80000007,
  err_block_size_reqd = 0x80000008,
  err_too_big = 0x80000009,
};

/// True for the NBD_REP_ERR_* reply types (bit 31 set).
constexpr bool is_error(OptionReply reply) noexcept { return (static_cast<std::uint32_t>(reply) & 0x80000000u) != 0; }

/// NBD_INFO_* information types in NBD_REP_INFO replies and NBD_OPT_INFO/GO requests.
enum class Info : std::uint16_t {
  export_info = 0,  ///< NBD_INFO_EXPORT: size + transmission flags
  name = 1,         ///< NBD_INFO_NAME
  description = 2,  ///< NBD_INFO_DESCRIPTION
  block_size = 3,   ///< NBD_INFO_BLOCK_SIZE
};

// ---- Transmission phase: proto.md "Request types", "Command flags", "Structured reply types" ----

/// NBD_CMD_* request types.
enum class Command : std::uint16_t {
  read = 0,
  write = 1,
  disc = 2,
  flush = 3,
  trim = 4,
  cache = 5,
  write_zeroes = 6,
  block_status = 7,
};

namespace command_flag {
inline constexpr std::uint16_t fua = 1u << 0;        ///< NBD_CMD_FLAG_FUA
inline constexpr std::uint16_t no_hole = 1u << 1;    ///< NBD_CMD_FLAG_NO_HOLE (WRITE_ZEROES only)
inline constexpr std::uint16_t df = 1u << 2;         ///< NBD_CMD_FLAG_DF (READ, structured replies only)
inline constexpr std::uint16_t req_one = 1u << 3;    ///< NBD_CMD_FLAG_REQ_ONE (BLOCK_STATUS only)
inline constexpr std::uint16_t fast_zero = 1u << 4;  ///< NBD_CMD_FLAG_FAST_ZERO (WRITE_ZEROES only)
}  // namespace command_flag

namespace reply_flag {
inline constexpr std::uint16_t done = 1u << 0;  ///< NBD_REPLY_FLAG_DONE: the final chunk of a reply
}

/// NBD_REPLY_TYPE_* structured reply chunk types. Error chunks have bit 15 set.
enum class ChunkType : std::uint16_t {
  none = 0,
  offset_data = 1,
  offset_hole = 2,
  block_status = 5,
  error = 0x8001,
  error_offset = 0x8002,
};

/// True for error chunk types (bit 15 set; proto.md "Structured reply types").
constexpr bool is_error(ChunkType type) noexcept { return (static_cast<std::uint16_t>(type) & 0x8000u) != 0; }

/// NBD_E* error values carried in replies (proto.md "Error values").
enum class NbdError : std::uint32_t {
  ok = 0,
  perm = 1,
  io = 5,
  nomem = 12,
  inval = 22,
  nospc = 28,
  overflow = 75,
  notsup = 95,
  shutdown = 108,
};

/// A short printable name: "NBD_OPT_GO", "NBD_CMD_READ", "NBD_REP_ERR_UNSUP", … ("unknown" otherwise).
std::string_view name_of(Option option) noexcept;
std::string_view name_of(Command command) noexcept;
std::string_view name_of(OptionReply reply) noexcept;

// ---- Handshake ----

/// Writes the 18-byte newstyle greeting: NBDMAGIC, IHAVEOPT, then `handshake_flags`.
/// Spec: proto.md "Newstyle negotiation".
void encode_greeting(std::span<std::byte, greeting_size> out, std::uint16_t handshake_flags) noexcept;

/// Parses a newstyle greeting and returns its handshake flags.
/// Returns errc::nbd_protocol_error for a short buffer, a wrong magic or an oldstyle server.
Result<std::uint16_t> decode_greeting(ConstByteSpan in) noexcept;

/// Writes the 32-bit client flags that follow the greeting.
void encode_client_flags(std::span<std::byte, client_flags_size> out, std::uint32_t flags) noexcept;
/// Reads the 32-bit client flags. `in` must hold at least 4 bytes.
std::uint32_t decode_client_flags(std::span<const std::byte, client_flags_size> in) noexcept;

/// The fixed part of an option request (proto.md "Newstyle negotiation": IHAVEOPT, option, length).
struct OptionHeader {
  std::uint32_t option = 0;        ///< an Option value; unknown values are kept as sent
  std::uint32_t length_bytes = 0;  ///< length of the option data that follows
};

/// Writes the 16-byte option header (IHAVEOPT magic first).
void encode_option_header(std::span<std::byte, option_header_size> out, const OptionHeader& header) noexcept;
/// Parses an option header. Returns errc::nbd_protocol_error when the magic is not IHAVEOPT.
Result<OptionHeader> decode_option_header(std::span<const std::byte, option_header_size> in) noexcept;

/// The fixed part of an option reply (proto.md "Fixed newstyle negotiation").
struct OptionReplyHeader {
  std::uint32_t option = 0;        ///< the option this answers, as the client sent it
  OptionReply reply_type = OptionReply::ack;
  std::uint32_t length_bytes = 0;  ///< length of the reply data that follows
};

/// Writes the 20-byte option reply header.
void encode_option_reply_header(std::span<std::byte, option_reply_header_size> out,
                                const OptionReplyHeader& header) noexcept;
/// Parses an option reply header. Returns errc::nbd_protocol_error on a wrong magic.
Result<OptionReplyHeader> decode_option_reply_header(std::span<const std::byte, option_reply_header_size> in) noexcept;

/// The data of NBD_OPT_INFO and NBD_OPT_GO (proto.md "Option types", NBD_OPT_INFO): a name and a
/// list of NBD_INFO_* requests (unknown values kept as sent). `name` views the decoded input.
struct InfoRequest {
  std::string_view name;
  std::vector<std::uint16_t> info_requests;
};

/// Encodes NBD_OPT_INFO/GO option data (without the option header).
std::vector<std::byte> encode_info_request(std::string_view name, std::span<const std::uint16_t> info_requests);
/// Parses NBD_OPT_INFO/GO option data. Returns errc::nbd_protocol_error (answer NBD_REP_ERR_INVALID)
/// when the name length exceeds the data length - 6, or the request count does not match the
/// remaining bytes exactly. The result views `in`.
Result<InfoRequest> decode_info_request(ConstByteSpan in);

/// Writes the reply to NBD_OPT_EXPORT_NAME: size, transmission flags, and 124 zero bytes unless
/// `no_zeroes` (client sent NBD_FLAG_C_NO_ZEROES). `out` must hold 134 bytes (10 with no_zeroes).
/// Returns the number of bytes written.
std::size_t encode_export_name_reply(ByteSpan out, std::uint64_t size_bytes, std::uint16_t transmission_flags,
                                     bool no_zeroes) noexcept;

/// Payload of NBD_REP_INFO / NBD_INFO_EXPORT: 12 bytes (type, size in bytes, transmission flags).
std::array<std::byte, 12> encode_info_export(std::uint64_t size_bytes, std::uint16_t transmission_flags) noexcept;
/// Payload of NBD_REP_INFO / NBD_INFO_NAME or NBD_INFO_DESCRIPTION: type then the string.
std::vector<std::byte> encode_info_string(Info type, std::string_view text);

/// NBD_INFO_BLOCK_SIZE values, in bytes (proto.md "Size constraints").
struct BlockSize {
  std::uint32_t minimum_bytes = 1;
  std::uint32_t preferred_bytes = 4096;
  std::uint32_t maximum_payload_bytes = 32u << 20;
};

/// Payload of NBD_REP_INFO / NBD_INFO_BLOCK_SIZE: 14 bytes.
std::array<std::byte, 14> encode_info_block_size(const BlockSize& sizes) noexcept;

/// A decoded NBD_REP_INFO payload (client side and tests).
struct InfoReply {
  Info type = Info::export_info;   ///< may hold an unknown value as sent
  std::uint64_t size_bytes = 0;    ///< NBD_INFO_EXPORT
  std::uint16_t transmission_flags = 0;  ///< NBD_INFO_EXPORT
  std::string text;                ///< NBD_INFO_NAME / NBD_INFO_DESCRIPTION
  BlockSize block_size;            ///< NBD_INFO_BLOCK_SIZE
};
/// Parses an NBD_REP_INFO payload. Returns errc::nbd_protocol_error when the length does not match
/// its type (12 for EXPORT, 14 for BLOCK_SIZE, ≥ 2 otherwise).
Result<InfoReply> decode_info_reply(ConstByteSpan in);

/// Payload of NBD_REP_SERVER: 32-bit name length, the name, then an optional description.
std::vector<std::byte> encode_rep_server(std::string_view name, std::string_view description);

// ---- Transmission ----

/// The 28-byte request header (proto.md "Request message"). `type` keeps unknown commands as sent.
struct RequestHeader {
  std::uint16_t flags = 0;         ///< command_flag bits
  std::uint16_t type = 0;          ///< a Command value
  std::uint64_t cookie = 0;        ///< opaque; echoed in the reply
  std::uint64_t offset_bytes = 0;
  std::uint32_t length_bytes = 0;  ///< for WRITE, the payload that follows
};

/// Writes a request header.
void encode_request_header(std::span<std::byte, request_header_size> out, const RequestHeader& header) noexcept;
/// Parses a request header. Returns errc::nbd_protocol_error when the magic is not NBD_REQUEST_MAGIC
/// (the connection has lost framing: proto.md lets the server hard-disconnect).
Result<RequestHeader> decode_request_header(std::span<const std::byte, request_header_size> in) noexcept;

/// A simple reply (proto.md "Simple reply message"); READ data, if any, follows on the wire.
struct SimpleReply {
  NbdError error = NbdError::ok;   ///< may hold a value outside the enum, as sent
  std::uint64_t cookie = 0;
};

/// Writes a 16-byte simple reply.
void encode_simple_reply(std::span<std::byte, simple_reply_size> out, const SimpleReply& reply) noexcept;
/// Parses a simple reply. Returns errc::nbd_protocol_error on a wrong magic.
Result<SimpleReply> decode_simple_reply(std::span<const std::byte, simple_reply_size> in) noexcept;

/// The 20-byte structured reply chunk header (proto.md "Structured reply chunk message").
struct ChunkHeader {
  std::uint16_t flags = 0;          ///< reply_flag bits
  ChunkType type = ChunkType::none; ///< may hold an unknown value, as sent
  std::uint64_t cookie = 0;
  std::uint32_t length_bytes = 0;   ///< payload length following the header
};

/// Writes a chunk header.
void encode_chunk_header(std::span<std::byte, chunk_header_size> out, const ChunkHeader& header) noexcept;
/// Parses a chunk header. Returns errc::nbd_protocol_error on a wrong magic.
Result<ChunkHeader> decode_chunk_header(std::span<const std::byte, chunk_header_size> in) noexcept;

/// Writes the header of an NBD_REPLY_TYPE_OFFSET_DATA chunk (chunk header + 64-bit offset) for
/// `data_bytes` bytes of data, which the caller sends right after (gather write).
/// Precondition: 1 ≤ data_bytes ≤ 2^32 - 9 (proto.md: length MUST be at least 9).
void encode_offset_data_header(std::span<std::byte, offset_data_header_size> out, std::uint64_t cookie,
                               std::uint16_t flags, std::uint64_t offset_bytes, std::uint32_t data_bytes) noexcept;

/// Writes the fixed part of an NBD_REPLY_TYPE_ERROR chunk (chunk header, error, message length) for
/// a message of `message_bytes` bytes that the caller sends right after.
/// Preconditions: `error` is nonzero; message_bytes ≤ 4096 (proto.md "Structured reply types").
void encode_error_chunk_header(std::span<std::byte, error_chunk_fixed_size> out, std::uint64_t cookie,
                               std::uint16_t flags, NbdError error, std::uint16_t message_bytes) noexcept;

/// Encodes a whole NBD_REPLY_TYPE_ERROR_OFFSET chunk (header, error, message, offset).
std::vector<std::byte> encode_error_offset_chunk(std::uint64_t cookie, std::uint16_t flags, NbdError error,
                                                 std::string_view message, std::uint64_t offset_bytes);

/// A decoded error chunk payload (ERROR or ERROR_OFFSET).
struct ErrorChunk {
  NbdError error = NbdError::ok;
  std::string message;
  std::uint64_t offset_bytes = 0;  ///< ERROR_OFFSET only
};
/// Parses an error chunk payload of the given type. Returns errc::nbd_protocol_error when the
/// message length overruns the payload, the error is zero, or ERROR_OFFSET lacks its offset.
Result<ErrorChunk> decode_error_chunk(ChunkType type, ConstByteSpan payload);

}  // namespace iserkit::nbd
