// Fuzz target: the NBD wire codec (nbd_bridge/protocol.hpp; NBD proto.md "Newstyle negotiation",
// "Option types", "Request message", "Simple reply message", "Structured reply chunk message")
// and transmission-phase request validation (nbd_bridge/request_check.hpp). Input: the bytes a
// peer sent; every decoder reads them from the start.
// Invariants: fixed-size messages that decode re-encode to the same bytes; NBD_OPT_INFO/GO data
// and LIST/SET_META_CONTEXT data and block status payloads that decode re-encode exactly; check_request accepts only requests inside the export, aligned
// and no longer than the maximum payload.
#include <algorithm>
#include <array>
#include <vector>

#include "fuzz_support.hpp"
#include "nbd_bridge/block_status.hpp"
#include "nbd_bridge/protocol.hpp"
#include "nbd_bridge/request_check.hpp"

using namespace iserkit;
using namespace iserkit::nbd;

namespace {

template <std::size_t N>
std::span<const std::byte, N> fixed(ConstByteSpan data, std::array<std::byte, N>& storage) {
  std::fill(storage.begin(), storage.end(), std::byte{0});
  std::copy_n(data.begin(), std::min(N, data.size()), storage.begin());
  return storage;
}

// A fixed-size message from the input's start: what decodes encodes back to the same N bytes.
template <std::size_t N, class Decode, class Encode>
void check_fixed_round_trip(ConstByteSpan data, Decode decode, Encode encode) {
  std::array<std::byte, N> in{}, out{};
  if (auto h = decode(fixed(data, in))) {
    encode(out, *h);
    FUZZ_CHECK(out == in);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* raw, std::size_t size) {
  const ConstByteSpan data(reinterpret_cast<const std::byte*>(raw), size);
  (void)decode_greeting(data);

  std::array<std::byte, client_flags_size> flags_in{};
  (void)decode_client_flags(fixed(data, flags_in));

  check_fixed_round_trip<option_header_size>(data, decode_option_header, encode_option_header);
  check_fixed_round_trip<option_reply_header_size>(data, decode_option_reply_header, encode_option_reply_header);
  if (auto info = decode_info_request(data)) {
    FUZZ_CHECK(info->name.size() <= data.size());
    const auto again = encode_info_request(info->name, info->info_requests);
    FUZZ_CHECK(std::equal(again.begin(), again.end(), data.begin(), data.end()));
  }
  (void)decode_info_reply(data);
  // NBD_OPT_LIST/SET_META_CONTEXT data (nbd_bridge/block_status.hpp): what decodes re-encodes exactly.
  if (auto meta = decode_meta_context_request(data)) {
    const auto again = encode_meta_context_request(meta->name, meta->queries);
    FUZZ_CHECK(std::equal(again.begin(), again.end(), data.begin(), data.end()));
  }
  if (auto status = decode_block_status_payload(data)) {
    const auto again = encode_block_status_payload(status->context_id, status->descriptors);
    FUZZ_CHECK(std::equal(again.begin(), again.end(), data.begin(), data.end()));
  }

  std::array<std::byte, request_header_size> request_in{}, request_out{};
  if (auto r = decode_request_header(fixed(data, request_in))) {
    encode_request_header(request_out, *r);
    FUZZ_CHECK(request_out == request_in);
    for (bool read_only : {false, true}) {
      TransmissionParams p;
      p.size_bytes = 1u << 20;
      p.transmission_flags = 0xffff;  // everything advertised
      if (!read_only) p.transmission_flags &= static_cast<std::uint16_t>(~transmission_flag::read_only);
      p.structured_replies = !read_only;
      p.min_block_size_bytes = 512;
      p.max_payload_bytes = 64 * 1024;
      const auto verdict = check_request(*r, p);
      const auto type = static_cast<Command>(r->type);
      if (read_only && type == Command::write) FUZZ_CHECK(!verdict.ok());
      if (verdict.ok() && (type == Command::read || type == Command::write)) {
        FUZZ_CHECK(r->offset_bytes <= p.size_bytes && r->length_bytes <= p.size_bytes - r->offset_bytes);
        FUZZ_CHECK(r->length_bytes <= p.max_payload_bytes);
        FUZZ_CHECK(r->offset_bytes % 512 == 0 && r->length_bytes % 512 == 0);
      }
    }
  }
  check_fixed_round_trip<simple_reply_size>(data, decode_simple_reply, encode_simple_reply);
  check_fixed_round_trip<chunk_header_size>(data, decode_chunk_header, encode_chunk_header);
  for (auto type : {ChunkType::error, ChunkType::error_offset}) {
    if (auto e = decode_error_chunk(type, data)) {
      FUZZ_CHECK(e->error != NbdError::ok);
      FUZZ_CHECK(e->message.size() <= data.size());
    }
  }
  return 0;
}
