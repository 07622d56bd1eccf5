// NBD metadata contexts and block status codec (see block_status.hpp).
// Spec: NBD proto.md "Metadata querying", NBD_OPT_LIST_META_CONTEXT, NBD_OPT_SET_META_CONTEXT,
// NBD_REP_META_CONTEXT, NBD_REPLY_TYPE_BLOCK_STATUS, "`base:allocation` metadata context".
#include "nbd_bridge/block_status.hpp"

#include <algorithm>

#include "iserkit/common/errors.hpp"

namespace iserkit::nbd {
namespace {

void append_be32(std::vector<std::byte>& out, std::uint32_t v) {
  const std::size_t at = out.size();
  out.resize(at + 4);
  store_be32(out.data() + at, v);
}

void append_string(std::vector<std::byte>& out, std::string_view s) {
  const auto bytes = as_bytes(s);
  out.insert(out.end(), bytes.begin(), bytes.end());
}

/// Reads a 32-bit length and that many bytes as a string; advances `pos`. Fails on overrun.
bool take_string(ConstByteSpan in, std::size_t& pos, std::string_view& out) noexcept {
  if (in.size() - pos < 4) return false;
  const std::uint32_t length = load_be32(in.data() + pos);
  pos += 4;
  if (length > max_string_bytes || length > in.size() - pos) return false;
  out = std::string_view(reinterpret_cast<const char*>(in.data() + pos), length);
  pos += length;
  return true;
}

}  // namespace

std::vector<std::byte> encode_meta_context_request(std::string_view name, std::span<const std::string_view> queries) {
  std::vector<std::byte> out;
  append_be32(out, static_cast<std::uint32_t>(name.size()));
  append_string(out, name);
  append_be32(out, static_cast<std::uint32_t>(queries.size()));
  for (std::string_view q : queries) {
    append_be32(out, static_cast<std::uint32_t>(q.size()));
    append_string(out, q);
  }
  return out;
}

Result<MetaContextRequest> decode_meta_context_request(ConstByteSpan in) {
  MetaContextRequest request;
  std::size_t pos = 0;
  if (!take_string(in, pos, request.name)) return fail(errc::nbd_protocol_error);
  if (in.size() - pos < 4) return fail(errc::nbd_protocol_error);
  const std::uint32_t count = load_be32(in.data() + pos);
  pos += 4;
  // Each query takes at least its 4-byte length: a count the data cannot hold is malformed, and
  // checking it first keeps a hostile count from reserving memory.
  if (count > (in.size() - pos) / 4) return fail(errc::nbd_protocol_error);
  request.queries.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    std::string_view query;
    if (!take_string(in, pos, query)) return fail(errc::nbd_protocol_error);
    request.queries.push_back(query);
  }
  if (pos != in.size()) return fail(errc::nbd_protocol_error);
  return request;
}

std::vector<std::byte> encode_rep_meta_context(std::uint32_t context_id, std::string_view name) {
  std::vector<std::byte> out;
  append_be32(out, context_id);
  append_string(out, name);
  return out;
}

bool query_selects_base_allocation(std::string_view query, bool listing) noexcept {
  // proto.md "Metadata querying": in LIST a query "namespace:" with no leaf asks for every
  // context of that namespace; in SET only full names select a context.
  return query == base_allocation_context || (listing && query == "base:");
}

std::vector<BlockExtent> block_status_descriptors(std::span<const BlockExtent> extents, std::uint32_t length_bytes,
                                                  bool req_one) {
  std::vector<BlockExtent> out;
  std::uint64_t covered = 0;
  for (const BlockExtent& e : extents) {
    if (covered >= length_bytes) break;
    if (e.length_bytes == 0) continue;
    const std::uint64_t take = std::min<std::uint64_t>(e.length_bytes, length_bytes - covered);
    if (!out.empty() && out.back().flags == e.flags) {
      out.back().length_bytes += take;
    } else {
      out.push_back({.length_bytes = take, .flags = e.flags});
    }
    covered += take;
  }
  // proto.md NBD_CMD_FLAG_REQ_ONE: exactly one descriptor, no longer than the requested length.
  if (req_one && out.size() > 1) out.resize(1);
  return out;
}

std::vector<std::byte> encode_block_status_payload(std::uint32_t context_id, std::span<const BlockExtent> descriptors) {
  std::vector<std::byte> out;
  out.reserve(4 + 8 * descriptors.size());
  append_be32(out, context_id);
  for (const BlockExtent& d : descriptors) {
    append_be32(out, static_cast<std::uint32_t>(d.length_bytes));
    append_be32(out, d.flags);
  }
  return out;
}

Result<BlockStatusPayload> decode_block_status_payload(ConstByteSpan in) {
  if (in.size() < 12 || (in.size() - 4) % 8 != 0) return fail(errc::nbd_protocol_error);
  BlockStatusPayload payload;
  payload.context_id = load_be32(in.data());
  for (std::size_t pos = 4; pos < in.size(); pos += 8) {
    payload.descriptors.push_back(
        {.length_bytes = load_be32(in.data() + pos), .flags = load_be32(in.data() + pos + 4)});
  }
  return payload;
}

}  // namespace iserkit::nbd
