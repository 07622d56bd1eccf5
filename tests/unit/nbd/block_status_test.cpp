// Metadata context option data, NBD_REP_META_CONTEXT, block status descriptors and payloads
// (nbd_bridge/block_status), BLOCK_STATUS request validation, and MemoryExport's allocation map.
// Spec: NBD proto.md "Metadata querying", NBD_CMD_BLOCK_STATUS, NBD_REPLY_TYPE_BLOCK_STATUS.
#include "nbd_bridge/block_status.hpp"

#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "nbd_bridge/memory_export.hpp"
#include "nbd_bridge/request_check.hpp"
#include "../support/byte_literals.hpp"

namespace iserkit::nbd {
namespace {

using iserkit::test::bytes;

TEST(NbdMetaContext, EncodesTheProtoMdLayout) {
  const std::array<std::string_view, 1> queries{"base:allocation"};
  const auto data = encode_meta_context_request("ab", queries);
  // name length, name, query count, query length, query
  auto want = bytes({0, 0, 0, 2, 'a', 'b', 0, 0, 0, 1, 0, 0, 0, 15});
  for (char c : std::string_view("base:allocation")) want.push_back(static_cast<std::byte>(c));
  EXPECT_EQ(data, want);
  auto decoded = decode_meta_context_request(data);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->name, "ab");
  ASSERT_EQ(decoded->queries.size(), 1u);
  EXPECT_EQ(decoded->queries[0], "base:allocation");
}

TEST(NbdMetaContext, EmptyNameAndNoQueries) {
  auto decoded = decode_meta_context_request(bytes({0, 0, 0, 0, 0, 0, 0, 0}));
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->name, "");
  EXPECT_TRUE(decoded->queries.empty());
}

TEST(NbdMetaContext, MalformedDataIsRefused) {
  EXPECT_FALSE(decode_meta_context_request({}));                                  // no name length
  EXPECT_FALSE(decode_meta_context_request(bytes({0, 0, 0, 5, 'a'})));            // name overruns
  EXPECT_FALSE(decode_meta_context_request(bytes({0, 0, 0, 0})));                 // no query count
  EXPECT_FALSE(decode_meta_context_request(bytes({0, 0, 0, 0, 0, 0, 0, 1})));     // count 1, no query
  EXPECT_FALSE(decode_meta_context_request(bytes({0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})));  // huge count
  EXPECT_FALSE(decode_meta_context_request(bytes({0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 3, 'a'})));  // query overruns
  EXPECT_FALSE(decode_meta_context_request(bytes({0, 0, 0, 0, 0, 0, 0, 0, 7})));  // trailing byte
  // A string longer than 4096 bytes (proto.md "Conventions") is refused even if the bytes are there.
  std::vector<std::byte> long_name(4 + 4097 + 4);
  store_be32(long_name.data(), 4097);
  EXPECT_FALSE(decode_meta_context_request(long_name));
}

TEST(NbdMetaContext, QueriesSelectBaseAllocation) {
  EXPECT_TRUE(query_selects_base_allocation("base:allocation", false));
  EXPECT_TRUE(query_selects_base_allocation("base:allocation", true));
  EXPECT_TRUE(query_selects_base_allocation("base:", true));    // LIST: the whole namespace
  EXPECT_FALSE(query_selects_base_allocation("base:", false));  // SET: full names only
  EXPECT_FALSE(query_selects_base_allocation("qemu:dirty-bitmap:x", true));
  EXPECT_FALSE(query_selects_base_allocation("base:allocationx", false));
  EXPECT_EQ(encode_rep_meta_context(1, "base:allocation").size(), 4u + 15u);
}

TEST(NbdBlockStatus, DescriptorsMergeCutAndReqOne) {
  namespace st = allocation_state;
  const std::vector<BlockExtent> extents{{4096, 0}, {0, st::hole}, {4096, 0}, {8192, st::hole | st::zero},
                                         {65536, 0}};
  // Equal neighbours merge, empty runs vanish, the total is cut at the requested length.
  auto d = block_status_descriptors(extents, 10000, false);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].length_bytes, 8192u);
  EXPECT_EQ(d[0].flags, 0u);
  EXPECT_EQ(d[1].length_bytes, 10000u - 8192u);
  EXPECT_EQ(d[1].flags, st::hole | st::zero);
  // REQ_ONE: only the first descriptor, no longer than the request.
  d = block_status_descriptors(extents, 2048, true);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].length_bytes, 2048u);
  d = block_status_descriptors(extents, 1u << 20, true);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].length_bytes, 8192u);
  // Runs that cover less than the request are reported as they are.
  d = block_status_descriptors(extents, 1u << 20, false);
  std::uint64_t total = 0;
  for (const auto& e : d) total += e.length_bytes;
  EXPECT_EQ(total, 4096u + 4096u + 8192u + 65536u);
  EXPECT_TRUE(block_status_descriptors({}, 512, false).empty());
}

TEST(NbdBlockStatus, PayloadRoundTrip) {
  const std::vector<BlockExtent> d{{512, 0}, {1024, allocation_state::hole}};
  const auto payload = encode_block_status_payload(7, d);
  EXPECT_EQ(payload, bytes({0, 0, 0, 7, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 1}));
  auto decoded = decode_block_status_payload(payload);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->context_id, 7u);
  ASSERT_EQ(decoded->descriptors.size(), 2u);
  EXPECT_EQ(decoded->descriptors[1].length_bytes, 1024u);
  EXPECT_EQ(decoded->descriptors[1].flags, allocation_state::hole);
  EXPECT_FALSE(decode_block_status_payload(bytes({0, 0, 0, 7})));               // no descriptor
  EXPECT_FALSE(decode_block_status_payload(bytes({0, 0, 0, 7, 0, 0, 0, 1, 0})));  // ragged
}

RequestHeader block_status(std::uint64_t offset, std::uint32_t length, std::uint16_t flags = 0) {
  return {.flags = flags, .type = static_cast<std::uint16_t>(Command::block_status), .cookie = 1,
          .offset_bytes = offset, .length_bytes = length};
}

TEST(NbdBlockStatus, RequestValidation) {
  TransmissionParams p{.size_bytes = 1 << 20, .structured_replies = true, .base_allocation = true,
                       .min_block_size_bytes = 512};
  EXPECT_TRUE(check_request(block_status(0, 1 << 20), p).ok());
  EXPECT_TRUE(check_request(block_status(512, 512, command_flag::req_one), p).ok());
  // Longer than the maximum payload is fine: BLOCK_STATUS carries no data.
  EXPECT_TRUE(check_request(block_status(0, 1 << 20), {.size_bytes = 1 << 20, .structured_replies = true,
                                                       .base_allocation = true, .max_payload_bytes = 4096})
                  .ok());
  EXPECT_EQ(check_request(block_status(0, 0), p).error, NbdError::inval);               // length 0
  EXPECT_EQ(check_request(block_status(1 << 20, 512), p).error, NbdError::inval);       // past the end
  EXPECT_EQ(check_request(block_status(UINT64_MAX - 1, 512), p).error, NbdError::inval);
  EXPECT_EQ(check_request(block_status(100, 512), p).error, NbdError::inval);           // misaligned
  EXPECT_EQ(check_request(block_status(0, 512, command_flag::fua), p).error, NbdError::inval);  // FUA not offered
  EXPECT_EQ(check_request(block_status(0, 512, command_flag::df), p).error, NbdError::inval);
  auto none = p;
  none.base_allocation = false;  // no context selected
  EXPECT_EQ(check_request(block_status(0, 512), none).error, NbdError::inval);
  // REQ_ONE belongs to BLOCK_STATUS only.
  const RequestHeader read{.flags = command_flag::req_one, .type = static_cast<std::uint16_t>(Command::read),
                           .cookie = 1, .offset_bytes = 0, .length_bytes = 512};
  EXPECT_EQ(check_request(read, p).error, NbdError::inval);
}

TEST(NbdBlockStatus, MemoryExportReportsUnwrittenChunksAsHoles) {
  constexpr std::uint64_t chunk = MemoryExport::chunk_bytes;
  MemoryExport e({.size_bytes = 8 * chunk});
  std::vector<std::byte> data(100, std::byte{1});
  ASSERT_FALSE(e.write_now(2 * chunk + 10, data));
  ASSERT_FALSE(e.write_now(3 * chunk, data));
  std::vector<BlockExtent> extents;
  ASSERT_FALSE(e.block_status_now(chunk / 2, static_cast<std::uint32_t>(6 * chunk), extents));
  namespace st = allocation_state;
  ASSERT_EQ(extents.size(), 3u);
  EXPECT_EQ(extents[0].length_bytes, chunk / 2 + chunk);  // rest of chunk 0, chunk 1
  EXPECT_EQ(extents[0].flags, st::hole | st::zero);
  EXPECT_EQ(extents[1].length_bytes, 2 * chunk);           // chunks 2 and 3 hold data
  EXPECT_EQ(extents[1].flags, 0u);
  EXPECT_EQ(extents[2].length_bytes, 2 * chunk + chunk / 2);
  EXPECT_EQ(extents[2].flags, st::hole | st::zero);
  EXPECT_TRUE(e.block_status_now(8 * chunk, 1, extents));  // past the end
}

}  // namespace
}  // namespace iserkit::nbd
