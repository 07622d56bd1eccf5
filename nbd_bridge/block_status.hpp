// NBD metadata contexts and block status (layer 1, pure): the option data of
// NBD_OPT_LIST_META_CONTEXT / NBD_OPT_SET_META_CONTEXT, the NBD_REP_META_CONTEXT reply, the
// `base:allocation` context and its NBD_STATE_* flags, the payload of an NBD_REPLY_TYPE_BLOCK_STATUS
// chunk, and the rules that turn an export's allocation map into the descriptors of one reply.
// No I/O; every function works on caller-owned bytes.
// Spec: NBD proto.md "Metadata querying", "Option types" (NBD_OPT_LIST_META_CONTEXT,
// NBD_OPT_SET_META_CONTEXT), "Option reply types" (NBD_REP_META_CONTEXT), "Structured reply types"
// (NBD_REPLY_TYPE_BLOCK_STATUS), "Request types" (NBD_CMD_BLOCK_STATUS), "`base:allocation`
// metadata context"; and doc/meta.md of the same repository.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "iserkit/common/bytes.hpp"
#include "iserkit/common/result.hpp"
#include "nbd_bridge/protocol.hpp"

namespace iserkit::nbd {

/// The one metadata context this server offers (proto.md "`base:allocation` metadata context").
inline constexpr std::string_view base_allocation_context = "base:allocation";
/// The context ID the server gives `base:allocation` in NBD_REP_META_CONTEXT (any nonzero value
/// would do; the client learns it from the reply).
inline constexpr std::uint32_t base_allocation_context_id = 1;

/// NBD_STATE_* flags of the `base:allocation` context.
namespace allocation_state {
inline constexpr std::uint32_t hole = 1u << 0;  ///< NBD_STATE_HOLE: not allocated (writes may fail ENOSPC)
inline constexpr std::uint32_t zero = 1u << 1;  ///< NBD_STATE_ZERO: reads as zeroes
}  // namespace allocation_state

/// The data of NBD_OPT_LIST_META_CONTEXT and NBD_OPT_SET_META_CONTEXT: an export name and a list
/// of queries ("namespace:leaf", or "namespace:" for a whole namespace in LIST). The views point
/// into the decoded input.
struct MetaContextRequest {
  std::string_view name;
  std::vector<std::string_view> queries;
};

/// Encodes LIST/SET_META_CONTEXT option data: 32-bit name length, name, 32-bit query count, then
/// each query as 32-bit length + string (client side, tests and the fuzz corpus).
std::vector<std::byte> encode_meta_context_request(std::string_view name, std::span<const std::string_view> queries);

/// Parses LIST/SET_META_CONTEXT option data. Returns errc::nbd_protocol_error (the server answers
/// NBD_REP_ERR_INVALID) when a length runs past the data, a string is longer than 4096 bytes, the
/// query count does not match the bytes that follow, or bytes are left over. Never reads past `in`.
Result<MetaContextRequest> decode_meta_context_request(ConstByteSpan in);

/// Payload of NBD_REP_META_CONTEXT: 32-bit context ID, then the context name.
std::vector<std::byte> encode_rep_meta_context(std::uint32_t context_id, std::string_view name);

/// Which contexts a query selects: true when `query` names `base:allocation`, or (LIST only) the
/// whole `base:` namespace. Queries for other namespaces select nothing (proto.md: the server
/// ignores queries it does not understand).
bool query_selects_base_allocation(std::string_view query, bool listing) noexcept;

/// One block status descriptor: a run of `length_bytes` bytes sharing the state `flags`.
struct BlockExtent {
  std::uint64_t length_bytes = 0;  ///< > 0 in a valid reply
  std::uint32_t flags = 0;         ///< allocation_state bits
};

/// Normalises an export's extents, which start at the request offset, into the descriptors of one
/// NBD_REPLY_TYPE_BLOCK_STATUS chunk: drops empty runs, merges neighbours with equal flags, cuts
/// the total at `length_bytes` (the requested length, so every descriptor fits in 32 bits and none
/// reaches past the request), and with `req_one` (NBD_CMD_FLAG_REQ_ONE) keeps only the first
/// descriptor. Returns an empty vector when nothing is left (the caller then answers an error:
/// proto.md requires at least one descriptor).
std::vector<BlockExtent> block_status_descriptors(std::span<const BlockExtent> extents, std::uint32_t length_bytes,
                                                  bool req_one);

/// Encodes the payload of an NBD_REPLY_TYPE_BLOCK_STATUS chunk: the context ID, then per descriptor
/// a 32-bit length and 32-bit flags. Precondition: every length fits in 32 bits (as
/// block_status_descriptors() guarantees).
std::vector<std::byte> encode_block_status_payload(std::uint32_t context_id, std::span<const BlockExtent> descriptors);

/// A decoded NBD_REPLY_TYPE_BLOCK_STATUS payload (tests and the fuzz target).
struct BlockStatusPayload {
  std::uint32_t context_id = 0;
  std::vector<BlockExtent> descriptors;
};
/// Parses a block status payload. Returns errc::nbd_protocol_error when it is shorter than 12
/// bytes or its length is not 4 + 8n.
Result<BlockStatusPayload> decode_block_status_payload(ConstByteSpan in);

}  // namespace iserkit::nbd
