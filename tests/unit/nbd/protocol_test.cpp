// Codec tests for nbd_bridge/protocol: fixed byte vectors written from NBD proto.md's message
// layouts, and encode/decode round trips.
#include "nbd_bridge/protocol.hpp"

#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "iserkit/common/errors.hpp"
#include "../support/byte_literals.hpp"

namespace iserkit::nbd {
namespace {

template <std::size_t N>
std::array<std::byte, N> bytes(const std::array<int, N>& values) {
  std::array<std::byte, N> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = static_cast<std::byte>(values[i]);
  return out;
}

using iserkit::test::bytes;

// proto.md "Newstyle negotiation": NBDMAGIC, IHAVEOPT, 16-bit handshake flags.
TEST(NbdProtocol, GreetingMatchesSpecBytes) {
  std::array<std::byte, greeting_size> out{};
  encode_greeting(out, handshake_flag::fixed_newstyle | handshake_flag::no_zeroes);
  const auto expected = bytes<18>({'N', 'B', 'D', 'M', 'A', 'G', 'I', 'C', 'I', 'H', 'A', 'V', 'E', 'O', 'P', 'T', 0, 3});
  EXPECT_EQ(out, expected);
  auto flags = decode_greeting(out);
  ASSERT_TRUE(flags);
  EXPECT_EQ(*flags, 3);
}

TEST(NbdProtocol, OldstyleGreetingIsRefused) {
  std::array<std::byte, greeting_size> out{};
  store_be64(out.data(), nbd_magic);
  store_be64(out.data() + 8, oldstyle_magic);
  EXPECT_EQ(decode_greeting(out).error(), make_error_code(errc::nbd_protocol_error));
  EXPECT_FALSE(decode_greeting(ConstByteSpan(out).first(10)));
}

TEST(NbdProtocol, OptionHeaderBytesAndRoundTrip) {
  std::array<std::byte, option_header_size> out{};
  encode_option_header(out, {.option = static_cast<std::uint32_t>(Option::go), .length_bytes = 0x0102});
  const auto expected = bytes<16>({'I', 'H', 'A', 'V', 'E', 'O', 'P', 'T', 0, 0, 0, 7, 0, 0, 1, 2});
  EXPECT_EQ(out, expected);
  auto header = decode_option_header(out);
  ASSERT_TRUE(header);
  EXPECT_EQ(header->option, 7u);
  EXPECT_EQ(header->length_bytes, 0x0102u);
  out[0] = std::byte{'X'};
  EXPECT_FALSE(decode_option_header(out));
}

// proto.md "Fixed newstyle negotiation": 0x3e889045565a9, option, reply type, length.
TEST(NbdProtocol, OptionReplyHeaderBytes) {
  std::array<std::byte, option_reply_header_size> out{};
  encode_option_reply_header(out, {.option = 8, .reply_type = OptionReply::err_unsup, .length_bytes = 5});
  const auto expected = bytes<20>({0x00, 0x03, 0xe8, 0x89, 0x04, 0x55, 0x65, 0xa9, 0, 0, 0, 8, 0x80, 0, 0, 1, 0, 0, 0, 5});
  EXPECT_EQ(out, expected);
  auto header = decode_option_reply_header(out);
  ASSERT_TRUE(header);
  EXPECT_EQ(header->reply_type, OptionReply::err_unsup);
  EXPECT_TRUE(is_error(header->reply_type));
  EXPECT_FALSE(is_error(OptionReply::ack));
}

// proto.md NBD_OPT_INFO/GO data: 32-bit name length, name, 16-bit count, 16-bit requests.
TEST(NbdProtocol, InfoRequestBytesAndRoundTrip) {
  const std::array<std::uint16_t, 2> requests{3, 1};
  const auto data = encode_info_request("ab", requests);
  EXPECT_EQ(data, bytes({0, 0, 0, 2, 'a', 'b', 0, 2, 0, 3, 0, 1}));
  auto decoded = decode_info_request(data);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->name, "ab");
  EXPECT_EQ(decoded->info_requests, (std::vector<std::uint16_t>{3, 1}));
}

TEST(NbdProtocol, InfoRequestRejectsInconsistentLengths) {
  EXPECT_FALSE(decode_info_request(bytes({0, 0, 0})));                         // < 6 bytes
  EXPECT_FALSE(decode_info_request(bytes({0, 0, 0, 9, 'a', 'b', 0, 0})));      // name longer than data - 6
  EXPECT_FALSE(decode_info_request(bytes({0, 0, 0, 0, 0, 2, 0, 3})));          // 2 requests, 1 present
  EXPECT_FALSE(decode_info_request(bytes({0, 0, 0, 0, 0, 0, 0})));             // trailing byte
  auto empty = decode_info_request(bytes({0, 0, 0, 0, 0, 0}));
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->name.empty());
  EXPECT_TRUE(empty->info_requests.empty());
}

TEST(NbdProtocol, ExportNameReplyWithAndWithoutZeroes) {
  std::array<std::byte, 134> out{};
  out.fill(std::byte{0xee});
  EXPECT_EQ(encode_export_name_reply(out, 0x100000, 0x0103, false), 134u);
  EXPECT_EQ(load_be64(out.data()), 0x100000u);
  EXPECT_EQ(load_be16(out.data() + 8), 0x0103u);
  for (std::size_t i = 10; i < 134; ++i) ASSERT_EQ(out[i], std::byte{0});
  out.fill(std::byte{0xee});
  EXPECT_EQ(encode_export_name_reply(out, 1, 1, true), 10u);
  EXPECT_EQ(out[10], std::byte{0xee});
  EXPECT_EQ(encode_export_name_reply(ByteSpan(out).first(20), 1, 1, false), 0u);  // too small
}

// proto.md NBD_REP_INFO payloads: EXPORT is 12 bytes, BLOCK_SIZE 14 bytes, NAME ≥ 2.
TEST(NbdProtocol, InfoPayloadsBytesAndRoundTrip) {
  const auto export_info = encode_info_export(0x0000000100000000, 0x012d);
  EXPECT_EQ(export_info, (bytes<12>({0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0x01, 0x2d})));
  auto decoded = decode_info_reply(export_info);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->size_bytes, 0x100000000u);
  EXPECT_EQ(decoded->transmission_flags, 0x012d);

  const auto block_size = encode_info_block_size({.minimum_bytes = 512, .preferred_bytes = 4096,
                                                  .maximum_payload_bytes = 33554432});
  EXPECT_EQ(block_size, (bytes<14>({0, 3, 0, 0, 2, 0, 0, 0, 0x10, 0, 0x02, 0, 0, 0})));
  decoded = decode_info_reply(block_size);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->block_size.minimum_bytes, 512u);
  EXPECT_EQ(decoded->block_size.maximum_payload_bytes, 33554432u);

  const auto name = encode_info_string(Info::name, "disk");
  EXPECT_EQ(name, bytes({0, 1, 'd', 'i', 's', 'k'}));
  decoded = decode_info_reply(name);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->text, "disk");

  EXPECT_FALSE(decode_info_reply(ConstByteSpan(export_info).first(11)));
  EXPECT_FALSE(decode_info_reply(bytes({0})));
}

TEST(NbdProtocol, RepServerBytes) {
  EXPECT_EQ(encode_rep_server("ab", "d"), bytes({0, 0, 0, 2, 'a', 'b', 'd'}));
}

// proto.md "Request message": 0x25609513, flags, type, cookie, offset, length.
TEST(NbdProtocol, RequestHeaderBytesAndRoundTrip) {
  std::array<std::byte, request_header_size> out{};
  const RequestHeader request{.flags = command_flag::fua,
                              .type = static_cast<std::uint16_t>(Command::write),
                              .cookie = 0x0102030405060708,
                              .offset_bytes = 0x1000,
                              .length_bytes = 0x200};
  encode_request_header(out, request);
  const auto expected = bytes<28>({0x25, 0x60, 0x95, 0x13, 0, 1, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8,
                                   0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 2, 0});
  EXPECT_EQ(out, expected);
  auto decoded = decode_request_header(out);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->flags, request.flags);
  EXPECT_EQ(decoded->type, request.type);
  EXPECT_EQ(decoded->cookie, request.cookie);
  EXPECT_EQ(decoded->offset_bytes, request.offset_bytes);
  EXPECT_EQ(decoded->length_bytes, request.length_bytes);
  out[3] = std::byte{0x14};  // 0x25609514 is reserved (transaction log), not a request
  EXPECT_EQ(decode_request_header(out).error(), make_error_code(errc::nbd_protocol_error));
}

// proto.md "Simple reply message": 0x67446698, error, cookie.
TEST(NbdProtocol, SimpleReplyBytesAndRoundTrip) {
  std::array<std::byte, simple_reply_size> out{};
  encode_simple_reply(out, {.error = NbdError::nospc, .cookie = 42});
  EXPECT_EQ(out, (bytes<16>({0x67, 0x44, 0x66, 0x98, 0, 0, 0, 28, 0, 0, 0, 0, 0, 0, 0, 42})));
  auto decoded = decode_simple_reply(out);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->error, NbdError::nospc);
  EXPECT_EQ(decoded->cookie, 42u);
}

// proto.md "Structured reply chunk message" and NBD_REPLY_TYPE_OFFSET_DATA.
TEST(NbdProtocol, OffsetDataChunkHeaderBytes) {
  std::array<std::byte, offset_data_header_size> out{};
  encode_offset_data_header(out, 7, reply_flag::done, 0x200, 0x1000);
  EXPECT_EQ(out, (bytes<28>({0x66, 0x8e, 0x33, 0xef, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7,
                             0, 0, 0x10, 0x08, 0, 0, 0, 0, 0, 0, 2, 0})));
  auto header = decode_chunk_header(std::span<const std::byte, chunk_header_size>(out.data(), chunk_header_size));
  ASSERT_TRUE(header);
  EXPECT_EQ(header->type, ChunkType::offset_data);
  EXPECT_EQ(header->length_bytes, 0x1008u);
  EXPECT_EQ(header->flags, reply_flag::done);
}

TEST(NbdProtocol, NoneChunkRoundTrip) {
  std::array<std::byte, chunk_header_size> out{};
  encode_chunk_header(out, {.flags = reply_flag::done, .type = ChunkType::none, .cookie = 9});
  auto header = decode_chunk_header(out);
  ASSERT_TRUE(header);
  EXPECT_EQ(header->type, ChunkType::none);
  EXPECT_EQ(header->length_bytes, 0u);
  EXPECT_EQ(header->cookie, 9u);
}

// proto.md NBD_REPLY_TYPE_ERROR: error, 16-bit message length, message.
TEST(NbdProtocol, ErrorChunkBytesAndRoundTrip) {
  std::array<std::byte, error_chunk_fixed_size> out{};
  encode_error_chunk_header(out, 5, reply_flag::done, NbdError::inval, 3);
  EXPECT_EQ(out, (bytes<26>({0x66, 0x8e, 0x33, 0xef, 0, 1, 0x80, 1, 0, 0, 0, 0, 0, 0, 0, 5,
                             0, 0, 0, 9, 0, 0, 0, 22, 0, 3})));
  const auto payload = bytes({0, 0, 0, 22, 0, 3, 'b', 'a', 'd'});
  auto chunk = decode_error_chunk(ChunkType::error, payload);
  ASSERT_TRUE(chunk);
  EXPECT_EQ(chunk->error, NbdError::inval);
  EXPECT_EQ(chunk->message, "bad");
  EXPECT_FALSE(decode_error_chunk(ChunkType::error, bytes({0, 0, 0, 22, 0, 4, 'b', 'a', 'd'})));  // overrun
  EXPECT_FALSE(decode_error_chunk(ChunkType::error, bytes({0, 0, 0, 0, 0, 0})));  // error MUST be nonzero
  EXPECT_FALSE(decode_error_chunk(ChunkType::offset_data, payload));
}

TEST(NbdProtocol, ErrorOffsetChunkRoundTrip) {
  const auto whole = encode_error_offset_chunk(3, reply_flag::done, NbdError::io, "x", 0x4000);
  ASSERT_EQ(whole.size(), chunk_header_size + 6 + 1 + 8);
  auto header = decode_chunk_header(std::span<const std::byte, chunk_header_size>(whole.data(), chunk_header_size));
  ASSERT_TRUE(header);
  EXPECT_EQ(header->type, ChunkType::error_offset);
  EXPECT_TRUE(is_error(header->type));
  EXPECT_EQ(header->length_bytes, 15u);
  auto chunk = decode_error_chunk(header->type, ConstByteSpan(whole).subspan(chunk_header_size));
  ASSERT_TRUE(chunk);
  EXPECT_EQ(chunk->error, NbdError::io);
  EXPECT_EQ(chunk->message, "x");
  EXPECT_EQ(chunk->offset_bytes, 0x4000u);
}

TEST(NbdProtocol, Names) {
  EXPECT_EQ(name_of(Option::go), "NBD_OPT_GO");
  EXPECT_EQ(name_of(Command::write_zeroes), "NBD_CMD_WRITE_ZEROES");
  EXPECT_EQ(name_of(OptionReply::err_unknown), "NBD_REP_ERR_UNKNOWN");
  EXPECT_EQ(name_of(static_cast<Command>(99)), "unknown");
}

}  // namespace
}  // namespace iserkit::nbd
